// denoise-cuda-bench: the public API with device and host frames (bench_api), and the memory plans
// of --plans (print_plans).
#include "cuda_bench.h"

namespace cuda_bench {

int bench_api(const std::string &wpath, int W, int H, int frames, DenoiseMemory mem, int64_t cap) {
    const DenoisePixelFormat fmt = yuv420p();
    const int cw = (W + 1) / 2, ch = (H + 1) / 2;
    const bool dev = mem == DENOISE_MEMORY_CUDA;
    cudaStream_t st = nullptr;
    if (dev) CU(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    DenoiseEngine *e = denoise_alloc();
    DenoiseParams p;
    denoise_params_defaults(&p);
    p.model_path = wpath.c_str();
    p.backend = DENOISE_BACKEND_CUDA;
    p.sigma = 20.f;
    p.width = W;
    p.height = H;
    p.format = fmt;
    p.memory = mem;
    p.cuda_stream = st;
    p.gpu_memory = cap;
    if (denoise_open(e, &p)) {
        std::fprintf(stderr, "denoise-cuda-bench: open: %s\n", denoise_last_error(e));
        denoise_free(&e);
        return 1;
    }
    // 8 distinct input frames, cycled; outputs into 2 frames
    const int K = 8;
    std::vector<uint8_t> hp[K][3], ho[2][3];
    std::vector<void *> dptr;
    DenoiseImage in[K], out[2];
    for (int k = 0; k < K + 2; ++k) {
        DenoiseImage &im = k < K ? in[k] : out[k - K];
        std::vector<uint8_t> *pl = k < K ? hp[k] : ho[k - K];
        fill_frame(pl, W, H, k);
        im = DenoiseImage{};
        im.color = bt709();
        for (int q = 0; q < 3; ++q) {
            im.linesize[q] = q ? cw : W;
            if (dev) {
                void *d = nullptr;
                CU(cudaMalloc(&d, pl[q].size()));
                CU(cudaMemcpy(d, pl[q].data(), pl[q].size(), cudaMemcpyHostToDevice));
                dptr.push_back(d);
                im.data[q] = (uint8_t *)d;
            } else {
                im.data[q] = pl[q].data();
            }
        }
    }
    CU(cudaDeviceSynchronize());  // the device frames' uploads have landed (see above)
    (void)ch;
    const int warm = cap ? 2 : 6, lat = denoise_latency(e);
    int pulled = 0, rc = 0;
    std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
    for (int f = 0; f < frames + warm + lat && !rc; ++f) {
        if ((rc = denoise_push(e, &in[f % K]))) break;
        int q;
        while ((q = denoise_pull(e, &out[pulled & 1])) == 0)
            if (++pulled == warm) {
                if (dev) cudaStreamSynchronize(st);
                t0 = std::chrono::steady_clock::now();
            }
        if (q != DENOISE_EAGAIN) rc = q;
    }
    if (dev) cudaStreamSynchronize(st);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const int n = pulled - warm;
    const int64_t peak = denoise_gpu_memory_peak(e);
    if (rc) std::fprintf(stderr, "denoise-cuda-bench: api: rc %d: %s\n", rc, denoise_last_error(e));
    denoise_free(&e);
    for (void *d : dptr) cudaFree(d);
    if (st) cudaStreamDestroy(st);
    if (rc || n <= 0) return 1;
    const double ms = 1000.0 * sec / n;
    char label[96];
    const char *g = std::getenv("DENOISE_CUDA_GRAPH");
    std::snprintf(label, sizeof label, "%dx%d api-%s%s%s", W, H, dev ? "cuda" : "host",
                  cap ? (" cap " + std::to_string(cap >> 20) + " MiB").c_str() : "",
                  g && !std::strcmp(g, "0") ? " stream launches" : "");
    std::printf("cuda-bench %-32s %8.3f ms/frame  %8.2f frames/s  engine GPU memory peak %.0f MiB (%d frames, wall "
                "clock)\n",
                label, ms, 1000.0 / ms, peak / 1048576.0, n);
    std::fflush(stdout);
    g_rows.push_back({label, ms, 1000.0 / ms, peak / 1073741824.0});
    return 0;
}

// The backend's memory plan (no GPU needed: planning is arithmetic).
void print_plans(const Model &M, int W, int H) {
    DenoisePixelFormat p010 = yuv420p();
    p010.bytes = 2;
    for (int c = 0; c < 3; ++c) p010.comp[c] = {c ? 1 : 0, c == 2 ? 2 : 0, c ? 4 : 2, 6, 10};
    const int m = M.cfg.pad_multiple;
    for (int f = 0; f < 2; ++f)
        for (DenoiseMemory mem : {DENOISE_MEMORY_HOST, DENOISE_MEMORY_CUDA})
            for (int64_t cap : {(int64_t)DENOISE_GPU_MEMORY_DEFAULT, (int64_t)2048 << 20}) {
                StreamSpec s;
                s.width = W;
                s.height = H;
                s.hp = (H + m - 1) / m * m;
                s.wp = (W + m - 1) / m * m;
                s.format = f ? p010 : yuv420p();
                s.cw = (W + 1) / 2;
                s.ch = (H + 1) / 2;
                s.memory = mem;
                s.gpu_memory = cap;
                std::string err;
                int code = 0;
                std::unique_ptr<Backend> b = cuda_backend_new(M, s, &err, &code);
                CudaPlanInfo info;
                std::printf("plan %5dx%-5d %-8s %-4s cap %5lld MiB: %s\n", W, H, f ? "p010le" : "yuv420p",
                            mem == DENOISE_MEMORY_HOST ? "host" : "cuda", (long long)(cap >> 20),
                            b && cuda_backend_plan(*b, &info) ? info.text.c_str() : err.c_str());
            }
}

}  // namespace cuda_bench
