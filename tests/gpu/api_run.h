// Shared by the GPU check programs that drive the engine (tests/gpu/*_check.cpp): native host
// frames of every pixel format (tests/common/pixfmt_descriptors.h) with their colour, the public
// API run on a clip (backend, memory HOST or CUDA in a context of the test's own, amounts, tiles),
// the clips (samples, random smooth frames), and the checks more than one area runs: the golden
// sequences through the API, tiles against whole frames (a crop written as PNG), and the CUDA
// graphs check.
#ifndef DENOISE_TESTS_GPU_API_RUN_H
#define DENOISE_TESTS_GPU_API_RUN_H

#include <dlfcn.h>
#include <png.h>

#include <algorithm>
#include <deque>
#include <fstream>
#include <memory>

#include "backend.h"
#include "common/blue_noise.h"
#include "cpu/frame_convert.h"
#include "cuda/frame_layout.h"
#include "harness.h"
#include "model.h"
#include "pixfmt_descriptors.h"
#include "safetensors.h"

using denoise_test::pixfmt_descriptor;

namespace gpu_check {

// ==========================================================================================
// Native frames on the host.
// A pixel format (tests/pixfmt_descriptors.h) and the colour system its frames are made in.
struct Fmt : denoise_test::PixFmtDescriptor {
    enum pl_color_system sys;
};

inline const std::vector<Fmt> &formats() {
    static const std::vector<Fmt> v = {
        {pixfmt_descriptor("yuv420p"), PL_COLOR_SYSTEM_BT_601},
        {pixfmt_descriptor("yuva420p"), PL_COLOR_SYSTEM_BT_709},
        {pixfmt_descriptor("yuv422p10le"), PL_COLOR_SYSTEM_BT_709},
        {pixfmt_descriptor("yuv444p"), PL_COLOR_SYSTEM_BT_709},
        {pixfmt_descriptor("yuv444p16le"), PL_COLOR_SYSTEM_BT_2020_NC},
        {pixfmt_descriptor("yuv410p"), PL_COLOR_SYSTEM_BT_601},
        {pixfmt_descriptor("yuv440p10le"), PL_COLOR_SYSTEM_BT_601},
        {pixfmt_descriptor("nv12"), PL_COLOR_SYSTEM_BT_709},
        {pixfmt_descriptor("nv21"), PL_COLOR_SYSTEM_BT_601},
        {pixfmt_descriptor("p010le"), PL_COLOR_SYSTEM_BT_2020_NC},
        {pixfmt_descriptor("p016le"), PL_COLOR_SYSTEM_BT_709},
        {pixfmt_descriptor("p210le"), PL_COLOR_SYSTEM_BT_709},
        {pixfmt_descriptor("yuyv422"), PL_COLOR_SYSTEM_BT_601},
        {pixfmt_descriptor("uyvy422"), PL_COLOR_SYSTEM_BT_709},
        {pixfmt_descriptor("gray"), PL_COLOR_SYSTEM_BT_601},
        {pixfmt_descriptor("gray10le"), PL_COLOR_SYSTEM_BT_709},
        {pixfmt_descriptor("ya16le"), PL_COLOR_SYSTEM_BT_709},
        {pixfmt_descriptor("grayf32le"), PL_COLOR_SYSTEM_RGB},
        {pixfmt_descriptor("rgb24"), PL_COLOR_SYSTEM_RGB},
        {pixfmt_descriptor("bgra"), PL_COLOR_SYSTEM_RGB},
        {pixfmt_descriptor("0rgb"), PL_COLOR_SYSTEM_RGB},
        {pixfmt_descriptor("rgb48le"), PL_COLOR_SYSTEM_RGB},
        {pixfmt_descriptor("rgba64le"), PL_COLOR_SYSTEM_RGB},
        {pixfmt_descriptor("gbrp"), PL_COLOR_SYSTEM_RGB},
        {pixfmt_descriptor("gbrp10le"), PL_COLOR_SYSTEM_RGB},
        {pixfmt_descriptor("gbrpf32le"), PL_COLOR_SYSTEM_RGB},
        {pixfmt_descriptor("gbrapf32le"), PL_COLOR_SYSTEM_RGB},
    };
    return v;
}
inline const Fmt &fmt_named(const char *n) {
    for (const Fmt &f : formats())
        if (!std::strcmp(f.name, n)) return f;
    std::printf("FAIL internal: no format %s\n", n);
    std::exit(1);
}

inline int comp_w(const DenoisePixelFormat &f, int c, int W) { return c ? -((-W) >> f.log2_chroma_w) : W; }
inline int comp_h(const DenoisePixelFormat &f, int c, int H) { return c ? -((-H) >> f.log2_chroma_h) : H; }

// A frame in host memory: nb_planes planes with padded linesizes, every byte random at first.
struct HostFrame {
    std::vector<uint8_t> plane[4];
    ptrdiff_t linesize[4] = {0, 0, 0, 0};
    int rows[4] = {0, 0, 0, 0};
    DenoiseImage image(const DenoiseColor &c) {
        DenoiseImage im{};
        for (int i = 0; i < 4; ++i) {
            im.data[i] = plane[i].empty() ? nullptr : plane[i].data();
            im.linesize[i] = linesize[i];
        }
        im.color = c;
        return im;
    }
};

inline HostFrame new_frame(const Fmt &F, int W, int H) {
    const cuda::FrameLayout L = cuda::frame_layout(F.f, W, H);
    HostFrame fr;
    std::uniform_int_distribution<int> byte(0, 255), pad(0, 40);
    for (int i = 0; i < F.nb_planes; ++i) {
        const int64_t rb = L.plane[i].used ? L.plane[i].row_bytes : (int64_t)W * F.f.bytes;  // alpha plane
        fr.linesize[i] = (rb + pad(rng) + 3) / 4 * 4;
        fr.rows[i] = L.plane[i].used ? L.plane[i].rows : H;
        fr.plane[i].resize((size_t)fr.linesize[i] * fr.rows[i]);
        for (auto &b : fr.plane[i]) b = (uint8_t)byte(rng);
    }
    return fr;
}

inline uint8_t *sample_at(HostFrame &fr, const DenoisePixelFormat &f, int c, int x, int y) {
    const DenoiseComponent &k = f.comp[c];
    return fr.plane[k.plane].data() + (ptrdiff_t)y * fr.linesize[k.plane] + k.offset + (ptrdiff_t)x * k.step;
}
// Normalised value of component c at (x, y) (integers: code / max; floats as stored).
inline double get_value(HostFrame &fr, const DenoisePixelFormat &f, int c, int x, int y) {
    const uint8_t *p = sample_at(fr, f, c, x, y);
    const DenoiseComponent &k = f.comp[c];
    if (f.is_float) {
        float v;
        std::memcpy(&v, p, 4);
        return v;
    }
    const unsigned w = f.bytes == 1 ? p[0] : p[0] | (unsigned)p[1] << 8, mask = (1u << k.depth) - 1;
    return ((w >> k.shift) & mask) / (double)mask;
}
inline unsigned get_code(HostFrame &fr, const DenoisePixelFormat &f, int c, int x, int y) {
    const uint8_t *p = sample_at(fr, f, c, x, y);
    const DenoiseComponent &k = f.comp[c];
    const unsigned w = f.bytes == 1 ? p[0] : p[0] | (unsigned)p[1] << 8;
    return (w >> k.shift) & ((1u << k.depth) - 1);
}
inline void set_value(HostFrame &fr, const DenoisePixelFormat &f, int c, int x, int y, double v) {
    uint8_t *p = sample_at(fr, f, c, x, y);
    const DenoiseComponent &k = f.comp[c];
    if (f.is_float) {
        const float fv = (float)v;
        std::memcpy(p, &fv, 4);
        return;
    }
    const unsigned mask = (1u << k.depth) - 1;
    const unsigned code = (unsigned)std::lround(std::min(1.0, std::max(0.0, v)) * mask);
    unsigned w = f.bytes == 1 ? p[0] : p[0] | (unsigned)p[1] << 8;
    w = (w & ~(mask << k.shift)) | (code << k.shift);
    p[0] = (uint8_t)w;
    if (f.bytes == 2) p[1] = (uint8_t)(w >> 8);
}

// Random colour samples (the other bits stay random): integers uniform codes; floats in
// [-0.2, 1.2] with a NaN, +-Inf and huge values here and there.
inline void fill_random(HostFrame &fr, const DenoisePixelFormat &f, int W, int H) {
    std::uniform_real_distribution<double> u(0.0, 1.0), uf(-0.2, 1.2);
    for (int c = 0; c < f.nb_components; ++c)
        for (int y = 0; y < comp_h(f, c, H); ++y)
            for (int x = 0; x < comp_w(f, c, W); ++x) {
                double v = f.is_float ? uf(rng) : u(rng);
                if (f.is_float) {
                    const double r = u(rng);
                    if (r < 0.003) v = NAN;
                    else if (r < 0.005) v = INFINITY;
                    else if (r < 0.007) v = -INFINITY;
                    else if (r < 0.009) v = 1e30;
                }
                set_value(fr, f, c, x, y, v);
            }
}

inline DenoiseColor color_of(const Fmt &F, enum pl_color_levels levels, int xpos, int ypos) {
    DenoiseColor c{};
    c.repr.sys = F.sys;
    c.repr.levels = F.sys == PL_COLOR_SYSTEM_RGB ? PL_COLOR_LEVELS_FULL : levels;
    c.repr.alpha = PL_ALPHA_UNKNOWN;
    c.chroma_xpos = xpos;
    c.chroma_ypos = ypos;
    return c;
}

// ==========================================================================================
// 2. frame conversions vs the CPU backend's FrameConvert
inline int reflect(int i, int n) {
    if (n == 1) return 0;
    const int p = 2 * (n - 1);
    i %= p;
    if (i < 0) i += p;
    return i >= n ? p - i : i;
}

// 4. the public API
//
// The CUDA driver API, loaded at run time (this binary must start without a driver): a context
// of the test's own, as FFmpeg's hwcontext_cuda makes one.
struct Driver {
    int (*init)(unsigned) = nullptr;
    int (*device_get)(int *, int) = nullptr;
    int (*ctx_create)(void **, unsigned, int) = nullptr;
    int (*ctx_destroy)(void *) = nullptr;
    int (*ctx_push)(void *) = nullptr;
    int (*ctx_pop)(void **) = nullptr;
    bool ok = false;
    Driver() {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!h) return;
        init = (int (*)(unsigned))dlsym(h, "cuInit");
        device_get = (int (*)(int *, int))dlsym(h, "cuDeviceGet");
        ctx_create = (int (*)(void **, unsigned, int))dlsym(h, "cuCtxCreate_v2");
        ctx_destroy = (int (*)(void *))dlsym(h, "cuCtxDestroy_v2");
        ctx_push = (int (*)(void *))dlsym(h, "cuCtxPushCurrent_v2");
        ctx_pop = (int (*)(void **))dlsym(h, "cuCtxPopCurrent_v2");
        ok = init && device_get && ctx_create && ctx_destroy && ctx_push && ctx_pop && init(0) == 0;
    }
};
inline Driver &driver() {
    static Driver d;
    return d;
}
// A context made current for the scope (popped and destroyed after).
struct OwnContext {
    void *ctx = nullptr;
    bool ok = false;
    OwnContext() {
        Driver &d = driver();
        int dev = 0;
        if (!d.ok || d.device_get(&dev, 0) || d.ctx_create(&ctx, 0, dev)) return;  // cuCtxCreate makes it current
        ok = true;
    }
    ~OwnContext() {
        if (!ok) return;
        void *p = nullptr;
        driver().ctx_pop(&p);
        driver().ctx_destroy(ctx);
    }
};

