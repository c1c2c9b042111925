// Noise level estimation for sigma=auto (noise_estimate.h): weak-texture patches and PCA after
// Liu, Tanaka & Okutomi (IEEE TIP 2013), per plane, summed over a segment's frames.
//
// Math, for one plane with values v = 255 (scale * sample + offset) and noise variance s2:
//   patches: d x d windows at origins on a grid of spacing `stride` (min_stride, grown so that
//     at most max_patches fit), as vectors x of p = d^2 values; m = mean(x).
//   texture strength: t(x) = sum of squared central differences (x[i+1] - x[i-1]) / 2 inside the
//     patch, horizontally (d rows of d-2) and vertically (d-2 rows of d). For a flat patch with
//     white noise, t ~ s2 * Gamma(r/2, 2 tr / r) (Liu et al. eq. 19), r = rank(D^T D) = 45 and
//     tr = trace(D^T D) = 35 for d = 7; weak texture: t <= tau0 * s2 with tau0 the `confidence`
//     quantile of that Gamma (81.8 for d = 7, 1 - 1e-6).
//   estimate: S = sum over selected patches of (x - m)(x - m)^T, n patches. For noise alone
//     E[S / n] = s2 (I - 1 1^T / p): the ones direction has eigenvalue 0, every other s2, and
//     texture only adds positive semi-definite terms, so s2 <= lambda_2(S / n) in expectation (the
//     second-smallest eigenvalue; lambda_1 = 0 is the ones direction). The sample eigenvalue is
//     biased low by the Marchenko-Pastur lower edge, lambda_2 ~ s2 (1 - sqrt((p-1)/n))^2
//     (Marchenko & Pastur 1967), so s2 = lambda_2(S / n) / (1 - sqrt((p-1)/n))^2.
//   iteration (Liu et al. Algorithm 1): start from Immerkaer's s2 (upper bound in texture, exact
//     on flat noise) or the segment's estimate, select, estimate, select again, ...
//   clipping: a patch whose mean m has m < g sqrt(s2) or m > 255 - g sqrt(s2) is skipped (g =
//     clip_guard), because clipped samples there have a smaller variance.
//   segment: S_seg = decay S_seg + S_frame, n_seg = decay n_seg + n_frame; the estimate is the
//     formula above on S_seg / n_seg; the next frame's threshold uses it.
// Cost per plane and frame, n <= max_patches (131072) patches: the texture strength ~(3 d + 2)
// flops per row and grid column (row shares summed per patch), the gather p floats, one SSYRK of n x 49 (2.5 kflop per patch, ~0.33 Gflop
// at the cap), a 49 x 49 symmetric eigenproblem (LAPACK dsyevr, two eigenvalues). At 854x480
// (stride 2, 101k patches per plane) about 0.75 Gflop for three planes and one round.
#include "noise_estimate.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "parallel.h"

extern "C" {
// LAPACK (bundled in OpenBLAS): selected eigenvalues of a real symmetric matrix.
void dsyevr_(const char *jobz, const char *range, const char *uplo, const int *n, double *a, const int *lda,
             const double *vl, const double *vu, const int *il, const int *iu, const double *abstol, int *m,
             double *w, double *z, const int *ldz, int *isuppz, double *work, const int *lwork, int *iwork,
             const int *liwork, int *info, size_t, size_t, size_t);
}

