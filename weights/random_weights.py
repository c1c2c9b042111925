#!/usr/bin/env python3
"""Untrained weights of a study candidate, as a weight file the engines load: for timing the
candidate in the CUDA engine before it is trained (the study's "projected 4K ms" column measured,
not scaled by GFLOP).

  python3 weights/random_weights.py CANDIDATE OUT.safetensors [--align R] [--sigma-gate G] [--seed 0]
  build/bin/denoise-cuda-bench --weights OUT.safetensors --sizes 3840x2160     (on a GPU machine)

The tensors are the candidate's initialisation (model.Denoiser(cfg) under torch.manual_seed(SEED),
bf16); __metadata__ has format, version and config as exported files do, and data / noise_model
say that the weights are untrained, so that a file made here cannot pass for a trained one.
--align R and --sigma-gate G set model v2's options (the shipped v2: align 24, sigma_gate 2).
Exit status 1 (with the reasons) for a candidate the engines do not run (candidates.engine_runs).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys

import torch

from denoise_train import candidates
from denoise_train.checkpoint import save_stable
from denoise_train.model import FORMAT, Denoiser


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("candidate", help=f"one of {', '.join(candidates.CANDIDATES)}")
    ap.add_argument("out")
    ap.add_argument("--align", type=int, default=0, help="model v2's alignment radius R (px; 0: none)")
    ap.add_argument("--sigma-gate", type=float, default=0.0, help="model v2's sigma gate (8-bit code values; 0: none)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    try:
        cfg, _ = candidates.get(a.candidate)
    except KeyError as e:
        sys.exit(f"random_weights.py: {e.args[0]}")
    cfg = dataclasses.replace(cfg, align=a.align, sigma_gate=a.sigma_gate)
    lacks = candidates.engine_runs(cfg)
    if lacks:
        sys.exit(f"random_weights.py: the engines do not run {a.candidate}: {'; '.join(lacks)}")
    torch.manual_seed(a.seed)
    model = Denoiser(cfg)
    tensors = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
    meta = {"format": FORMAT, "version": str(cfg.version), "config": cfg.to_json(), "dtype": "bf16",
            "data": f"none: untrained initialisation of candidate {a.candidate} (seed {a.seed}), for timing only",
            "noise_model": "none (untrained)", "steps": "0", "clips": "0", "train_minutes": "0"}
    save_stable(tensors, a.out, meta)
    print(f"wrote {a.out}: {a.candidate}, {len(tensors)} tensors, {os.path.getsize(a.out)} bytes, config {cfg.to_json()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
