#!/usr/bin/env python3
"""Validate weight files on the held-out split exactly as weights/train.py's val events do.

  python3 weights/val.py WEIGHTS [WEIGHTS ...] [--photos DIR] [--videos DIR ...] [--device cpu|cuda]
         [--bf16] [--val-clips 24] [--val-patch 256]

WEIGHTS: .safetensors files or training checkpoints (.pt), loaded by weights/export.py's
load_weights. The clips are train.py's make_val_set (24 clips of 9 frames, 256x256, from the val
split of ../shared/data's train-photos and train-video*, drawn with a CPU generator, seed 12345)
and the noise its validate (AWGN unclipped, seed 777, on the CPU); PSNR in dB against the clean
centre frame, peak 1, at sigma 10 / 30 / 50 (8-bit code values) and their mean. Both are drawn on
the CPU, so these figures equal train.log's val events (those with val_rng "cpu") on any machine,
up to the precision: on CUDA, validate runs the network under bf16 autocast, as train.py; on the
CPU in fp32 (the CPU engine's precision), or with --bf16 under CPU bf16 autocast.
Prints one line per file, and the same PSNR over the video clips and over the photo clips (the
first and last 4 of each group of 8: make_val_set's layout); never trains, never reads
eval-davis4.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from data import VAL_T, load_photo_tiles, load_videos  # noqa: E402
from export import load_weights  # noqa: E402
from train import make_val_set, validate  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("weights", nargs="+")
    ap.add_argument("--photos", default=os.path.join(DATA, "train-photos"))
    ap.add_argument("--videos", nargs="+", default=[os.path.join(DATA, d) for d in ("train-video", "train-video2")])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--bf16", action="store_true", help="on the CPU: bf16 autocast (CUDA always uses it)")
    ap.add_argument("--val-clips", type=int, default=24)
    ap.add_argument("--val-patch", type=int, default=256)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(args.device)
    vphotos = load_photo_tiles(args.photos, "val", "cpu")
    vframes, vstarts = load_videos(args.videos, "val", "cpu", VAL_T)
    val = make_val_set(vphotos, vframes, vstarts, dev, n=args.val_clips, P=args.val_patch)
    k = torch.arange(len(val))
    groups = {"video": k[k % 8 < 4], "photo": k[k % 8 >= 4]} if vframes is not None and len(vphotos) else None
    for path in args.weights:
        model = load_weights(path, dev)
        model.set_engine(sdpa=True, channels_last=False)
        # validate() turns autocast on for CUDA tensors itself; on the CPU it is asked for here
        bf16 = args.bf16 or dev.type == "cuda"
        ctx = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 and dev.type == "cpu" else contextlib.nullcontext()
        with ctx:
            r = validate(model, val, groups=groups)
        print(f"{path}: {'bf16' if bf16 else 'fp32'} {dev.type} PSNR sigma 10 / 30 / 50 "
              f"{r['val_psnr_s10']:.3f} / {r['val_psnr_s30']:.3f} / {r['val_psnr_s50']:.3f}, "
              f"mean {r['val_psnr_mean']:.3f} dB", flush=True)
        for name in groups or {}:
            print(f"  {len(groups[name])} {name} clips: " +
                  " / ".join(f"{r[f'val_psnr_s{s}_{name}']:.3f}" for s in (10, 30, 50)) + " dB", flush=True)


if __name__ == "__main__":
    main()
