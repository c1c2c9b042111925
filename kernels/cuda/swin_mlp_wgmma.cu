// swin_mlp_wgmma: the MLP half of a Swin block, x += fc2(GELU_tanh(fc1(LN2(x)))) on n tokens of
// an (n, C) fp32 map in place, on Hopper's warpgroup MMA (wgmma.mma_async, sm_90a only): a probe
// of what the Hopper path of the fused block (issue 37, item 1) buys, measured before the whole
// block is rewritten. The engine does not call it; tests/gpu/mlp_wgmma_check.cpp checks it and
// denoise-cuda-bench --mlp-probe times it (docs/fused.md, "Hopper path: first probe").
//
// Math (model.py SwinBlock's second half, as swin_block_fused.cu's mlp phase computes it): per
// token, LayerNorm with biased variance and eps (two passes: mean, then the centred sum of
// squares), h = GELU_tanh(LN2(x) W1^T + b1) with GELU_tanh(v) = v/2 + v/2 tanh(sqrt(2/pi) (v +
// 0.044715 v^3)), x += h W2^T + b2. C 64 (hidden 256) or 128 (hidden 512).
//
// Value path (the fused kernel's rounding points (5) and (6), swin_block_fused.cu's header): x
// fp32 -> LN2 in fp32 -> rounded to bf16 (5) -> fc1 on tensor cores, fp32 accumulate, + b1 (fp32)
// -> GELU in fp32 with tanh.approx.f32 (TANH 1: tanh.approx.bf16x2 on the argument rounded to
// bf16, then the last multiply-add in fp32) -> rounded to bf16 (6) -> fc2, fp32 accumulate over
// all 4C hidden units in one accumulator (the fused kernel adds each 128-unit chunk's partial sum
// to the residual in turn) -> + b2 + x in fp32 -> stored fp32. Weights bf16 (RNE at packing),
// biases and LayerNorm parameters fp32.
//
// Layout: x (n, C) fp32, tokens in order (the probe has no window gather: the MLP is per token);
// the weight image and its shared-memory form: swin_mlp_wgmma_image.h. Each tile is 64 tokens
// (the M of wgmma.m64nNk16); tile T = tokens 64 T .. 64 T + 63, the last one partial.
//
// CTA (persistent, one per SM, tiles blockIdx.x + k gridDim.x): warpgroup 0 is the producer
// (setmaxnreg 40; its warp 0 issues every copy, warps 1-3 retire), warpgroups 1..NCW the
// consumers (setmaxnreg to what the producer frees: 232 with 2, 152 with 3). In round r consumer
// c takes tile blockIdx.x + (r NCW + c) gridDim.x. Pipeline (mbarriers, full / empty per stage):
//  - params (LN2 gamma, beta, b1, b2: 7C fp32) once per CTA;
//  - weights: C 64 all NCH chunks once per CTA (64 KB, resident); C 128 (256 KB: more than
//    shared memory) one hidden chunk of HC units at a time through a ring of WST 2 stages, each
//    chunk copied once per round and used by all consumers (the empty barrier counts 128 NCW
//    arrivals; a consumer without a tile in the last round still waits and releases);
//  - x: XST 2 stages per consumer; the producer copies tile r + 1 (row by row: 64 cp.async.bulk
//    of 4 C bytes into rows of 4 (C + 8) bytes) while the consumer computes tile r.
// Consumer, per tile (the 4 warps of a warpgroup own rows 16 w .. 16 w + 15; lane 4 g + t rows
// 16 w + g and 16 w + g + 8):
//  1. LN2 from the x stage into the A fragments of fc1, in registers (no shared-memory store):
//     lane t reads the 16-byte chunks swin_mlp_chunk_of(t, s) of its two rows (conflict-free at
//     the padded stride), the quad reduces with two shuffles, and channel 4 q + e lands at fc1's
//     logical k of the fragment (swin_mlp_fc1_channel; the packer permutes fc1's K the same way);
//  2. per hidden chunk ch: fc1 = C / 16 wgmma.m64n{HC}k16 (A registers, B = W1c in shared memory)
//     -> HC / 2 fp32 per thread; + b1, GELU, rounded to bf16 and packed straight into the A
//     fragments of fc2 (the accumulator layout of two n8 blocks is the A layout of one k16 step);
//     fc2 = HC / 16 wgmma.m64n{C}k16 accumulating into C / 2 fp32 per thread over the chunks.
//     fc2(ch) and fc1(ch + 1) are issued back to back in one commit group, so the tensor core
//     runs across the chunk boundary while the other consumer warpgroup does its GELU;
//  3. epilogue: + b2 + x (from the x stage) in fp32, stored with 8-byte stores (a quad writes 32
//     contiguous bytes of a row), then the x stage is released.
//
// Shared memory (swin_mlp_plan; barriers, params, weights, x stages of 64 x 4 (C + 8) B):
//   C 64  HC 128 / 64, 2 consumers: 0.1 + 1.8 + 64 (resident) + 4 x 18 KB = 138 KB, 1 CTA per SM
//   C 64  HC 64, 3 consumers:       0.1 + 1.8 + 64 + 6 x 18 KB = 174 KB
//   C 128 HC 64, 2 consumers:       0.1 + 3.5 + 2 x 32 (ring) + 4 x 34 KB = 204 KB
// Registers: 384 threads at one CTA per SM launch with 168 each (512 threads: 128); the producer
// gives back 128 per thread, the consumers take them (live per consumer thread: fc1's A C / 4,
// acc1 HC / 2, fc2's A HC / 4, acc2 C / 2; C 64 HC 128: 16 + 64 + 32 + 32).
//
// Cost per token: FLOP 16 C^2 (fc1 8 C^2, fc2 8 C^2): 65.5 K at C 64, 262 K at C 128. DRAM 8 C
// bytes (x fp32 read and written once): 512 / 1024 B, 128 / 256 FLOP per byte, against an H100's
// ridge of about 240 (800 TFLOP/s, 3.35 TB/s): at C 64 the probe alone is bound by DRAM, not by
// the tensor core (the whole block does 115 K FLOP on the same bytes). Beside the GEMMs, per
// token: 4 C tanh on the MUFU (16 per clock per SM: at C 64 as many clocks as the GEMMs take at
// the tensor core's peak; TANH 1 halves them) and about 10 ALU operations per hidden unit (bias,
// GELU polynomial, pack). C 128 streams the weights from L2: 256 KB per round of 2 x 64 tokens,
// 2 KB per token. At C 64 and 4K level 0 (2.09 M tokens, 1.07 GB moved) the DRAM floor is 0.32 ms
// (the expected time: docs/fused.md, "Hopper path: first probe"); L2-resident maps show the
// compute rate alone. The fused kernel's whole C 64 block runs at 13-16 % of the GEMM ceiling.
//
// PTX followed (PTX ISA 8.x/9.0, section titles): "Asynchronous Warpgroup Level Matrix Multiply-
// Accumulate Instructions" (wgmma.mma_async with A in registers: the "Register Fragments" of
// .m64nNk16 for A and D; "Matrix Descriptor Format" and the canonical K-major layout without
// swizzle of "Shared Memory Matrix Layout"; wgmma.fence before a wgmma batch whose A or
// accumulator registers other instructions wrote, wgmma.commit_group, wgmma.wait_group 0 before
// those registers are read again); "Parallel Synchronization and Communication Instructions:
// mbarrier" (init, arrive, arrive.expect_tx, try_wait.parity; a fresh barrier's phase 0 is
// incomplete, so a wait for parity 1 passes at once: the producers' first pass through the empty
// barriers); "cp.async.bulk" (global -> shared::cluster, mbarrier::complete_tx::bytes, 16-byte
// aligned addresses and sizes); fence.mbarrier_init; setmaxnreg (per warpgroup, multiples of 8 in
// 24..256); tanh.approx.f32 / .bf16x2.
#include "swin_mlp_wgmma.h"