// Native frames of a format made from R'G'B' planes in [0, 1] (the inverse of frame_color's
// decoding; chroma subsampled by a box average).
inline HostFrame native_from_rgb(const Fmt &F, const DenoiseColor &col, const float *rgb, int W, int H) {
    const DenoisePixelFormat &f = F.f;
    const FrameColor fc = frame_color(f, col);
    HostFrame fr = new_frame(F, W, H);
    const size_t ps = (size_t)W * H;
    auto enc = [&](int k, size_t i) {
        if (fc.rgb) return (double)rgb[k * ps + i];
        double v = 0;
        for (int j = 0; j < 3; ++j) v += fc.enc[k][j] * (rgb[j * ps + i] - fc.dec_off[j]);
        return v;
    };
    if (f.nb_components == 1) {
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < W; ++x) {
                const size_t i = (size_t)y * W + x;
                const double Y = fc.rgb ? 0.2126 * rgb[i] + 0.7152 * rgb[ps + i] + 0.0722 * rgb[2 * ps + i] : enc(0, i);
                set_value(fr, f, 0, x, y, Y);
            }
        return fr;
    }
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) set_value(fr, f, 0, x, y, enc(0, (size_t)y * W + x));
    const int sx = 1 << f.log2_chroma_w, sy = 1 << f.log2_chroma_h;
    for (int c = 1; c < 3; ++c)
        for (int j = 0; j < comp_h(f, c, H); ++j)
            for (int i = 0; i < comp_w(f, c, W); ++i) {
                double s = 0;
                int n = 0;
                for (int y = j * sy; y < std::min(H, (j + 1) * sy); ++y)
                    for (int x = i * sx; x < std::min(W, (i + 1) * sx); ++x, ++n) s += enc(c, (size_t)y * W + x);
                set_value(fr, f, c, i, j, s / n);
            }
    return fr;
}

