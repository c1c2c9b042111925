// The CUDA backend's pass for model option align (class in backend_cuda_impl.h)
// (weights/denoise_train/align.py; the CPU backend's compute_features / queue_output):
//  - luma pyramids: with 2r + 1 of them (memory_plan.cpp, where the cap allows), a frame's luma
//    (frame_in with a luma plane only) and box means (luma_pyramid) go into one and stay there
//    while the frame is kept, so each frame is converted once for the 2r + 1 windows that hold it
//    (the least recently used pyramid that the window does not need goes first), and a window's
//    2r pairs are matched in one block_match launch; with 2, a pair at a time (the centre's
//    pyramid and one other), every frame of a window converted anew (2r + 1 conversions a window:
//    the same kernels for every window's CUDA graph).
//  - whole frames: a U-Net pass first has its window's pyramids (before its graph, when they all
//    fit: the graph's kernels are then the same from window to window), matches the frames but the
//    centre against it (block_match); the fusion conv reads them moved onto it through their maps
//    (TileShift: no moved copy is written); the maps of taps r-1 and r+1 stay with F_s in its
//    feature ring buffer (after F), the others in scratch maps; an output's head reads F_{t-1} and
//    F_{t+1} moved by window t's maps halved with floor on tiles of align_tile / 2 (the
//    tensor-core head through the maps; the two-pass head from two scratch maps that shift_tiles
//    writes).
//  - tiles: before an output's tiles, each of its windows gets its maps on the whole frame the same
//    way, kept with its recipe; each tile reads its domain's frames and feature maps through the
//    maps' part over the domain (reads clamped to the domain). The halo grows by the alignment's
//    reach, to 64 px + R rounded up to the tile unit (tile origins are multiples of 64 px and of
//    align_tile): docs/cuda.md "Model v2's alignment".
#include "backend_cuda_impl.h"
#include "tile_shift.h"