#include <algorithm>
#include <type_traits>

#include "common.cuh"
#include "warp_mma.h"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define DN_MLP_SM90A 1
#else
#define DN_MLP_SM90A 0
#endif
#if defined(DENOISE_SM90A) && defined(__CUDA_ARCH__) && !DN_MLP_SM90A
#error "swin_mlp_wgmma.cu with DENOISE_SM90A is compiled for sm_90a only (the Makefile's per-file -gencode)"
#endif

namespace denoise {
namespace cuda {
namespace mlp_wgmma {

using namespace warp;

struct Args {
    float *x;           // (n, C) fp32, in place
    const uint8_t *img; // the MLP image (swin_mlp_wgmma_image.h)
    int64_t n;
    int ntiles;
    float eps;
};

// mbarrier indices (swin_mlp_plan's nbar): params, w_full[WST], w_empty[WST], x_full[NCW][XST],
// x_empty[NCW][XST]
DN_MLP_HD constexpr int bar_w_full(int i) { return 1 + i; }
DN_MLP_HD constexpr int bar_w_empty(const SwinMlpPlan &P, int i) { return 1 + P.WST + i; }
DN_MLP_HD constexpr int bar_x_full(const SwinMlpPlan &P, int c, int j) { return 1 + 2 * P.WST + c * P.XST + j; }
DN_MLP_HD constexpr int bar_x_empty(const SwinMlpPlan &P, int c, int j) { return 1 + 2 * P.WST + (P.NCW + c) * P.XST + j; }
// tokens of tile `tile` (64, fewer in the last)
DN_MLP_HD constexpr int tile_rows(int64_t n, int64_t tile) {
    return n - tile * kMlpRows < kMlpRows ? (int)(n - tile * kMlpRows) : kMlpRows;
}

#if DN_MLP_SM90A

DN_DEVI void mbar_init(uint64_t *b, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(b)), "r"(count) : "memory");
}
DN_DEVI void fence_mbar_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
DN_DEVI void mbar_expect_tx(uint64_t *b, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(b)), "r"(bytes) : "memory");
}
DN_DEVI void mbar_arrive(uint64_t *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(b)) : "memory");
}
DN_DEVI void mbar_wait(uint64_t *b, uint32_t parity) {
    uint32_t done = 0;
    do {
        asm volatile(
            "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(smem_addr(b)), "r"(parity)
            : "memory");
    } while (!done);
}
// bytes (a multiple of 16) from global src to shared dst (both 16-byte aligned), completing on b
DN_DEVI void bulk_g2s(void *dst, const void *src, uint32_t bytes, uint64_t *b) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                     smem_addr(dst)),
                 "l"(src), "r"(bytes), "r"(smem_addr(b))
                 : "memory");
}
template <int R>
DN_DEVI void setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R>
DN_DEVI void setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}