// Full-resolution R'G'B' of a native frame (the CPU backend's to_rgb, unclamped).
inline std::vector<float> rgb_of(const Fmt &F, HostFrame &fr, const DenoiseColor &col, int W, int H) {
    const DenoisePixelFormat &f = F.f;
    cpu::FrameConvert conv(f, W, H, f.nb_components == 3 ? comp_w(f, 1, W) : W, f.nb_components == 3 ? comp_h(f, 1, H) : H);
    cpu::NativeSamples ns;
    conv.read(fr.image(col), &ns);
    std::vector<float> rgb((size_t)3 * W * H);
    float *rp[3] = {&rgb[0], &rgb[(size_t)W * H], &rgb[(size_t)2 * W * H]};
    conv.to_rgb(ns, frame_color(f, col), rp);
    return rgb;
}

inline double psnr(const std::vector<float> &a, const std::vector<float> &ref) {
    double se = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        const double d = std::min(1.f, std::max(0.f, a[i])) - std::min(1.f, std::max(0.f, ref[i]));
        se += d * d;
    }
    return se == 0 ? INFINITY : 10.0 * std::log10(1.0 / (se / a.size()));
}

struct ApiRun {
    std::vector<HostFrame> out;
    std::vector<float> sigmas;  // denoise_output_sigma() after each pull
    std::string err;
    int rc = 0;
    int64_t peak = 0;
    std::string reason;
    int latency = -1;         // denoise_latency()
    int first_out_push = -1;  // frames pushed when the first output came out (-1: only after the flush)
    // sigma=auto's host waits for the GPU estimator (backend_cuda.h NoiseReads; zero on the CPU
    // backend): when the first output was pulled, and at the end
    NoiseReads reads_first_out, reads;
};

// The CUDA backend's estimator reads of an open engine so far (zero for another backend).
inline NoiseReads engine_noise_reads(const DenoiseEngine *e) {
    const Backend *b = engine_backend(e);
    CudaPlanInfo i;
    return b && cuda_backend_plan(*b, &i) ? i.noise_reads : NoiseReads();
}