namespace denoise {
namespace cuda {

// The luma pyramid of frame f's padded frame (frame_in with a luma plane only, luma_pyramid).
int CudaBackend::luma_of(int64_t f, float *pyr) {
    Slot *s = frames_.at(f);
    TRY(cuda::frame_in(ctx_, cuda::compact_frame(L_, s->nat), spec_.format, s->color, spec_.width, spec_.height, 0,
                       0, spec_.hp, spec_.wp, nullptr, pyr));
    return cuda::luma_pyramid(ctx_, pyr, spec_.hp, spec_.wp);
}

// out[k]: the luma pyramid of kept frame frames[k], k < n (n at most plan().pyramids), the one
// kept for its slot or converted into the least recently used pyramid that none of frames[0..k)
// took.
int CudaBackend::luma_pyramids(const int64_t *frames, int n, const float **out) {
    const uint64_t now = ++pyr_clock_;
    for (int k = 0; k < n; ++k) {
        const Slot *s = frames_.at(frames[k]);
        LumaPyramid *q = nullptr, *lru = nullptr;
        for (LumaPyramid &p : pyrs_) {
            if (p.src == s && p.frame == frames[k]) q = &p;
            else if (p.used != now && (!lru || p.used < lru->used)) lru = &p;
        }
        if (!q) {
            if (!lru)
                return fail(DENOISE_EINVAL, "internal: more than " + std::to_string(pyrs_.size()) +
                                                " frames' luma pyramids at once");
            *lru = LumaPyramid{lru->p, nullptr, -1, 0};
            TRY(luma_of(frames[k], lru->p));
            lru->src = s;
            lru->frame = frames[k];
            q = lru;
        }
        q->used = now;
        out[k] = q->p;
    }
    return 0;
}

// The shift maps of a window's frames but the centre (frames[r]) against it, maps[j] for the j-th
// of them in order: with 2r + 1 pyramids all 2r pairs in one block_match launch, the pyramids
// kept; with 2 a launch per pair, every frame converted anew (the same kernels for every window,
// as a CUDA graph's update needs).
int CudaBackend::window_maps(const std::vector<int64_t> &frames, int32_t *const *maps) {
    const int rr = cfg_.fusion_radius, n = (int)frames.size();
    std::vector<int64_t> order(1, frames[rr]);  // the centre, then the others
    for (int k = 0; k < n; ++k)
        if (k != rr) order.push_back(frames[k]);
    if (n < 2) return 0;
    if ((int)pyrs_.size() >= n) {
        std::vector<const float *> p(n);
        TRY(luma_pyramids(order.data(), n, p.data()));
        return cuda::block_match(ctx_, p[0], p.data() + 1, maps, n - 1, spec_.hp, spec_.wp, cfg_.align,
                                 cfg_.align_tile);
    }
    if (pyrs_.size() < 2) return fail(DENOISE_EINVAL, "internal: fewer than 2 luma pyramids to match frames");
    for (LumaPyramid &q : pyrs_) q = LumaPyramid{q.p, nullptr, -1, 0};
    const float *centre = pyrs_[0].p, *other = pyrs_[1].p;
    TRY(luma_of(frames[rr], pyrs_[0].p));
    for (int j = 1; j < n; ++j) {
        TRY(luma_of(order[j], pyrs_[1].p));
        TRY(cuda::block_match(ctx_, centre, &other, maps + j - 1, 1, spec_.hp, spec_.wp, cfg_.align,
                              cfg_.align_tile));
    }
    return 0;
}

// Whole frames: every frame of the window but the centre matched against it; sh[k] (a TileShift
// per window frame, none for the centre) then moves frame k onto it where the fusion conv reads it
// (no moved copy); the maps of taps r-1 and r+1 into maps (2 maps). The caller marks the
// window's slots read (read_done).
int CudaBackend::align_window_whole(const std::vector<int64_t> &frames, cuda::TileShift *sh, int32_t *maps) {
    const int rr = cfg_.fusion_radius;
    std::vector<int32_t *> m;  // per tap but the centre
    for (int k = 0, j = 0; k < (int)frames.size(); ++k) {
        if (k == rr) continue;
        m.push_back(k == rr - 1 ? maps : k == rr + 1 ? maps + map_ints_ : tap_maps_ + (size_t)j++ * map_ints_);
    }
    TRY(window_maps(frames, m.data()));
    for (int k = 0, j = 0; k < (int)frames.size(); ++k)
        sh[k] = k == rr ? cuda::TileShift{} : cuda::TileShift{m[j++], map_tw_, cfg_.align_tile / 2};
    return 0;
}

// Tiles: the recipe's 2r maps (taps but the centre, in order) on the whole frame, once.
int CudaBackend::recipe_maps(Recipe &r) {
    if (r.maps) return 0;
    if (!free_maps_.empty()) {
        r.maps = free_maps_.back();
        free_maps_.pop_back();
    } else {
        TRY(cuda::dev_alloc(ctx_, (void **)&r.maps, (size_t)recipe_map_bytes(), "a window's shift maps"));
    }
    std::vector<int32_t *> m;
    for (int j = 0; j < 2 * cfg_.fusion_radius; ++j) m.push_back(r.maps + (size_t)j * map_ints_);
    TRY(window_maps(r.frames, m.data()));
    for (int64_t f : r.frames) TRY(read_done(frames_.at(f)));
    return 0;
}

void CudaBackend::drop_recipes(std::map<int64_t, Recipe>::iterator a, std::map<int64_t, Recipe>::iterator b) {
    for (auto it = a; it != b; ++it)
        if (it->second.maps) free_maps_.push_back(it->second.maps);
    recipes_.erase(a, b);
}

// F_{t-1}, F_{t+1} (F[0], F[2], (h, w, c0)) moved by maps[0], maps[1] (the window's
// full-resolution maps at the domain's first tile) halved with floor on tiles of align_tile / 2:
// with the tensor-core head, sh gets the two maps (the head reads F through them) and Fh = F;
// with the two-pass head, shift_tiles copies them into the scratch maps, Fh gets F with those two
// replaced and sh none.
int CudaBackend::align_features(const bf16 *const F[3], const int32_t *const maps[2], int h, int w, const bf16 *Fh[3],
                                cuda::TileShift *sh) {
    for (int dt = 0; dt < 3; ++dt) {
        Fh[dt] = F[dt];
        sh[dt] = cuda::TileShift{};
    }
    if (net_.head_fused()) {
        sh[0] = cuda::TileShift{maps[0], map_tw_, cfg_.align_tile / 2};
        sh[2] = cuda::TileShift{maps[1], map_tw_, cfg_.align_tile / 2};
        return 0;
    }
    if (!moved_F_) return fail(DENOISE_EINVAL, "internal: the two-pass head without the moved feature maps' scratch");
    const int c0 = cfg_.channels[0];
    for (int j = 0; j < 2; ++j) {
        bf16 *out = moved_F_ + (size_t)j * h * w * c0;
        TRY(cuda::shift_tiles(ctx_, F[2 * j], h, w, c0, maps[j], map_tw_, cfg_.align_tile / 2, true, out));
        Fh[2 * j] = out;
    }
    return 0;
}

}  // namespace cuda
}  // namespace denoise