DN_DEVI void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
DN_DEVI void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
DN_DEVI void wgmma_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
// keeps the compiler from moving accesses of these registers across the wgmma region (the asm of
// a wgmma does not tell it that the hardware writes them until wgmma.wait_group)
template <int N>
DN_DEVI void fence_regs(float (&r)[N]) {
DN_UNROLL
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int S>
DN_DEVI void fence_regs(uint32_t (&r)[S][4]) {
DN_UNROLL
    for (int i = 0; i < S; ++i)
DN_UNROLL
        for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(r[i][j])::"memory");
}

#define DN_F4(d, i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define DN_F16(d, i) DN_F4(d, i), DN_F4(d, i + 4), DN_F4(d, i + 8), DN_F4(d, i + 12)

// d (64 x 64 fp32, the D fragment) = A (64 x 16 bf16, fragment registers a) x B (16 x 64 bf16,
// shared memory, descriptor b) + (acc ? d : 0)
DN_DEVI void wgmma_n64(float (&d)[32], const uint32_t (&a)[4], uint64_t b, int acc) {
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
        : DN_F16(d, 0), DN_F16(d, 16)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(acc));
}
// the same with N = 128 (64 fp32 per thread)
DN_DEVI void wgmma_n128(float (&d)[64], const uint32_t (&a)[4], uint64_t b, int acc) {
    asm volatile(
        "{\n .reg .pred p;\n setp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "{%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
        : DN_F16(d, 0), DN_F16(d, 16), DN_F16(d, 32), DN_F16(d, 48)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(acc));
}
#undef DN_F16
#undef DN_F4

template <int N>
DN_DEVI void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b, int acc) {
    static_assert(N == 64 || N == 128, "wgmma written out for N 64 and 128");
    if constexpr (N == 64)
        wgmma_n64(d, a, b, acc);
    else
        wgmma_n128(d, a, b, acc);
}

// K steps of one GEMM: d = (first ? 0 : d) + A (fragments a, K = 16 S) x B (K x N at shared
// address w, swin_mlp_b_offset's layout)
template <int N, int S>
DN_DEVI void gemm_rs(float (&d)[N / 2], const uint32_t (&a)[S][4], uint32_t w, bool first) {
DN_UNROLL
    for (int s = 0; s < S; ++s) wgmma_rs<N>(d, a[s], swin_mlp_desc(w + (uint32_t)s * swin_mlp_kstep_bytes(N)), !(first && s == 0));
}

