#!/usr/bin/env python3
"""Checks of the fusion windows' motion alignment (weights/align.py, Config.align) on the CPU.

  python3 weights/check_align.py

  shifts    a smoothed random image moved by a known whole-pixel shift per 64x64 tile (|s| <= 20):
            tile_shifts finds every shift of the tiles whose matched block stays inside the frame
            (the border tiles see clamped reads), clean and with AWGN of sigma 10.
  flat      a flat frame keeps shift 0 on every tile (candidates scanned outward from (0, 0)).
  window    align_window keeps the centre frame, moves a shifted neighbour back onto it exactly
            inside the frame, and returns its input with radius 0.
  features  features of x_{t-1}, x_t, x_{t+1} (2x2 means, NHWC) of a scene moved by (4, -6) px
            per frame: align_features moves F_{t-1} and F_{t+1} onto F_t inside the frame (the
            halved shift, direction included), leaves F_t, and returns its input with radius 0.
  model     Config(align=24) writes a version-2 config with the field, align 0 writes none (and
            with align_window and align_features returning their inputs at radius 0, the network
            is model v1's); Denoiser.forward and denoise_sequence (the engines' order) give the
            same output frames with it on, at both sequence ends (mirrored frames) and inside.
Prints one line per check ending in "ok"; an AssertionError names the check that failed.
"""
from __future__ import annotations

import dataclasses
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from align import align_features, align_window, shift_tiles, tile_shifts  # noqa: E402
from model import Config, Denoiser, denoise_sequence, reflect_index  # noqa: E402


def textured(n: int, h: int, w: int, g: torch.Generator) -> torch.Tensor:
    return F.avg_pool2d(torch.rand(n, 3, h, w, generator=g) * 2 - 1, 3, 1, 1)


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
