// What the CUDA backend decided for a stream, for tests and benchmarks (tests/gpu/,
// tools/cuda_bench/): whole frames or tiles, the tile size, the planned device bytes.
// Host-only (g++-includable).
#ifndef DENOISE_CUDA_BACKEND_CUDA_H
#define DENOISE_CUDA_BACKEND_CUDA_H

#include <cstdint>
#include <string>

#include "../backend.h"

namespace denoise {

// sigma=auto's host waits for the GPU estimator's sums (cuda/noise_estimate.h), counted since
// the backend was made. A frame's first statistics are started at its push and read at the next
// push or the flush (engine.cpp); any later round of the frame is queued and read at once.
// A wait costs throughput only where the GPU runs out of network work meanwhile: while the
// compute stream still holds passes queued earlier (a host ahead of the GPU, as in a loop that
// does nothing but push and pull), the wait only moves the host's waiting from the pull to the
// read. started_drained counts the waits the GPU paid for.
struct NoiseReads {
    int64_t started = 0;          // reads of sums queued by an earlier start (each frame's first)
    int64_t started_busy = 0;     // of those, the sums were not ready when the host came to read
                                  // them (cudaEventQuery): the host waited
    int64_t started_drained = 0;  // of the waits, those after which the compute stream (the
                                  // backend's ctx.stream: the network, the frame conversions) had
                                  // no work left (cudaStreamQuery): the GPU ran out of queued
                                  // work before the host could queue more, a bubble
    int64_t started_wait_us = 0;  // host time in those waits, microseconds
    int64_t direct = 0;           // reads of sums queued by the read itself, which the host always
                                  // waits for: a frame's later rounds (a segment's first frame runs
                                  // Immerkaer's start and three rounds; a plane still without an
                                  // estimate repeats that)
};

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
    NoiseReads noise_reads;        // sigma=auto's host waits (zero before the first estimate)
};

// The plan of a backend made by cuda_backend_new (false for any other backend). Valid after
// the first push_frame (the plan can change after an out-of-memory fallback).
bool cuda_backend_plan(const Backend &b, CudaPlanInfo *info);

}  // namespace denoise

#endif