struct ApiOpts {
    DenoiseBackend backend = DENOISE_BACKEND_CUDA;
    DenoiseMemory memory = DENOISE_MEMORY_HOST;
    DenoiseAmount amount = {DENOISE_AMOUNT_DEFAULTS};
    int change_at = -1;                                // set `later` before pushing this frame
    DenoiseAmount later = {DENOISE_AMOUNT_DEFAULTS};
    int64_t gpu_memory = 0;
    int tile = 0;
    float sigma = 20.f;
    bool pull_into_input = false;  // memory HOST: write each output over its own input frame
    // memory CUDA: synchronise the stream after each pull, as a consumer that reads the frame on
    // the host (hwdownload, an encoder) does; without one the host runs ahead of the GPU
    bool consumer_sync = false;
};

// Push every frame, flush, pull everything (pulling as soon as outputs are ready, as the
// filter does). Memory CUDA: frames copied to device planes of the same linesizes in the
// current context, a stream of that context; outputs copied back after a stream sync.
inline ApiRun run_api(const std::string &weights, const Fmt &F, const DenoiseColor &col, std::vector<HostFrame> in, int W,
               int H, const ApiOpts &o) {
    ApiRun r;
    DenoiseEngine *e = denoise_alloc();
    DenoiseParams p;
    denoise_params_defaults(&p);
    p.model_path = weights.c_str();
    p.backend = o.backend;
    p.sigma = o.sigma;
    p.width = W;
    p.height = H;
    p.format = F.f;
    p.memory = o.memory;
    p.gpu_memory = o.gpu_memory;
    p.tile = o.tile;
    cudaStream_t stream = nullptr;
    const bool dev = o.memory == DENOISE_MEMORY_CUDA;
    if (dev && cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
        r.rc = -100;
        r.err = "cudaStreamCreate in the test";
        return r;
    }
    p.cuda_stream = stream;
    std::vector<std::vector<void *>> dplanes;  // device copies (memory CUDA)
    auto to_dev = [&](HostFrame &fr) {
        std::vector<void *> v(4, nullptr);
        for (int i = 0; i < F.nb_planes; ++i) {
            cudaMalloc(&v[i], fr.plane[i].size());
            cudaMemcpy(v[i], fr.plane[i].data(), fr.plane[i].size(), cudaMemcpyHostToDevice);
        }
        cudaDeviceSynchronize();  // see up(): the engine's streams do not wait for these copies
        return v;
    };
    auto dev_image = [&](std::vector<void *> &v, HostFrame &fr) {
        DenoiseImage im = fr.image(col);
        for (int i = 0; i < 4; ++i) im.data[i] = (uint8_t *)v[i];
        return im;
    };
    int rc = denoise_open(e, &p);
    if (!rc && denoise_backend(e) != o.backend) rc = -101;
    if (rc) {
        r.rc = rc;
        r.err = rc == -101 ? "backend not in use" : denoise_last_error(e);
        denoise_free(&e);
        if (stream) cudaStreamDestroy(stream);
        return r;
    }
    r.reason = denoise_backend_reason(e);
    r.latency = denoise_latency(e);
    if (!(o.amount.amount == 1.f && o.amount.luma == 1.f && o.amount.chroma == 1.f) &&
        (rc = denoise_set_amount(e, &o.amount)) != 0) {
        r.rc = rc;
        r.err = std::string("denoise_set_amount: ") + denoise_last_error(e);
        denoise_free(&e);
        if (stream) cudaStreamDestroy(stream);
        return r;
    }
    const int N = (int)in.size();
    r.out = in;  // output frames start as copies (their non-colour bits must survive)
    std::vector<std::vector<void *>> dout;
    if (dev) {
        for (int t = 0; t < N; ++t) {
            dplanes.push_back(to_dev(in[t]));
            dout.push_back(to_dev(r.out[t]));
        }
        cudaDeviceSynchronize();  // the legacy-stream uploads landed before the engine's stream reads them
    }
    int t = 0, pushed = 0;
    bool flushed = false;
    auto drain = [&]() {
        int q;
        for (;;) {
            if (t >= N) return (int)DENOISE_EOF;
            DenoiseImage im = dev ? dev_image(dout[t], r.out[t])
                                  : (o.pull_into_input ? in[t].image(col) : r.out[t].image(col));
            q = denoise_pull(e, &im);
            if (q) return q;
            if (dev && o.consumer_sync && cudaStreamSynchronize(stream) != cudaSuccess) return -102;
            if (t == 0) r.reads_first_out = engine_noise_reads(e);
            if (t == 0 && !flushed) r.first_out_push = pushed;
            float sg = -1.f;
            denoise_output_sigma(e, &sg);
            r.sigmas.push_back(sg);
            if (!dev && o.pull_into_input) r.out[t] = in[t];
            ++t;
        }
    };
    for (int k = 0; k < N && !rc; ++k) {
        DenoiseImage im = dev ? dev_image(dplanes[k], in[k]) : in[k].image(col);
        if (k == o.change_at) rc = denoise_set_amount(e, &o.later);
        if (!rc) rc = denoise_push(e, &im);
        if (!rc) {
            ++pushed;
            int q = drain();
            if (q != DENOISE_EAGAIN && q != DENOISE_EOF) rc = q;
        }
    }
    if (!rc) rc = denoise_flush(e);
    flushed = true;
    if (!rc) {
        int q = drain();
        if (q != DENOISE_EOF) rc = q;
    }
    if (dev) {
        if (cudaStreamSynchronize(stream) != cudaSuccess && !rc) rc = -102;
        for (int k = 0; k < N; ++k)
            for (int i = 0; i < F.nb_planes; ++i)
                cudaMemcpy(r.out[k].plane[i].data(), dout[k][i], r.out[k].plane[i].size(), cudaMemcpyDeviceToHost);
    }
    if (rc || t != N) {
        r.rc = rc ? rc : -103;
        r.err = "rc " + std::to_string(rc) + " after " + std::to_string(t) + " of " + std::to_string(N) +
                " frames: " + (rc == -102 ? std::string("stream sync failed") : std::string(denoise_last_error(e)));
    }
    r.peak = denoise_gpu_memory_peak(e);
    r.reads = engine_noise_reads(e);
    denoise_free(&e);
    for (auto &v : dplanes)
        for (void *q : v) cudaFree(q);
    for (auto &v : dout)
        for (void *q : v) cudaFree(q);
    if (stream) cudaStreamDestroy(stream);
    return r;
}

