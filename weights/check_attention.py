#!/usr/bin/env python3
"""The SDPA attention path computes the same network as the v1 code (weights/model.py).

  python3 weights/check_attention.py [--device cpu|cuda]

For three configs (v1; v1 widths with head_dim 16, i.e. 2/4/8 heads; a per-frame-encoder design)
with randomised weights (LayerNorm affines, biases and the relative position bias tables
perturbed, as weights/make_goldens.py does, so that each one shows in the output), a random
7-frame clip of 64x128 (4 x 8 windows at the first level, so shifted blocks have all 9 mask
regions) and random sigmas:
  - forward: output of Denoiser.set_engine(sdpa=True) vs the v1 code, fp32 (TF32 off);
  - backward: the gradient of a random projection of the output for every parameter (the
    relative position bias tables included, which SDPA gets through its float mask).
Pass: relative L2 < 1e-5 and max abs < 1e-4 for the outputs; relative L2 < 1e-4 for every
parameter gradient. On CUDA also under bf16 autocast, the kernels training runs: relative L2 < 2e-2
for the output and < 1e-1 for every relative position bias gradient, and whether SDPA runs it on a
fused kernel (it says so when it would fall back to its math backend: correct, only slower).
Exit status 1 when anything fails, with the tensor that failed.
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import Config, Denoiser  # noqa: E402

CONFIGS = {
    "v1": Config(),
    "heads-2-4-8": Config(heads=(2, 4, 8), head_dim=16),
    "frame16": Config(fusion="frame", frame_channels=16),
}


def randomise(model: Denoiser, gen: torch.Generator) -> None:
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, torch.nn.LayerNorm):
                mod.weight.add_(torch.randn(mod.weight.shape, generator=gen) * 0.1)
                mod.bias.add_(torch.randn(mod.bias.shape, generator=gen) * 0.1)
            elif isinstance(getattr(mod, "bias", None), torch.Tensor):
                mod.bias.add_(torch.randn(mod.bias.shape, generator=gen) * 0.05)
            if hasattr(mod, "relative_position_bias_table"):
                t = mod.relative_position_bias_table
                t.copy_(torch.randn(t.shape, generator=gen) * 0.5)


def rel_l2(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30)).item()


def run(model, clip, sigma, proj, sdpa, autocast=False):
    """-> output, gradients; fails when the SDPA path did not call SDPA once per Swin block."""
    model.set_engine(sdpa=sdpa)
    model.zero_grad(set_to_none=True)
    calls = []
    sdpa_fn = torch.nn.functional.scaled_dot_product_attention

    def counted(*a, **k):
        calls.append(1)
        return sdpa_fn(*a, **k)
    torch.nn.functional.scaled_dot_product_attention = counted
    try:
        with torch.autocast(clip.device.type, dtype=torch.bfloat16, enabled=autocast):
            y = model(clip, sigma)
    finally:
        torch.nn.functional.scaled_dot_product_attention = sdpa_fn
    blocks = sum(model.cfg.depths.values())
    if len(calls) != (blocks if sdpa else 0):
        raise AssertionError(f"{len(calls)} SDPA calls, expected {blocks if sdpa else 0}")
    (y.float() * proj).sum().backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    return y.detach().float(), grads


def check(device: torch.device) -> tuple[list[str], list[str]]:
    """-> (failures, notes); prints one line per measurement."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    failures, notes = [], []
    for name, cfg in CONFIGS.items():
        gen = torch.Generator().manual_seed(11)
        torch.manual_seed(5)
        model = Denoiser(cfg)
        randomise(model, gen)
        model = model.to(device)
        T = 2 * cfg.temporal_radius + 1
        clip = (torch.rand(2, T, 3, 64, 128, generator=gen) * 2 - 1).to(device)
        sigma = torch.tensor([7.0, 43.0]).to(device)
        proj = torch.randn(2, 3, 64, 128, generator=gen).to(device)
        y0, g0 = run(model, clip, sigma, proj, sdpa=False)
        y1, g1 = run(model, clip, sigma, proj, sdpa=True)
        r, m = rel_l2(y1, y0), (y1 - y0).abs().max().item()
        ok = r < 1e-5 and m < 1e-4
        print(f"{name:12s} forward fp32: rel L2 {r:.2e}, max abs {m:.2e}  {'ok' if ok else 'FAIL'}")
        if not ok:
            failures.append(f"{name} forward")
        worst = max(((rel_l2(g1[n], g0[n]), n) for n in g0))
        ok = worst[0] < 1e-4
        print(f"{name:12s} gradients fp32: worst rel L2 {worst[0]:.2e} ({worst[1]})  {'ok' if ok else 'FAIL'}")
        if not ok:
            failures.append(f"{name} gradient {worst[1]}")
        bias_names = [n for n in g0 if n.endswith("relative_position_bias_table")]
        if not all(g0[n].abs().max() > 0 for n in bias_names):
            failures.append(f"{name}: a relative position bias gradient is zero (test cannot see it)")
        if device.type == "cuda":   # the kernels training runs: bf16, whatever SDPA backend it picks
            yb0, gb0 = run(model, clip, sigma, proj, sdpa=False, autocast=True)
            yb1, gb1 = run(model, clip, sigma, proj, sdpa=True, autocast=True)
            r = rel_l2(yb1, yb0)
            rb = max(rel_l2(gb1[n], gb0[n]) for n in bias_names)
            ok = r < 2e-2 and rb < 1e-1
            print(f"{name:12s} bf16 autocast: forward rel L2 {r:.2e}, worst bias-table gradient rel L2 {rb:.2e}  "
                  f"{'ok' if ok else 'FAIL'}")
            if not ok:
                failures.append(f"{name} bf16")
            notes.append(f"{name}: {fused_kernel_note(model, clip, sigma, proj)}")
            print(f"{name:12s} {notes[-1].split(': ', 1)[1]}")
        model.set_engine(sdpa=False)
    return failures, notes


def fused_kernel_note(model, clip, sigma, proj) -> str:
    """Whether SDPA runs this model's attention (bf16, float mask with gradient) on a fused
    kernel: the math backend is excluded, so SDPA raises (with its reasons) if it would fall
    back to it. A fallback is still correct, only slower."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    try:
        with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION]):
            run(model, clip, sigma, proj, sdpa=True, autocast=True)
        return "fused SDPA kernel: yes (forward and backward, no math fallback)"
    except RuntimeError as e:
        return f"fused SDPA kernel: NO, SDPA would use its math backend ({str(e)[:300]})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    failures, _ = check(torch.device(a.device))
    print("attention check:", "PASS" if not failures else "FAIL: " + "; ".join(failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
