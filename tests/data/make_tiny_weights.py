#!/usr/bin/env python3
"""Write tests/data/tiny_weights.safetensors: random weights of a very small model of the v1 family.

    python3 tests/data/make_tiny_weights.py [--out tests/data/tiny_weights.safetensors]

For CLI tests whose subject is the filter's plumbing at large frame sizes (the scene-cut detector
at 1920x1080, the sigma range warning), where the shipped model would cost tens of seconds per
frame on the CPU and its output does not matter. Config: channels (4, 8, 16), heads (1, 2, 4),
head_dim 4, one Swin block per stage, MLP ratio 1, fusion radius 1 (temporal radius 2), window 8:
about 4.5 GFLOP per 1920x1080 frame (counted: fusion conv 1.4, head 1.4, window attention and
linears of the five stages ~1.7) against about 200 for model v1. __metadata__ as
shipped files (format, version, config) plus sigma_range [5, 30], so that the filter's warning
can be seen to read the range from the file. fp32, fixed seed, weights/make_goldens.py's
randomise() (every parameter visible in the output).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "weights"))
from safetensors.torch import save_file  # noqa: E402

from denoise_train.model import FORMAT, Config, Denoiser  # noqa: E402
from make_goldens import randomise  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny_weights.safetensors"))
    args = ap.parse_args()
    cfg = Config(channels=(4, 8, 16), heads=(1, 2, 4), head_dim=4,
                 depths={"enc0": 1, "enc1": 1, "mid": 1, "dec1": 1, "dec0": 1}, mlp_ratio=1, fusion_radius=1)
    torch.manual_seed(4321)
    model = Denoiser(cfg)
    randomise(model, torch.Generator().manual_seed(4321))
    sd = {k: v.detach().float().contiguous() for k, v in model.state_dict().items()}
    meta = {"format": FORMAT, "version": str(cfg.version), "config": cfg.to_json(), "sigma_range": json.dumps([5, 30])}
    save_file(sd, args.out, metadata=meta)
    n = sum(v.numel() for v in sd.values())
    print(f"wrote {args.out}: {len(sd)} tensors, {n} parameters, {os.path.getsize(args.out)} bytes")


if __name__ == "__main__":
    main()
