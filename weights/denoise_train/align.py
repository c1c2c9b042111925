"""Motion alignment of a fusion window (model option Config.align): every frame of the window is
moved onto its centre frame by one whole-pixel shift per tile, estimated on the noisy frames.

Why: the fusion conv reads the window's frames at half resolution through a 3x3 kernel, so it
matches content only within about 2 px of full-resolution motion, while the DAVIS footage moves
by a median of 14.5 px between a frame and the one 3 frames away (docs/model.md, "The curve and
what it says").

Estimation, tile_shifts(centre, other, radius, tile): luma L = the mean of R', G', B' (the
network's [-1, 1] input). For each tile x tile block of the centre frame, the shift s = (dy, dx)
with |dy|, |dx| <= radius that minimises the mean over the block of |L_c(p) - L_o(p + s)|, reads
outside the frame clamped to its edge (block matching by the sum of absolute differences).
Coarse to fine, as hierarchical block matching does (Bierling, "Displacement estimation by
hierarchical blockmatching", SPIE VCIP 1988): over +-ceil(radius / 4) on 4x4 box means, then +-1
on 2x2 box means around twice that, then +-1 at full resolution around twice that; the result is
clamped to [-radius, radius]. Candidates are scanned outward from (0, 0) and a later one must be
strictly better, so a flat tile keeps shift 0.
Warping, shift_tiles(frame, shifts, tile): out(p) = frame(clamp(p + s_tile(p))).
The head's features: F_{t-1} and F_{t+1} (half resolution) are moved onto x_t by the shifts of
x_{t-1} and x_{t+1} against x_t, halved (s >> 1, floor) on tiles of tile / 2 (align_features),
so that the head's 3x3x3 stencil reads the three feature maps in the coordinates of x_t.

Cost per frame pair at H x W: (2 ceil(R/4) + 1)^2 + 18 candidates, each one gather and one absolute
difference over the level's samples plus a box mean per tile: for R = 24 and 1080p, 169 candidates
over 130 k samples, 9 over 518 k and 9 over 2.07 M: about 45 M candidate samples, each a read, a
subtraction and an absolute value. An output frame needs 4 pairs (the head's 2 are window t's):
about 180 M samples, well under 1 % of the network's 313 GFLOP per 1080p frame in operations,
memory-bound. A training step of 128 clips aligns 1,792 pairs of 128x128 crops (3 windows x 4
neighbours, and the head's 2), at R = 24 169 x 1,024 and 9 x 16,384 samples per pair. Each level
reads one (t + 2r)^2 patch of the other frame per tile (advanced indexing with a row and a column
index per tile, no per-sample index), takes the K candidates as views of it (unfold) and puts
|L_c - candidate| into one (N, K, H, W) float32 buffer (a subtraction, then abs in place) for
two avg_pool2d (row means, then the mean of a tile's row means: _costs); the warp gathers with one
int64 index per sample, built in one pass. Counted per 384 pairs (one neighbour of a 128-clip
step's windows; tensor bytes read and written per op, `python3 tests/weights/check_align.py`'s
bytes line): tile_shifts 1.38 GiB read and 1.15 GiB written (1.36 / 1.13 with one avg_pool2d per tile),
shift_tiles 0.12 and 0.12, against 10.14 / 9.90 and 0.45 / 0.45 when every level gathered its
(N, K, H, W) candidates with int64 indices built in several passes (the code the H200 ran at
1,256 clips/s against 2,290 without the alignment; docs/model.md). Same shifts, bit for bit
(check_align.py compares with the definitions).

Shapes: frames (N, 3, H, W) float in [-1, 1], H and W multiples of tile, tile a multiple of 4;
shifts (N, H / tile, W / tile, 2) int64 (dy, dx) in full-resolution pixels.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def _candidates(r: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Every (dy, dx) with |dy|, |dx| <= r as two (K,) int64 tensors, nearest to (0, 0) first (then
    by dy, dx). Built on the device (no host-to-device copy: a CUDA graph may capture it)."""
    a = torch.arange(-r, r + 1, device=device)
    dy, dx = a.view(-1, 1).expand(-1, 2 * r + 1).flatten(), a.view(1, -1).expand(2 * r + 1, -1).flatten()
    n = 2 * r + 1
    order = torch.argsort((dy.abs() + dx.abs()) * n * n + (dy + r) * n + (dx + r))
    return dy[order], dx[order]


