// Noise level estimation in the network's domain, for sigma=auto: the standard deviation of
// additive white noise in non-linear R'G'B', in 8-bit code values (0..255 scale, the unit of the
// filter's and the engine's sigma), from the frames themselves.
//
// Method: weak-texture patch selection and PCA, after
//   X. Liu, M. Tanaka, M. Okutomi, "Single-Image Noise Level Estimation for Blind Denoising",
//   IEEE Trans. Image Processing 22(12), 5226-5237, 2013,
// with three changes (math in noise_estimate.cpp):
//   - each patch is centred on its own mean, so the all-ones direction drops out of the
//     covariance (its DC spread is texture, and float sums stay well conditioned);
//   - the smallest eigenvalue of the sample covariance of n patches of p dimensions is biased low
//     by the Marchenko-Pastur lower edge (1 - sqrt(p/n))^2; it is divided by that factor;
//   - patches whose mean is within `clip_guard` sigma of 0 or 255 are skipped, so clipped 8-bit
//     footage (blown-out sky, black) does not pull the estimate down;
// and, for video, the selected patches' scatter matrices of a segment's frames are summed with a
// per-frame decay, so the estimate uses many frames' patches and follows slow changes.
// The initial threshold of a segment's first frame comes from Immerkaer's estimator
// (J. Immerkaer, "Fast Noise Variance Estimation", CVIU 64(2), 300-302, 1996).
//
// The host code here (CpuNoiseSource) is the reference; kernels/cuda/noise_estimate.cu evaluates the same patch
// statistics on the GPU (a NoiseSource), and the rounds, the segment sum and the 49x49
// eigenvalue problem stay on the host, shared.
#ifndef DENOISE_COMMON_NOISE_ESTIMATE_H
#define DENOISE_COMMON_NOISE_ESTIMATE_H

#include <cstddef>
#include <vector>

namespace denoise {

// Parameters, with their defaults (libplacebo's *_DEFAULTS habit as default member initialisers).
// The defaults were chosen on train-video / train-video2 frames (docs/sigma-auto.md).
struct NoiseEstimateParams {
    int patch = 7;                    // patch side d: vectors of d*d samples (Liu et al.: 7)
    int min_stride = 2;               // smallest spacing of patch origins, pixels
    int max_patches = 131072;         // per channel and frame: the spacing grows to stay below it
    double confidence = 1.0 - 1e-6;   // weak-texture threshold: quantile of a flat patch's gradient energy
    int iterations = 3;               // selection/estimation rounds on a segment's first frame
    int iterations_next = 1;          // rounds on later frames (threshold from the segment's estimate)
    double clip_guard = 2.0;          // skip patches whose mean is within clip_guard * sigma of 0 or 255
    double decay = 0.9;               // weight of the segment's earlier frames, per new frame (0: none)
};

// One plane of a frame: sample (x, y) is data[y * row_stride + x * pixel_stride] (in floats, so
// planar and interleaved R'G'B' both work); its value in the estimator's unit is
// 255 * (scale * sample + offset): scale 1, offset 0 for R'G'B' in [0, 1]; 0.5, 0.5 for [-1, 1].
struct NoisePlane {
    const float *data = nullptr;
    ptrdiff_t pixel_stride = 1;
    ptrdiff_t row_stride = 0;
};

// What a patch must satisfy to be used in one round on one plane: texture strength <= tau and
// lo <= patch mean <= hi (8-bit code values, the estimator's unit). tau < 0: the plane takes no
// part in the round.
struct NoiseSelect {
    double tau = -1, lo = 0, hi = 255;
};

// Where the patch statistics come from: the CPU code below over float planes (CpuNoiseSource), a
// backend over its kept frame (kernels/cpu/backend_cpu.cpp, kernels/cuda/noise_estimate.cu). The
// math (patch grid, texture strength, centring) is the one at the top of noise_estimate.cpp; a
// source only evaluates it. Calls return 0 or a negative DENOISE_E* code (denoise.h); the
// estimator passes that code on.
class NoiseSource {
public:
    virtual ~NoiseSource() = default;
    // Planes of the frame (1..3).
    virtual int planes() const = 0;
    // Immerkaer's estimate of each plane in 8-bit code values into sigma[0..planes()-1].
    virtual int immerkaer(double *sigma) = 0;
    // For each plane j with sel[j].tau >= 0: the scatter sum over the grid patches that pass
    // sel[j] of (x - m)(x - m)^T (p x p doubles, row-major, full, p = patch^2) into
    // scatter + j p^2, and their number into count[j]; planes with tau < 0 get count 0.
    virtual int scatter(const NoiseSelect *sel, double *scatter, double *count) = 0;

    // An asynchronous source (the GPU's) computes on a queue of its own: start_immerkaer() and
    // start_scatter(sel) queue the statistics that the next immerkaer() / scatter(sel) with the
    // same selection then only reads, so the caller can do other work in between. A synchronous
    // source (these defaults) computes inside immerkaer() and scatter() and starts nothing.
    virtual bool asynchronous() const { return false; }
    virtual int start_immerkaer() { return 0; }
    virtual int start_scatter(const NoiseSelect *sel) {
        (void)sel;
        return 0;
    }
};

// Streaming estimator of one stream: push frames of a segment in order, read sigma() after each;
// reset() at a segment boundary (scene cut, new stream). Not thread-safe; allocates per frame.
class NoiseEstimator {
public:
    explicit NoiseEstimator(const NoiseEstimateParams &params = NoiseEstimateParams());

