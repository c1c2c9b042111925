#!/usr/bin/env python3
"""Validate weight files on the held-out split exactly as weights/train.py's val events do.

  python3 weights/val.py WEIGHTS [WEIGHTS ...] [--photos DIR] [--videos DIR ...] [--device cpu|cuda]
         [--bf16] [--jpeg Q] [--map-scale F] [--noise awgn|awgn8|pg|ycc420] [--val-clips 24]
         [--val-patch 256] [--frames N]

WEIGHTS: .safetensors files or training checkpoints (.pt), loaded by denoise_train/checkpoint.py's
load_weights. The clips are validation.make_val_set's (24 clips of 9 frames, 256x256, from the
val split of the data folder's train-photos and train-video*, drawn with a CPU generator, seed 12345)
and the noise its validate (AWGN unclipped, seed 777, on the CPU); PSNR in dB against the clean
centre frame, peak 1, at sigma 10 / 30 / 50 (8-bit code values) and their mean. Both are drawn on
the CPU, so these figures equal train.log's val events (those with val_rng "cpu") on any machine,
up to the precision: on CUDA, validate runs the network under bf16 autocast, as train.py; on the
CPU in fp32 (the CPU engine's precision), or with --bf16 under CPU bf16 autocast.
--jpeg Q: every frame of the clean clips is first rounded to 8 bits and round-tripped through
JPEG at quality Q (Pillow, 4:2:0), frame by frame, so that the clean references carry JPEG
texture as the frames of DAVIS (JPEG about q75; data README) do, which the H.264 crf 15 training
copies and the downscaled photos have lost; a stand-in for eval-davis4's kind of frames that
never reads them. On 2026-12-03 it did not reproduce eval-davis4's ranking of v1 and v2
(docs/model.md): the round trip smooths these already smooth clips further.
--map-scale F: on the whole split the network is given a sigma map of F x the noise
(validation.validate's map_scale); the val_davis line keeps train.log's maps.
--noise: the clips' noise, on the whole split and val_davis: awgn (train.log's), awgn8 (clipped and
quantised), pg (Poisson-Gaussian, f 0.5) or ycc420 (4:2:0 chroma noise, rho 0.75), each at the
same sigma from the same normal draw (validation.validate): what a recipe's noise mix costs or buys on
each model.
Prints one line per file, the same PSNR over the video clips and over the photo clips (the
first and last 4 of each group of 8: make_val_set's layout), and train.log's val_davis figures:
16 clips of the DAVIS sequences of the split alone (data.VAL_DAVIS, make_val_set's seed), the
validation that ranks models as eval-davis4 does (docs/model.md), with sigma 30 given a map 1.3x
the noise. --frames N (fusion "shift" models, which read clips of any odd length): a second line,
the same centre frames through N-frame clips, the gap that the 7-frame training clip's truncated
receptive field leaves (denoise_train/model.py; with N > 9 the set is drawn N frames long, so both
lines are on other clips than train.log's). Never trains, never reads eval-davis4.
"""
from __future__ import annotations

import argparse
import contextlib
import io

import numpy as np
import torch
from PIL import Image

from denoise_train.checkpoint import load_weights
from denoise_train.data import VAL_DAVIS, VAL_T, data_path, load_photo_tiles, load_videos
from denoise_train.validation import VAL_NOISES, make_val_davis, make_val_set, validate, validate_davis



