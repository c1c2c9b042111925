// The fused Swin block on the device, for its checks (tests/gpu/fused_check.cpp) and its timings
// (tools/cuda_bench/swin.cpp): device buffers, transfers ordered on the context's compute stream,
// a block's random weights uploaded for the fused kernel and for the correct-first op sequence
// (Net::block op for op, chunk for chunk), residual maps between poisoned guard bands, and one
// fused launch.
//
// Every host <-> device transfer and fill here is queued on the context's compute stream (a
// non-blocking stream, like the engine's) and waited for: a plain cudaMemcpy / cudaMemset runs on
// the legacy default stream, which such a stream does not wait for, and a pageable upload may
// still be in flight when cudaMemcpy returns, so a kernel could read a map half uploaded.
#ifndef DENOISE_TESTS_GPU_SWIN_BLOCK_DEV_H
#define DENOISE_TESTS_GPU_SWIN_BLOCK_DEV_H

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "bf16.h"
#include "check_tally.h"
#include "cuda/ops.h"
#include "cuda/swin_block_fused.h"
#include "cuda/swin_weight_image.h"
#include "swin_ref.h"

namespace swin_dev {

using namespace denoise;
using namespace denoise::cuda;
using check_tally::result;

constexpr float kEps = 1e-5f;
inline Ctx g_ctx;  // the context every call runs on (ctx_create by main)

// A failure after which nothing can be checked: its FAIL line, the summary, exit 1.
[[noreturn]] inline void fatal(const std::string &what) {
    result(false, "%s", what.c_str());
    std::exit(check_tally::summary());
}

inline void ck(cudaError_t e, const char *what) {
    if (e != cudaSuccess) fatal(std::string(what) + ": " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}
inline void ok_or_die(int rc, const char *what) {
    if (rc) fatal(std::string(what) + " returned " + std::to_string(rc) + ": " + g_ctx.err);
}

struct Dev {
    void *p = nullptr;
    size_t bytes = 0;
    explicit Dev(size_t n) : bytes(n) { ck(cudaMalloc(&p, n ? n : 16), "cudaMalloc"); }
    ~Dev() { cudaFree(p); }
    Dev(const Dev &) = delete;
    Dev &operator=(const Dev &) = delete;
    template <typename T>
    T *as() const {
        return static_cast<T *>(p);
    }
};

// Transfers and fills, ordered on the compute stream and waited for (see the top).
inline void h2d(void *dst, const void *src, size_t n) {
    ck(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, g_ctx.stream), "cudaMemcpyAsync H2D");
    ck(cudaStreamSynchronize(g_ctx.stream), "cudaStreamSynchronize (H2D)");
}
inline void d2h(void *dst, const void *src, size_t n) {
    ck(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, g_ctx.stream), "cudaMemcpyAsync D2H");
    ck(cudaStreamSynchronize(g_ctx.stream), "cudaStreamSynchronize (D2H)");
}
inline void fill(void *dst, int byte, size_t n) {
    ck(cudaMemsetAsync(dst, byte, n, g_ctx.stream), "cudaMemsetAsync");
    ck(cudaStreamSynchronize(g_ctx.stream), "cudaStreamSynchronize (memset)");
}
inline void upload(Dev &d, const void *src, size_t n) { h2d(d.p, src, n); }

inline std::vector<uint16_t> bf16_of(const float *p, size_t n) {
    std::vector<uint16_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = bf16_host::from_float(p[i]);
    return v;
}

// One block's weights on the device, for the fused kernel (the image) and for the correct-first
// op sequence (bf16 GEMM weights, fp32 + bf16 biases, fp32 norms and gathered bias table).
struct DevBlock {
    int C, heads;
    uint8_t *image = nullptr;
    std::vector<Dev *> bufs;
    bf16 *qkv_w, *proj_w, *fc1_w, *fc2_w, *qkv_b16;
    float *proj_b32, *fc1_b32, *fc2_b32, *n1g, *n1b, *n2g, *n2b, *relb;
    DevBlock(const swin_ref::RandomBlock &rb) : C(rb.C), heads(rb.heads) {
        ok_or_die(swin_weight_image_upload(g_ctx, rb.w, C, heads, &image, nullptr), "swin_weight_image_upload");
        auto put16 = [&](const std::vector<float> &v) {
            std::vector<uint16_t> h = bf16_of(v.data(), v.size());
            Dev *d = new Dev(2 * h.size());
            upload(*d, h.data(), 2 * h.size());
            bufs.push_back(d);
            return d->as<bf16>();
        };
        auto put32 = [&](const float *p, size_t n) {
            Dev *d = new Dev(4 * n);
            upload(*d, p, 4 * n);
            bufs.push_back(d);
            return d->as<float>();
        };
        qkv_w = put16(rb.qkvw);
        proj_w = put16(rb.projw);
        fc1_w = put16(rb.fc1w);
        fc2_w = put16(rb.fc2w);
        qkv_b16 = put16(rb.qkvb);
        proj_b32 = put32(rb.projb.data(), rb.projb.size());
        fc1_b32 = put32(rb.fc1b.data(), rb.fc1b.size());
        fc2_b32 = put32(rb.fc2b.data(), rb.fc2b.size());
        n1g = put32(rb.n1g.data(), C);
        n1b = put32(rb.n1b.data(), C);
        n2g = put32(rb.n2g.data(), C);
        n2b = put32(rb.n2b.data(), C);
        relb = put32(rb.w.rel_bias.data(), rb.w.rel_bias.size());
    }
    ~DevBlock() {
        dev_free(g_ctx, image);
        for (Dev *d : bufs) delete d;
    }
};

