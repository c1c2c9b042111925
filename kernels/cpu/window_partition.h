// Swin's cyclic roll by -shift and window partition (model.py SwinBlock.forward: torch.roll, then
// window_partition) as index math, for the ops that move tokens between an NHWC map and window
// order (window_gather, window_scatter_add, window_gather_layernorm): token (i, j) of window
// (wy, wx) of the rolled map is token ((wy ws + i + shift) % H, (wx ws + j + shift) % W) of the
// map. No data is touched here; the callers move C floats per token, once each way.
#ifndef DENOISE_CPU_WINDOW_PARTITION_H
#define DENOISE_CPU_WINDOW_PARTITION_H

#include <cstddef>
#include <cstdint>

#include "../common/parallel.h"

namespace denoise {
namespace cpu {

// Calls fn(map_token, win_token) for every token of windows [win0, win1) of an H x W map cut into
// ws x ws windows (row-major, W / ws per row) after the roll: map_token = y W + x, the token's
// index in the map; win_token = (wi - win0) ws^2 + i ws + j, its index in a buffer holding those
// windows from its start. Windows are spread over the pool (parallel.h); fn runs concurrently for
// different windows, and every map token is visited once when [win0, win1) covers all windows.
template <typename Fn>
inline void for_each_window_token(int H, int W, int ws, int shift, int win0, int win1, const Fn &fn) {
    const int nwx = W / ws, nw = win1 - win0;
    parallel_for(nw, grain_for(nw), [&](int64_t l0, int64_t l1) {
        for (int li = (int)l0; li < (int)l1; ++li) {
            const int wi = win0 + li, wy = wi / nwx, wx = wi % nwx;
            for (int i = 0; i < ws; ++i) {
                const int y = (wy * ws + i + shift) % H;
                for (int j = 0; j < ws; ++j) {
                    const int x = (wx * ws + j + shift) % W;
                    fn((size_t)y * W + x, (size_t)li * ws * ws + i * ws + j);
                }
            }
        }
    });
}

}  // namespace cpu
}  // namespace denoise

#endif
