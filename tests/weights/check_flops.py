#!/usr/bin/env python3
"""Checks of denoise_train/flops.py (the MFU's numerator) on the CPU (tests/run_tests.sh runs it).

  python3 tests/weights/check_flops.py

For model v1's network, the shipped v2 network (weights/denoise-v2.safetensors' config) and the
deep-34643 study candidate, on a 7-frame 128x128 clip:
  - forward: FlopCounterMode's count of one forward pass equals model.gflop_per_frame's formula
    for what a clip computes, three U-Net passes (F_{t-1}, F_t, F_{t+1}) and one head,
    3 (g - head) + head, exactly (both count multiply-adds x 2 of the products and convolutions);
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


def forward_flops(cfg: Config, patch: int) -> int:
    m = Denoiser(cfg)
    clip = torch.rand(1, 2 * cfg.temporal_radius + 1, 3, patch, patch) * 2 - 1
    with FlopCounterMode(display=False) as c, torch.no_grad():
        m(clip, torch.full((1,), 25.0))
    return c.get_total_flops()


def main() -> None:
    patch = 128
    cfgs = {"v1": Config(), "shipped": load_weights(os.path.join(WEIGHTS, "denoise-v2.safetensors")).cfg,
            "deep-34643": candidates.get("deep-34643")[0]}
    for name, cfg in cfgs.items():
        n0 = (patch // 2) ** 2
        head = 2 * n0 * cfg.channels[0] * 27 * 12 / 1e9
        g = gflop_per_frame(cfg, patch, patch)
        want = 3 * (g - head) + head
        fwd = forward_flops(cfg, patch) / 1e9
        assert abs(fwd - want) <= 1e-9 * want, f"{name}: forward {fwd:.6f} GFLOP, formula {want:.6f}"
        train = train_flop_per_clip(cfg, patch) / 1e9
        assert 2.5 * fwd <= train <= 3 * fwd, f"{name}: train {train:.3f} GFLOP not in [2.5, 3] x forward {fwd:.3f}"
        print(f"{name}: forward {fwd:.3f} GFLOP = formula, train {train:.3f} GFLOP per clip "
              f"({train / fwd:.2f}x forward) ok")


if __name__ == "__main__":
    main()
