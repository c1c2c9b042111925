// sigma=auto on the GPU (noise_estimate.h): the patch statistics of the weak-texture PCA noise
// estimator (common/noise_estimate.cpp has the math and the CPU reference) on a native frame in
// device memory, for the estimation planes of a NoisePlan (sigma_auto.h).
//
// Plane values, in 8-bit code values u = 255 v:
//   converted plan (no chroma subsampling): v = the frame's R'G'B' component j exactly as the
//     network input gets it (frame_in.cu's pixel rule, rounded operation by operation: the CPU
//     backend's floats);
//   native plan (subsampled Y'CbCr): v = component j's normalised code value at its own resolution.
// Kernels, all on the estimator's stream, launched by the host rounds of common/noise_estimate.cpp:
//   immerkaer_kernel  (a segment's first frame only) sum over interior pixels of |I * M|,
//                     M = [1 -2 1; -2 4 -2; 1 -2 1]: one thread per pixel, a double per block
//                     added atomically. Reads the plane once (9 taps, cached).
//   stats_kernel      one thread per grid patch (7x7, origin (i stride, j stride), patch_grid()):
//                     texture strength t = sum of squared central differences / 2 inside the
//                     patch (rows first, then columns, summed in double in the CPU's order) and
//                     the mean, stored as float2 (8 B per patch). Reads 49 samples per patch: at
//                     3840x2160 yuv420p (stride 8 on Y', 4 on Cb/Cr, ~129k patches per plane)
//                     about the frame once from DRAM (12.4 MB) and 3 MB written.
//   scatter_kernel    the scatter sum S = sum (x - m)(x - m)^T over the patches that pass the
//                     selection (t <= tau, lo <= m <= hi): a block takes a range of patches in
//                     batches of 128, compacts the selected ones into shared memory (128 x 49
//                     floats = 25 KB) and each of its 256 threads accumulates up to 5 of the
//                     1225 upper-triangle entries in float registers (2 shared loads per FMA, one
//                     a broadcast); each block adds its sums to the plane's doubles atomically.
//                     Work: n x 1225 FMAs (at most 3 x 131072 patches: 0.96 GFLOP at 4K), reads
//                     the selected patches again (<= 12.4 MB at 4K), writes 29 KB.
// The sums (3 x 1226 doubles, 29 KB) are copied into pinned memory on the same stream and an
// event recorded after the copy; the host reads them once that event is done. A round the
// estimator asks for in advance (start_immerkaer / start_scatter: each frame's first, queued at
// its push, engine.cpp) is read later, a further round at once. Expected at 3840x2160: well
// under 1 ms of GPU time per round (the scatter's shared-memory traffic bounds it), plus one host
// round trip for each round read at once; a segment's first frame runs Immerkaer and three rounds.
#include "native.cuh"
#include "noise_estimate.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace denoise {
namespace cuda {

namespace {

constexpr int kD = 7;                          // patch side (NoiseEstimateParams.patch)
constexpr int kP = kD * kD;                    // 49
constexpr int kEntries = kP * (kP + 1) / 2;    // 1225 upper-triangle entries of S
constexpr int kPlaneAcc = kEntries + 1;        // + the count
constexpr int kThreads = 256;
constexpr int kBatch = 128;                    // candidate patches per batch in scatter_kernel
constexpr int kPerThread = (kEntries + kThreads - 1) / kThreads;  // 5
constexpr int kPatchesPerBlock = 1024;         // scatter_kernel's range per block

struct NoiseArgs {
    DevFrame f;
    DenoisePixelFormat fmt;
    FrameColor col;
    int native;
    int W[3], H[3];
    int stride[3], nx[3], ny[3];
    long long base[3];
};

// Value of estimation plane j at (x, y), 8-bit code values (see the note at the top).
__device__ __forceinline__ float plane_value(const NoiseArgs &a, int j, int x, int y) {
    const DenoisePixelFormat &fm = a.fmt;
    float v;
    if (a.native) {
        v = load_value(a.f, fm.comp[j], fm.bytes, 0, x, y);
    } else if (fm.nb_components == 1) {
        v = load_value(a.f, fm.comp[0], fm.bytes, fm.is_float, x, y);
        v = gray_value(a.col, v, fm.is_float);
    } else if (a.col.rgb) {
        v = load_value(a.f, fm.comp[j], fm.bytes, fm.is_float, x, y);
        if (fm.is_float) v = sanitize(v);
    } else {
        const float v0 = load_value(a.f, fm.comp[0], fm.bytes, 0, x, y);
        const float v1 = load_value(a.f, fm.comp[1], fm.bytes, 0, x, y);
        const float v2 = load_value(a.f, fm.comp[2], fm.bytes, 0, x, y);
        v = __fadd_rn(dot3_rn(a.col.dec[j], v0, v1, v2), a.col.dec_off[j]);
    }
    return __fmul_rn(255.0f, v);
}

__device__ __forceinline__ double warp_sum_d(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Block-wide sum of v into *dst (atomically). All threads of the block must call it.
__device__ void block_add(double v, double *dst) {
    __shared__ double part[kThreads / 32];
    v = warp_sum_d(v);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < kThreads / 32 ? part[lane] : 0.0;
        v = warp_sum_d(v);
        if (lane == 0) atomicAdd(dst, v);
    }
}

// grid (ceil(max_j (W_j - 2)(H_j - 2) / 256), planes); acc[j] += sum |I * M| over plane j.
__global__ void __launch_bounds__(kThreads) immerkaer_kernel(NoiseArgs a, double *acc) {
    const int j = blockIdx.y;
    const int iw = a.W[j] - 2, ih = a.H[j] - 2;
    const long long k = (long long)blockIdx.x * kThreads + threadIdx.x;
    double r = 0.0;
    if (iw > 0 && ih > 0 && k < (long long)iw * ih) {
        const int x = (int)(k % iw), y = (int)(k / iw);
        float s[3][3];
#pragma unroll
        for (int dy = 0; dy < 3; ++dy)
#pragma unroll
            for (int dx = 0; dx < 3; ++dx) s[dy][dx] = plane_value(a, j, x + dx, y + dy);
        const double v = (double)s[0][0] - 2.0 * s[0][1] + s[0][2] - 2.0 * (s[1][0] - 2.0 * s[1][1] + s[1][2]) +
                         s[2][0] - 2.0 * s[2][1] + s[2][2];
        r = fabs(v);
    }
    block_add(r, acc + j);
}

// grid (ceil(max_j nx_j ny_j / 256), planes): stats[base_j + jj nx_j + i] = (texture, mean) of
// the patch at (i stride_j, jj stride_j).
__global__ void __launch_bounds__(kThreads) stats_kernel(NoiseArgs a, float2 *stats) {
    const int j = blockIdx.y;
    const long long k = (long long)blockIdx.x * kThreads + threadIdx.x;
    if (k >= (long long)a.nx[j] * a.ny[j]) return;
    const int i = (int)(k % a.nx[j]), jj = (int)(k / a.nx[j]);
    const int x0 = i * a.stride[j], y0 = jj * a.stride[j];
    float u[kD][kD];
#pragma unroll
    for (int y = 0; y < kD; ++y)
#pragma unroll
        for (int x = 0; x < kD; ++x) u[y][x] = plane_value(a, j, x0 + x, y0 + y);
    // the CPU's order: per row, the horizontal share h_y, the vertical share v_y (inner rows of the
    // patch) and the sum m_y; then t = sum h_y + sum v_y, m = sum m_y / 49
    double t = 0.0, m = 0.0;
#pragma unroll
    for (int y = 0; y < kD; ++y) {
        double h = 0.0, mm = 0.0;
#pragma unroll
        for (int x = 1; x + 1 < kD; ++x) {
            const double g = 0.5 * ((double)u[y][x + 1] - u[y][x - 1]);
            h += g * g;
        }
#pragma unroll
        for (int x = 0; x < kD; ++x) mm += u[y][x];
        t += h;
        m += mm;
    }
#pragma unroll
    for (int y = 1; y + 1 < kD; ++y) {
        double v = 0.0;
#pragma unroll
        for (int x = 0; x < kD; ++x) {
            const double g = 0.5 * ((double)u[y + 1][x] - u[y - 1][x]);
            v += g * g;
        }
        t += v;
    }
    stats[a.base[j] + k] = make_float2((float)t, (float)(m / kP));
}

// a[j] for j in 0..2 without dynamic indexing (which would copy the kernel parameter to local memory)
__device__ __forceinline__ double pick(const double a[3], int j) { return j == 0 ? a[0] : j == 1 ? a[1] : a[2]; }

// grid (ceil(max_j nx_j ny_j / kPatchesPerBlock), planes), kThreads threads: acc[j * kPlaneAcc +
// e] += sum over the selected patches of block's range of (x_r - m)(x_q - m) for upper-triangle
// entry e = (r, q), r <= q, row-major; acc[j * kPlaneAcc + kEntries] += their number.
__global__ void __launch_bounds__(kThreads) scatter_kernel(NoiseArgs a, const float2 *stats, PlaneSelect sel, double *acc) {
    __shared__ float xs[kBatch][kP];
    __shared__ int idx[kBatch];
    __shared__ float mu[kBatch];
    __shared__ int nsel;
    __shared__ unsigned short rq[kEntries];
    const int j = blockIdx.y;
    const long long n = (long long)a.nx[j] * a.ny[j];
    const long long k0 = (long long)blockIdx.x * kPatchesPerBlock;
    const double tau = pick(sel.tau, j), lo = pick(sel.lo, j), hi = pick(sel.hi, j);
    if (tau < 0.0 || k0 >= n) return;  // uniform per block
    const long long k1 = min(n, k0 + kPatchesPerBlock);
    // entry e = (r, q) packed as r * 64 + q, for the block's threads to read
    for (int e = threadIdx.x; e < kEntries; e += kThreads) {
        int r = 0, start = 0;
        while (e >= start + (kP - r)) {
            start += kP - r;
            ++r;
        }
        rq[e] = (unsigned short)(r * 64 + r + (e - start));
    }
    float accf[kPerThread];
#pragma unroll
    for (int m = 0; m < kPerThread; ++m) accf[m] = 0.f;
    int total = 0;
    const int stride = a.stride[j], nx = a.nx[j];
    for (long long b = k0; b < k1; b += kBatch) {
        if (threadIdx.x == 0) nsel = 0;
        __syncthreads();
        if (threadIdx.x < kBatch && b + threadIdx.x < k1) {
            const long long k = b + threadIdx.x;
            const float2 s = stats[a.base[j] + k];
            if ((double)s.x <= tau && (double)s.y >= lo && (double)s.y <= hi) {
                const int slot = atomicAdd(&nsel, 1);
                idx[slot] = (int)k;
                mu[slot] = s.y;
            }
        }
        __syncthreads();
        const int ns = nsel;
        for (int e = threadIdx.x; e < ns * kP; e += kThreads) {
            const int slot = e / kP, q = e % kP;
            const int k = idx[slot];
            const int x0 = (k % nx) * stride, y0 = (k / nx) * stride;
            xs[slot][q] = __fsub_rn(plane_value(a, j, x0 + q % kD, y0 + q / kD), mu[slot]);
        }
        __syncthreads();
#pragma unroll
        for (int m = 0; m < kPerThread; ++m) {
            const int e = threadIdx.x + m * kThreads;
            if (e < kEntries) {
                const int r = rq[e] >> 6, q = rq[e] & 63;
                float acc_e = accf[m];
                for (int t = 0; t < ns; ++t) acc_e = fmaf(xs[t][r], xs[t][q], acc_e);
                accf[m] = acc_e;
            }
        }
        total += ns;
        __syncthreads();  // xs, idx, nsel are rewritten by the next batch
    }
    double *dst = acc + (size_t)j * kPlaneAcc;
#pragma unroll
    for (int m = 0; m < kPerThread; ++m)
        if (threadIdx.x + m * kThreads < kEntries) atomicAdd(dst + threadIdx.x + m * kThreads, (double)accf[m]);
    if (threadIdx.x == 0) atomicAdd(dst + kEntries, (double)total);
}

}  // namespace


CudaNoiseSource::~CudaNoiseSource() {
    if (done_) {
        cudaEventSynchronize(done_);  // the copy into host_acc_ lands before the buffer goes
        cudaEventDestroy(done_);
    }
    dev_free(ctx_, stats_);
    dev_free(ctx_, acc_);
    if (host_acc_) cudaFreeHost(host_acc_);
}

int CudaNoiseSource::bind(const DevFrame &f, const DenoisePixelFormat &fmt, const FrameColor &col, int W, int H,
                          int cw, int ch, const NoisePlan &plan, cudaStream_t stream) {
    Ctx &ctx = ctx_;
    DN_REQUIRE(plan.params.patch == kD, "patch side " + std::to_string(plan.params.patch) + " (the kernels use 7)");
    DN_REQUIRE(plan.planes >= 1 && plan.planes <= 3, "plan with " + std::to_string(plan.planes) + " planes");
    DN_REQUIRE(!plan.native || (!fmt.is_float && fmt.nb_components == 3), "native plan needs integer Y'CbCr");
    for (int j = 0; j < plan.planes; ++j) {
        const int ew = plan.native && j ? cw : W, eh = plan.native && j ? ch : H;
        DN_REQUIRE(plan.width[j] == ew && plan.height[j] == eh, "plane " + std::to_string(j) + " size does not match the frame");
    }
    f_ = f;
    fmt_ = fmt;
    col_ = col;
    plan_ = plan;
    stream_ = stream;
    stats_valid_ = false;
    started_ = Started::none;
    int64_t total = 0;
    for (int j = 0; j < 3; ++j) {
        nx_[j] = ny_[j] = 0;
        stride_[j] = 1;
        base_[j] = total;
        if (j >= plan.planes) continue;
        noise_estimate_detail::patch_grid(plan.width[j], plan.height[j], kD, plan.params.min_stride,
                                          plan.params.max_patches, &stride_[j], &nx_[j], &ny_[j]);
        total += (int64_t)nx_[j] * ny_[j];
    }
    const size_t need = (size_t)std::max<int64_t>(total, 1) * sizeof(float2);
    if (need > stats_bytes_) {
        dev_free(ctx, stats_);
        stats_ = nullptr;
        stats_bytes_ = 0;
        TRY(dev_alloc(ctx, (void **)&stats_, need, "noise estimator patch statistics"));
        stats_bytes_ = need;
        // NaN bytes: a patch stats_kernel failed to write is never selected (the counts then
        // disagree with the CPU's in tests/gpu/noise_check.cpp)
        TRY(cuda_check(ctx, cudaMemsetAsync(stats_, 0xff, need, stream), "cudaMemsetAsync (patch statistics)"));
    }
    const size_t acc_bytes = (3 * kPlaneAcc + 3) * sizeof(double);
    if (!acc_) {
        TRY(dev_alloc(ctx, (void **)&acc_, acc_bytes, "noise estimator sums"));
        acc_bytes_ = acc_bytes;
    }
    if (!host_acc_)
        TRY(cuda_check(ctx, cudaHostAlloc((void **)&host_acc_, acc_bytes, cudaHostAllocDefault),
                       "cudaHostAlloc (noise estimator sums)"));
    if (!done_)
        TRY(cuda_check(ctx, cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreate (noise estimator)"));
    return 0;
}

static NoiseArgs make_args(const DevFrame &f, const DenoisePixelFormat &fmt, const FrameColor &col, const NoisePlan &plan,
                           const int *stride, const int *nx, const int *ny, const int64_t *base) {
    NoiseArgs a;
    a.f = f;
    a.fmt = fmt;
    a.col = col;
    a.native = plan.native ? 1 : 0;
    for (int j = 0; j < 3; ++j) {
        const bool on = j < plan.planes;
        a.W[j] = on ? plan.width[j] : 0;
        a.H[j] = on ? plan.height[j] : 0;
        a.stride[j] = stride[j];
        a.nx[j] = on ? nx[j] : 0;
        a.ny[j] = on ? ny[j] : 0;
        a.base[j] = (long long)base[j];
    }
    return a;
}

PlaneSelect CudaNoiseSource::selection(const NoiseSelect *sel) const {
    PlaneSelect s;
    for (int j = 0; j < 3; ++j) {
        const bool on = j < plan_.planes && sel[j].tau >= 0;
        s.tau[j] = on ? sel[j].tau : -1.0;
        s.lo[j] = on ? sel[j].lo : 0.0;
        s.hi[j] = on ? sel[j].hi : 0.0;
    }
    return s;
}

int CudaNoiseSource::queue_immerkaer() {
    Ctx &ctx = ctx_;
    DN_REQUIRE(acc_ && host_acc_ && stats_ && done_, "not bound");
    const NoiseArgs a = make_args(f_, fmt_, col_, plan_, stride_, nx_, ny_, base_);
    int64_t most = 1;
    for (int j = 0; j < plan_.planes; ++j)
        most = std::max<int64_t>(most, (int64_t)std::max(plan_.width[j] - 2, 0) * std::max(plan_.height[j] - 2, 0));
    unsigned blocks = 0;
    DN_REQUIRE(grid_1d(most, kThreads, &blocks), "plane too large");
    double *sums = acc_ + 3 * kPlaneAcc;
    TRY(cuda_check(ctx, cudaMemsetAsync(sums, 0, 3 * sizeof(double), stream_), "cudaMemsetAsync (Immerkaer sums)"));
    immerkaer_kernel<<<dim3(blocks, plan_.planes), kThreads, 0, stream_>>>(a, sums);
    TRY(launch_check(ctx, "immerkaer_kernel"));
    TRY(cuda_check(ctx, cudaMemcpyAsync(host_acc_, sums, 3 * sizeof(double), cudaMemcpyDeviceToHost, stream_),
                   "cudaMemcpyAsync (Immerkaer sums)"));
    return cuda_check(ctx, cudaEventRecord(done_, stream_), "cudaEventRecord (noise estimator)");
}

int CudaNoiseSource::queue_scatter(const PlaneSelect &s) {
    Ctx &ctx = ctx_;
    DN_REQUIRE(acc_ && host_acc_ && stats_ && done_, "not bound");
    const NoiseArgs a = make_args(f_, fmt_, col_, plan_, stride_, nx_, ny_, base_);
    int64_t most = 1;
    for (int j = 0; j < plan_.planes; ++j) most = std::max<int64_t>(most, (int64_t)nx_[j] * ny_[j]);
    if (!stats_valid_) {
        unsigned blocks = 0;
        DN_REQUIRE(grid_1d(most, kThreads, &blocks), "patch grid too large");
        stats_kernel<<<dim3(blocks, plan_.planes), kThreads, 0, stream_>>>(a, stats_);
        TRY(launch_check(ctx, "stats_kernel"));
        stats_valid_ = true;
    }
    unsigned blocks = 0;
    DN_REQUIRE(grid_1d(most, kPatchesPerBlock, &blocks), "patch grid too large");
    const size_t bytes = (size_t)plan_.planes * kPlaneAcc * sizeof(double);
    TRY(cuda_check(ctx, cudaMemsetAsync(acc_, 0, bytes, stream_), "cudaMemsetAsync (scatter sums)"));
    scatter_kernel<<<dim3(blocks, plan_.planes), kThreads, 0, stream_>>>(a, stats_, s, acc_);
    TRY(launch_check(ctx, "scatter_kernel"));
    TRY(cuda_check(ctx, cudaMemcpyAsync(host_acc_, acc_, bytes, cudaMemcpyDeviceToHost, stream_),
                   "cudaMemcpyAsync (scatter sums)"));
    return cuda_check(ctx, cudaEventRecord(done_, stream_), "cudaEventRecord (noise estimator)");
}

// A not-ready query is no error: cudaGetLastError() clears it, so that the next launch_check does
// not report it. After a wait for started sums, the compute stream (ctx_.stream) is queried: the
// host queued nothing on it while it waited, so it is done only if the GPU ran out of that work
// before the sums arrived or before the host woke (NoiseReads::started_drained).
int CudaNoiseSource::wait(bool started) {
    Ctx &ctx = ctx_;
    const cudaError_t q = cudaEventQuery(done_);
    if (q == cudaErrorNotReady) cudaGetLastError();
    else TRY(cuda_check(ctx, q, "cudaEventQuery (noise estimator)"));
    if (started) reads_.started++;
    else reads_.direct++;
    if (q == cudaSuccess) return 0;
    const auto t0 = std::chrono::steady_clock::now();
    TRY(cuda_check(ctx, cudaEventSynchronize(done_), "cudaEventSynchronize (noise estimator)"));
    if (!started) return 0;
    reads_.started_busy++;
    reads_.started_wait_us +=
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
    const cudaError_t c = cudaStreamQuery(ctx.stream);
    if (c == cudaErrorNotReady) {
        cudaGetLastError();
        return 0;
    }
    TRY(cuda_check(ctx, c, "cudaStreamQuery (compute stream)"));
    reads_.started_drained++;
    return 0;
}

int CudaNoiseSource::start_immerkaer() {
    started_ = Started::none;
    TRY(queue_immerkaer());
    started_ = Started::immerkaer;
    return 0;
}

int CudaNoiseSource::start_scatter(const NoiseSelect *sel) {
    started_ = Started::none;
    const PlaneSelect s = selection(sel);
    TRY(queue_scatter(s));
    sel_ = s;
    started_ = Started::scatter;
    return 0;
}

int CudaNoiseSource::immerkaer(double *sigma) {
    const bool started = started_ == Started::immerkaer;
    started_ = Started::none;
    if (!started) TRY(queue_immerkaer());
    TRY(wait(started));
    for (int j = 0; j < plan_.planes; ++j) {
        const int w = plan_.width[j], h = plan_.height[j];
        // common/noise_estimate.cpp's immerkaer_sigma: sqrt(pi / 2) / (6 (W-2) (H-2)) sum |I * M|, -1 under 3x3
        sigma[j] = w < 3 || h < 3 ? -1.0 : std::sqrt(M_PI / 2) / (6.0 * (w - 2) * (h - 2)) * host_acc_[j];
    }
    return 0;
}

int CudaNoiseSource::scatter(const NoiseSelect *sel, double *scatter, double *count) {
    const PlaneSelect s = selection(sel);
    bool started = started_ == Started::scatter;
    for (int j = 0; started && j < 3; ++j)
        started = s.tau[j] == sel_.tau[j] && s.lo[j] == sel_.lo[j] && s.hi[j] == sel_.hi[j];
    started_ = Started::none;
    if (!started) TRY(queue_scatter(s));
    TRY(wait(started));
    for (int j = 0; j < plan_.planes; ++j) {
        double *S = scatter + (size_t)j * kP * kP;
        count[j] = 0;
        if (s.tau[j] < 0) continue;
        const double *src = host_acc_ + (size_t)j * kPlaneAcc;
        int e = 0;
        for (int r = 0; r < kP; ++r)
            for (int q = r; q < kP; ++q, ++e) S[r * kP + q] = S[q * kP + r] = src[e];
        count[j] = src[kEntries];
    }
    return 0;
}

}  // namespace cuda
}  // namespace denoise