// Decoded R'G'B' of a run's frames, concatenated.
inline std::vector<float> rgb_all(const Fmt &F, std::vector<HostFrame> &frames, const DenoiseColor &col, int W, int H) {
    std::vector<float> all;
    for (HostFrame &fr : frames) {
        std::vector<float> v = rgb_of(F, fr, col, W, H);
        all.insert(all.end(), v.begin(), v.end());
    }
    return all;
}

// Max code difference between two runs over the colour samples (floats: max abs).
inline double max_sample_diff(const Fmt &F, std::vector<HostFrame> &a, std::vector<HostFrame> &b, int W, int H, size_t *n_diff) {
    double mx = 0;
    *n_diff = 0;
    for (size_t t = 0; t < a.size(); ++t)
        for (int c = 0; c < F.f.nb_components; ++c)
            for (int y = 0; y < comp_h(F.f, c, H); ++y)
                for (int x = 0; x < comp_w(F.f, c, W); ++x) {
                    double d = F.f.is_float ? std::fabs(get_value(a[t], F.f, c, x, y) - get_value(b[t], F.f, c, x, y))
                                            : std::fabs((double)get_code(a[t], F.f, c, x, y) - get_code(b[t], F.f, c, x, y));
                    if (std::isnan(d)) d = std::isnan(get_value(a[t], F.f, c, x, y)) && std::isnan(get_value(b[t], F.f, c, x, y)) ? 0 : INFINITY;
                    if (d > 0) ++*n_diff;
                    mx = std::max(mx, d);
                }
    return mx;
}

// Bytes outside the colour components that differ between a run's outputs and its inputs.
inline size_t other_bits_changed(const Fmt &F, std::vector<HostFrame> &out, std::vector<HostFrame> &in, int W, int H) {
    size_t n = 0;
    for (size_t t = 0; t < out.size(); ++t) {
        HostFrame a = out[t], b = in[t];
        // clear the colour bits of both, then compare what is left
        for (int c = 0; c < F.f.nb_components; ++c)
            for (int y = 0; y < comp_h(F.f, c, H); ++y)
                for (int x = 0; x < comp_w(F.f, c, W); ++x) {
                    set_value(a, F.f, c, x, y, 0.0);
                    set_value(b, F.f, c, x, y, 0.0);
                }
        for (int i = 0; i < F.nb_planes; ++i)
            for (size_t k = 0; k < a.plane[i].size(); ++k) n += a.plane[i][k] != b.plane[i][k];
    }
    return n;
}

struct Clip {
    int W = 0, H = 0, N = 0;
    std::vector<float> clean, noisy;  // N x 3 x H x W in [0, 1] (noisy: AWGN, unclipped)
    std::string name;
};

// rgb48le raw (check_gpu.sh) -> a clip with AWGN of sigma (8-bit code values), fixed seed;
// scale > 1 upsamples bilinearly (a larger frame of real content for the tile checks).
inline bool load_clip(const std::string &raw, int W, int H, int N, const std::string &name, float sigma, int scale, Clip *c) {
    std::ifstream f(raw, std::ios::binary);
    std::vector<uint16_t> px((size_t)N * H * W * 3);
    if (!f.read((char *)px.data(), px.size() * 2)) return false;
    c->W = W * scale;
    c->H = H * scale;
    c->N = N;
    c->name = name;
    const size_t ps = (size_t)c->W * c->H;
    c->clean.assign((size_t)N * 3 * ps, 0.f);
    c->noisy.assign(c->clean.size(), 0.f);
    std::mt19937 g(1234);
    std::normal_distribution<float> nd(0.f, sigma / 255.f);
    for (int t = 0; t < N; ++t)
        for (int y = 0; y < c->H; ++y)
            for (int x = 0; x < c->W; ++x) {
                const float sy = std::max(0.f, (y + 0.5f) / scale - 0.5f), sx = std::max(0.f, (x + 0.5f) / scale - 0.5f);
                const int y0 = std::min(H - 1, (int)sy), x0 = std::min(W - 1, (int)sx);
                const int y1 = std::min(H - 1, y0 + 1), x1 = std::min(W - 1, x0 + 1);
                const float wy = sy - y0, wx = sx - x0;
                for (int k = 0; k < 3; ++k) {
                    auto P = [&](int yy, int xx) { return px[(((size_t)t * H + yy) * W + xx) * 3 + k] / 65535.f; };
                    const float v = (1 - wy) * ((1 - wx) * P(y0, x0) + wx * P(y0, x1)) + wy * ((1 - wx) * P(y1, x0) + wx * P(y1, x1));
                    const size_t i = ((size_t)t * 3 + k) * ps + (size_t)y * c->W + x;
                    c->clean[i] = v;
                    c->noisy[i] = v + nd(g);
                }
            }
    return true;
}