// Workspace of the correct-first sequence: chunk buffers for wper windows (the attention half)
// and tper tokens (the MLP half) of C channels, each holding only its chunk from its start, as
// Net::block's buffers do (kernels/cuda/network.cu).
struct SeqWs {
    int wper;
    int64_t tper;
    Dev tb, qkv, att, hidf, hid;
    SeqWs(int wper_, int64_t tper_, int C)
        : wper(wper_),
          tper(tper_),
          tb(2 * (size_t)std::max<int64_t>(64 * (int64_t)wper_, tper_) * C),
          qkv(6 * 64 * (size_t)wper_ * C),
          att(2 * 64 * (size_t)wper_ * C),
          hidf(16 * (size_t)tper_ * C),
          hid(8 * (size_t)tper_ * C) {}
};

// kernels/cuda/network.cu's Net::block, op for op and chunk for chunk; ev (10 events, may be null:
// only with the whole map in one chunk) brackets the ops.
inline int unfused_block(const DevBlock &B, float *x, int H, int W, int shift, SeqWs &ws, cudaEvent_t *ev) {
    Ctx &ctx = g_ctx;
    const int C = B.C, Ch = 4 * C;
    const int64_t n = (int64_t)H * W;
    const int nwin = (H / 8) * (W / 8);
    if (ev && (ws.wper < nwin || ws.tper < n)) fatal("unfused_block: per-op events need the map in one chunk");
    bf16 *tb = ws.tb.as<bf16>(), *qkv = ws.qkv.as<bf16>(), *att = ws.att.as<bf16>(), *hid = ws.hid.as<bf16>();
    float *hidf = ws.hidf.as<float>();
    int rc;
    int e = 0;
    auto mark = [&] {
        if (ev) cudaEventRecord(ev[e++], ctx.stream);
    };
    for (int w0 = 0; w0 < nwin; w0 += ws.wper) {
        const int w1 = std::min(nwin, w0 + ws.wper);
        const int64_t nc = (int64_t)(w1 - w0) * 64;
        mark();
        if ((rc = layernorm_window(ctx, x, H, W, C, 8, shift, w0, w1, B.n1g, B.n1b, kEps, tb))) return rc;
        mark();
        if ((rc = linear(ctx, tb, nc, C, C, B.qkv_w, B.qkv_b16, 3 * C, qkv, false, 3 * C, 0.f))) return rc;
        mark();
        if ((rc = window_attention(ctx, qkv, nullptr, H, W, C, B.heads, 8, shift, w0, w1, B.relb, att))) return rc;
        mark();
        float *pf = ws.qkv.as<float>();  // the proj output in fp32, in qkv's room (qkv is consumed)
        if ((rc = linear(ctx, att, nc, C, C, B.proj_w, B.proj_b32, C, pf, true, C, 0.f))) return rc;
        mark();
        if ((rc = window_scatter_add(ctx, pf, nullptr, H, W, C, 8, shift, w0, w1, x))) return rc;
    }
    for (int64_t t0 = 0; t0 < n; t0 += ws.tper) {
        const int64_t nc = std::min(n, t0 + ws.tper) - t0;
        float *xt = x + t0 * C;
        mark();
        if ((rc = layernorm_rows(ctx, xt, nc, C, B.n2g, B.n2b, kEps, tb))) return rc;
        mark();
        if ((rc = linear(ctx, tb, nc, C, C, B.fc1_w, B.fc1_b32, Ch, hidf, true, Ch, 0.f))) return rc;
        mark();
        if ((rc = gelu_tanh(ctx, hidf, nc, Ch, nullptr, hid))) return rc;
        mark();
        if ((rc = linear(ctx, hid, nc, Ch, Ch, B.fc2_w, B.fc2_b32, C, xt, true, C, 1.f))) return rc;
    }
    mark();
    return 0;
}
// The MLP half of that sequence alone on x (n, C) in place, in chunks of ws.tper tokens:
// layernorm_rows -> fc1 (cuBLASLt, fp32 out, + bias) -> gelu_tanh (bf16 out) -> fc2 (+ bias, added
// to x). The reference the Hopper MLP probe (swin_mlp_wgmma) is checked and timed against.
inline int unfused_mlp(const DevBlock &B, float *x, int64_t n, SeqWs &ws) {
    Ctx &ctx = g_ctx;
    const int C = B.C, Ch = 4 * C;
    bf16 *tb = ws.tb.as<bf16>(), *hid = ws.hid.as<bf16>();
    float *hidf = ws.hidf.as<float>();
    int rc;
    for (int64_t t0 = 0; t0 < n; t0 += ws.tper) {
        const int64_t nc = std::min(n, t0 + ws.tper) - t0;
        float *xt = x + t0 * C;
        if ((rc = layernorm_rows(ctx, xt, nc, C, B.n2g, B.n2b, kEps, tb))) return rc;
        if ((rc = linear(ctx, tb, nc, C, C, B.fc1_w, B.fc1_b32, Ch, hidf, true, Ch, 0.f))) return rc;
        if ((rc = gelu_tanh(ctx, hidf, nc, Ch, nullptr, hid))) return rc;
        if ((rc = linear(ctx, hid, nc, Ch, Ch, B.fc2_w, B.fc2_b32, C, xt, true, C, 1.f))) return rc;
    }
    return 0;
}

