#!/usr/bin/env python3
"""Checks of denoise_train/sigma_reparam.py on the CPU (tests/run_tests.sh runs it).

  python3 tests/weights/check_sigma_reparam.py

Each check prints "NAME: figures ok" or raises. On a small random model (widths 16/32/64, head
dim 16, two blocks per stage) with LayerNorm-1 affines and qkv weights perturbed away from their
initial values, so that the folding has something to fold:
  - switch: enable() leaves the network's output unchanged (rel L2 < 1e-5, fp32);
  - sigma: after power-iteration steps, gamma V / (u^T V v) has spectral norm gamma (1e-3);
  - train: AdamW steps on the reparametrised model change gamma and V, never norm1 (frozen);
  - fold: fold() gives a plain model with the reparametrised model's output (rel L2 < 1e-5)
    and the state-dict keys of a plain model, the norm1 affine at 1 / 0;
  - checkpoint: a reparametrised state dict loads into a model after enable(fold_norm=False),
    and denoise_train/checkpoint.py's model_from_checkpoint folds it to the same output.
"""
from __future__ import annotations

import sys

from needs import need

need("torch", "numpy", "safetensors")
import torch  # noqa: E402

from denoise_train import sigma_reparam  # noqa: E402
from denoise_train.checkpoint import model_from_checkpoint  # noqa: E402
from denoise_train.model import Config, Denoiser  # noqa: E402


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def small_model(seed: int = 0) -> Denoiser:
    torch.manual_seed(seed)
    cfg = Config(channels=(16, 32, 64), heads=(1, 2, 4), head_dim=16,
                 depths={"enc0": 2, "enc1": 2, "mid": 2, "dec1": 2, "dec0": 2})
    m = Denoiser(cfg)
    with torch.no_grad():
        for b in sigma_reparam.swin_blocks(m):
            b.norm1.weight.normal_(1.0, 0.5)
            b.norm1.bias.normal_(0.0, 0.3)
            b.attn.qkv.weight.mul_(3.0)
    return m


def inputs(m: Denoiser, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    T = 2 * m.cfg.temporal_radius + 1
    x = torch.rand(2, T, 3, 64, 64, generator=g) * 2 - 1
    return x, torch.tensor([10.0, 30.0])


def main() -> int:
    m = small_model().eval()
    x, s = inputs(m)
    with torch.no_grad():
        y0 = m(x, s)
    sigma_reparam.enable(m)
    assert sigma_reparam.is_enabled(m)
    with torch.no_grad():
        y1 = m(x, s)
    r = rel(y1, y0)
    assert r < 1e-5, f"switch: rel L2 {r}"
    print(f"switch: output rel L2 {r:.1e} ok")

    m.train()
    for _ in range(30):   # power-iteration steps only (no optimizer)
        for b in sigma_reparam.swin_blocks(m):
            _ = b.attn.qkv.weight
    worst = 0.0
    for b in sigma_reparam.swin_blocks(m):
        p = b.attn.qkv.parametrizations.weight
        w = b.attn.qkv.weight
        worst = max(worst, abs(torch.linalg.matrix_norm(w.detach(), ord=2).item() / p[0].gamma.item() - 1))
    assert worst < 1e-3, f"sigma: |sigma_max(W) / gamma - 1| = {worst}"
    print(f"sigma: sigma_max(W) / gamma within {worst:.1e} ok")

    ln0 = [b.norm1.weight.clone() for b in sigma_reparam.swin_blocks(m)]
    g0 = sigma_reparam.gammas(m)
    V0 = [b.attn.qkv.parametrizations.weight.original.clone() for b in sigma_reparam.swin_blocks(m)]
    opt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-3)
    for _ in range(3):
        opt.zero_grad()
        loss = (m(x, s) - x[:, x.shape[1] // 2]).abs().mean()
        loss.backward()
        opt.step()
    g1 = sigma_reparam.gammas(m)
    moved_g = max(abs(a - b) for a, b in zip(g0, g1))
    moved_v = max((b.attn.qkv.parametrizations.weight.original - v).abs().max().item()
                  for b, v in zip(sigma_reparam.swin_blocks(m), V0))
    still = all(torch.equal(b.norm1.weight, w) for b, w in zip(sigma_reparam.swin_blocks(m), ln0))
    assert moved_g > 0 and moved_v > 0 and still, (moved_g, moved_v, still)
    print(f"train: gamma moved {moved_g:.1e}, V {moved_v:.1e}, norm1 frozen ok")

    m.eval()
    sd = {k: v.clone() for k, v in m.state_dict().items()}
    with torch.no_grad():
        y2 = m(x, s)
    sigma_reparam.fold(m)
    assert not sigma_reparam.is_enabled(m)
    with torch.no_grad():
        y3 = m(x, s)
    r = rel(y3, y2)
    plain = set(Denoiser(m.cfg).state_dict())
    assert r < 1e-5 and set(m.state_dict()) == plain, (r, set(m.state_dict()) ^ plain)
    ones = all(torch.all(b.norm1.weight == 1) and torch.all(b.norm1.bias == 0) for b in sigma_reparam.swin_blocks(m))
    assert ones
    print(f"fold: rel L2 {r:.1e}, plain keys, norm1 1 / 0 ok")

    ck = {"config": m.cfg.to_json(), "model": sd, "state": {"qkv_reparam": True}}
    m2 = model_from_checkpoint(ck).eval()
    with torch.no_grad():
        y4 = m2(x, s)
    r = rel(y4, y2)
    assert r < 1e-5, f"checkpoint: rel L2 {r}"
    print(f"checkpoint: export's model_from_checkpoint rel L2 {r:.1e} ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
