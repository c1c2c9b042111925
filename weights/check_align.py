#!/usr/bin/env python3
"""Checks of the fusion windows' motion alignment (weights/align.py, Config.align) on the CPU.

  python3 weights/check_align.py

  shifts    a smoothed random image moved by a known whole-pixel shift per 64x64 tile (|s| <= 20):
            tile_shifts finds every shift of the tiles whose matched block stays inside the frame
            (the border tiles see clamped reads), clean and with AWGN of sigma 10.
  flat      a flat frame keeps shift 0 on every tile (candidates scanned outward from (0, 0)).
  window    align_window keeps the centre frame, moves a shifted neighbour back onto it exactly
            inside the frame, and returns its input with radius 0.
  features  align_features moves F_{t-1} and F_{t+1} by the halved shifts (floor) and leaves F_t.
  model     Config(align=24) writes a version-2 config with the field; Denoiser.forward and
            denoise_sequence (the engines' order) give the same output frame with it on; align 0
            is model v1's output bit for bit.
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
from model import Config, Denoiser, denoise_sequence  # noqa: E402


def textured(n: int, h: int, w: int, g: torch.Generator) -> torch.Tensor:
    return F.avg_pool2d(torch.rand(n, 3, h, w, generator=g) * 2 - 1, 3, 1, 1)


def main() -> int:
    g = torch.Generator().manual_seed(0)
    img = textured(2, 256, 256, g)
    true = torch.randint(-20, 21, (2, 4, 4, 2), generator=g)
    moved = shift_tiles(img, -true, 64)            # moved(p) = img(p - s): moved(p + s) = img(p)
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

    feats = [torch.rand(1, 64, 64, 8, generator=g) for _ in range(3)]
    fa = align_features(feats, win, 24, 64)
    half = torch.div(tile_shifts(win[:, 1], win[:, 0], 24, 64), 2, rounding_mode="floor")
    want = shift_tiles(feats[0].permute(0, 3, 1, 2), half, 32).permute(0, 2, 3, 1)
    assert torch.equal(fa[1], feats[1]) and torch.equal(fa[0], want), "features: wrong move of F_{t-1} or F_t"
    assert half[0, 0, 0].tolist() == [1, -3], f"features: halved shift {half[0, 0, 0].tolist()} != [1, -3]"
    print("features  F_{t-1} moved by the halved shift (floor: (3, -5) -> (1, -3)), F_t kept  ok")

    cfg = Config(channels=(32, 64, 128), depths={"enc0": 1, "enc1": 1, "mid": 1, "dec1": 1, "dec0": 1}, align=24)
    assert cfg.version == 2 and '"align": 24' in cfg.to_json(), "model: the config does not record align"
    torch.manual_seed(1)
    m = Denoiser(cfg).eval()
    big = textured(1, 160, 176, g)[0]      # a scene panning by (2, -1) px per frame, with noise
    seq = torch.stack([big[:, 20 + 2 * k:140 + 2 * k, 20 - k:156 - k] for k in range(-3, 4)])
    seq = seq + 0.05 * torch.randn(seq.shape, generator=g)
    with torch.no_grad():
        a = denoise_sequence(m, seq, 20)[3]
        b = m(seq[None], torch.tensor([20.0]))[0]
        m.cfg = dataclasses.replace(cfg, align=0)
        c = m(seq[None], torch.tensor([20.0]))[0]
        v1 = Denoiser(dataclasses.replace(cfg, align=0)).eval()
        v1.load_state_dict(m.state_dict())
        d = v1(seq[None], torch.tensor([20.0]))[0]
    err = (a - b).abs().max().item()
    assert err <= 1e-5, f"model: denoise_sequence and forward differ by {err}"
    assert torch.equal(c, d) and (b - c).abs().max().item() > 1e-3, "model: align 0 must be v1, align 24 not"
    print(f"model     version 2 config; denoise_sequence vs forward max abs {err:.1e}; align 0 is v1 bit for bit  ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