inline std::vector<HostFrame> clip_frames(const Fmt &F, const DenoiseColor &col, const Clip &c, bool noisy) {
    std::vector<HostFrame> v;
    const size_t fs = (size_t)3 * c.W * c.H;
    for (int t = 0; t < c.N; ++t) {
        std::vector<float> rgb((noisy ? c.noisy : c.clean).begin() + t * fs, (noisy ? c.noisy : c.clean).begin() + (t + 1) * fs);
        if (!F.f.is_float)
            for (float &x : rgb) x = std::min(1.f, std::max(0.f, x));
        v.push_back(native_from_rgb(F, col, rgb.data(), c.W, c.H));
    }
    return v;
}

// golden: the file pair tests/data/<golden>_tensors / _weights.safetensors ("golden";
// "golden_align": the aligned model, align 8, tile 32, on moving content; "golden_wide": channels
// 64/64/128, make_goldens.py --wide)
inline void golden_api_checks(const char *path, const std::string &golden = "golden") {
    StFile g;
    std::string err;
    if (!load_safetensors(data_dir() + "/" + golden + "_tensors.safetensors", &g, &err)) {
        result(false, "%s tensors: %s", golden.c_str(), err.c_str());
        return;
    }
    const std::string wpath = data_dir() + "/" + golden + "_weights.safetensors";
    const Fmt &F = fmt_named("gbrpf32le");
    const DenoiseColor col = color_of(F, PL_COLOR_LEVELS_FULL, 0, 0);
    for (const char *key : {"seq", "seq1", "seq2"}) {
        const StTensor &in = g.tensors.at(std::string(key) + ".input");
        const StTensor &ref = g.tensors.at(std::string(key) + ".output");
        const int N = (int)in.shape[0], H = (int)in.shape[2], W = (int)in.shape[3];
        const float sigma = g.tensors.at(std::string(key) + ".sigma").data[0];
        std::vector<HostFrame> frames;
        const size_t ps = (size_t)H * W;
        for (int t = 0; t < N; ++t) {
            HostFrame fr = new_frame(F, W, H);
            for (int k = 0; k < 3; ++k)
                for (int y = 0; y < H; ++y)
                    for (int x = 0; x < W; ++x)
                        set_value(fr, F.f, k, x, y, 0.5 * (in.data[((size_t)t * 3 + k) * ps + (size_t)y * W + x] + 1.0));
            frames.push_back(fr);
        }
        ApiOpts oc, og;
        oc.backend = DENOISE_BACKEND_CPU;
        oc.sigma = og.sigma = sigma;
        ApiRun rc = run_api(wpath, F, col, frames, W, H, oc), rg = run_api(wpath, F, col, frames, W, H, og);
        char name[96];
        std::snprintf(name, sizeof name, "api %s%s %s N=%d %dx%d vs CPU", path, golden.c_str(), key, N, W, H);
        if (rc.rc || rg.rc) {
            result(false, "%-40s cpu: %s cuda: %s", name, rc.err.c_str(), rg.err.c_str());
            continue;
        }
        std::vector<float> a, b, r(ref.data.begin(), ref.data.end());
        for (int t = 0; t < N; ++t)
            for (int k = 0; k < 3; ++k)
                for (int y = 0; y < H; ++y)
                    for (int x = 0; x < W; ++x) {  // network units
                        a.push_back(2.f * (float)get_value(rg.out[t], F.f, k, x, y) - 1.f);
                        b.push_back(2.f * (float)get_value(rc.out[t], F.f, k, x, y) - 1.f);
                    }
        check(name, a, b, 0.1);
        std::snprintf(name, sizeof name, "api %s%s %s vs PyTorch", path, golden.c_str(), key);
        check(name, a, r, 0.1);
    }
}

// 5. tiles, memory caps, errors, two engines

