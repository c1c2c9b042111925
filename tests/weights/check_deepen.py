#!/usr/bin/env python3
"""Checks of denoise_train/deepen.py on the CPU (tests/run_tests.sh runs it).

  python3 tests/weights/check_deepen.py

Each check prints "NAME: figures ok" or raises. On a small random model (widths 16/32/64, head
dim 16, two blocks per stage), plain and with sigma-reparametrised qkv weights:
  - same function: two and four blocks added to enc0 and mid give exactly the source's output
    (max |difference| 0, fp32), and every trained block keeps its shift;
  - first step: the new blocks' proj and fc2 weights get non-zero gradients, their qkv and fc1
    zero ones (their branches end in zero);
  - checkpoint: the deepened state dict written as deepen.py writes it (no AdamW state) loads
    through denoise_train/checkpoint.py's model_from_checkpoint with the same output;
  - refusals: an odd number of new blocks, a shallower stage and an unknown stage are refused.
"""
from __future__ import annotations

import sys

from needs import need

need("torch", "numpy", "safetensors")
import torch  # noqa: E402

from denoise_train import sigma_reparam  # noqa: E402
from denoise_train.checkpoint import model_from_checkpoint  # noqa: E402
from denoise_train.deepen import STAGES, check_same, deepen, parse_depths  # noqa: E402
from denoise_train.model import Config, Denoiser  # noqa: E402


def small_model(reparam: bool, seed: int = 0) -> Denoiser:
    torch.manual_seed(seed)
    cfg = Config(channels=(16, 32, 64), heads=(1, 2, 4), head_dim=16,
                 depths={"enc0": 2, "enc1": 2, "mid": 2, "dec1": 2, "dec0": 2})
    m = Denoiser(cfg)
    if reparam:
        sigma_reparam.enable(m)
    return m


def main() -> int:
    for reparam in (False, True):
        tag = "reparam" if reparam else "plain"
        src = small_model(reparam)
        depths = dict(src.cfg.depths, enc0=4, mid=6)
        net = deepen(src, depths, reparam, seed=3)
        diff = check_same(src, net)
        assert diff == 0.0, f"{tag}: max |difference| {diff}"
        for name in STAGES:
            a, b = getattr(src.unet, name).blocks, getattr(net.unet, name).blocks
            assert all(x.shift == y.shift for x, y in zip(a, b)), f"{tag}: {name} shifts"
        print(f"same function ({tag}): depths {src.cfg.depths} -> {net.cfg.depths}, max |difference| {diff:g} ok")

    net.train()
    g = torch.Generator().manual_seed(5)
    T = 2 * net.cfg.temporal_radius + 1
    x = torch.rand(2, T, 3, 64, 64, generator=g) * 2 - 1
    loss = (net(x, torch.tensor([20.0, 20.0])) - x[:, T // 2]).abs().mean()
    loss.backward()
    new = [b for name in ("enc0", "mid") for b in getattr(net.unet, name).blocks[2:]]
    g_out = min(min(b.attn.proj.weight.grad.abs().max().item(), b.fc2.weight.grad.abs().max().item()) for b in new)
    qkv = lambda b: b.attn.qkv.parametrizations.weight.original  # noqa: E731
    g_in = max(max(qkv(b).grad.abs().max().item(), b.fc1.weight.grad.abs().max().item()) for b in new)
    assert g_out > 0 and g_in == 0, (g_out, g_in)
    print(f"first step: new blocks' proj / fc2 gradients >= {g_out:.1e}, qkv / fc1 {g_in:g} ok")

    net.eval()
    ck = {"config": net.cfg.to_json(), "model": net.state_dict(), "opt": None,
          "state": {"qkv_reparam": True, "deepened": [{"from": src.cfg.depths, "to": net.cfg.depths}]}}
    m2 = model_from_checkpoint(ck)
    diff = check_same(net, m2)
    assert diff < 1e-5, f"checkpoint: {diff}"
    print(f"checkpoint: export's model_from_checkpoint max |difference| {diff:.1e} ok")

    cfg = src.cfg
    refused = 0
    for text in ("mid=3", "mid=0", "enc2=4", "mid=four"):
        try:
            parse_depths(text, cfg)
        except ValueError:
            refused += 1
    assert refused == 4, refused
    assert parse_depths("mid=4,dec0=2", cfg) == dict(cfg.depths, mid=4)
    print(f"refusals: {refused} of 4 bad --depths refused ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
