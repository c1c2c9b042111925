"""Reproducible AWGN: the counter-based generator shared by tools/noise.c and weights/eval.py.

Every noise sample is a pure function of (seed, frame, component, y, x), so the same noisy clip
comes out of the C tool (through ffmpeg pipes) and of PyTorch on the GPU, on any machine and in
any order of evaluation.

  mix(z)   = splitmix64 finaliser of z + 0x9E3779B97F4A7C15 (Steele, Lea, Flood,
             "Fast splittable pseudorandom number generators", OOPSLA 2014; constants from
             Vigna's splitmix64.c), all arithmetic mod 2^64
  base     = mix(seed)
  i        = ((frame * 3 + c) * H + y) * W + x      c: 0 = R, 1 = G, 2 = B (not storage order)
  a, b     = mix(base + 2i), mix(base + 2i + 1)
  u1       = ((a >> 11) + 1) * 2^-53  in (0, 1]
  u2       = (b >> 11) * 2^-53        in [0, 1)
  n        = sqrt(-2 ln u1) * cos(2 pi u2)           (Box-Muller)
  noisy    = v + sigma / 255 * n                     v in [0,1]; sigma in 8-bit code values

The 8-bit protocol then clips to [0,1] and rounds to code values; the benchmark protocol keeps
the float value unclipped.
"""
from __future__ import annotations

import numpy as np
import torch

_GOLDEN = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB


def _s64(v: int) -> int:
    """Reinterpret an unsigned 64-bit constant as int64 (torch has no full uint64 arithmetic)."""
    return v - (1 << 64) if v >= 1 << 63 else v


def _srl(x: torch.Tensor, k: int) -> torch.Tensor:
    """Logical right shift of int64 viewed as uint64."""
    return (x >> k) & ((1 << (64 - k)) - 1)


def _mix_t(z: torch.Tensor) -> torch.Tensor:
    z = z + _s64(_GOLDEN)
    z = (z ^ _srl(z, 30)) * _s64(_M1)
    z = (z ^ _srl(z, 27)) * _s64(_M2)
    return z ^ _srl(z, 31)


def mix_py(z: int) -> int:
    """Reference mix() on Python ints (for tests)."""
    m = (1 << 64) - 1
    z = (z + _GOLDEN) & m
    z = ((z ^ (z >> 30)) * _M1) & m
    z = ((z ^ (z >> 27)) * _M2) & m
    return z ^ (z >> 31)


def gaussian(seed: int, first_frame: int, frames: int, H: int, W: int, device="cpu") -> torch.Tensor:
    """Unit normal noise (frames, 3, H, W) float32 for frames first_frame.. of a clip."""
    base = _s64(mix_py(seed & ((1 << 64) - 1)))
    out = torch.empty(frames, 3, H, W, dtype=torch.float32, device=device)
    n = 3 * H * W
    for f in range(frames):
        i = torch.arange(n, dtype=torch.int64, device=device) + (first_frame + f) * n
        a = _mix_t(base + 2 * i)
        b = _mix_t(base + 2 * i + 1)
        u1 = (_srl(a, 11) + 1).double() * 2.0 ** -53
        u2 = _srl(b, 11).double() * 2.0 ** -53
        g = torch.sqrt(-2.0 * torch.log(u1)) * torch.cos(2.0 * np.pi * u2)
        out[f] = g.view(3, H, W).float()
    return out


def add_noise(clean: torch.Tensor, sigma: float, seed: int, clip8: bool = False) -> torch.Tensor:
    """clean (N, 3, H, W) in [0,1] -> noisy copy; clip8 clips and rounds to 8-bit codes."""
    N, _, H, W = clean.shape
    noisy = clean + (sigma / 255.0) * gaussian(seed, 0, N, H, W, clean.device)
    if clip8:
        noisy = torch.round(noisy.clamp(0, 1) * 255.0) / 255.0
    return noisy
