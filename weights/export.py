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
  H200"), eval (JSON of weights/eval.py, if given), faithfulness (JSON of weights/faithful.py, if given).
The weights are the checkpoint's moving average when the run kept one (weights/train.py --ema).
Loading it back: weights/export.py's load_weights(), or the C engine (kernels/safetensors.cpp).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch
from safetensors.torch import load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sigma_reparam  # noqa: E402
from model import FORMAT, VERSIONS, Config, Denoiser  # noqa: E402
from weight_ema import averaged_state  # noqa: E402
from noise_models import AWGNRecipe, NoiseRecipe  # noqa: E402

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


def checkpoint_model(d: dict, average: bool = True) -> Denoiser:
    """The Denoiser of a training checkpoint (weights/train.py's save_ckpt) as it trained: the
    weights' moving average when the run kept one (train.py --ema; average=False: the live
    weights), sigma-reparametrised qkv weights kept when the run had them (state qkv_reparam)."""
    m = Denoiser(Config.from_json(d["config"]))
    if d.get("state", {}).get("qkv_reparam"):
        sigma_reparam.enable(m, fold_norm=False)
    if average and d.get("ema"):   # the average's own power-iteration vectors (weights/weight_ema.py)
        m.load_state_dict(averaged_state(d["model"], d["ema"]))
        sigma_reparam.power_steps(m)
    else:
        m.load_state_dict(d["model"])
    return m


def model_from_checkpoint(d: dict, average: bool = True) -> Denoiser:
    """checkpoint_model() folded back to plain weights (what the engines and the weight file hold)."""
    return sigma_reparam.fold(checkpoint_model(d, average))


def load_weights(path: str, device="cpu") -> Denoiser:
    """Build a Denoiser from a weight file (.safetensors or a training checkpoint .pt)."""
    if path.endswith(".pt"):
        return model_from_checkpoint(torch.load(path, map_location=device)).to(device)
    from safetensors import safe_open
    with safe_open(path, "pt") as f:
        meta = f.metadata() or {}
    if meta.get("format") != FORMAT or meta.get("version") not in [str(v) for v in VERSIONS]:
        raise ValueError(f"{path}: not a {FORMAT} weight file of version {' or '.join(map(str, VERSIONS))} "
                         f"(metadata {meta.get('format')!r} v{meta.get('version')!r})")
    m = Denoiser(Config.from_json(meta["config"]))
    sd = {k: v.float() for k, v in load_file(path).items()}
    m.load_state_dict(sd, strict=True)
    return m.to(device)


def save_stable(tensors: dict, path: str, meta: dict) -> None:
    """safetensors' save_file with the header's keys sorted: the library writes the metadata in
    no fixed order, so the same checkpoint would give files of other bytes (and sha256, which the
    goldens record). The tensors' layout and offsets are the library's, untouched; the header is
    padded with spaces to a multiple of 8 bytes as the library does."""
    from safetensors.torch import save
    raw = save(tensors, metadata=meta)
    n = int.from_bytes(raw[:8], "little")
    header = json.dumps(json.loads(raw[8:8 + n]), sort_keys=True, separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)
    with open(path, "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header + raw[8 + n:])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ckpt")
    ap.add_argument("out")
    ap.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    ap.add_argument("--eval", help="JSON written by weights/eval.py")
    ap.add_argument("--faithful", help="JSON written by weights/faithful.py --json")
    ap.add_argument("--gpu", default="NVIDIA H200")
    args = ap.parse_args()
    d = torch.load(args.ckpt, map_location="cpu")
    cfg = Config.from_json(d["config"])
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