namespace denoise {
namespace noise_estimate_detail {

// Regularised lower incomplete gamma P(a, x): series for x < a + 1 (Abramowitz & Stegun 6.5.29),
// else 1 - Q by Lentz's continued fraction (Numerical Recipes 3rd ed., 6.2).
static double gamma_p(double a, double x) {
    if (x <= 0) return 0;
    const double lead = std::exp(-x + a * std::log(x) - std::lgamma(a));
    if (x < a + 1) {
        double term = 1.0 / a, sum = term;
        for (int n = 1; n < 10000 && term > sum * 1e-16; ++n) {
            term *= x / (a + n);
            sum += term;
        }
        return sum * lead;
    }
    const double tiny = 1e-300;
    double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
    for (int i = 1; i < 10000; ++i) {
        const double an = -i * (i - a);
        b += 2;
        d = an * d + b;
        if (std::fabs(d) < tiny) d = tiny;
        c = b + an / c;
        if (std::fabs(c) < tiny) c = tiny;
        d = 1 / d;
        const double delta = d * c;
        h *= delta;
        if (std::fabs(delta - 1) < 1e-16) break;
    }
    return 1 - lead * h;
}

std::vector<double> smallest_eigenvalues(const std::vector<double> &a, int n, int count) {
    std::vector<double> m(a), w(n), work(26 * (size_t)n);
    std::vector<int> iwork(10 * (size_t)n), isuppz(2 * (size_t)n);
    const int lwork = (int)work.size(), liwork = (int)iwork.size(), il = 1, iu = std::min(count, n), one = 1;
    const double vl = 0, vu = 0, abstol = 0;
    double z = 0;
    int found = 0, info = 0;
    dsyevr_("N", "I", "U", &n, m.data(), &n, &vl, &vu, &il, &iu, &abstol, &found, w.data(), &z, &one,
            isuppz.data(), work.data(), &lwork, iwork.data(), &liwork, &info, 1, 1, 1);
    if (info != 0) return {};
    w.resize(found);
    return w;
}

double weak_texture_tau0(int d, double confidence) {
    // D: central differences [-1/2, 0, 1/2] inside a d x d patch (row-major vector), rows first
    const int p = d * d;
    std::vector<double> dd((size_t)p * p, 0.0);
    auto add_row = [&](int i0, int i1) {  // D row with -1/2 at i0, +1/2 at i1: D^T D += r r^T
        const int idx[2] = {i0, i1};
        const double v[2] = {-0.5, 0.5};
        for (int a = 0; a < 2; ++a)
            for (int b = 0; b < 2; ++b) dd[(size_t)idx[a] * p + idx[b]] += v[a] * v[b];
    };
    for (int y = 0; y < d; ++y)
        for (int x = 1; x + 1 < d; ++x) add_row(y * d + x - 1, y * d + x + 1);
    for (int y = 1; y + 1 < d; ++y)
        for (int x = 0; x < d; ++x) add_row((y - 1) * d + x, (y + 1) * d + x);
    double tr = 0;
    for (int i = 0; i < p; ++i) tr += dd[(size_t)i * p + i];
    const std::vector<double> ev = smallest_eigenvalues(dd, p, p);
    if ((int)ev.size() != p) return 0;
    int rank = 0;
    for (double e : ev) rank += e > 1e-9 * ev.back();
    // Gamma(shape k = r/2, scale theta = 2 tr / r): quantile by bisection on P(k, x / theta)
    const double k = rank / 2.0, theta = 2 * tr / rank;
    double lo = 0, hi = k * theta;
    while (gamma_p(k, hi / theta) < confidence) hi *= 2;
    for (int i = 0; i < 200; ++i) {
        const double mid = 0.5 * (lo + hi);
        (gamma_p(k, mid / theta) < confidence ? lo : hi) = mid;
    }
    return 0.5 * (lo + hi);
}

double immerkaer_sigma(const NoisePlane &pl, int width, int height, float scale, float offset) {
    (void)offset;  // the mask sums to zero
    if (width < 3 || height < 3) return -1;
    // mask [1 -2 1; -2 4 -2; 1 -2 1]; sigma = sqrt(pi / 2) / (6 (W-2) (H-2)) sum |I * M|
    std::vector<double> rows(height - 2);
    parallel_for(height - 2, grain_for(height - 2), [&](int64_t y0, int64_t y1) {
        for (int64_t y = y0; y < y1; ++y) {
            const float *r0 = pl.data + (y + 0) * pl.row_stride, *r1 = pl.data + (y + 1) * pl.row_stride,
                        *r2 = pl.data + (y + 2) * pl.row_stride;
            const ptrdiff_t s = pl.pixel_stride;
            double acc = 0;
            for (int x = 0; x + 2 < width; ++x) {
                const ptrdiff_t a = x * s, b = a + s, c = b + s;
                const double v = (double)r0[a] - 2.0 * r0[b] + r0[c] - 2.0 * (r1[a] - 2.0 * r1[b] + r1[c]) +
                                 r2[a] - 2.0 * r2[b] + r2[c];
                acc += std::fabs(v);
            }
            rows[y] = acc;
        }
    });
    double sum = 0;
    for (double r : rows) sum += r;
    return std::sqrt(M_PI / 2) / (6.0 * (width - 2) * (height - 2)) * sum * 255.0 * std::fabs(scale);
}

void patch_grid(int width, int height, int d, int min_stride, int max_patches, int *stride, int *nx, int *ny) {
    const int64_t ox = (int64_t)width - d + 1, oy = (int64_t)height - d + 1;
    int s = std::max(min_stride, 1);
    if (ox < 1 || oy < 1) {
        *stride = s;
        *nx = *ny = 0;
        return;
    }
    while ((int64_t)((ox + s - 1) / s) * ((oy + s - 1) / s) > std::max(max_patches, 1)) ++s;
    *stride = s;
    *nx = (int)((ox + s - 1) / s);
    *ny = (int)((oy + s - 1) / s);
}

}  // namespace noise_estimate_detail

using namespace noise_estimate_detail;

namespace {

// Per-patch statistics of one plane on the patch grid.
struct PatchGrid {
    int d = 0, stride = 0, nx = 0, ny = 0;
    std::vector<float> texture, mean;  // ny * nx
};

void patch_stats(const NoisePlane &pl, int width, int height, float scale, float offset, int d, int min_stride,
                 int max_patches, PatchGrid &g) {
    int stride = 0;
    patch_grid(width, height, d, min_stride, max_patches, &stride, &g.nx, &g.ny);
    g.d = d;
    g.stride = stride;
    g.texture.assign((size_t)g.nx * g.ny, 0.f);
    g.mean.assign((size_t)g.nx * g.ny, 0.f);
    const float a = 255.f * scale, b = 255.f * offset;
    const int nx = g.nx;
    // Per row y and grid column i (x0 = i * stride): the row's share of a patch's horizontal
    // gradient energy (x0+1 .. x0+d-2), of its vertical one (rows y-1, y+1; 0 on the first and
    // last row) and of its sum. A patch then adds d (d-2) rows: about (3 d + 2) operations per
    // row and grid column instead of 4 d (d-2) + d^2 per patch. Sums of non-negative terms: a
    // flat patch has texture exactly 0.
    std::vector<double> rh((size_t)height * nx), rv((size_t)height * nx, 0.0), rm((size_t)height * nx);
    parallel_for(height, grain_for(height), [&](int64_t y0, int64_t y1) {
        std::vector<float> cur(width), up(width), down(width);
        auto load = [&](int64_t y, std::vector<float> &row) {
            const float *r = pl.data + y * pl.row_stride;
            for (int x = 0; x < width; ++x) row[x] = a * r[(ptrdiff_t)x * pl.pixel_stride] + b;
        };
        for (int64_t y = y0; y < y1; ++y) {
            load(y, cur);
            const bool inner = y > 0 && y + 1 < height;
            if (inner) {
                load(y - 1, up);
                load(y + 1, down);
            }
            for (int i = 0; i < nx; ++i) {
                const int x0 = i * stride;
                double h = 0, v = 0, m = 0;
                for (int x = x0 + 1; x + 1 < x0 + d; ++x) {
                    const double gx = 0.5 * ((double)cur[x + 1] - cur[x - 1]);
                    h += gx * gx;
                }
                for (int x = x0; x < x0 + d; ++x) {
                    m += cur[x];
                    if (inner) {
                        const double gy = 0.5 * ((double)down[x] - up[x]);
                        v += gy * gy;
                    }
                }
                rh[(size_t)y * nx + i] = h;
                rv[(size_t)y * nx + i] = v;
                rm[(size_t)y * nx + i] = m;
            }
        }
    });
    parallel_for(g.ny, grain_for(g.ny), [&](int64_t j0, int64_t j1) {
        for (int64_t j = j0; j < j1; ++j) {
            const int64_t y0 = j * stride;
            for (int i = 0; i < nx; ++i) {
                double t = 0, m = 0;
                for (int64_t y = y0; y < y0 + d; ++y) {
                    t += rh[(size_t)y * nx + i];
                    m += rm[(size_t)y * nx + i];
                }
                for (int64_t y = y0 + 1; y + 1 < y0 + d; ++y) t += rv[(size_t)y * nx + i];
                g.texture[(size_t)j * nx + i] = (float)t;
                g.mean[(size_t)j * nx + i] = (float)(m / (d * d));
            }
        }
    });
}

// Scatter matrix (p x p doubles, full, into scatter[0..p^2)) of the centred patches that pass
// `sl`; returns n.
int64_t selected_scatter(const NoisePlane &pl, float scale, float offset, const PatchGrid &g, const NoiseSelect &sl,
                         double *scatter) {
    const int d = g.d, p = d * d;
    const double tau = sl.tau, lo = sl.lo, hi = sl.hi;
    std::vector<int32_t> sel;
    for (int64_t k = 0; k < (int64_t)g.texture.size(); ++k)
        if (g.texture[k] <= tau && g.mean[k] >= lo && g.mean[k] <= hi) sel.push_back((int32_t)k);
    const int64_t n = (int64_t)sel.size();
    std::fill(scatter, scatter + (size_t)p * p, 0.0);
    if (n == 0) return 0;
    std::vector<float> m((size_t)n * p);
    const float a = 255.f * scale, b = 255.f * offset;
    parallel_for(n, grain_for(n), [&](int64_t k0, int64_t k1) {
        for (int64_t k = k0; k < k1; ++k) {
            const int j = sel[k] / g.nx, i = sel[k] % g.nx;
            const float *base = pl.data + (ptrdiff_t)j * g.stride * pl.row_stride + (ptrdiff_t)i * g.stride * pl.pixel_stride;
            const float mu = g.mean[sel[k]];
            float *row = m.data() + k * p;
            for (int y = 0; y < d; ++y)
                for (int x = 0; x < d; ++x) row[y * d + x] = a * base[y * pl.row_stride + x * pl.pixel_stride] + b - mu;
        }
    });
    std::vector<float> c((size_t)p * p, 0.f);
    cblas_ssyrk(CblasRowMajor, CblasUpper, CblasTrans, p, (int)n, 1.f, m.data(), p, 0.f, c.data(), p);
    for (int r = 0; r < p; ++r)
        for (int q = r; q < p; ++q) scatter[(size_t)r * p + q] = scatter[(size_t)q * p + r] = c[(size_t)r * p + q];
    return n;
}

// s2 from a scatter matrix of n centred patches (see the note at the top); -1 if n < 4 p.
double variance_from_scatter(const std::vector<double> &scatter, int p, double n) {
    if (n < 4.0 * p) return -1;
    std::vector<double> cov(scatter);
    for (double &v : cov) v /= n;
    const std::vector<double> ev = smallest_eigenvalues(cov, p, 2);
    if (ev.size() < 2) return -1;
    const double edge = 1.0 - std::sqrt((p - 1) / n);
    return std::max(ev[1], 0.0) / (edge * edge);
}

}  // namespace

NoiseEstimator::NoiseEstimator(const NoiseEstimateParams &params) : params_(params) {
    params_.patch = std::max(params_.patch, 3);
    params_.iterations = std::max(params_.iterations, 1);
    params_.iterations_next = std::max(params_.iterations_next, 1);
    tau0_ = weak_texture_tau0(params_.patch, params_.confidence);
}

void NoiseEstimator::reset() {
    for (PlaneState &s : planes_) s = PlaneState();
    nb_planes_ = 0;
}

struct CpuNoiseSource::Grid : PatchGrid {
    bool made = false;
};

CpuNoiseSource::CpuNoiseSource(const NoisePlane *planes, int nb_planes, int width, int height, float scale,
                               float offset, const NoiseEstimateParams &params)
    : nb_(std::min(std::max(nb_planes, 0), 3)), scale_(scale), offset_(offset), params_(params) {
    for (int c = 0; c < nb_; ++c) {
        pl_[c] = planes[c];
        w_[c] = width;
        h_[c] = height;
    }
    grids_.resize(nb_);
}

CpuNoiseSource::CpuNoiseSource(const NoisePlane *planes, int nb_planes, const int *width, const int *height,
                               float scale, float offset, const NoiseEstimateParams &params)
    : nb_(std::min(std::max(nb_planes, 0), 3)), scale_(scale), offset_(offset), params_(params) {
    for (int c = 0; c < nb_; ++c) {
        pl_[c] = planes[c];
        w_[c] = width[c];
        h_[c] = height[c];
    }
    grids_.resize(nb_);
}

CpuNoiseSource::~CpuNoiseSource() = default;

int CpuNoiseSource::immerkaer(double *sigma) {
    for (int c = 0; c < nb_; ++c) sigma[c] = immerkaer_sigma(pl_[c], w_[c], h_[c], scale_, offset_);
    return 0;
}

int CpuNoiseSource::scatter(const NoiseSelect *sel, double *scatter, double *count) {
    const int d = params_.patch, p = d * d;
    for (int c = 0; c < nb_; ++c) {
        count[c] = 0;
        if (sel[c].tau < 0) continue;
        Grid &g = grids_[c];
        if (!g.made) {
            patch_stats(pl_[c], w_[c], h_[c], scale_, offset_, d, params_.min_stride, params_.max_patches, g);
            g.made = true;
        }
        count[c] = (double)selected_scatter(pl_[c], scale_, offset_, g, sel[c], scatter + (size_t)c * p * p);
    }
    return 0;
}

int NoiseEstimator::push(const NoisePlane *planes, int nb_planes, int width, int height, float scale, float offset) {
    const int d = params_.patch;
    if (!planes || nb_planes < 1 || nb_planes > 3 || width < d || height < d || !(tau0_ > 0)) return -1;
    for (int c = 0; c < nb_planes; ++c)
        if (!planes[c].data) return -1;
    CpuNoiseSource src(planes, nb_planes, width, height, scale, offset, params_);
    return push(src);
}

// One frame (Liu et al. Algorithm 1 per plane, the planes' rounds batched into one source call):
// start from the segment's variance (iterations_next rounds) or, on a segment's first frame,
// Immerkaer's (iterations rounds); each round selects with tau = tau0 s2, clip band
// [g sqrt(s2), 255 - g sqrt(s2)], and re-estimates s2 from the selection's scatter. The last
// round that had enough patches is the frame's contribution to the segment sum.
bool NoiseEstimator::needs_start(int nb) const {
    if (nb != nb_planes_) return true;
    for (int c = 0; c < nb; ++c)
        if (planes_[c].var < 0) return true;
    return false;
}

NoiseSelect NoiseEstimator::select(double var) const {
    NoiseSelect s;
    const double lo = params_.clip_guard * std::sqrt(var);
    s.tau = tau0_ * var;
    s.lo = lo;
    s.hi = 255.0 - lo;
    return s;
}

// push()'s first request: Immerkaer's start, or round 0 on every plane (each has a segment
// estimate, and rounds >= 1) with the selection of that estimate.
int NoiseEstimator::start(NoiseSource &src) const {
    const int nb = src.planes();
    if (nb < 1 || nb > 3 || !(tau0_ > 0)) return -1;
    if (needs_start(nb)) return src.start_immerkaer();
    NoiseSelect sel[3];
    for (int c = 0; c < nb; ++c) sel[c] = select(planes_[c].var);
    return src.start_scatter(sel);
}

int NoiseEstimator::push(NoiseSource &src) {
    const int d = params_.patch, p = d * d, nb = src.planes();
    if (nb < 1 || nb > 3 || !(tau0_ > 0)) return -1;
    const bool need_start = needs_start(nb);
    if (nb != nb_planes_) reset();
    double var[3], s0[3] = {0, 0, 0};
    int rounds[3];
    if (need_start) {
        const int rc = src.immerkaer(s0);
        if (rc) return rc;
    }
    for (int c = 0; c < nb; ++c) {
        var[c] = planes_[c].var;
        rounds[c] = params_.iterations_next;
        if (var[c] < 0) {
            var[c] = s0[c] * s0[c];
            rounds[c] = params_.iterations;
        }
    }
    std::vector<double> scatter((size_t)nb * p * p), best((size_t)nb * p * p);
    double count[3], best_n[3] = {0, 0, 0}, frame_var[3] = {-1, -1, -1};
    bool active[3] = {true, true, true};
    for (int r = 0;; ++r) {
        NoiseSelect sel[3];
        bool any = false;
        for (int c = 0; c < nb; ++c) {
            if (!active[c] || r >= rounds[c]) continue;
            sel[c] = select(var[c]);
            any = true;
        }
        if (!any) break;
        const int rc = src.scatter(sel, scatter.data(), count);
        if (rc) return rc;
        for (int c = 0; c < nb; ++c) {
            if (sel[c].tau < 0) continue;
            const std::vector<double> S(scatter.begin() + (size_t)c * p * p, scatter.begin() + (size_t)(c + 1) * p * p);
            const double v = variance_from_scatter(S, p, count[c]);
            if (v < 0) {
                active[c] = false;
                continue;
            }
            var[c] = frame_var[c] = v;
            std::copy(S.begin(), S.end(), best.begin() + (size_t)c * p * p);
            best_n[c] = count[c];
        }
    }
    nb_planes_ = nb;
    for (int c = 0; c < nb; ++c) {
        PlaneState &st = planes_[c];
        st.var_frame = frame_var[c];
        if (frame_var[c] < 0) continue;  // nothing usable in this frame: the segment estimate stays
        const double decay = st.scatter.empty() ? 0.0 : params_.decay;
        if (st.scatter.empty()) st.scatter.assign((size_t)p * p, 0.0);
        for (size_t k = 0; k < st.scatter.size(); ++k) st.scatter[k] = decay * st.scatter[k] + best[(size_t)c * p * p + k];
        st.count = decay * st.count + best_n[c];
        st.var = variance_from_scatter(st.scatter, p, st.count);
    }
    return 0;
}

// The planes' variances with the unknown ones (< 0: too small for the patch grid, e.g. the chroma
// planes of a small 4:2:0 frame, or no weak-texture patch) taken as the mean of the known ones;
// false when none is known.
static bool fill_unknown(const double *var, int n, double *out) {
    double sum = 0;
    int known = 0;
    for (int c = 0; c < n; ++c)
        if (var[c] >= 0) {
            sum += var[c];
            known++;
        }
    if (!known) return false;
    for (int c = 0; c < n; ++c) out[c] = var[c] >= 0 ? var[c] : sum / known;
    return true;
}

static float combine(const double *var, int n) {
    double v[3];
    if (n < 1 || !fill_unknown(var, n, v)) return -1;
    double sum = 0;
    for (int c = 0; c < n; ++c) sum += v[c];
    return (float)std::sqrt(sum / n);
}

float NoiseEstimator::sigma() const {
    double v[3];
    for (int c = 0; c < nb_planes_; ++c) v[c] = planes_[c].var;
    return combine(v, nb_planes_);
}

static float combine_weighted(const double *var, const double *gain, int n) {
    double v[3];
    if (n < 1 || !fill_unknown(var, n, v)) return -1;
    double sum = 0;
    for (int c = 0; c < n; ++c) sum += gain[c] * v[c];
    return (float)std::sqrt(std::max(sum, 0.0));
}

float NoiseEstimator::sigma_weighted(const double *gain) const {
    double v[3];
    for (int c = 0; c < nb_planes_; ++c) v[c] = planes_[c].var;
    return combine_weighted(v, gain, nb_planes_);
}

float NoiseEstimator::sigma_frame_weighted(const double *gain) const {
    double v[3];
    for (int c = 0; c < nb_planes_; ++c) v[c] = planes_[c].var_frame;
    return combine_weighted(v, gain, nb_planes_);
}

float NoiseEstimator::sigma_frame() const {
    double v[3];
    for (int c = 0; c < nb_planes_; ++c) v[c] = planes_[c].var_frame;
    return combine(v, nb_planes_);
}

float NoiseEstimator::sigma_plane(int plane) const {
    if (plane < 0 || plane >= nb_planes_ || planes_[plane].var < 0) return -1;
    return (float)std::sqrt(planes_[plane].var);
}

double NoiseEstimator::patches() const {
    double n = 0;
    for (int c = 0; c < nb_planes_; ++c) n += planes_[c].count;
    return n;
}

}  // namespace denoise
