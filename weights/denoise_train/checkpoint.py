"""Model weights in and out of files: a training checkpoint's Denoiser (train.py's save_ckpt), a
shipped weight file loaded back, and the weight file written with a stable header (export.py).
"""
from __future__ import annotations

import json

import torch
from safetensors.torch import load_file

from . import sigma_reparam
from .model import FORMAT, VERSIONS, Config, Denoiser
from .weight_ema import averaged_state


def checkpoint_model(d: dict, average: bool = True) -> Denoiser:
    """The Denoiser of a training checkpoint (weights/train.py's save_ckpt) as it trained: the
    weights' moving average when the run kept one (train.py --ema; average=False: the live
    weights), sigma-reparametrised qkv weights kept when the run had them (state qkv_reparam)."""
    m = Denoiser(Config.from_json(d["config"]))
    if d.get("state", {}).get("qkv_reparam"):
        sigma_reparam.enable(m, fold_norm=False)
    if average and d.get("ema"):   # the average's own power-iteration vectors (weight_ema.py)
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
