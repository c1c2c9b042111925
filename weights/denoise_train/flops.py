"""Model FLOPs of a training step and the bf16 GEMM ceiling of the card: MFU, model FLOP
utilisation (Chowdhery et al., "PaLM", 2022, appendix B: the FLOPs the model needs, without
recomputation; here counted by PyTorch's FlopCounterMode rather than by formula).

  MFU = clips/s x train_flop_per_clip(cfg) / (bf16_gemm_tflops(dev) x 1e12)

train_flop_per_clip counts what FlopCounterMode counts, forward and backward: matrix products
(the linears, attention's QK^T and PV, SDPA) and convolutions (fusion conv, the head's conv3d);
LayerNorm, GELU, softmax, the optimiser and the alignment's block matching (no products) are
not model FLOPs. A 7-frame clip trains the U-Net three times (F_{t-1}, F_t, F_t+1), so one clip
is about 3x (forward + 2x forward) the GFLOP of model.gflop_per_frame at the clip's size.
"""
from __future__ import annotations

import statistics

import torch
from torch.utils.flop_counter import FlopCounterMode

from .model import Config, Denoiser


def train_flop_per_clip(cfg: Config, patch: int = 128) -> float:
    """FLOPs (multiply-adds x 2) of one forward and backward pass of Denoiser(cfg) on one clip of
    2R+1 frames of patch x patch pixels, R = cfg.temporal_radius. Counted on the CPU in fp32 with
    fresh random weights and inputs (the count does not depend on the values)."""
    torch.manual_seed(0)
    model = Denoiser(cfg)
    T = 2 * cfg.temporal_radius + 1
    clip = torch.rand(1, T, 3, patch, patch) * 2 - 1
    sigma = torch.full((1,), 25.0)                   # code values, as in training
    with FlopCounterMode(display=False) as counter:
        model(clip, sigma).abs().mean().backward()
    return float(counter.get_total_flops())


def bf16_gemm_tflops(dev: torch.device, n: int = 8192, reps: int = 20) -> float:
    """The card's dense bf16 matrix-product rate, TFLOP/s: n x n x n products of random bf16
    operands (never zeros: they run faster), fp32 accumulation, timed one by one with CUDA events
    after 3 warm-ups; the median of reps."""
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    ms = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        a @ b
        e.record()
        e.synchronize()
        ms.append(s.elapsed_time(e))
    return 2 * n ** 3 / (statistics.median(ms) / 1e3) / 1e12