    // Add one frame of `nb_planes` (1..3) planes of width x height samples (width, height >= the
    // patch side). Returns 0 on success, -1 on bad arguments (nothing changes then).
    int push(const NoisePlane *planes, int nb_planes, int width, int height, float scale = 1.f,
             float offset = 0.f);

    // Add one frame from a source (same rounds and segment sum). Returns 0 or the source's
    // negative code (the segment state is then left as it was before the frame).
    int push(NoiseSource &src);
    // Ask an asynchronous source for the statistics that push(src) will read first (Immerkaer's
    // on a segment's first frame, else the first round's scatter with the selection of the
    // segment's estimate), so that they are computed while the caller does other work; push(src)
    // must follow with the estimator unchanged in between. Changes nothing here. Returns 0, -1
    // on a bad source, or the source's negative code.
    int start(NoiseSource &src) const;

    // Segment estimate after the frames pushed so far: sqrt of the mean over planes of the noise
    // variance, in 8-bit code values. A plane without enough weak-texture patches (fewer than
    // 4 p: a plane smaller than a few patches, such as the chroma of a small 4:2:0 frame, or an
    // entirely textured one) counts with the mean variance of the known planes; -1 while no plane
    // is known.
    float sigma() const;
    // The same with weights: sqrt(sum_j gain[j] var_j) over the planes (the engine's map from
    // native Y'CbCr planes to the R'G'B' noise, kernels/sigma_auto.cpp), unknown planes as above.
    float sigma_weighted(const double *gain) const;
    // The same per plane (index < nb_planes of the last push), -1 when unknown.
    float sigma_plane(int plane) const;
    // The last pushed frame's own estimate (no temporal smoothing), as sigma() / sigma_weighted().
    float sigma_frame() const;
    float sigma_frame_weighted(const double *gain) const;
    // Weak-texture patches behind the segment estimate (decayed count, summed over planes).
    double patches() const;

    void reset();

    const NoiseEstimateParams &params() const { return params_; }

private:
    struct PlaneState {
        std::vector<double> scatter;  // p x p, sum over selected patches of (x - mean)(x - mean)^T, decayed
        double count = 0;             // decayed number of patches behind `scatter`
        double var = -1;              // segment estimate (code values^2), -1 unknown
        double var_frame = -1;        // last frame's own estimate
    };
    // push's first round on a frame of nb planes: whether it needs Immerkaer's start (a plane
    // without a segment estimate, or another plane count: a new segment)
    bool needs_start(int nb) const;
    // a round's selection for a plane whose current variance estimate is var (code values^2)
    NoiseSelect select(double var) const;

    NoiseEstimateParams params_;
    double tau0_ = 0;                 // threshold factor: gradient energy < tau0 * variance
    int nb_planes_ = 0;
    PlaneState planes_[3];
};

namespace noise_estimate_detail {
// Exposed for the unit tests and the sources.
// Immerkaer's estimate (code values) of one plane of values v = 255 (scale * s + offset).
double immerkaer_sigma(const NoisePlane &plane, int width, int height, float scale, float offset);
// tau0 of Liu et al.: the `confidence` quantile of the gradient energy of a flat patch of unit
// noise variance, Gamma(r/2, 2 tr / r) with r = rank and tr = trace of D^T D (the patch's
// central-difference operators): for d = 7, r = 45 and tr = 35.
double weak_texture_tau0(int patch, double confidence);
// The patch grid of a width x height plane: origins (i stride, j stride), i < nx, j < ny, with
// the smallest stride >= min_stride that keeps nx ny <= max_patches. nx = ny = 0 when the plane
// is smaller than a patch.
void patch_grid(int width, int height, int d, int min_stride, int max_patches, int *stride, int *nx, int *ny);
// Smallest eigenvalues of a symmetric n x n matrix (row-major, doubles), ascending, `count` of them.
std::vector<double> smallest_eigenvalues(const std::vector<double> &a, int n, int count);
}  // namespace noise_estimate_detail

// The CPU source: planes of floats (NoisePlane) of one frame, values 255 (scale * s + offset).
// The pointers must stay valid while the source is used.
class CpuNoiseSource final : public NoiseSource {
public:
    CpuNoiseSource(const NoisePlane *planes, int nb_planes, int width, int height, float scale, float offset,
                   const NoiseEstimateParams &params);
    // Per-plane sizes (planes of different sizes, e.g. Y' and subsampled Cb, Cr).
    CpuNoiseSource(const NoisePlane *planes, int nb_planes, const int *width, const int *height, float scale,
                   float offset, const NoiseEstimateParams &params);
    ~CpuNoiseSource() override;
    int planes() const override { return nb_; }
    int immerkaer(double *sigma) override;
    int scatter(const NoiseSelect *sel, double *scatter, double *count) override;

private:
    struct Grid;
    NoisePlane pl_[3];
    int nb_ = 0, w_[3] = {}, h_[3] = {};
    float scale_ = 1, offset_ = 0;
    NoiseEstimateParams params_;
    std::vector<Grid> grids_;  // per plane, made on the first scatter()
};

}  // namespace denoise

#endif
