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
memory-bound. Here every level's candidates are one gather of (N, K, H, W) samples with int64
indices, so a training step adds a few kernels per level, not one per candidate, but moves many
bytes: a step of 128 clips aligns 1,792 pairs of 128x128 crops (3 windows x 4 neighbours, and the
head's 2), at R = 24 169 x 1,024 and 9 x 16,384 samples per pair, 2.1 to 2.5 GB of indices at each
of those levels. On the H200 that step ran at 1,256 clips/s against 2,290 without the alignment
(docs/model.md).

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


def _index(H: int, W: int, sy: torch.Tensor, sx: torch.Tensor) -> torch.Tensor:
    """Per-sample shifts sy, sx (..., H, W) int64 -> the flat index y' W + x' of
    (y', x') = clamp((y, x) + (sy, sx)) into an H x W image, same shape."""
    y = (torch.arange(H, device=sy.device).view(H, 1) + sy).clamp(0, H - 1)
    x = (torch.arange(W, device=sx.device).view(1, W) + sx).clamp(0, W - 1)
    return y * W + x


def _gather(img: torch.Tensor, sy: torch.Tensor, sx: torch.Tensor) -> torch.Tensor:
    """img (N, C, H, W); sy, sx (N, H, W) int64 per-sample shifts -> img(clamp(y + sy, x + sx))."""
    N, C, H, W = img.shape
    idx = _index(H, W, sy, sx).view(N, 1, H * W).expand(N, C, H * W)
    return img.reshape(N, C, H * W).gather(2, idx).view(N, C, H, W)


def _per_sample(shifts: torch.Tensor, t: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, h, w, 2) per-tile shifts -> (sy, sx), each (N, h t, w t): the tile's shift at every
    sample of the tile."""
    s = shifts.repeat_interleave(t, dim=1).repeat_interleave(t, dim=2)
    return s[..., 0], s[..., 1]


def _search(lc: torch.Tensor, lo: torch.Tensor, base: torch.Tensor, r: int, t: int) -> torch.Tensor:
    """Luma lc, lo (N, 1, H, W) at one level, base (N, H/t, W/t, 2) shifts at that level ->
    base + the candidate in [-r, r]^2 with the least mean |lc - lo(p + s)| per t x t tile (the
    first in _candidates' order among equal ones: argmin returns the first minimum). All K
    candidates in one gather: (N, K, H, W) samples."""
    N, _, H, W = lc.shape
    dy, dx = _candidates(r, lc.device)
    K = dy.numel()
    by, bx = _per_sample(base, t)
    idx = _index(H, W, by[:, None] + dy.view(1, K, 1, 1), bx[:, None] + dx.view(1, K, 1, 1))   # (N, K, H, W)
    moved = lo.reshape(N, H * W).gather(1, idx.view(N, K * H * W)).view(N, K, H, W)
    k = F.avg_pool2d((lc - moved).abs(), t).argmin(dim=1)                       # (N, H/t, W/t)
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
    """frame (N, C, H, W), shifts (N, H / tile, W / tile, 2) -> frame(clamp(p + s_tile(p)))."""
    sy, sx = _per_sample(shifts, tile)
    return _gather(frame, sy, sx)


def align_features(feats: list, frames: torch.Tensor, radius: int, tile: int) -> list:
    """feats [F_{t-1}, F_t, F_{t+1}], each (B, H/2, W/2, C) NHWC; frames (B, 3, 3, H, W) in
    [-1, 1]: x_{t-1}, x_t, x_{t+1} -> the list with F_{t-1} and F_{t+1} moved onto x_t (module
    docstring); radius 0 returns feats."""
    if radius <= 0:
        return feats
    out = list(feats)
    for k in (0, 2):
        s = torch.div(tile_shifts(frames[:, 1], frames[:, k], radius, tile), 2, rounding_mode="floor")
        out[k] = shift_tiles(feats[k].permute(0, 3, 1, 2), s, tile // 2).permute(0, 2, 3, 1)
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
