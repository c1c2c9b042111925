// cuda_bench (tools/cuda_bench/, build/bin/denoise-cuda-bench): speed and memory of the CUDA engine (built with it; run by tools/bench.sh).
// For each frame size (yuv420p frames of real-looking content: smooth gradients and noise):
//  kernels  the steady-state GPU work of one output frame as the backend runs it for whole frames
//           (frame_in of the newest frame, one U-Net pass, the head, frame_out), timed with CUDA
//           events after warm-up, median of --iters; the U-Net workspace shaped as the backend's
//           whole-frame plan (chunks of 2^18 tokens; head bands of 32 MiB, which the backend's
//           plan leaves out when the tensor-core head runs: the workspace figure here includes
//           them); twice, with the Swin blocks fused and the tensor-core head (the engine's
//           default: the `kernels` line) and as the correct-first op sequence with the two-pass
//           head (`kernels-correct-first`, DENOISE_CUDA_FUSED=0's path), the per-op split of
//           both with the head's FLOP and bytes, and the relative L2 between the two paths'
//           features F (they differ only by bf16 roundings);
//  api-cuda the public API with frames in device memory (memory CUDA, the current context, one
//           stream): push/pull of --frames frames, wall clock from the first pull to the stream's
//           end, frames/s, and the engine's peak device memory (denoise_gpu_memory_peak);
//  api-host the public API with frames in host memory (memory HOST: pinned staging, two frames in
//           flight), wall clock, frames/s, peak device memory;
//  api-cuda stream launches  api-cuda once more with DENOISE_CUDA_GRAPH=0 (each kernel launched on
//           the stream instead of a CUDA graph per U-Net pass and per output);
//  align    model v2's alignment ops alone (bench_align: luma_pyramid, block_match, both
//           shift_tiles; the model's R and tile, else 24 and 64), and their sum per output frame;
//           the whole network of an aligned model (--weights) is the api lines' (the backend runs
//           the alignment; the kernels lines time the network without it);
//  graph    the kernels line's frame as a CUDA graph beside its stream launches (bench_graph);
//  ceilings first: a cuBLASLt bf16 GEMM of 8192^3 and a 1 GiB device copy (bench_ceilings); the
//           kernels lines give their TFLOP/s as a share of that GEMM, and a roofline table per
//           size gives each op kind of the fused path its GFLOP, least DRAM MB, TFLOP/s and GB/s
//           against both ceilings (fused_op_cost).
// Each line also gives GFLOP/frame (weights/denoise_train/model.py gflop_per_frame's formula) and TFLOP/s.
// --cap SIZE=MIB runs that size's API measurements under a GPU memory cap (tiles).
// --plans prints, without touching a GPU, the memory plan the backend picks for each size, for
// yuv420p and p010le frames in host and device memory, at the default cap and under 2 GiB.
// --fusion-conv times the fusion conv alone, direct vs tensor core, on --sizes as token maps
// (bench_fusion_conv) and nothing else; --head likewise the head alone, tensor-core vs two-pass
// (bench_head); both for 32 (models v1 / v2) and 64 level-0 channels (wide64).
// --patch times the patch merges and expands alone, the op sequence vs the fused kernels, on the
// token grids of --sizes (bench_patch), then the kernels line and per-op table of each size, and
// nothing else.
// --swin times the fused Swin block alone (swin.cpp: every kernel built on model v1's stage grids
// at 540p, 1080p and 4K, the op sequence's per-op split, the size sweep; --sizes is not used) and
// nothing else. --swin-sweep times every fused kernel built for C 32 / 64 / 128 on the 4K frame's
// level 0 / 1 / 2 token grids, one table per width with registers, spills, resident CTAs and the
// ratio to the engine's kernel, and prints the SWIN_FUSED_PREFERENCE rows that would make the
// fastest the engine's on this GPU (bench_swin_sweep; about 20 s).
// --mlp-probe times the Hopper MLP probe (kernels/cuda/swin_mlp_wgmma.cu, sm_90a: the MLP half of a
// Swin block on wgmma) for C 64 and 128 on the 4K frame's level 0 / 1 / 2 token grids and an
// L2-resident map, against cuBLASLt's two GEMMs alone, the correct-first MLP sequence and the
// fused block's estimated MLP share (bench_mlp_probe; exit 77 on a GPU other than sm_90).
// Usage: denoise-cuda-bench [--weights FILE] [--iters N] [--frames N] [--sizes WxH,...] [--cap WxH=MIB]...
//        denoise-cuda-bench --plans [--weights FILE] [--sizes WxH,...]
//        denoise-cuda-bench --fusion-conv [--iters N] [--sizes WxH,...]
//        denoise-cuda-bench --head [--iters N] [--sizes WxH,...]
//        denoise-cuda-bench --patch [--weights FILE] [--iters N] [--sizes WxH,...]
//        denoise-cuda-bench --swin [--iters N]
//        denoise-cuda-bench --swin-sweep [--iters N]
//        denoise-cuda-bench --mlp-probe [--iters N]
// Exit: 0, 1 on an error, 77 without a usable GPU.
#include "cuda_bench.h"

using namespace cuda_bench;

