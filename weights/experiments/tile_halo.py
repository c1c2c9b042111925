#!/usr/bin/env python3
"""How wide a halo overlapping tiles need so that the tiled output matches the untiled one.

  python3 weights/experiments/tile_halo.py WEIGHTS [--clip MP4] [--frames N] [--sigma S] [--tile T]
                               [--halos 0 32 64 ...] [--threads N]

The CUDA engine runs frames that do not fit its memory cap in tiles (kernels/cuda/backend_cuda.cu):
tile interiors of T x T pixels on a grid of the padded frame (origins on multiples of 64 px, so
the window grids of all three U-Net levels and the shifted windows align with the whole frame's),
each computed on its domain D = the interior grown by the halo on every side (clipped to the
padded frame). On D the network sees D as a whole frame: zero padding of the fusion conv and the
head at D's border, Swin's cyclic shift and region mask at D's border. This script does exactly
that with the reference model (fp32, CPU or GPU) on a real clip with AWGN and prints, per halo,
the PSNR of the tiled output against the untiled one (peak 1, RGB, the centre frames), the max
abs difference in 8-bit code values, and the same restricted to a 4-px band around the tile seams.
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # weights/: the package
from denoise_train.awgn import add_noise  # noqa: E402
from denoise_train.checkpoint import load_weights  # noqa: E402
from denoise_train.data import data_path, decode_video  # noqa: E402
from denoise_train.model import reflect_index, reflect_pad  # noqa: E402


def run_domain(model, x, t, sig, y0, y1, x0, x1):
    """Output frame t (network units) of the padded clip x (N, 3, Hp, Wp) on rows [y0, y1), cols [x0, x1)."""
    N = x.shape[0]
    if model.cfg.align:
        raise ValueError("tile_halo.py builds the head's input itself and does not move features (Config.align)")
    r = model.cfg.fusion_radius
    d = x[..., y0:y1, x0:x1]
    feats = []
    for s in (t - 1, t, t + 1):
        win = d[[reflect_index(s + k, N) for k in range(-r, r + 1)]][None]
        feats.append(model.features(win, sig))
    return model.head_out(feats, d[t:t + 1])[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("weights")
    ap.add_argument("--clip", default=data_path("train-video", "car-roundabout.mp4"),
                    help="default: $DENOISE_DATA/train-video/car-roundabout.mp4")
    ap.add_argument("--frames", type=int, default=2, help="centre frames measured (frames 3..3+N-1)")
    ap.add_argument("--sigma", type=float, default=20)
    ap.add_argument("--tile", type=int, default=256, help="tile interior side, px (multiple of 64)")
    ap.add_argument("--halos", type=int, nargs="+", default=[0, 32, 64, 96, 128, 192])
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    if not args.clip:
        ap.error("--clip is needed (or DENOISE_DATA: the data folder)")
    if args.threads:
        torch.set_num_threads(args.threads)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = load_weights(args.weights, dev).eval()
    m = model.cfg.pad_multiple
    T = args.tile
    assert T % m == 0
    v = torch.from_numpy(decode_video(args.clip).copy()).permute(0, 3, 1, 2).float() / 255.0
    nf = args.frames + 6
    v = v[:nf].to(dev)
    noisy = add_noise(v, args.sigma, 0) * 2 - 1
    H, W = noisy.shape[-2:]
    x = reflect_pad(noisy, (-H) % m, (-W) % m)
    Hp, Wp = x.shape[-2:]
    sig = torch.full((1,), args.sigma, device=dev)
    print(f"clip {os.path.basename(args.clip)} {W}x{H} (padded {Wp}x{Hp}), sigma {args.sigma:g}, "
          f"tile interior {T} px, frames 3..{2 + args.frames}, {dev}", flush=True)
    seam = torch.zeros(H, W, dtype=torch.bool)
    for b in range(T, max(Hp, Wp), T):
        seam[max(0, b - 4):b + 4, :] |= b < H
        seam[:, max(0, b - 4):b + 4] |= b < W
    with torch.no_grad():
        ref = [run_domain(model, x, t, sig, 0, Hp, 0, Wp)[:, :H, :W] for t in range(3, 3 + args.frames)]
        for halo in args.halos:
            se = 0.0
            mx = mxs = 0.0
            for i, t in enumerate(range(3, 3 + args.frames)):
                out = torch.empty(3, Hp, Wp, device=dev)
                for ty in range(0, Hp, T):
                    for tx in range(0, Wp, T):
                        y0, y1 = max(0, ty - halo), min(Hp, ty + T + halo)
                        x0, x1 = max(0, tx - halo), min(Wp, tx + T + halo)
                        o = run_domain(model, x, t, sig, y0, y1, x0, x1)
                        iy1, ix1 = min(Hp, ty + T), min(Wp, tx + T)
                        out[:, ty:iy1, tx:ix1] = o[:, ty - y0:iy1 - y0, tx - x0:ix1 - x0]
                d = ((out[:, :H, :W] - ref[i]) / 2).abs().cpu()  # [0,1] units
                se += (d.double() ** 2).mean().item()
                mx = max(mx, d.max().item() * 255)
                mxs = max(mxs, d[:, seam].max().item() * 255 if seam.any() else 0.0)
            mse = se / args.frames
            psnr = float("inf") if mse == 0 else -10 * torch.log10(torch.tensor(mse)).item()
            print(f"halo {halo:4d} px: PSNR tiled vs untiled {psnr:7.2f} dB, max |diff| {mx:7.3f} "
                  f"(8-bit code values), at the seams (+-4 px) {mxs:7.3f}", flush=True)


if __name__ == "__main__":
    main()
