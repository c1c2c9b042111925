#!/usr/bin/env python3
"""Checks of denoise_train/flops.py (the MFU's numerator) on the CPU (tests/run_tests.sh runs it).

  python3 tests/weights/check_flops.py

For model v1's network, the shipped v2 network (weights/denoise-v2.safetensors' config) and the
deep-34643, shift and wide64 (fine levels 64 wide: merge 4x64 -> 64, expand 128 -> 4x64) study
candidates, on a 7-frame 128x128 clip:
  - forward: FlopCounterMode's count of one forward pass equals model.gflop_per_frame's formula
    for what a clip computes, three U-Net passes (F_{t-1}, F_t, F_{t+1}) and one head,
    3 (g - head) + head, exactly (both count multiply-adds x 2 of the products and convolutions);
    fusion "shift": one U-Net pass per frame of the clip and one head, T (g - head) + head, for
    the training clip (T = 7) and a longer one (T = 11; the temporal shift moves data only);
  - train: train_flop_per_clip (forward + backward) lies between 2.5x and 3x the forward count
    (backward is 2x forward for every product whose input needs a gradient; the fusion conv
    reads the clip, which needs none, so it costs 2x, not 3x).
"""
from __future__ import annotations

import os

from needs import need

need("torch", "numpy", "safetensors")
import torch  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from denoise_train import candidates  # noqa: E402
from denoise_train.checkpoint import load_weights  # noqa: E402
from denoise_train.flops import train_flop_per_clip  # noqa: E402
from denoise_train.model import Config, Denoiser, gflop_per_frame  # noqa: E402
from needs import WEIGHTS  # noqa: E402


def forward_flops(cfg: Config, patch: int, T: int | None = None) -> int:
    m = Denoiser(cfg)
    clip = torch.rand(1, T or 2 * cfg.temporal_radius + 1, 3, patch, patch) * 2 - 1
    with FlopCounterMode(display=False) as c, torch.no_grad():
        m(clip, torch.full((1,), 25.0))
    return c.get_total_flops()


def main() -> None:
    patch = 128
    cfgs = {"v1": Config(), "shipped": load_weights(os.path.join(WEIGHTS, "denoise-v2.safetensors")).cfg,
            "deep-34643": candidates.get("deep-34643")[0], "shift": candidates.get("shift")[0],
            "wide64": candidates.get("wide64")[0]}
    for name, cfg in cfgs.items():
        n0 = (patch // 2) ** 2
        head = 2 * n0 * cfg.channels[0] * 27 * 12 / 1e9
        g = gflop_per_frame(cfg, patch, patch)
        passes = 2 * cfg.temporal_radius + 1 if cfg.fusion == "shift" else 3   # U-Net passes of one clip
        want = passes * (g - head) + head
        fwd = forward_flops(cfg, patch) / 1e9
        assert abs(fwd - want) <= 1e-9 * want, f"{name}: forward {fwd:.6f} GFLOP, formula {want:.6f}"
        if cfg.fusion == "shift":   # a longer clip: one more U-Net pass per frame, the same head
            long = forward_flops(cfg, patch, T=11) / 1e9
            want11 = 11 * (g - head) + head
            assert abs(long - want11) <= 1e-9 * want11, f"{name}: forward of 11 frames {long:.6f} GFLOP, formula {want11:.6f}"
            print(f"{name}: forward of an 11-frame clip {long:.3f} GFLOP = 11 (g - head) + head ok")
        train = train_flop_per_clip(cfg, patch) / 1e9
        assert 2.5 * fwd <= train <= 3 * fwd, f"{name}: train {train:.3f} GFLOP not in [2.5, 3] x forward {fwd:.3f}"
        print(f"{name}: forward {fwd:.3f} GFLOP = formula, train {train:.3f} GFLOP per clip "
              f"({train / fwd:.2f}x forward) ok")


if __name__ == "__main__":
    main()