def _tile_rows_cols(shifts: torch.Tensor, H: int, W: int, t: int, r: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, h, w, 2) per-tile shifts (dy, dx) (h = H / t, w = W / t) -> rows, cols, each (N, h, w, t + 2r)
    int64: rows[n, ty, tx, a] = clamp(ty t + a - r + dy, 0, H - 1), cols likewise with tx, dx and W: the
    source rows and columns of the tile's samples, widened by r on each side."""
    N, h, w, _ = shifts.shape
    a = torch.arange(t + 2 * r, device=shifts.device) - r
    rows = (torch.arange(h, device=shifts.device).view(1, h, 1, 1) * t + a + shifts[..., :1]).clamp(0, H - 1)
    cols = (torch.arange(w, device=shifts.device).view(1, 1, w, 1) * t + a + shifts[..., 1:]).clamp(0, W - 1)
    return rows, cols


def _tile_source_index(shifts: torch.Tensor, H: int, W: int, t: int) -> torch.Tensor:
    """(N, h, w, 2) per-tile shifts -> (N, H W) int64: the flat index y' W + x' of every sample's
    source (_tile_rows_cols), built in one pass in the samples' order (N, h, t, w, t)."""
    N, h, w, _ = shifts.shape
    rows, cols = _tile_rows_cols(shifts, H, W, t)
    row_term = (rows * W).permute(0, 1, 3, 2).contiguous()                  # (N, h, t, w): small
    return (row_term[..., None] + cols[:, :, None]).view(N, H * W)


