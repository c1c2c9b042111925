// What the CUDA backend decided for a stream, for tests and benchmarks (tests/gpu/,
// tools/cuda_bench/): whole frames or tiles, the tile size, the planned device bytes.
// Host-only (g++-includable).
#ifndef DENOISE_CUDA_BACKEND_CUDA_H
#define DENOISE_CUDA_BACKEND_CUDA_H

#include <cstdint>
#include <string>

#include "../backend.h"

namespace denoise {

struct CudaPlanInfo {
    bool tiled = false;
    int tile = 0;             // tile interior side, px (tiled)
    int halo = 0;             // px on each side of a tile (tiled)
    int tiles = 0;            // tiles per frame that hold frame pixels (1 for whole frames)
    int64_t planned_bytes = 0;
    int64_t chunk = 0;        // level-0 tokens per chunk of the token-wise phases
    int align_pyramids = 0;   // model option align: whole-frame luma pyramids kept (2r + 1: a
                              // window's pairs matched in one launch; 2: one pair at a time)
    std::string text;         // one line: "whole frames, 2.01 GiB planned, chunks of 262144 tokens"
    std::string swin;         // the Swin-block path (cuda::Net::swin_path): "Swin blocks: fused 11 of 11"
    std::string launches;     // "a CUDA graph per U-Net pass and per output" / "stream launches: <why>"
    int graph_launches = 0;   // CUDA graphs launched so far (frame_graph.h)
    int graph_instantiations = 0;  // of those, built anew rather than updated
};

// The plan of a backend made by cuda_backend_new (false for any other backend). Valid after
// the first push_frame (the plan can change after an out-of-memory fallback).
bool cuda_backend_plan(const Backend &b, CudaPlanInfo *info);

}  // namespace denoise

#endif