// A crop around a tile corner: whole frame | tiled | |difference| x 64, 8-bit R'G'B' (white
// 4 px gaps between the three), written as PNG with libpng's simplified API. Returns false (and
// says why) when the file cannot be written.
inline bool write_crop(const std::string &path, const std::vector<float> &a, const std::vector<float> &b, int W, int H, int cx,
                int cy, int size) {
    const int x0 = std::max(0, cx - size / 2), y0 = std::max(0, cy - size / 2);
    const int w = std::min(size, W - x0), h = std::min(size, H - y0), ow = 3 * w + 8;
    const size_t ps = (size_t)W * H;
    std::vector<uint8_t> img((size_t)ow * h * 3, 255);
    for (int y = 0; y < h; ++y)
        for (int part = 0; part < 3; ++part)
            for (int x = 0; x < w; ++x)
                for (int k = 0; k < 3; ++k) {
                    const size_t i = k * ps + (size_t)(y0 + y) * W + x0 + x;
                    const float v = part == 0 ? a[i] : part == 1 ? b[i] : std::fabs(a[i] - b[i]) * 64.f;
                    img[((size_t)y * ow + part * (w + 4) + x) * 3 + k] =
                        (uint8_t)std::lround(255.f * std::min(1.f, std::max(0.f, v)));
                }
    png_image pi;
    std::memset(&pi, 0, sizeof pi);
    pi.version = PNG_IMAGE_VERSION;
    pi.width = (png_uint_32)ow;
    pi.height = (png_uint_32)h;
    pi.format = PNG_FORMAT_RGB;
    if (!png_image_write_to_file(&pi, path.c_str(), 0, img.data(), 0, nullptr)) {
        std::printf("     crop: cannot write %s: %s\n", path.c_str(), pi.message);
        return false;
    }
    return true;
}

// The whole-frame run of clip c as yuv420p (limited range, chroma left), default options: the
// reference of the yuv420p tile check, the memory checks and the two-engines check.
inline ApiRun whole_yuv420p(const std::string &weights, const Clip &c) {
    const Fmt &F = fmt_named("yuv420p");
    const DenoiseColor col = color_of(F, PL_COLOR_LEVELS_LIMITED, 0, 128);
    return run_api(weights, F, col, clip_frames(F, col, c, true), c.W, c.H, ApiOpts());
}

// whole: the whole-frame run of the same frames and options when already made (whole_yuv420p).
inline void tile_check(const std::string &weights, const Clip &c, int tile, const char *fname, const ApiRun *whole = nullptr) {
    const Fmt &F = fmt_named(fname);
    const DenoiseColor col = color_of(F, PL_COLOR_LEVELS_LIMITED, 0, 128);
    std::vector<HostFrame> in = clip_frames(F, col, c, true);
    ApiOpts ow, ot;
    ot.tile = tile;
    ApiRun rw = whole ? *whole : run_api(weights, F, col, in, c.W, c.H, ow), rt = run_api(weights, F, col, in, c.W, c.H, ot);
    char name[128];
    std::snprintf(name, sizeof name, "tiles %s %s %dx%d tile %d", c.name.c_str(), fname, c.W, c.H, tile);
    if (rw.rc || rt.rc) {
        result(false, "%-48s whole: %s | tiled: %s", name, rw.err.c_str(), rt.err.c_str());
        return;
    }
    std::vector<float> a = rgb_all(F, rw.out, col, c.W, c.H), b = rgb_all(F, rt.out, col, c.W, c.H);
    const double p = psnr(b, a);
    // max |difference| (8-bit code values) within 4 px of a seam, and elsewhere
    double seam = 0, rest = 0;
    const size_t ps = (size_t)c.W * c.H;
    for (int t = 0; t < c.N; ++t)
        for (int k = 0; k < 3; ++k)
            for (int y = 0; y < c.H; ++y)
                for (int x = 0; x < c.W; ++x) {
                    const size_t i = ((size_t)t * 3 + k) * ps + (size_t)y * c.W + x;
                    const double d = std::fabs(a[i] - b[i]) * 255.0;
                    const bool near = (x % tile < 4 || x % tile >= tile - 4 || y % tile < 4 || y % tile >= tile - 4);
                    (near ? seam : rest) = std::max(near ? seam : rest, d);
                }
    result(p >= 50.0, "%-48s PSNR tiled vs whole %.2f dB (>= 50), max |diff| at the seams (+-4 px) %.3f, elsewhere "
                      "%.3f (8-bit code values); GPU memory peak whole %.0f MiB, tiled %.0f MiB",
           name, p, seam, rest, rw.peak / 1048576.0, rt.peak / 1048576.0);
    if (!g_out.empty()) {
        const int fs = (int)(3 * ps);
        std::vector<float> fa(a.begin() + (c.N / 2) * fs, a.begin() + (c.N / 2 + 1) * fs),
            fb(b.begin() + (c.N / 2) * fs, b.begin() + (c.N / 2 + 1) * fs);
        const std::string path = g_out + "/tile_crop_" + c.name + ".png";
        if (write_crop(path, fa, fb, c.W, c.H, tile, tile, 128))
            std::printf("     crop (whole | tiled | |diff| x 64) around the tile corner (%d, %d): %s\n", tile, tile,
                        path.c_str());
    }
}

