#!/usr/bin/env python3
"""Export a training checkpoint to the shipped safetensors weight file.

  python3 weights/export.py CKPT.pt OUT.safetensors [--dtype bf16] [--eval EVAL.json]
                            [--log train.log]

Tensors keep the PyTorch module names (model.Denoiser.state_dict()). __metadata__ (all values
strings, as safetensors requires) holds:
  format "denoise-swin", version ("1" for a model v1 config, "2" when it uses a v2 option: the
  v1 engines refuse those, naming the field), config (model.Config JSON), data, noise_model
  (from the checkpoint's recipe), sigma_range (JSON [lo, hi]: the noise levels of the training in
  8-bit code values, which the filter warns outside of), steps, clips, train_minutes, gpu ("NVIDIA
  H200"), eval (JSON of weights/eval.py, if given), faithfulness (JSON of
  denoise_train/faithful.py, if given).
The weights are the checkpoint's moving average when the run kept one (weights/train.py --ema).
A fusion "shift" checkpoint is refused (the engines do not run it yet).
Loading it back: denoise_train/checkpoint.py's load_weights(), or the C engine (kernels/safetensors.cpp).
"""
from __future__ import annotations

import argparse
import json
import os

import torch

from denoise_train import candidates
from denoise_train.checkpoint import model_from_checkpoint, save_stable
from denoise_train.model import FORMAT, Config
from denoise_train.noise_models import AWGNRecipe, NoiseRecipe

# DATA, DATA_V2, NOISE and provenance()'s text are the metadata of the shipped weight files as they
# were written (the paths name the modules as they were then: weights/data.py and
# weights/candidates.py are now in denoise_train/): a re-export gives the same bytes.
DATA = ("train-photos (234 JPEG photographs: Debian wallpaper packages, Urban100, Sun-Hays80) and "
        "train-video (16 DAVIS-2016 sequences, CC BY 4.0), minus the held-out validation split "
        "(weights/data.py); never eval-davis4")
DATA_V2 = ("train-photos (234 JPEG photographs: Debian wallpaper packages, Urban100, Sun-Hays80), "
           "train-video (16 DAVIS-2016 sequences, CC BY 4.0) and train-video2 (SA-V gallery clips, CC BY 4.0, "
           "and SAM 2's bedroom clip, Apache-2.0), minus the held-out validation split (weights/data.py); "
           "never eval-davis4")
NOISE = ("AWGN, sigma ~ U(0,55) in 8-bit code values per 7-frame clip, RGB, unclipped; 25% of clips "
         "clipped to [0,1] and quantised to 8 bit")


def provenance(state: dict) -> tuple[str, str]:
    """(data, noise_model) metadata strings for a checkpoint's state (recipe v1 or v2)."""
    if state.get("recipe") in ("v2", "v2b", "v2c"):
        changes = "".join(f"; recipe {c['from']} until {c['train_minutes']:g} training minutes, {c['to']} after"
                          for c in state.get("recipe_changes", []))
        return DATA_V2, (NoiseRecipe().describe() + "; synthetic clips and a low-pass loss term; recipe "
                         f"{state['recipe']} (weights/candidates.py){changes}")
    if state.get("recipe") == "v1":
        return DATA_V2, AWGNRecipe().describe()
    return DATA, NOISE   # model v1's own checkpoint (before recipes were recorded)


def sigma_range(state: dict) -> list:
    """[lo, hi] of the training's noise levels (8-bit code values) for a checkpoint's state: every
    recipe draws sigma ~ U(0, sigma_max) per clip (noise_models.py; v1's own checkpoint:
    data.make_noisy's default, 55)."""
    if state.get("recipe") in ("v2", "v2b", "v2c"):
        return [0, NoiseRecipe().sigma_max]
    if state.get("recipe") == "v1":
        return [0, AWGNRecipe().sigma_max]
    return [0, 55.0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ckpt")
    ap.add_argument("out")
    ap.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    ap.add_argument("--eval", help="JSON written by weights/eval.py")
    ap.add_argument("--faithful", help="JSON written by denoise_train.faithful --json")
    ap.add_argument("--gpu", default="NVIDIA H200")
    args = ap.parse_args()
    d = torch.load(args.ckpt, map_location="cpu")
    cfg = Config.from_json(d["config"])
    lacks = candidates.engine_runs(cfg)
    if lacks:   # the shipped file is for the engines
        raise SystemExit(f"export.py: {args.ckpt}: the engines do not run this model yet ({'; '.join(lacks)}; "
                         "denoise_train/candidates.py engine_runs); validate or evaluate the checkpoint itself "
                         "(weights/val.py and weights/eval.py read .pt files)")
    m = model_from_checkpoint(d)
    dt = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    tensors = {k: v.detach().to(dt).contiguous() for k, v in m.state_dict().items()}
    st = d.get("state", {})
    data, noise = provenance(st)
    meta = {
        "format": FORMAT, "version": str(cfg.version), "config": cfg.to_json(),
        "data": data, "noise_model": noise, "sigma_range": json.dumps(sigma_range(st)),
        "steps": str(st.get("step", 0)), "clips": str(st.get("clips", 0)),
        "train_minutes": f"{st.get('train_seconds', 0) / 60:.1f}", "gpu": args.gpu,
        "dtype": args.dtype,
    }
    if args.eval:
        with open(args.eval) as f:
            meta["eval"] = json.dumps(json.load(f), sort_keys=True)
    if args.faithful:
        with open(args.faithful) as f:
            meta["faithfulness"] = json.dumps(json.load(f), sort_keys=True)
    save_stable(tensors, args.out, meta)
    print(f"wrote {args.out}: {len(tensors)} tensors, {os.path.getsize(args.out)} bytes, {args.dtype}")


if __name__ == "__main__":
    main()
