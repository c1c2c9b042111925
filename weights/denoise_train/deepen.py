#!/usr/bin/env python3
"""Deepen a training checkpoint's network without changing its function.

  python3 -m denoise_train.deepen CKPT OUT.pt --depths mid=10[,enc1=6,dec1=6,...] [--seed 0]   (from weights/)

Swin blocks are added at the end of the named stages (model.py Config.depths: enc0, enc1,
mid, dec1, dec0), two at a time: a stage alternates plain and shifted windows (block i is
shifted when i is odd), so an even count keeps every trained block's shift. Each new block's two
residual branches end in zero (attention proj and MLP fc2, weights and biases 0), so the block is
the identity, x + 0 + 0, and the deeper network computes exactly the source's function: Net2Net's
function-preserving deepening (Chen, Goodfellow & Shlens, ICLR 2016) with the zero-initialised
residual branch of Fixup (Zhang, Dauphin & Ma, ICLR 2019). The new blocks' other weights take
the model's own initialisation (seeded), so the gradients of proj and fc2 are non-zero from the
first step and the rest follows from the second. With sigma-reparametrised qkv weights (state
qkv_reparam, denoise_train/sigma_reparam.py) the new blocks get them too.

The source's weights are its moving average when it kept one (train.py --ema), as export takes.
OUT is a checkpoint for `weights/train.py --init OUT.pt`: the source's model state with the new
blocks, its config with the new depths, its state (counters, recipe, qkv_reparam) plus
state["deepened"] (from / to depths, step, training minutes), and no AdamW state (the parameter
list changed, so train.py starts AdamW afresh, with its warm-up). Prints the parameters and GFLOP
per 1080p frame before and after, and the largest difference of the two networks' outputs on a
random clip (0 expected; the command fails otherwise). A depth that takes the network outside
the engines' limits (denoise_train/candidates.py engine_limits: 2x model v1's GFLOP per 1080p frame) is
refused.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys

import torch

from . import sigma_reparam
from .candidates import engine_limits
from .checkpoint import checkpoint_model
from .model import Config, Denoiser, count_parameters, gflop_per_frame

STAGES = ("enc0", "enc1", "mid", "dec1", "dec0")


def parse_depths(text: str, cfg: Config) -> dict:
    """'mid=10,enc1=6' -> cfg.depths with those stages replaced; ValueError on a bad stage, a
    shallower depth or an odd number of new blocks."""
    d = dict(cfg.depths)
    for item in text.split(","):
        name, _, val = item.partition("=")
        name = name.strip()
        if name not in STAGES or not val.strip().isdigit():
            raise ValueError(f"--depths {text!r}: want STAGE=N,... with STAGE one of {', '.join(STAGES)}")
        n = int(val)
        if n < d[name] or (n - d[name]) % 2:
            raise ValueError(f"--depths: {name} {d[name]} -> {n}: want an even number of new blocks (>= 0)")
        d[name] = n
    return d


@torch.no_grad()
def deepen(src: Denoiser, depths: dict, reparam: bool, seed: int = 0) -> Denoiser:
    """A Denoiser with src's weights and `depths` (each >= src's, by an even count); the new
    blocks are identities (module docstring). reparam: src has sigma-reparametrised qkv weights
    (so does the result)."""
    cfg = dataclasses.replace(src.cfg, depths=dict(depths))
    torch.manual_seed(seed)
    out = Denoiser(cfg)
    if reparam:
        sigma_reparam.enable(out, fold_norm=False)
    sd = out.state_dict()
    old = src.state_dict()
    for k, v in old.items():
        if k not in sd:
            raise KeyError(f"deepen: source tensor {k} has no place in the deeper network")
        sd[k] = v
    out.load_state_dict(sd)
    for name in STAGES:
        blocks = getattr(out.unet, name).blocks
        for i in range(src.cfg.depths[name], len(blocks)):
            b = blocks[i]
            for lin in (b.attn.proj, b.fc2):
                lin.weight.zero_()
                lin.bias.zero_()
            assert b.shift == (cfg.shift if i % 2 else 0), f"unet.{name}.blocks.{i}: shift"
    return out


def check_same(a: Denoiser, b: Denoiser, seed: int = 1) -> float:
    """Largest |a(x) - b(x)| on a random 2-clip batch (64x64, sigma 10 and 40), eval mode, fp32."""
    g = torch.Generator().manual_seed(seed)
    T = 2 * a.cfg.temporal_radius + 1
    x = torch.rand(2, T, 3, 64, 64, generator=g) * 2 - 1
    s = torch.tensor([10.0, 40.0])
    a.eval()
    b.eval()
    with torch.no_grad():
        return (a(x, s) - b(x, s)).abs().max().item()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ckpt")
    ap.add_argument("out")
    ap.add_argument("--depths", required=True, help="STAGE=N,... (enc0 enc1 mid dec1 dec0)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    d = torch.load(args.ckpt, map_location="cpu")
    cfg = Config.from_json(d["config"])
    try:
        depths = parse_depths(args.depths, cfg)
    except ValueError as e:
        ap.error(str(e))
    why = engine_limits(dataclasses.replace(cfg, depths=depths))
    if why:
        ap.error("the deeper network would be outside the engines' limits: " + "; ".join(why))
    state = dict(d.get("state", {}))
    reparam = bool(state.get("qkv_reparam"))
    src = checkpoint_model(d)
    net = deepen(src, depths, reparam, args.seed)
    diff = check_same(src, net)
    g0, g1 = gflop_per_frame(cfg, 1080, 1920), gflop_per_frame(net.cfg, 1080, 1920)
    print(f"{args.ckpt}: depths {cfg.depths} -> {net.cfg.depths}; params {count_parameters(src):,} -> "
          f"{count_parameters(net):,}; GFLOP per 1080p frame {g0:.1f} -> {g1:.1f}; max |output difference| "
          f"on a random clip {diff:.3g}")
    if diff != 0.0:
        print("deepen: the deeper network's output differs from the source's", file=sys.stderr)
        return 1
    state["deepened"] = list(state.get("deepened", [])) + [
        {"from": dict(cfg.depths), "to": dict(net.cfg.depths), "step": state.get("step", 0),
         "train_minutes": round(state.get("train_seconds", 0.0) / 60, 3), "source": os.path.abspath(args.ckpt)}]
    tmp = args.out + ".tmp"
    torch.save({"model": net.state_dict(), "opt": None, "state": state, "config": net.cfg.to_json()}, tmp)
    os.replace(tmp, args.out)
    print(f"wrote {args.out} (no AdamW state: weights/train.py --init starts it afresh with its warm-up)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