def jpeg_round_trip(clips: torch.Tensor, quality: int) -> torch.Tensor:
    """(N, T, 3, H, W) in [0,1] -> the same with each frame rounded to 8 bits, encoded as JPEG at
    `quality` (Pillow, 4:2:0 chroma) and decoded, in [0,1] on clips' device."""
    u8 = (clips.detach().cpu().clamp(0, 1) * 255).round().to(torch.uint8).permute(0, 1, 3, 4, 2).numpy()
    out = np.empty_like(u8)
    for n in range(u8.shape[0]):
        for t in range(u8.shape[1]):
            buf = io.BytesIO()
            Image.fromarray(u8[n, t]).save(buf, format="JPEG", quality=quality, subsampling="4:2:0")
            out[n, t] = np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGB"))
    return torch.from_numpy(out).permute(0, 1, 4, 2, 3).float().div(255).to(clips.device)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("weights", nargs="+")
    ap.add_argument("--photos", default=data_path("train-photos"), help="default: $DENOISE_DATA/train-photos")
    ap.add_argument("--videos", nargs="+",
                    default=data_path() and [data_path(d) for d in ("train-video", "train-video2")],
                    help="default: $DENOISE_DATA/train-video and train-video2")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--bf16", action="store_true", help="on the CPU: bf16 autocast (CUDA always uses it)")
    ap.add_argument("--jpeg", type=int, metavar="Q", help="clean clips round-tripped through JPEG at quality Q first")
    ap.add_argument("--map-scale", type=float, default=1.0, help="sigma map = F x the noise (default 1)")
    ap.add_argument("--noise", choices=VAL_NOISES, default="awgn",
                    help="the noise model of the whole split's and val_davis's clips (validation.validate; default awgn)")
    ap.add_argument("--val-clips", type=int, default=24)
    ap.add_argument("--val-patch", type=int, default=256)
    ap.add_argument("--frames", type=int, metavar="N",
                    help="fusion 'shift' models: also validate the same centre frames through N-frame clips (odd, "
                    f">= 3; above {VAL_T} the set is drawn N frames long, other clips than train.log's)")
    args = ap.parse_args()
    if not args.photos or not args.videos:
        ap.error("--photos and --videos are needed (or DENOISE_DATA: the data folder)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(args.device)
    vphotos = load_photo_tiles(args.photos, "val", "cpu")
    vt = max(VAL_T, args.frames or 0)
    vframes, vstarts = load_videos(args.videos, "val", "cpu", vt)
    val = make_val_set(vphotos, vframes, vstarts, dev, n=args.val_clips, P=args.val_patch, T=vt)
    val_davis = make_val_davis(args.videos, dev, P=args.val_patch)
    if args.jpeg is not None:
        if not 1 <= args.jpeg <= 95:
            ap.error("--jpeg: quality 1..95")
        val = jpeg_round_trip(val, args.jpeg)
        val_davis = None if val_davis is None else jpeg_round_trip(val_davis, args.jpeg)
    k = torch.arange(len(val))
    groups = {"video": k[k % 8 < 4], "photo": k[k % 8 >= 4]} if vframes is not None and len(vphotos) else None
    for path in args.weights:
        model = load_weights(path, dev)
        model.set_engine(sdpa=True, channels_last=False)
        # validate() turns autocast on for CUDA tensors itself; on the CPU it is asked for here
        bf16 = args.bf16 or dev.type == "cuda"
        ctx = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 and dev.type == "cpu" else contextlib.nullcontext()
        with ctx:
            r = validate(model, val, groups=groups, map_scale=args.map_scale, noise=args.noise)
            d = validate_davis(model, val_davis, noise=args.noise)
        jpeg = f" clean clips through JPEG q{args.jpeg}" if args.jpeg is not None else ""
        scaled = f" (map {args.map_scale:g}x the noise)" if args.map_scale != 1 else ""
        scaled += f" noise {args.noise}" if args.noise != "awgn" else ""
        print(f"{path}: {'bf16' if bf16 else 'fp32'} {dev.type}{jpeg} PSNR sigma 10 / 30 / 50 "
              f"{r['val_psnr_s10']:.3f} / {r['val_psnr_s30']:.3f} / {r['val_psnr_s50']:.3f}, "
              f"mean {r['val_psnr_mean']:.3f} dB{scaled}", flush=True)
        if args.frames and model.cfg.fusion == "shift":
            with ctx:
                rl = validate(model, val, groups=groups, map_scale=args.map_scale, noise=args.noise, frames=args.frames)
            print(f"  through {args.frames}-frame clips (the same centre frames and noise): PSNR sigma 10 / 30 / 50 "
                  f"{rl['val_psnr_s10']:.3f} / {rl['val_psnr_s30']:.3f} / {rl['val_psnr_s50']:.3f}, "
                  f"mean {rl['val_psnr_mean']:.3f} dB ({rl['val_psnr_mean'] - r['val_psnr_mean']:+.3f})", flush=True)
        for name in groups or {}:
            print(f"  {len(groups[name])} {name} clips: " +
                  " / ".join(f"{r[f'val_psnr_s{s}_{name}']:.3f}" for s in (10, 30, 50)) + " dB", flush=True)
        if d:
            print(f"  val_davis ({len(val_davis)} clips of {', '.join(VAL_DAVIS)}): " +
                  " / ".join(f"{d[f'val_davis_s{s}']:.3f}" for s in (10, 30, 50)) +
                  f", mean {d['val_davis_mean']:.3f} dB; sigma 30 with a map 1.3x the noise "
                  f"{d['val_davis_s30_map1.3']:.3f}", flush=True)


if __name__ == "__main__":
    main()