int main(int argc, char **argv) {
    std::string wpath = "weights/denoise-v2.safetensors";
    int iters = 30, frames = 30;
    std::string sizes = "960x540,1920x1080,3840x2160";
    std::map<std::string, int64_t> caps;
    bool plans = false, fusion_conv = false, head = false, patch = false, swin = false, swin_sweep = false, mlp_probe = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--plans") plans = true;
        else if (a == "--fusion-conv") fusion_conv = true;
        else if (a == "--head") head = true;
        else if (a == "--patch") patch = true;
        else if (a == "--swin") swin = true;
        else if (a == "--swin-sweep") swin_sweep = true;
        else if (a == "--mlp-probe") mlp_probe = true;
        else if (a == "--weights" && i + 1 < argc) wpath = argv[++i];
        else if (a == "--iters" && i + 1 < argc) iters = std::max(3, std::atoi(argv[++i]));
        else if (a == "--frames" && i + 1 < argc) frames = std::max(4, std::atoi(argv[++i]));
        else if (a == "--sizes" && i + 1 < argc) sizes = argv[++i];
        else if (a == "--cap" && i + 1 < argc) {
            std::string v = argv[++i];
            const size_t e = v.find('=');
            if (e == std::string::npos) {
                std::fprintf(stderr, "denoise-cuda-bench: --cap WxH=MIB\n");
                return 2;
            }
            caps[v.substr(0, e)] = (int64_t)std::atoll(v.c_str() + e + 1) << 20;
        } else {
            std::fprintf(stderr, "usage: denoise-cuda-bench [--plans | --fusion-conv | --head | --patch | --swin | --swin-sweep | --mlp-probe] [--weights FILE] [--iters N] [--frames N] "
                                 "[--sizes WxH,...] [--cap WxH=MIB]...\n");
            return 2;
        }
    }
    std::vector<std::pair<int, int>> dims;
    for (size_t pos = 0; pos < sizes.size();) {
        size_t q = sizes.find(',', pos);
        std::string s = sizes.substr(pos, q == std::string::npos ? std::string::npos : q - pos);
        pos = q == std::string::npos ? sizes.size() : q + 1;
        int w = 0, h = 0;
        if (std::sscanf(s.c_str(), "%dx%d", &w, &h) != 2 || w < 1 || h < 1) {
            std::fprintf(stderr, "denoise-cuda-bench: bad size %s\n", s.c_str());
            return 2;
        }
        dims.push_back({w, h});
    }
    if (plans) {
        Model M;
        std::string err;
        if (!load_model(wpath, &M, &err)) {
            std::fprintf(stderr, "denoise-cuda-bench: %s\n", err.c_str());
            return 1;
        }
        for (auto &d : dims) print_plans(M, d.first, d.second);
        return 0;
    }
    std::string why;
    if (cuda_probe(0, &why)) {
        std::fprintf(stderr, "denoise-cuda-bench: no usable GPU: %s\n", why.c_str());
        return 77;
    }
    if (swin) return bench_swin(iters);
    if (swin_sweep) return bench_swin_sweep(iters);
    if (mlp_probe) return bench_mlp_probe(iters);
    if (fusion_conv || head) {
        int rc = 0;
        for (auto &d : dims)
            for (int c0 : {32, 64})  // models v1 / v2, wide64
                rc |= fusion_conv ? bench_fusion_conv(d.first, d.second, iters, c0) : bench_head(d.first, d.second, iters, c0);
        std::printf("\ncuda-bench summary\n%-44s %10s\n", "measure", "ms");
        for (const Row &r : g_rows) std::printf("%-44s %10.3f\n", r.what.c_str(), r.ms);
        return rc;
    }
    std::printf("%s; weights %s; kernels: CUDA events, median of %d after 3 warm-ups; api: %d frames after 6 (capped: 4 after 2)\n",
                why.c_str(), wpath.c_str(), iters, frames);
    Model M;
    std::string err;
    if (!load_model(wpath, &M, &err)) {
        std::fprintf(stderr, "denoise-cuda-bench: %s\n", err.c_str());
        return 1;
    }
    int rc = 0;
    if (patch) {
        for (auto &d : dims) rc |= bench_patch(M, d.first, d.second, iters);
        rc |= bench_ceilings(iters);
        for (auto &d : dims) rc |= bench_kernels(M, d.first, d.second, iters);
        std::printf("\ncuda-bench summary\n%-44s %10s\n", "measure", "ms");
        for (const Row &r : g_rows) std::printf("%-44s %10.3f\n", r.what.c_str(), r.ms);
        return rc;
    }
    rc |= bench_ceilings(iters);
    for (auto &d : dims) {
        const int w = d.first, h = d.second;
        auto cap = caps.find(std::to_string(w) + "x" + std::to_string(h));
        const int64_t c = cap == caps.end() ? 0 : cap->second;
        if (!c) rc |= bench_align(M, w, h, iters);
        if (!c) rc |= bench_kernels(M, w, h, iters);
        rc |= bench_api(wpath, w, h, c ? 4 : frames, DENOISE_MEMORY_CUDA, c);
        if (!c) {  // the same without CUDA graphs (the backend reads DENOISE_CUDA_GRAPH when it is made)
            setenv("DENOISE_CUDA_GRAPH", "0", 1);
            rc |= bench_api(wpath, w, h, frames, DENOISE_MEMORY_CUDA, c);
            unsetenv("DENOISE_CUDA_GRAPH");
        }
        rc |= bench_api(wpath, w, h, c ? 4 : frames, DENOISE_MEMORY_HOST, c);
    }
    std::printf("\ncuda-bench summary\n%-40s %10s %10s %12s\n", "measure", "ms/frame", "frames/s", "GPU GiB");
    for (const Row &r : g_rows) std::printf("%-40s %10.3f %10.2f %12.2f\n", r.what.c_str(), r.ms, r.fps, r.gib);
    if (!g_paths.empty()) {
        std::printf("cuda-bench Swin-block paths, kernel-only ms per frame (medians)\n%-12s %10s %14s %8s\n", "frame",
                    "fused", "correct-first", "speedup");
        for (const PathRow &r : g_paths)
            std::printf("%-12s %10.3f %14.3f %7.2fx\n", (std::to_string(r.W) + "x" + std::to_string(r.H)).c_str(), r.fused,
                        r.correct_first, r.correct_first / r.fused);
    }
    return rc;
}