// LN2 of rows r0 and r0 + 8 of the x stage xs (row stride C + 8 fp32) into fc1's A fragments
// (module header, step 1); rows at or past `valid` (the last tile's tail) read as zeros.
template <int C>
DN_DEVI void ln_fragments(const float *xs, int r0, int valid, const float *gam, const float *bet, float eps, int t,
                          uint32_t (&a1)[C / 16][4]) {
    constexpr int S = C / 16, XS = C + kMlpXPad;
    float v0[S][4], v1[S][4];
    const bool in0 = r0 < valid, in1 = r0 + 8 < valid;
    float s0 = 0.f, s1 = 0.f;
DN_UNROLL
    for (int s = 0; s < S; ++s) {
        const int c = 4 * swin_mlp_chunk_of(t, s);
        const f32x4 p = ld4f(xs + r0 * XS + c), q = ld4f(xs + (r0 + 8) * XS + c);
        v0[s][0] = in0 ? p.x : 0.f;
        v0[s][1] = in0 ? p.y : 0.f;
        v0[s][2] = in0 ? p.z : 0.f;
        v0[s][3] = in0 ? p.w : 0.f;
        v1[s][0] = in1 ? q.x : 0.f;
        v1[s][1] = in1 ? q.y : 0.f;
        v1[s][2] = in1 ? q.z : 0.f;
        v1[s][3] = in1 ? q.w : 0.f;
        s0 += (v0[s][0] + v0[s][1]) + (v0[s][2] + v0[s][3]);
        s1 += (v1[s][0] + v1[s][1]) + (v1[s][2] + v1[s][3]);
    }
    s0 += shfl_xor(s0, 1);
    s0 += shfl_xor(s0, 2);
    s1 += shfl_xor(s1, 1);
    s1 += shfl_xor(s1, 2);
    const float m0 = s0 / C, m1 = s1 / C;
    float q0 = 0.f, q1 = 0.f;
DN_UNROLL
    for (int s = 0; s < S; ++s)
DN_UNROLL
        for (int e = 0; e < 4; ++e) {
            const float d0 = v0[s][e] - m0, d1 = v1[s][e] - m1;
            q0 += d0 * d0;
            q1 += d1 * d1;
        }
    q0 += shfl_xor(q0, 1);
    q0 += shfl_xor(q0, 2);
    q1 += shfl_xor(q1, 1);
    q1 += shfl_xor(q1, 2);
    const float rs0 = rsqrt(q0 / C + eps), rs1 = rsqrt(q1 / C + eps);
DN_UNROLL
    for (int s = 0; s < S; ++s) {
        const int c = 4 * swin_mlp_chunk_of(t, s);
        const f32x4 g = ld4f(gam + c), b = ld4f(bet + c);
        const float y0[4] = {(v0[s][0] - m0) * rs0 * g.x + b.x, (v0[s][1] - m0) * rs0 * g.y + b.y,
                             (v0[s][2] - m0) * rs0 * g.z + b.z, (v0[s][3] - m0) * rs0 * g.w + b.w};
        const float y1[4] = {(v1[s][0] - m1) * rs1 * g.x + b.x, (v1[s][1] - m1) * rs1 * g.y + b.y,
                             (v1[s][2] - m1) * rs1 * g.z + b.z, (v1[s][3] - m1) * rs1 * g.w + b.w};
        a1[s][0] = pack_bf16x2(y0[0], y0[1]);  // row g,     k 2t, 2t + 1
        a1[s][1] = pack_bf16x2(y1[0], y1[1]);  // row g + 8, k 2t, 2t + 1
        a1[s][2] = pack_bf16x2(y0[2], y0[3]);  // row g,     k 2t + 8, 2t + 9
        a1[s][3] = pack_bf16x2(y1[2], y1[3]);  // row g + 8, k 2t + 8, 2t + 9
    }
}

// GELU_tanh of two values, rounded to bf16 and packed (lo = v0): the fused kernel's gelu_tanh
// (TANH 0), or with the tanh of both arguments in one tanh.approx.bf16x2 (TANH 1).
template <int TANH>
DN_DEVI uint32_t gelu2(float v0, float v1) {
    constexpr float k0 = 0.7978845608028654f, k1 = 0.044715f * 0.7978845608028654f;
    const float u0 = v0 * (k0 + k1 * v0 * v0), u1 = v1 * (k0 + k1 * v1 * v1);
    const float h0 = 0.5f * v0, h1 = 0.5f * v1;
    float t0, t1;
    if constexpr (TANH == 0) {
        t0 = tanh_approx(u0);
        t1 = tanh_approx(u1);
    } else {
        uint32_t r;
        asm("tanh.approx.bf16x2 %0, %1;\n" : "=r"(r) : "r"(pack_bf16x2(u0, u1)));
        t0 = bf16_lo(r);
        t1 = bf16_hi(r);
    }
    return pack_bf16x2(h0 + h0 * t0, h1 + h1 * t1);
}