// 7. The CUDA backend driven directly, as engine.cpp does for a stream of n frames (push k,
// F_{k-r} once its frames are in, output k-r-1 once its three feature maps are, pulled one
// pipeline depth later, evict what no later output reads; sigma and amounts changing from frame
// to frame), once with CUDA graphs and once without; outputs bit for bit equal, and the graph
// counters of the plan.
inline void graph_check(const std::string &weights, const char *label = "") {
    const Fmt &F = fmt_named("yuv420p");
    const DenoiseColor col = color_of(F, PL_COLOR_LEVELS_LIMITED, 0, 128);
    const int W = 200, H = 136, N = 14;
    Model M;
    std::string err;
    if (!load_model(weights, &M, &err)) {
        result(false, "CUDA graphs: %s", err.c_str());
        return;
    }
    const int r = M.cfg.fusion_radius, R = M.cfg.temporal_radius(), m = M.cfg.pad_multiple;
    std::vector<HostFrame> in;
    for (int k = 0; k < N; ++k) {
        in.push_back(new_frame(F, W, H));
        fill_random(in.back(), F.f, W, H);
    }
    StreamSpec spec;
    spec.width = W;
    spec.height = H;
    spec.hp = (H + m - 1) / m * m;
    spec.wp = (W + m - 1) / m * m;
    spec.cw = -((-W) >> F.f.log2_chroma_w);
    spec.ch = -((-H) >> F.f.log2_chroma_h);
    spec.format = F.f;
    spec.gpu_memory = (int64_t)4 << 30;
    spec.blue_noise = blue_noise_tile();
    const FrameColor fc = frame_color(F.f, col);
    struct Run {
        std::vector<HostFrame> out;
        CudaPlanInfo info;
        int outputs = 0, features = 0;
        std::string err;
    } run[2];
    for (int g = 0; g < 2; ++g) {
        if (g) setenv("DENOISE_CUDA_GRAPH", "0", 1);
        int code = 0;
        std::unique_ptr<Backend> b = cuda_backend_new(M, spec, &err, &code);
        if (g) unsetenv("DENOISE_CUDA_GRAPH");
        Run &u = run[g];
        u.out = in;
        int rc = b ? 0 : code;
        // outputs queued ahead of their pulls by the backend's pipeline depth, as engine.cpp does
        // (a graph is then updated while its previous launch may still run); sigma per F_s and the
        // amounts per output vary, so a kernel argument left stale by an update would show
        const size_t depth = b ? (size_t)b->pipeline_depth() : 0;
        std::deque<int> pending;
        auto pull_one = [&]() {
            const int t = pending.front();
            pending.pop_front();
            int q = b->write_output(t, u.out[t].image(col));
            if (!q) b->evict(t + 1 - R, t);
            return q;
        };
        for (int k = 0; k < N && !rc; ++k) {
            rc = b->push_frame(k, in[k].image(col), fc);
            const int s = k - r;
            if (!rc && s - r >= 0) {
                std::vector<int64_t> fr;
                for (int i = s - r; i <= s + r; ++i) fr.push_back(i);
                rc = b->compute_features(s, fr.data(), (int)fr.size(), 14.f + 2.f * (float)s);
                ++u.features;
            }
            const int t = s - 1;
            if (!rc && t - 1 >= r) {
                const int64_t feats[3] = {t - 1, t, t + 1};
                Amount am;
                am.luma = 1.f - 0.04f * (float)t;
                am.chroma = 1.f - 0.06f * (float)t;
                rc = b->queue_output(t, feats, am);
                if (!rc) pending.push_back(t);
                ++u.outputs;
                if (!rc && pending.size() > depth) rc = pull_one();
            }
        }
        while (!rc && !pending.empty()) rc = pull_one();
        if (rc) u.err = b ? b->error() : err;
        if (b && !cuda_backend_plan(*b, &u.info) && u.err.empty()) u.err = "no plan";
    }
    size_t differ = 0;
    for (int t = 0; t < N; ++t)
        for (int i = 0; i < F.nb_planes; ++i)
            for (size_t k = 0; k < run[0].out[t].plane[i].size(); ++k)
                differ += run[0].out[t].plane[i][k] != run[1].out[t].plane[i][k];
    const CudaPlanInfo &a = run[0].info, &d = run[1].info;
    const int want = run[0].features - 1 + run[0].outputs - 1;
    result(run[0].err.empty() && run[1].err.empty() && run[0].outputs > 2 && differ == 0 && a.graph_launches == want &&
               a.graph_instantiations == 2 && d.graph_launches == 0,
           "CUDA graphs %s%dx%d yuv420p, %d outputs from %d U-Net passes: %zu bytes differ from stream launches; graphs "
           "launched %d (want %d), instantiated %d (want 2), with DENOISE_CUDA_GRAPH=0 %d; \"%s\" / \"%s\"%s%s%s%s",
           label, W, H, run[0].outputs, run[0].features, differ, a.graph_launches, want, a.graph_instantiations,
           d.graph_launches, a.launches.c_str(), d.launches.c_str(), run[0].err.empty() ? "" : "; graphs: ",
           run[0].err.c_str(), run[1].err.empty() ? "" : "; stream: ", run[1].err.c_str());
}

// A small clip for the API checks: the first sample if given (not with --quick), else random
// smooth frames (--quick: 4 frames of 64x64, few launches for compute-sanitizer).
inline Clip small_clip(const Options &o) {
    Clip small;
    if (!o.quick && !o.samples.empty() &&
        load_clip(o.samples[0].raw, o.samples[0].w, o.samples[0].h, std::min(6, o.samples[0].n), o.samples[0].name,
                  20.f, 1, &small))
        return small;
    small.W = o.quick ? 64 : 96;
    small.H = 64;
    small.N = o.quick ? 4 : 6;
    small.name = "random";
    small.clean = rnd((size_t)small.N * 3 * small.W * small.H, 0.2f, 0.8f);
    small.noisy = small.clean;
    for (float &v : small.noisy) v += rnd(1, -0.08f, 0.08f)[0];
    return small;
}

}  // namespace gpu_check

#endif
