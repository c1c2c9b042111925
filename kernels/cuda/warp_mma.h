// Warp-level primitives of the fused kernels: tensor-core mma.sync.m16n8k16 (bf16 in, fp32
// accumulate), ldmatrix, shuffles, the CTA and warp barriers, plain shared-memory loads and stores
// (DN_LDS, DN_STS, DN_STS_ADD), cp.async, 16-byte loads and the fast fp32 functions, as inline PTX for
// sm_80..sm_90 (nvcc), or, with DENOISE_WARP_EMULATION defined, as declarations that a CPU warp
// emulator implements (tests/emu/warp_emu.h), so that the same kernel source runs on the CPU in
// `make check`. A kernel that makes every shared-memory access through ldmatrix and these macros
// gets the emulator's hazard check (warp_emu.h): accesses of two threads to a byte, one a write,
// with no barrier between that both passed (bar.sync; for lanes of one warp also bar.warp.sync)
// fail its test. Under nvcc the macros are the plain expressions *p, *p = v and *p += v, so that
// a kernel compiles to the same code as it did with plain pointers.
//
// Memory ordering between lanes of one warp: only the warp barrier (sync_warp, __syncwarp) orders
// one lane's shared-memory access before another lane's. ldmatrix, mma.sync and shfl.sync
// synchronize execution, not memory, and a lane's ldmatrix reads the rows whose addresses the
// other lanes give: data that a lane stores where other lanes' ldmatrix read (or read where they
// stored) needs a warp barrier between, as compute-sanitizer's racecheck reports.
//
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"), lane
// l = 4 g + t: A (16 x 16, row-major) a0 = (g, 2t..2t+1), a1 = (g+8, 2t..), a2 = (g, 2t+8..),
// a3 = (g+8, 2t+8..); B (16 x 8, "col") b0 = (k 2t..2t+1, n g), b1 = (k 2t+8..2t+9, n g);
// C/D (16 x 8) c0, c1 = (g, 2t..2t+1), c2, c3 = (g+8, 2t..2t+1). A 32-bit register holds the
// lower-index element in its low 16 bits. ldmatrix .x4: lanes 8i..8i+7 give the row addresses of
// 8x8 matrix i, register i of lane l receives row l / 4, columns 2 (l % 4)..+1 of matrix i (.trans:
// rows 2 (l % 4)..+1 of column l / 4).
#ifndef DENOISE_CUDA_WARP_MMA_H
#define DENOISE_CUDA_WARP_MMA_H

#include <cstdint>

#if defined(DENOISE_WARP_EMULATION)
#include <cmath>
#include <cstring>
#define DN_DEVI inline
#define DN_HD inline
#define DN_UNROLL
#define DN_UNROLL_1
#define DN_LDS(p) ::denoise::cuda::warp::lds(p)
#define DN_STS(p, v) ::denoise::cuda::warp::sts((p), (v))
#define DN_STS_ADD(p, v) ::denoise::cuda::warp::sts_add((p), (v))
#else
#include <cuda_runtime.h>
#define DN_DEVI __device__ __forceinline__
// index and tiling arithmetic the kernels share with their host-side planning code
#define DN_HD __host__ __device__ __forceinline__
#define DN_UNROLL _Pragma("unroll")
#define DN_UNROLL_1 _Pragma("unroll 1")
#define DN_LDS(p) (*(p))
#define DN_STS(p, v) ((void)(*(p) = (v)))
#define DN_STS_ADD(p, v) ((void)(*(p) += (v)))
#endif