// fc1's accumulators (HC / 2 per thread, D fragment of m64n{HC}) + b1 of the chunk -> GELU ->
// fc2's A fragments (k step s2 = n8 blocks 2 s2 and 2 s2 + 1)
template <int HC, int TANH>
DN_DEVI void gelu_fragments(const float (&acc)[HC / 2], const float *b1, int t, uint32_t (&a2)[HC / 16][4]) {
DN_UNROLL
    for (int s2 = 0; s2 < HC / 16; ++s2)
DN_UNROLL
        for (int h = 0; h < 2; ++h) {
            const int j = 2 * s2 + h;
            const f32x2 b = *reinterpret_cast<const f32x2 *>(b1 + 8 * j + 2 * t);
            a2[s2][2 * h] = gelu2<TANH>(acc[4 * j] + b.x, acc[4 * j + 1] + b.y);          // row g
            a2[s2][2 * h + 1] = gelu2<TANH>(acc[4 * j + 2] + b.x, acc[4 * j + 3] + b.y);  // row g + 8
        }
}

// The producer warp (lane 0..31 of warpgroup 0's warp 0).
template <int C, int HC, int NCW, int TANH>
DN_DEVI void producer(const Args &a, uint8_t *smem, int lane) {
    constexpr SwinMlpPlan P = swin_mlp_plan(C, HC, NCW, TANH);
    uint64_t *bar = reinterpret_cast<uint64_t *>(smem + P.off_bar);
    uint8_t *wsm = smem + P.off_w;
    if (lane == 0) {
        mbar_expect_tx(&bar[0], P.params_bytes);
        bulk_g2s(smem + P.off_params, a.img, P.params_bytes, &bar[0]);
        if constexpr (P.resident)
            for (int ch = 0; ch < P.NCH; ++ch) {
                uint64_t *full = &bar[bar_w_full(ch)];
                mbar_expect_tx(full, P.chunk_bytes);
                bulk_g2s(wsm + (uint32_t)ch * P.chunk_bytes, a.img + swin_mlp_chunk_offset(P, ch), P.chunk_bytes, full);
            }
    }
    const int64_t G = gridDim.x;
    for (int r = 0;; ++r) {
        const int64_t first = (int64_t)blockIdx.x + (int64_t)r * NCW * G;
        if (first >= a.ntiles) break;
        const int xst = r % P.XST;
        const uint32_t empty_par = ((r / P.XST) & 1) ^ 1;
        for (int c = 0; c < NCW; ++c) {
            const int64_t tile = first + c * G;
            if (tile >= a.ntiles) break;
            uint64_t *full = &bar[bar_x_full(P, c, xst)];
            mbar_wait(&bar[bar_x_empty(P, c, xst)], empty_par);
            const int valid = tile_rows(a.n, tile);
            if (lane == 0) mbar_expect_tx(full, (uint32_t)valid * 4u * C);
            __syncwarp();
            uint8_t *dst = smem + P.off_x + (uint32_t)(c * P.XST + xst) * P.x_stage_bytes;
            const float *src = a.x + (size_t)tile * kMlpRows * C;
            for (int row = lane; row < valid; row += 32)
                bulk_g2s(dst + (uint32_t)row * P.x_stride, src + (size_t)row * C, 4u * C, full);
        }
        if constexpr (!P.resident)
            for (int ch = 0; ch < P.NCH; ++ch) {
                const int q = r * P.NCH + ch, st = q % P.WST;
                mbar_wait(&bar[bar_w_empty(P, st)], ((q / P.WST) & 1) ^ 1);
                if (lane == 0) {
                    uint64_t *full = &bar[bar_w_full(st)];
                    mbar_expect_tx(full, P.chunk_bytes);
                    bulk_g2s(wsm + (uint32_t)st * P.chunk_bytes, a.img + swin_mlp_chunk_offset(P, ch), P.chunk_bytes, full);
                }
                __syncwarp();
            }
    }
}

