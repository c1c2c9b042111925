#!/usr/bin/env python3
"""PSNR/SSIM of the reference model on eval-davis4 (the numbers the engines must reproduce).

  python3 weights/eval.py WEIGHTS(.safetensors|.pt) [--data DATA/eval-davis4]
         [--sigmas 10 20 30 40 50] [--seed 0] [--json out.json] [--bf16]

Protocol: each sequence (FFV1 gbrp, 25 frames, 854x480) decoded to RGB v in [0,1]; AWGN of
sigma (8-bit code values) from denoise_train/awgn.py with the given seed (the same noise tools/noise
writes), unclipped; the whole sequence denoised as the engines do (model.denoise_sequence:
mirrored ends, full frames); PSNR (peak 1.0, RGB, per frame, averaged per sequence, then across
sequences) and SSIM (Wang et al. 2004: 11x11 Gaussian window, sigma 1.5, K1 0.01, K2 0.03, per
RGB channel, averaged) of the output and of the noisy input. fp32 unless --bf16.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

from denoise_train.awgn import add_noise
from denoise_train.checkpoint import load_weights
from denoise_train.data import data_path, decode_video
from denoise_train.model import denoise_sequence


def psnr(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per frame PSNR in dB, peak 1.0: (N, 3, H, W) -> (N,)."""
    mse = ((a.double() - b.double()) ** 2).flatten(1).mean(1)
    return -10 * torch.log10(mse)


def ssim(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per frame SSIM (N, 3, H, W) in [0,1] -> (N,), 'valid' Gaussian filtering as in Wang et al."""
    x = torch.arange(11, dtype=torch.float64, device=a.device) - 5
    g = torch.exp(-x ** 2 / (2 * 1.5 ** 2))
    g = (g / g.sum()).float()
    w = (g[:, None] * g[None, :]).expand(3, 1, 11, 11).contiguous()
    f = lambda t: F.conv2d(t, w, groups=3)
    a, b = a.float(), b.float()
    mu_a, mu_b = f(a), f(b)
    saa = f(a * a) - mu_a ** 2
    sbb = f(b * b) - mu_b ** 2
    sab = f(a * b) - mu_a * mu_b
    C1, C2 = 0.01 ** 2, 0.03 ** 2
    m = ((2 * mu_a * mu_b + C1) * (2 * sab + C2)) / ((mu_a ** 2 + mu_b ** 2 + C1) * (saa + sbb + C2))
    return m.flatten(1).mean(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("weights")
    ap.add_argument("--data", default=data_path("eval-davis4"), help="default: $DENOISE_DATA/eval-davis4")
    ap.add_argument("--sigmas", type=float, nargs="+", default=[10, 20, 30, 40, 50])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json")
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--frames", type=int, default=0, help="use only the first N frames (quick checks)")
    args = ap.parse_args()
    if not args.data:
        ap.error("--data is needed (or DENOISE_DATA: the data folder)")
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model = load_weights(args.weights, dev).eval()
    seqs = sorted(glob.glob(os.path.join(args.data, "*.mkv")))
    if not seqs:
        sys.exit(f"eval.py: no *.mkv sequences in {args.data} (--data)")
    # the protocol text as the shipped weights' eval metadata records it (awgn.py is now denoise_train/awgn.py)
    table = {"protocol": "eval-davis4, AWGN unclipped, noise seed %d (weights/awgn.py), RGB PSNR peak 1, "
                         "SSIM 11x11 Gaussian, per frame -> per sequence -> mean" % args.seed,
             "weights": os.path.basename(args.weights), "precision": "bf16" if args.bf16 else "fp32",
             "sigmas": {}}
    t0 = time.time()
    for s in args.sigmas:
        rows = {}
        for p in seqs:
            name = os.path.splitext(os.path.basename(p))[0]
            v = torch.from_numpy(decode_video(p).copy()).to(dev).permute(0, 3, 1, 2).float() / 255.0
            if args.frames:
                v = v[:args.frames]
            noisy = add_noise(v, s, args.seed)
            with torch.no_grad(), torch.autocast(dev.type, dtype=torch.bfloat16, enabled=args.bf16):
                y = denoise_sequence(model, noisy * 2 - 1, s)
            out = (y.float() + 1) / 2
            rows[name] = {"psnr": psnr(out, v).mean().item(), "ssim": ssim(out, v).mean().item(),
                          "noisy_psnr": psnr(noisy, v).mean().item(), "noisy_ssim": ssim(noisy, v).mean().item()}
        avg = {k: sum(r[k] for r in rows.values()) / len(rows) for k in next(iter(rows.values()))}
        table["sigmas"][str(int(s))] = {"sequences": rows, "mean": avg}
        print(f"sigma {s:4.0f}: PSNR {avg['psnr']:.2f} dB SSIM {avg['ssim']:.4f} "
              f"(noisy {avg['noisy_psnr']:.2f} dB {avg['noisy_ssim']:.4f}) "
              + " ".join(f"{k} {r['psnr']:.2f}" for k, r in rows.items()), flush=True)
    table["seconds"] = round(time.time() - t0, 1)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(table, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
