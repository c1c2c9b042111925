#!/usr/bin/env python3
"""Checks of the fusion windows' motion alignment (denoise_train/align.py, Config.align) on the CPU.

  python3 tests/weights/check_align.py

  shifts    a smoothed random image moved by a known whole-pixel shift per 64x64 tile (|s| <= 20):
            tile_shifts finds every shift of the tiles whose matched block stays inside the frame
            (the border tiles see clamped reads), clean and with AWGN of sigma 10.
  flat      a flat frame keeps shift 0 on every tile (candidates scanned outward from (0, 0)).
  reference tile_shifts, its per-candidate costs (align._costs) and shift_tiles equal, bit for
            bit, the definitions written out below (one per-sample gather per candidate, the
            candidates' order and the strictly-better rule written out), on textured, noisy,
            flat, quantised and diagonal-stripe frames (ties) at radii 1..33 and tiles 16..64;
            the NHWC warp equals the NCHW one, its gradient too.
  bytes     tensor bytes read and written per op (views excluded) by tile_shifts and shift_tiles
            for one neighbour of a 128-clip training step (384 pairs of 128x128, R 24, tile 64):
            at most 3.5 GiB and 0.3 GiB (2.5 and 0.24 now; 10.1 + 9.9 and 0.9 GiB when each level gathered its
            candidates with int64 indices).
  window    align_window keeps the centre frame, moves a shifted neighbour back onto it exactly
            inside the frame, and returns its input with radius 0.
  features  features of x_{t-1}, x_t, x_{t+1} (2x2 means, NHWC) of a scene moved by (4, -6) px
            per frame: align_features moves F_{t-1} and F_{t+1} onto F_t inside the frame (the
            halved shift, direction included), leaves F_t, and returns its input with radius 0.
  compile   tile_shifts under torch.compile (backend aot_eager: the functionalisation and fake
            tensors Inductor sees, without a C++ compiler) equals eager: its cost volume's
            out= buffer once failed there with BackendCompilerFailed (Cannot view a tensor ...),
            which broke tools/bench_torch.py's compiled rows for aligned models.
  model     Config(align=24) writes a version-2 config with the field, align 0 writes none (and
            with align_window and align_features returning their inputs at radius 0, the network
            is model v1's); Denoiser.forward and denoise_sequence (the engines' order) give the
            same output frames with it on, at both sequence ends (mirrored frames) and inside.
Prints one line per check ending in "ok"; an AssertionError names the check that failed.
"""
from __future__ import annotations

import dataclasses
import math
import sys

from needs import need

need("torch", "numpy")
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_flatten  # noqa: E402

from denoise_train import align  # noqa: E402
from denoise_train.align import align_features, align_window, shift_tiles, shift_tiles_nhwc, tile_shifts  # noqa: E402
from denoise_train.model import Config, Denoiser, denoise_sequence, reflect_index  # noqa: E402


def textured(n: int, h: int, w: int, g: torch.Generator) -> torch.Tensor:
    return F.avg_pool2d(torch.rand(n, 3, h, w, generator=g) * 2 - 1, 3, 1, 1)


def reference_shift_tiles(frame: torch.Tensor, shifts: torch.Tensor, tile: int) -> torch.Tensor:
    """The warp's definition: out[n, :, y, x] = frame[n, :, clamp(y + dy), clamp(x + dx)], (dy, dx)
    the shift of the tile holding (y, x)."""
    N, C, H, W = frame.shape
    s = shifts.repeat_interleave(tile, 1).repeat_interleave(tile, 2)             # (N, H, W, 2)
    y = (torch.arange(H).view(1, H, 1) + s[..., 0]).clamp(0, H - 1)
    x = (torch.arange(W).view(1, 1, W) + s[..., 1]).clamp(0, W - 1)
    return frame.permute(0, 2, 3, 1)[torch.arange(N).view(N, 1, 1), y, x].permute(0, 3, 1, 2)