// Consumer warpgroup c (0..NCW-1), thread tid (0..127) of it.
template <int C, int HC, int NCW, int TANH>
DN_DEVI void consumer(const Args &a, uint8_t *smem, int c, int tid) {
    constexpr SwinMlpPlan P = swin_mlp_plan(C, HC, NCW, TANH);
    constexpr int S1 = C / 16, S2 = HC / 16, XS = C + kMlpXPad;
    uint64_t *bar = reinterpret_cast<uint64_t *>(smem + P.off_bar);
    const float *prm = reinterpret_cast<const float *>(smem + P.off_params);
    const float *gam = prm, *bet = prm + C, *b1 = prm + 2 * C, *b2 = prm + 6 * C;
    const uint32_t wsm = smem_addr(smem + P.off_w);
    const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int r0 = 16 * warp + g;
    mbar_wait(&bar[0], 0);
    if constexpr (P.resident)
        for (int ch = 0; ch < P.NCH; ++ch) mbar_wait(&bar[bar_w_full(ch)], 0);
    float acc1[HC / 2], acc2[C / 2];
    uint32_t a1[S1][4], a2[S2][4];
    const int64_t G = gridDim.x;
    DN_UNROLL_1
    for (int r = 0;; ++r) {
        const int64_t first = (int64_t)blockIdx.x + (int64_t)r * NCW * G;
        if (first >= a.ntiles) break;
        const int64_t tile = first + c * G;
        if (tile >= a.ntiles) {  // no tile for this consumer in the last round: pass the chunks on
            if constexpr (!P.resident)
                for (int ch = 0; ch < P.NCH; ++ch) {
                    const int q = r * P.NCH + ch;
                    mbar_wait(&bar[bar_w_full(q % P.WST)], (q / P.WST) & 1);
                    mbar_arrive(&bar[bar_w_empty(P, q % P.WST)]);
                }
            continue;
        }
        // the weights of chunk ch of this round, landed: their shared-memory address
        auto chunk = [&](int ch) -> uint32_t {
            constexpr SwinMlpPlan Q = swin_mlp_plan(C, HC, NCW, TANH);  // (P would be a capture)
            if constexpr (Q.resident) {
                return wsm + (uint32_t)ch * Q.chunk_bytes;
            } else {
                const int q = r * Q.NCH + ch;
                mbar_wait(&bar[bar_w_full(q % Q.WST)], (q / Q.WST) & 1);
                return wsm + (uint32_t)(q % Q.WST) * Q.chunk_bytes;
            }
        };
        const int xst = r % P.XST;
        mbar_wait(&bar[bar_x_full(P, c, xst)], (r / P.XST) & 1);
        const float *xs = reinterpret_cast<const float *>(smem + P.off_x + (uint32_t)(c * P.XST + xst) * P.x_stage_bytes);
        const int valid = tile_rows(a.n, tile);
        ln_fragments<C>(xs, r0, valid, gam, bet, a.eps, t, a1);

        uint32_t w = chunk(0);
        fence_regs(acc1);
        fence_regs(a1);
        wgmma_fence();
        gemm_rs<HC, S1>(acc1, a1, w, true);
        wgmma_commit();
        wgmma_wait0();
        fence_regs(acc1);
        // chunk ch: its GELU, then fc2(ch) and (NEXT) fc1(ch + 1) in one commit group. The chunk
        // loop is peeled (the last chunk has no fc1 after it) so that no branch splits a wgmma
        // batch: ptxas injects a warpgroup.arrive into every block between wgmma of one batch.
        auto step = [&](int ch, auto next) {
            constexpr bool NEXT = decltype(next)::value;
            gelu_fragments<HC, TANH>(acc1, b1 + ch * HC, t, a2);
            const uint32_t wn = NEXT ? chunk(ch + 1) : 0u;  // waited for before the batch
            fence_regs(a2);
            fence_regs(acc2);
            wgmma_fence();
            gemm_rs<C, S2>(acc2, a2, w + swin_mlp_plan(C, HC, NCW, TANH).w1_bytes, ch == 0);
            if constexpr (NEXT) gemm_rs<HC, S1>(acc1, a1, wn, true);
            wgmma_commit();
            wgmma_wait0();
            fence_regs(acc1);
            fence_regs(acc2);
            if constexpr (!swin_mlp_plan(C, HC, NCW, TANH).resident) {
                constexpr SwinMlpPlan Q = swin_mlp_plan(C, HC, NCW, TANH);
                mbar_arrive(&bar[bar_w_empty(Q, (r * Q.NCH + ch) % Q.WST)]);
            }
            w = wn;
        };
        DN_UNROLL_1
        for (int ch = 0; ch + 1 < P.NCH; ++ch) step(ch, std::true_type{});
        step(P.NCH - 1, std::false_type{});

        float *xg = a.x + (size_t)tile * kMlpRows * C;
DN_UNROLL
        for (int j = 0; j < C / 8; ++j) {
            const int col = 8 * j + 2 * t;
            const f32x2 b = *reinterpret_cast<const f32x2 *>(b2 + col);
            if (r0 < valid) {
                const f32x2 v = *reinterpret_cast<const f32x2 *>(xs + r0 * XS + col);
                *reinterpret_cast<f32x2 *>(xg + (size_t)r0 * C + col) = f32x2{v.x + (acc2[4 * j] + b.x), v.y + (acc2[4 * j + 1] + b.y)};
            }
            if (r0 + 8 < valid) {
                const f32x2 v = *reinterpret_cast<const f32x2 *>(xs + (r0 + 8) * XS + col);
                *reinterpret_cast<f32x2 *>(xg + (size_t)(r0 + 8) * C + col) =
                    f32x2{v.x + (acc2[4 * j + 2] + b.x), v.y + (acc2[4 * j + 3] + b.y)};
            }
        }
        mbar_arrive(&bar[bar_x_empty(P, c, xst)]);
    }
}