inline const char *const kSeqOps[9] = {"ln1+gather", "qkv", "attention", "proj", "scatter-add", "ln2", "fc1", "gelu", "fc2+res"};

using Tile = swin_ref::FusedTile;
using Kernel = swin_ref::FusedKernel;

// The parameters that force kernel k (every field of its row).
inline SwinFusedParams params_of(const Kernel &k) {
    SwinFusedParams p;
    p.tw = k.t.TW;
    p.nw = k.t.NW;
    p.qa = k.t.QA;
    p.ma = k.t.MA;
    p.pf = k.PF;
    p.ctas = k.CTAS;
    return p;
}
inline Kernel kernel_of(const SwinFusedKernel &k) { return Kernel{{k.C, k.HD, k.tw, k.nw, k.qa, k.ma}, k.pf, k.ctas}; }
// "1/4 qa ma8 x5" (swin_fused_kernel_name), and with the width "C 64 hd 32 1/4 qa ma8 x5"
inline std::string kernel_tag(const Kernel &k) {
    return swin_fused_kernel_name(SwinFusedKernel{k.t.C, k.t.HD, k.t.TW, k.t.NW, k.t.QA, k.t.MA, k.PF, k.CTAS, 0});
}
inline std::string kernel_name(const Kernel &k) {
    return "C " + std::to_string(k.t.C) + " hd " + std::to_string(k.t.HD) + " " + kernel_tag(k);
}
// The engine's kernel for (C, heads) on the context's device (swin_block_fused_choice).
inline Kernel engine_kernel(int C, int heads) {
    SwinFusedKernel k{};
    std::string why;
    if (swin_block_fused_choice(g_ctx.device, C, heads, &k, &why))
        fatal("swin_block_fused_choice C " + std::to_string(C) + ": " + why);
    return kernel_of(k);
}

// The residual map on the device between two guard bands of 0xFF bytes.
struct GuardedMap {
    static constexpr size_t kGuard = 4096;
    size_t bytes;
    Dev d;
    explicit GuardedMap(size_t b) : bytes(b), d(b + 2 * kGuard) { fill(d.p, 0xFF, b + 2 * kGuard); }
    void *map() const { return d.as<uint8_t>() + kGuard; }
    bool guards_intact() const {
        std::vector<uint8_t> g(kGuard);
        for (int side = 0; side < 2; ++side) {
            d2h(g.data(), d.as<uint8_t>() + (side ? kGuard + bytes : 0), kGuard);
            for (uint8_t b : g)
                if (b != 0xFF) return false;
        }
        return true;
    }
};

// x0 (H, W, C) through kernel k of the fused block on the GPU -> out (fp32 values). bf16: x0 is
// bf16-exact. mma: non-null runs k's instrumented kernel and gives its count.
inline void run_fused(const DevBlock &B, const std::vector<float> &x0, int H, int W, int shift, bool bf16, const Kernel &k,
                      std::vector<float> *out, bool *guards_ok, unsigned long long *mma) {
    const size_t n = x0.size(), es = bf16 ? 2 : 4;
    GuardedMap m(n * es);
    std::vector<uint16_t> xb;
    if (bf16) {
        xb = bf16_of(x0.data(), n);
        h2d(m.map(), xb.data(), 2 * n);
    } else {
        h2d(m.map(), x0.data(), 4 * n);
    }
    Dev cnt(8);
    fill(cnt.p, 0, 8);
    SwinFusedParams p = params_of(k);
    p.mma_count = mma ? cnt.as<unsigned long long>() : nullptr;
    ok_or_die(swin_block_fused(g_ctx, B.image, B.C, B.heads, kEps, m.map(), bf16, H, W, shift, &p), "swin_block_fused");
    ck(cudaStreamSynchronize(g_ctx.stream), "fused Swin block kernel");
    out->resize(n);
    if (bf16) {
        d2h(xb.data(), m.map(), 2 * n);
        for (size_t i = 0; i < n; ++i) (*out)[i] = bf16_host::to_float(xb[i]);
    } else {
        d2h(out->data(), m.map(), 4 * n);
    }
    *guards_ok = m.guards_intact();
    if (mma) d2h(mma, cnt.p, 8);
}


}  // namespace swin_dev

#endif