def reference_tile_shifts(centre: torch.Tensor, other: torch.Tensor, radius: int, tile: int) -> torch.Tensor:
    """tile_shifts' definition (module docstring of align.py), one candidate at a time: candidates
    nearest to (0, 0) first (|dy| + |dx|, then dy, then dx), a later one only when strictly better.
    Also asserts that align._costs gives the same cost per candidate and tile, bit for bit."""
    def search(lc, lo, base, r, t):
        cands = sorted(((a, b) for a in range(-r, r + 1) for b in range(-r, r + 1)),
                       key=lambda c: (abs(c[0]) + abs(c[1]), c[0], c[1]))
        # the mean of the tile's row means (align._costs' order)
        costs = torch.cat([F.avg_pool2d(F.avg_pool2d((lc - reference_shift_tiles(lo, base + torch.tensor(c), t)).abs(),
                                                     (1, t)), (t, 1)) for c in cands], 1)
        assert torch.equal(align._costs(lc, lo, base, r, t)[0], costs), \
            f"reference: align._costs differs from the per-candidate costs (radius {r}, tile {t})"
        best = costs[:, 0]
        shift = torch.zeros_like(base)
        for c, cost in zip(cands, costs.unbind(1)):
            better = cost < best
            best = torch.where(better, cost, best)
            shift[better] = torch.tensor(c)
        return base + shift
    lc0, lo0 = centre.float().mean(1, keepdim=True), other.float().mean(1, keepdim=True)
    s = torch.zeros(centre.shape[0], centre.shape[2] // tile, centre.shape[3] // tile, 2, dtype=torch.long)
    s = search(F.avg_pool2d(lc0, 4), F.avg_pool2d(lo0, 4), s, math.ceil(radius / 4), tile // 4)
    s = search(F.avg_pool2d(lc0, 2), F.avg_pool2d(lo0, 2), 2 * s, 1, tile // 2)
    return search(lc0, lo0, 2 * s, 1, tile).clamp(-radius, radius)


class TensorBytes(TorchDispatchMode):
    """Sums, over the ops run under it (views excluded), the bytes of the tensors they read (at
    most each operand's storage: a broadcast counts once; an out= tensor not) and write (an
    in-place op's tensor is read and written)."""
    VIEWS = {"view", "_unsafe_view", "unfold", "permute", "expand", "slice", "select", "unsqueeze",
             "empty", "alias", "detach", "as_strided", "t", "transpose", "squeeze", "split", "unbind"}

    def __init__(self):
        super().__init__()
        self.read = self.written = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func._overloadpacket.__name__ not in self.VIEWS:
            tensors = lambda v: [a for a in tree_flatten(v)[0] if isinstance(a, torch.Tensor)]  # noqa: E731
            ins = {k: v for k, v in (kwargs or {}).items() if k != "out"}    # out= is written, not read
            self.read += sum(min(a.numel() * a.element_size(), a.untyped_storage().nbytes())
                             for a in tensors((args, ins)))
            self.written += sum(a.numel() * a.element_size() for a in tensors(out))
        return out


def main() -> int:
    g = torch.Generator().manual_seed(0)
    img = textured(2, 256, 256, g)
    true = torch.randint(-20, 21, (2, 4, 4, 2), generator=g)
    moved = shift_tiles(img, -true, 64)            # moved(p) = img(p - s_tile(p)): a block matches img at s
    inner = (slice(None), slice(1, 3), slice(1, 3))
    est = tile_shifts(img, moved, 24, 64)
    noisy = tile_shifts(img + 0.08 * torch.randn(img.shape, generator=g),
                        moved + 0.08 * torch.randn(img.shape, generator=g), 24, 64)
    assert torch.equal(est[inner], true[inner]) and torch.equal(noisy[inner], true[inner]), \
        f"shifts: {est[inner].tolist()} / {noisy[inner].tolist()} != {true[inner].tolist()}"
    print(f"shifts    {true[inner][..., 0].numel()} inner tiles, |s| <= 20: exact, clean and at sigma 10  ok")

    flat = torch.full((1, 3, 128, 128), 0.3)
    assert tile_shifts(flat, flat, 24, 64).abs().max().item() == 0, "flat: a flat frame moved"
    print("flat      flat frame: shift 0 on every tile  ok")

    n_tiles = 0
    for k in range(15):
        H, W = ((128, 128), (64, 192), (256, 64))[k % 3]
        tile, radius = (64, 32, 64, 16)[k % 4], (24, 8, 3, 33, 1, 12)[k % 6]
        c = textured(2, H, W, g)
        if k % 5 == 4:                                              # diagonal stripes: ties along the stripes
            v = torch.rand(2, 3, H + W, generator=g) * 2 - 1
            c = v[..., torch.arange(H).view(H, 1) + torch.arange(W).view(1, W)]
        o = torch.roll(c, (k % 7 - 3, 5 - k % 11), (2, 3))
        if k % 5 == 1:
            c, o = c + 0.1 * torch.randn(c.shape, generator=g), o + 0.1 * torch.randn(o.shape, generator=g)
        if k % 5 == 2:
            c, o = (c * 4).round() / 4, (o * 4).round() / 4       # few levels: equal costs
        if k % 5 == 3:
            c = o = torch.full_like(c, 0.2)                         # flat: every candidate ties
        est = tile_shifts(c, o, radius, tile)
        ref = reference_tile_shifts(c, o, radius, tile)
        assert torch.equal(est, ref), f"reference: tile_shifts differs from its definition (case {k})"
        n_tiles += est[..., 0].numel()
        wide = torch.randint(-70, 71, est.shape, generator=g)
        f = torch.randn(2, 5, H, W, generator=g)
        assert torch.equal(shift_tiles(f, wide, tile), reference_shift_tiles(f, wide, tile)), \
            f"reference: shift_tiles differs from its definition (case {k})"
        fn = f.permute(0, 2, 3, 1).contiguous().requires_grad_()
        fc = fn.detach().clone().requires_grad_()
        a, b = shift_tiles_nhwc(fn, wide, tile), shift_tiles(fc.permute(0, 3, 1, 2), wide, tile).permute(0, 2, 3, 1)
        w = torch.randn(a.shape, generator=g)
        (a * w).sum().backward()
        (b * w).sum().backward()
        assert torch.equal(a, b) and torch.allclose(fn.grad, fc.grad, rtol=1e-6, atol=1e-5), \
            f"reference: the NHWC warp or its gradient differs from the NCHW one (case {k})"
    print(f"reference tile_shifts and its costs on {n_tiles} tiles (textured, noisy, quantised, flat, diagonal; "
          f"radius 1..33, tile 16..64) and shift_tiles (NCHW, NHWC, gradient) equal their definitions  ok")

    c = textured(384, 128, 128, g)
    o = torch.roll(c, (3, -5), (2, 3))
    with TensorBytes() as est_bytes:
        s = tile_shifts(c, o, 24, 64)
    with TensorBytes() as warp_bytes:
        shift_tiles(o, s, 64)
    gib = 2.0 ** 30
    est_total, warp_total = (est_bytes.read + est_bytes.written) / gib, (warp_bytes.read + warp_bytes.written) / gib
    assert est_total <= 3.5 and warp_total <= 0.3, \
        f"bytes: tile_shifts {est_total:.2f} GiB (limit 3.5), shift_tiles {warp_total:.2f} GiB (limit 0.3)"
    print(f"bytes     384 pairs of 128x128, R 24: tile_shifts read {est_bytes.read / gib:.2f} GiB, wrote "
          f"{est_bytes.written / gib:.2f}; shift_tiles read {warp_bytes.read / gib:.2f}, wrote "
          f"{warp_bytes.written / gib:.2f}  ok")

    frames = textured(1, 128, 128, g)
    s = torch.tensor([3, -5]).view(1, 1, 1, 2).expand(1, 2, 2, 2)
    win = torch.stack([shift_tiles(frames, -s, 64), frames, shift_tiles(frames, s, 64)], dim=1)
    out = align_window(win, 24, 64)
    core = (slice(None), slice(None), slice(8, -8), slice(8, -8))
    assert torch.equal(out[:, 1], win[:, 1]), "window: the centre frame changed"
    assert torch.equal(out[:, 0][core], frames[core]) and torch.equal(out[:, 2][core], frames[core]), \
        "window: a neighbour was not moved back onto the centre"
    assert align_window(win, 0, 64) is win, "window: radius 0 must return its input"
    print("window    centre kept, neighbours moved back exactly inside the frame, radius 0 identity  ok")

    s = torch.tensor([4, -6]).view(1, 1, 1, 2).expand(1, 2, 2, 2)
    win = torch.stack([shift_tiles(frames, -s, 64), frames, shift_tiles(frames, s, 64)], dim=1)
    feats = [F.avg_pool2d(win[:, k], 2).permute(0, 2, 3, 1) for k in range(3)]
    fa = align_features(feats, win, 24, 64)
    core = (slice(None), slice(4, -4), slice(4, -4))
    assert torch.equal(fa[1], feats[1]), "features: F_t changed"
    assert torch.equal(fa[0][core], feats[1][core]) and torch.equal(fa[2][core], feats[1][core]), \
        "features: F_{t-1} or F_{t+1} not moved onto F_t"
    assert align_features(feats, win, 0, 64) is feats, "features: radius 0 must return its input"
    print("features  F_{t-1}, F_{t+1} moved onto F_t by the halved shift inside the frame, radius 0 identity  ok")

    c, o = textured(1, 192, 256, g), textured(1, 192, 256, g)
    compiled = torch.compile(lambda a, b: tile_shifts(a, b, 24, 64), backend="aot_eager", dynamic=False)
    assert torch.equal(compiled(c, o), tile_shifts(c, o, 24, 64)), "compile: compiled tile_shifts differs from eager"
    print("compile   tile_shifts under torch.compile (aot_eager) equals eager  ok")

    cfg = Config(channels=(32, 64, 128), depths={"enc0": 1, "enc1": 1, "mid": 1, "dec1": 1, "dec0": 1}, align=24)
    off = dataclasses.replace(cfg, align=0, align_tile=32)
    assert cfg.version == 2 and '"align": 24' in cfg.to_json(), "model: the config does not record align"
    assert off.version == 1 and "align" not in off.to_json(), "model: align 0 must write v1's config"
    torch.manual_seed(1)
    m = Denoiser(cfg).eval()
    big = textured(1, 160, 176, g)[0]      # a scene panning by (2, -1) px per frame, with noise
    seq = torch.stack([big[:, 20 + 2 * k:140 + 2 * k, 20 - k:156 - k] for k in range(-3, 4)])
    seq = seq + 0.05 * torch.randn(seq.shape, generator=g)
    N, R = len(seq), cfg.temporal_radius
    with torch.no_grad():
        whole = denoise_sequence(m, seq, 20)
        err = 0.0
        for t in (0, 3, N - 1):
            clip = seq[[reflect_index(t + k, N) for k in range(-R, R + 1)]][None]
            err = max(err, (whole[t] - m(clip, torch.tensor([20.0]))[0]).abs().max().item())
        m.cfg = dataclasses.replace(cfg, align=0)
        plain = m(seq[None], torch.tensor([20.0]))[0]
    assert err <= 1e-5, f"model: denoise_sequence and forward differ by {err}"
    assert (whole[3] - plain).abs().max().item() > 1e-3, "model: align 24 did not change the output"
    print(f"model     version 2 config (align 0: v1's); denoise_sequence vs forward at t = 0, 3, {N - 1}: "
          f"max abs {err:.1e}  ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