#endif  // DN_MLP_SM90A

template <int C, int HC, int NCW, int TANH>
__global__ void __launch_bounds__(128 * (NCW + 1), 1) swin_mlp_wgmma_kernel(const Args a) {
#if DN_MLP_SM90A
    constexpr SwinMlpPlan P = swin_mlp_plan(C, HC, NCW, TANH);
    static_assert(P.ok, "no plan for this (C, HC, NCW, TANH)");
    extern __shared__ __align__(128) uint8_t smem[];
    const int tid = threadIdx.x;
    // the warpgroup index through a shuffle: ptxas then knows it is warp-uniform, and the wgmma
    // in the consumers' branch are not serialized as code on a divergent path
    const int wg = __shfl_sync(0xffffffffu, tid >> 7, 0);
    if (tid == 0) {
        uint64_t *bar = reinterpret_cast<uint64_t *>(smem + P.off_bar);
        mbar_init(&bar[0], 1);
        for (int i = 0; i < P.WST; ++i) {
            mbar_init(&bar[bar_w_full(i)], 1);
            mbar_init(&bar[bar_w_empty(P, i)], 128 * NCW);
        }
        for (int c = 0; c < NCW; ++c)
            for (int j = 0; j < P.XST; ++j) {
                mbar_init(&bar[bar_x_full(P, c, j)], 1);
                mbar_init(&bar[bar_x_empty(P, c, j)], 128);
            }
        fence_mbar_init();
    }
    __syncthreads();
    if (wg == 0) {
        setmaxnreg_dec<kMlpProducerRegs>();
        if (tid < 32) producer<C, HC, NCW, TANH>(a, smem, tid);
    } else {
        setmaxnreg_inc<P.regs_consumer>();
        consumer<C, HC, NCW, TANH>(a, smem, wg - 1, tid & 127);
    }
#else
    (void)a;
#endif
}

}  // namespace mlp_wgmma

namespace {

using KernelFn = void (*)(const mlp_wgmma::Args);
struct Instance {
    SwinMlpKernel k;
    KernelFn fn;
};
#define SWIN_MLP_INSTANCE(C, HC, NCW, TANH)                                                      \
    static_assert(swin_mlp_plan(C, HC, NCW, TANH).ok, "SWIN_MLP_WGMMA_KERNELS: a kernel without a plan");
SWIN_MLP_WGMMA_KERNELS(SWIN_MLP_INSTANCE)
#undef SWIN_MLP_INSTANCE
#define SWIN_MLP_INSTANCE(C, HC, NCW, TANH) \
    {{C, HC, NCW, TANH, swin_mlp_plan(C, HC, NCW, TANH).smem}, mlp_wgmma::swin_mlp_wgmma_kernel<C, HC, NCW, TANH>},
const Instance g_instances[] = {SWIN_MLP_WGMMA_KERNELS(SWIN_MLP_INSTANCE)};
#undef SWIN_MLP_INSTANCE

const Instance *find_instance(const SwinMlpKernel &k) {
    for (const Instance &i : g_instances)
        if (i.k.C == k.C && i.k.HC == k.HC && i.k.NCW == k.NCW && i.k.tanh == k.tanh) return &i;
    return nullptr;
}

std::string built_list() {
    std::string s;
    for (const Instance &i : g_instances) s += (s.empty() ? "" : ", ") + ("C " + std::to_string(i.k.C) + " " + swin_mlp_kernel_name(i.k));
    return s;
}

}  // namespace

std::vector<SwinMlpKernel> swin_mlp_kernels(int C) {
    std::vector<SwinMlpKernel> v;
    for (const Instance &i : g_instances)
        if (C == 0 || i.k.C == C) v.push_back(i.k);
    return v;
}

std::string swin_mlp_kernel_name(const SwinMlpKernel &k) {
    return "hc" + std::to_string(k.HC) + " x" + std::to_string(k.NCW) + (k.tanh ? " bf16x2" : " f32");
}

int swin_mlp_wgmma_supported(int device, std::string *why) {
#if !defined(DENOISE_SM90A)
    (void)device;
    *why = "this build has no sm_90a code for the wgmma MLP probe (its nvcc lacks sm_90a: CUDA 12.0 or newer builds it)";
    return DENOISE_EINVAL;
#else
    int major = 0, minor = 0;
    cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
    if (e != cudaSuccess) {
        *why = std::string("cudaDeviceGetAttribute (compute capability): ") + cudaGetErrorString(e);
        cudaGetLastError();
        return DENOISE_EDEVICE;
    }
    if (major != 9 || minor != 0) {
        *why = "the wgmma MLP probe is sm_90a code, which runs on compute capability 9.0 only; device " +
               std::to_string(device) + " is " + std::to_string(major) + "." + std::to_string(minor);
        return DENOISE_EINVAL;
    }
    why->clear();
    return 0;
#endif
}

