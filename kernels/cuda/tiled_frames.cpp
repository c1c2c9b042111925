// The CUDA backend's tiled plans (class in backend_cuda_impl.h; memory_plan.cpp sizes them): only native frames are
// kept; compute_features records what F_s is made of, and an output is computed tile by tile,
// each on its domain (the tile and its halo): the frames' network input, the three U-Net
// passes, the head and frame_out of the tile's interior. Launched on the stream.
#include "backend_cuda_impl.h"
#include "tile_shift.h"

#include <algorithm>

namespace denoise {
namespace cuda {

int CudaBackend::output_tiled(int64_t t, const int64_t feats[3], Amount amount, Out *o) {
    const Plan &p = plan();
    // the distinct frames the three feature maps and the residual read
    std::vector<int64_t> fids;
    auto add = [&](int64_t f) {
        if (std::find(fids.begin(), fids.end(), f) == fids.end()) fids.push_back(f);
    };
    for (int k = 0; k < 3; ++k)
        for (int64_t f : recipes_.at(feats[k]).frames) add(f);
    add(t);
    if (fids.size() > tile_x_.size())
        return fail(DENOISE_EINVAL, "queue_output: output " + std::to_string(t) + " reads " +
                                        std::to_string(fids.size()) + " frames, tiles hold " +
                                        std::to_string(tile_x_.size()));
    for (int64_t f : fids)
        if (!frames_.count(f)) return fail(DENOISE_EINVAL, "queue_output: frame " + std::to_string(f) + " is not kept");
    auto xof = [&](int64_t f) { return tile_x_[std::find(fids.begin(), fids.end(), f) - fids.begin()]; };
    if (cfg_.align)
        for (int k = 0; k < 3; ++k) TRY(recipe_maps(recipes_.at(feats[k])));
    Slot *st = frames_.at(t);
    const int T = p.tile, rr = cfg_.fusion_radius;
    for (int ty = 0; ty < spec_.height; ty += T)
        for (int tx = 0; tx < spec_.width; tx += T) {
            const int oy = std::max(0, ty - halo_), ox = std::max(0, tx - halo_);
            const int hd = std::min(spec_.hp, ty + T + halo_) - oy, wd = std::min(spec_.wp, tx + T + halo_) - ox;
            // the domain's first tile in the whole frame's shift maps
            const size_t moff = cfg_.align ? ((size_t)(oy / cfg_.align_tile) * map_tw_ + ox / cfg_.align_tile) * 2 : 0;
            for (int64_t f : fids) {
                Slot *s = frames_.at(f);
                TRY(cuda::frame_in(ctx_, cuda::compact_frame(L_, s->nat), spec_.format, s->color, spec_.width,
                                   spec_.height, oy, ox, hd, wd, xof(f)));
            }
            for (int k = 0; k < 3; ++k) {
                const Recipe &r = recipes_.at(feats[k]);
                std::vector<const bf16 *> win;
                for (int64_t f : r.frames) win.push_back(xof(f));
                // the fusion conv reads the window's frames moved through the maps' part over the
                // domain (recipe map order: the taps but the centre)
                std::vector<cuda::TileShift> sh(win.size());
                if (cfg_.align)
                    for (int j = 0, kk = 0; kk < (int)win.size(); ++kk)
                        if (kk != rr)
                            sh[kk] = cuda::TileShift{r.maps + (size_t)j++ * map_ints_ + moff, map_tw_, cfg_.align_tile / 2};
                TRY(net_.features(ctx_, win.data(), (int)win.size(), r.sigma, hd / 2, wd / 2, tile_F_[k],
                                  cfg_.align ? sh.data() : nullptr));
            }
            const bf16 *F[3] = {tile_F_[0], tile_F_[1], tile_F_[2]};
            cuda::TileShift fsh[3];
            if (cfg_.align) {
                // window t's maps of taps r-1, r+1 (recipe map order: the taps but the centre)
                const int32_t *m = recipes_.at(feats[1]).maps + moff;
                const int32_t *maps[2] = {m + (size_t)(rr - 1) * map_ints_, m + (size_t)rr * map_ints_};
                TRY(align_features(F, maps, hd / 2, wd / 2, F, fsh));
            }
            TRY(net_.head(ctx_, F, xof(t), hd / 2, wd / 2, change_, true, fsh));
            TRY(cuda::frame_out(ctx_, change_, oy, ox, hd, wd, cuda::compact_frame(L_, st->nat),
                                cuda::compact_frame(L_, o->dev), spec_.format, st->color, spec_.width, spec_.height,
                                ty, ty + T, tx, tx + T, amount, noise_));
        }
    for (int64_t f : fids) TRY(read_done(frames_.at(f)));
    return 0;
}

}  // namespace cuda
}  // namespace denoise