def _costs(lc: torch.Tensor, lo: torch.Tensor, base: torch.Tensor, r: int,
           t: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Luma lc, lo (N, 1, H, W) at one level, base (N, H/t, W/t, 2) shifts at that level -> (cost,
    dy, dx): cost (N, K, H/t, W/t), the mean over each t x t tile of |lc - lo(p + base + s)| for the
    K = (2r + 1)^2 candidates s = (dy[k], dx[k]) in _candidates' order (reads clamped to the frame),
    formed as the mean of the tile's row means (two avg_pool2d, (1, t) then (t, 1)): on PyTorch's
    CPU each row summed in order and divided by t, then the row means likewise, the order the
    engines' block matching uses (a tile's rows summed in parallel on the GPU, bit for bit).
    Each tile reads one (t + 2r)^2 patch of lo around its base shift (clamped rows and columns, two
    small index tensors broadcast by advanced indexing); the candidates are views of it (unfold), and
    |lc - candidate| goes into one (N, K, H, W) buffer in raster order of the candidates (a
    subtraction, then abs in place) for avg_pool2d: per element, two 4-byte writes and two reads
    of the buffer, besides reads of the patch, which is (1 + 2r/t)^2 samples per sample."""
    N, _, H, W = lc.shape
    h, w = H // t, W // t
    dy, dx = _candidates(r, lc.device)
    K1 = 2 * r + 1
    ys, xs = _tile_rows_cols(base, H, W, t, r)                                  # (N, h, w, t + 2r)
    n = torch.arange(N, device=lc.device).view(N, 1, 1, 1, 1)
    patch = lo[:, 0][n, ys[..., :, None], xs[..., None, :]]                       # (N, h, w, p, p)
    cand = patch.unfold(3, t, 1).unfold(4, t, 1).permute(0, 3, 4, 1, 5, 2, 6)   # (N, K1, K1, h, t, w, t)
    if torch.compiler.is_compiling():
        # Inductor fuses the subtraction into the pooling's reads. No out= here: compile's fake
        # tensors give an out= result cand's strides while calling it contiguous, so the view
        # below (or reshape, or contiguous) failed with BackendCompilerFailed
        diff = (lc.view(N, 1, 1, h, t, w, t) - cand).abs()
    else:
        # eager: a broadcast subtraction would take cand's strides and the view would copy
        diff = torch.empty((N, K1, K1, h, t, w, t), dtype=lc.dtype, device=lc.device)
        torch.sub(lc.view(N, 1, 1, h, t, w, t), cand, out=diff).abs_()
    cost = F.avg_pool2d(F.avg_pool2d(diff.reshape(N, K1 * K1, H, W), (1, t)), (t, 1))
    return cost.index_select(1, (dy + r) * K1 + (dx + r)), dy, dx


def _search(lc: torch.Tensor, lo: torch.Tensor, base: torch.Tensor, r: int, t: int) -> torch.Tensor:
    """base + the candidate with the least cost per tile (_costs), the first in _candidates' order
    among equal ones (argmin returns the first minimum): (N, H/t, W/t, 2)."""
    cost, dy, dx = _costs(lc, lo, base, r, t)
    k = cost.argmin(dim=1)
    return base + torch.stack([dy[k], dx[k]], dim=-1)


@torch.no_grad()
def tile_shifts(centre: torch.Tensor, other: torch.Tensor, radius: int, tile: int) -> torch.Tensor:
    """centre, other (N, 3, H, W) in [-1, 1] -> (N, H / tile, W / tile, 2) int64: per tile of the
    centre frame, the whole-pixel shift (dy, dx) at which `other` matches it best (module
    docstring), |dy|, |dx| <= radius."""
    N, _, H, W = centre.shape
    if tile % 4 or H % tile or W % tile:
        raise ValueError(f"tile {tile} must be a multiple of 4 that divides {H}x{W}")
    lc0, lo0 = centre.float().mean(1, keepdim=True), other.float().mean(1, keepdim=True)
    lc1, lo1 = F.avg_pool2d(lc0, 2), F.avg_pool2d(lo0, 2)
    lc2, lo2 = F.avg_pool2d(lc0, 4), F.avg_pool2d(lo0, 4)
    s = torch.zeros(N, H // tile, W // tile, 2, dtype=torch.long, device=centre.device)
    s = _search(lc2, lo2, s, math.ceil(radius / 4), tile // 4)
    s = _search(lc1, lo1, 2 * s, 1, tile // 2)
    s = _search(lc0, lo0, 2 * s, 1, tile)
    return s.clamp(-radius, radius)


def shift_tiles(frame: torch.Tensor, shifts: torch.Tensor, tile: int) -> torch.Tensor:
    """frame (N, C, H, W), shifts (N, H / tile, W / tile, 2) -> frame(clamp(p + s_tile(p))), (N, C, H, W)."""
    N, C, H, W = frame.shape
    idx = _tile_source_index(shifts, H, W, tile)
    return frame.reshape(N, C, H * W).gather(2, idx[:, None].expand(N, C, H * W)).view(N, C, H, W)


def shift_tiles_nhwc(feat: torch.Tensor, shifts: torch.Tensor, tile: int) -> torch.Tensor:
    """shift_tiles for feat (N, H, W, C), NHWC as the U-Net's features -> (N, H, W, C): each sample's
    C channels are read as one row."""
    N, H, W, C = feat.shape
    idx = _tile_source_index(shifts, H, W, tile)
    return feat.reshape(N, H * W, C).gather(1, idx[..., None].expand(N, H * W, C)).view(N, H, W, C)


def align_features(feats: list, frames: torch.Tensor, radius: int, tile: int) -> list:
    """feats [F_{t-1}, F_t, F_{t+1}], each (B, H/2, W/2, C) NHWC; frames (B, 3, 3, H, W) in
    [-1, 1]: x_{t-1}, x_t, x_{t+1} -> the list with F_{t-1} and F_{t+1} moved onto x_t (module
    docstring); radius 0 returns feats."""
    if radius <= 0:
        return feats
    out = list(feats)
    for k in (0, 2):
        s = torch.div(tile_shifts(frames[:, 1], frames[:, k], radius, tile), 2, rounding_mode="floor")
        out[k] = shift_tiles_nhwc(feats[k], s, tile // 2)
    return out


def align_window(frames: torch.Tensor, radius: int, tile: int) -> torch.Tensor:
    """frames (B, T, 3, H, W) in [-1, 1] -> the same with every frame but the centre (T // 2)
    moved onto the centre by tile_shifts / shift_tiles; radius 0 returns frames."""
    if radius <= 0:
        return frames
    B, T = frames.shape[:2]
    c = T // 2
    out = [frames[:, c] if k == c else
           shift_tiles(frames[:, k], tile_shifts(frames[:, c], frames[:, k], radius, tile), tile)
           for k in range(T)]
    return torch.stack(out, dim=1)