int swin_mlp_image_upload(Ctx &ctx, const BlockW &b, int C, int HC, uint8_t **image, size_t *bytes) {
    *image = nullptr;
    std::vector<uint8_t> host;
    std::string err;
    int rc = swin_mlp_image_pack(b, C, HC, &host, &err);
    if (rc) return fail(ctx, rc, err);
    void *d = nullptr;
    if ((rc = dev_alloc(ctx, &d, host.size(), "the wgmma MLP probe's weight image"))) return rc;
    // on the compute stream (non-blocking), then waited for: `host` goes away on return
    rc = cuda_check(ctx, cudaMemcpyAsync(d, host.data(), host.size(), cudaMemcpyHostToDevice, ctx.stream),
                    "cudaMemcpyAsync (MLP image)");
    if (!rc) rc = cuda_check(ctx, cudaStreamSynchronize(ctx.stream), "cudaStreamSynchronize (MLP image)");
    if (rc) {
        dev_free(ctx, d);
        return rc;
    }
    *image = static_cast<uint8_t *>(d);
    if (bytes) *bytes = host.size();
    return 0;
}

int swin_mlp_wgmma(Ctx &ctx, const SwinMlpKernel &k, const uint8_t *image, float eps, float *x, int64_t n, int max_ctas) {
    DN_REQUIRE(image && x, "null pointer");
    DN_REQUIRE(n >= 0, "negative token count " + std::to_string(n));
    DN_REQUIRE(eps > 0.f, "LayerNorm eps must be > 0");
    DN_REQUIRE(((uintptr_t)x & 15) == 0 && ((uintptr_t)image & 15) == 0, "x and the image must be 16-byte aligned");
    const Instance *in = find_instance(k);
    DN_REQUIRE(in, "no wgmma MLP kernel C " + std::to_string(k.C) + " " + swin_mlp_kernel_name(k) + " built (built: " +
                       built_list() + ")");
    std::string why;
    int rc = swin_mlp_wgmma_supported(ctx.device, &why);
    if (rc) return fail(ctx, rc, std::string(__func__) + ": " + why);
    const int64_t ntiles = (n + kMlpRows - 1) / kMlpRows;
    DN_REQUIRE(ntiles <= 0x7fffffffLL, "too many tokens: " + std::to_string(n));
    if (n == 0) return 0;
    const SwinMlpPlan P = swin_mlp_plan(k.C, k.HC, k.NCW, k.tanh);
    int per_sm = 0, sms = 0;
    TRY(smem_kernel(ctx, (const void *)in->fn, "swin_mlp_wgmma_kernel", P.threads, P.smem, &per_sm, &sms));
    int64_t grid = std::min<int64_t>((int64_t)per_sm * sms, (ntiles + k.NCW - 1) / k.NCW);
    if (max_ctas > 0) grid = std::min<int64_t>(grid, max_ctas);
    mlp_wgmma::Args a{x, image, n, (int)ntiles, eps};
    in->fn<<<(unsigned)grid, P.threads, P.smem, ctx.stream>>>(a);
    return launch_check(ctx, "swin_mlp_wgmma_kernel");
}

int swin_mlp_kernel_info(Ctx &ctx, const SwinMlpKernel &k, SwinMlpKernelInfo *info) {
    *info = SwinMlpKernelInfo{};
    const Instance *in = find_instance(k);
    DN_REQUIRE(in, "no wgmma MLP kernel C " + std::to_string(k.C) + " " + swin_mlp_kernel_name(k) + " built");
    std::string why;
    int rc = swin_mlp_wgmma_supported(ctx.device, &why);
    if (rc) return fail(ctx, rc, std::string(__func__) + ": " + why);
    cudaFuncAttributes fa;
    TRY(cuda_check(ctx, cudaFuncGetAttributes(&fa, (const void *)in->fn), "cudaFuncGetAttributes (swin_mlp_wgmma_kernel)"));
    info->registers = fa.numRegs;
    info->local_bytes = (int)fa.localSizeBytes;
    const SwinMlpPlan P = swin_mlp_plan(k.C, k.HC, k.NCW, k.tanh);
    return smem_kernel(ctx, (const void *)in->fn, "swin_mlp_wgmma_kernel", P.threads, P.smem, &info->ctas_per_sm, &info->sms);
}

}  // namespace cuda
}  // namespace denoise