namespace denoise {
namespace cuda {

// v limited to [lo, hi] (lo <= hi): edge clamping of pixel indices and shifts.
DN_HD int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

namespace warp {

#if defined(DENOISE_WARP_EMULATION)

struct u32x4 {
    uint32_t x, y, z, w;
};
struct f32x4 {
    float x, y, z, w;
};
struct f32x2 {
    float x, y;
};

// implemented by the emulator: collective over the 32 lanes of the calling warp (or the CTA)
void ldsm_x4(uint32_t (&r)[4], const void *smem_row);
void ldsm_x4_t(uint32_t (&r)[4], const void *smem_row);
void ldsm_x2(uint32_t (&r)[2], const void *smem_row);
void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
float shfl_xor(float v, int lane_mask);
void sync_cta();
void sync_warp();
// a plain shared-memory load / store (DN_LDS / DN_STS; the emulator checks it for hazards, then
// makes it)
template <class T>
T lds(const T *p);
template <class T>
void sts(T *p, T v);
template <class T>
void sts_add(T *p, T v);  // *p += v: a load, then a store
// cp.async of 4 bytes, global -> shared, no register staging; the thread's copies complete at its
// cp_async_wait_all (the emulator applies them there and aborts at a barrier or the CTA's end with
// copies not waited for)
void cp_async4(void *smem, const void *gmem);
void cp_async_wait_all();

inline u32x4 ldg4(const void *p) {
    u32x4 v;
    std::memcpy(&v, p, 16);
    return v;
}
inline f32x4 ldg4f(const float *p) {
    f32x4 v;
    std::memcpy(&v, p, 16);
    return v;
}
inline f32x2 ldg2f(const float *p) { return f32x2{p[0], p[1]}; }
inline u32x4 ld4(const void *p) { return ldg4(p); }
inline void st4(void *p, const u32x4 &v) { std::memcpy(p, &v, 16); }
inline f32x4 ld4f(const float *p) { return ldg4f(p); }
inline void st4f(float *p, const f32x4 &v) { std::memcpy(p, &v, 16); }
inline uint32_t bf16_round(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return ((u >> 16) | 0x40u) & 0xffffu;
    u += 0x7fffu + ((u >> 16) & 1u);
    return u >> 16;
}
inline uint32_t pack_bf16x2(float lo, float hi) { return bf16_round(lo) | (bf16_round(hi) << 16); }
inline float bf16_lo(uint32_t v) {
    const uint32_t u = v << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline float bf16_hi(uint32_t v) {
    const uint32_t u = v & 0xffff0000u;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline float exp2_approx(float x) { return std::exp2(x); }
inline float tanh_approx(float x) { return std::tanh(x); }
inline float rsqrt(float x) { return 1.0f / std::sqrt(x); }
inline float rcp(float x) { return 1.0f / x; }
inline void atomic_add(unsigned long long *p, unsigned long long v) { *p += v; }

#else

using u32x4 = uint4;
using f32x4 = float4;
using f32x2 = float2;

DN_DEVI uint32_t smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

DN_DEVI void ldsm_x4(uint32_t (&r)[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}
DN_DEVI void ldsm_x4_t(uint32_t (&r)[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(p)));
}
DN_DEVI void ldsm_x2(uint32_t (&r)[2], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(smem_addr(p)));
}
DN_DEVI void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
DN_DEVI float shfl_xor(float v, int m) { return __shfl_xor_sync(0xffffffffu, v, m); }
DN_DEVI void sync_cta() { __syncthreads(); }
DN_DEVI void sync_warp() { __syncwarp(); }
// sm_80+: a copy in flight occupies no register, so a thread issues all of its copies before the
// first completes (loads into registers then stores would wait on each load at its store)
DN_DEVI void cp_async4(void *smem, const void *gmem) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_addr(smem)), "l"(gmem) : "memory");
}
DN_DEVI void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// read-only data (the weight image): the non-coherent path
DN_DEVI u32x4 ldg4(const void *p) { return __ldg(reinterpret_cast<const uint4 *>(p)); }
DN_DEVI f32x4 ldg4f(const float *p) { return __ldg(reinterpret_cast<const float4 *>(p)); }
DN_DEVI f32x2 ldg2f(const float *p) { return __ldg(reinterpret_cast<const float2 *>(p)); }
// the residual stream (read and written by the kernel): ordinary 16-byte accesses
DN_DEVI u32x4 ld4(const void *p) { return *reinterpret_cast<const uint4 *>(p); }
DN_DEVI void st4(void *p, const u32x4 &v) { *reinterpret_cast<uint4 *>(p) = v; }
DN_DEVI f32x4 ld4f(const float *p) { return *reinterpret_cast<const float4 *>(p); }
DN_DEVI void st4f(float *p, const f32x4 &v) { *reinterpret_cast<float4 *>(p) = v; }

DN_DEVI uint32_t pack_bf16x2(float lo, float hi) {
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
DN_DEVI float bf16_lo(uint32_t v) { return __uint_as_float(v << 16); }
DN_DEVI float bf16_hi(uint32_t v) { return __uint_as_float(v & 0xffff0000u); }
DN_DEVI float exp2_approx(float x) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(x));
    return r;
}
DN_DEVI float tanh_approx(float x) {
    float r;
    asm("tanh.approx.f32 %0, %1;\n" : "=f"(r) : "f"(x));
    return r;
}
DN_DEVI float rsqrt(float x) { return rsqrtf(x); }
DN_DEVI float rcp(float x) { return __frcp_rn(x); }
DN_DEVI void atomic_add(unsigned long long *p, unsigned long long v) { atomicAdd(p, v); }

#endif

DN_DEVI float warp_sum(float v) {
    v += shfl_xor(v, 16);
    v += shfl_xor(v, 8);
    v += shfl_xor(v, 4);
    v += shfl_xor(v, 2);
    v += shfl_xor(v, 1);
    return v;
}

}  // namespace warp
}  // namespace cuda
}  // namespace denoise

#endif
