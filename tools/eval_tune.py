#!/usr/bin/env python3
"""Choose each FFmpeg denoiser's setting per sigma on a TRAINING clip (never on eval-davis4).

  python3 tools/eval_tune.py [--clip DENOISE_DATA/train-video/bmx-trees.mp4] [--frames 10]
         [--crop 320:240] [--sigmas 10 20 30 40 50] [--methods hqdn3d ...] [--out docs/quality/settings.json]

Same protocol as the evaluation (tools/eval_run.py): clean frames -> raw gbrpf32le -> build/bin/denoise-noise
(seed 0, unclipped) -> build/bin/ffmpeg with the method in its working format -> gbrpf32le;
the setting with the best mean RGB PSNR over the frames wins. Grids are small and scale with sigma
(8-bit code values; all these filters' strengths are in 8-bit units whatever the bit depth).
Run through tools/tune_ffmpeg_denoisers.sh (or `make eval TUNE=1`).
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eval_common import (FFMPEG_DENOISERS, ROOT, WORK_FMT, add_noise, decode_clean, filter_chain,  # noqa: E402
                         psnr, read_raw, run_filter)


def r3(x: float) -> float:
    return float(f"{x:.3g}")


def grid(method: str, s: float) -> list[str]:
    """Candidate option strings for one sigma."""
    out = []
    if method == "hqdn3d":
        # luma spatial ls, temporal = ratio * ls; chroma = luma (RGB AWGN puts comparable noise
        # into full-range Cb/Cr)
        for f, t in itertools.product([0.55, 0.8, 1.2, 1.8, 2.7, 4.0], [0.1, 0.3, 0.75, 1.5]):
            ls = r3(s * f)
            lt = r3(ls * t)
            out.append(f"luma_spatial={ls}:chroma_spatial={ls}:luma_tmp={lt}:chroma_tmp={lt}")
    elif method == "nlmeans":
        # FFmpeg's weight is exp(-SSD over the patch / (10 s)^2): the useful s grows with p
        for p, f in itertools.product([3, 5, 7], [0.15, 0.25, 0.4, 0.6, 0.9]):
            v = min(30.0, max(1.0, r3(s * f * p / 5)))
            out.append(f"s={v}:p={p}:r=15")
    elif method == "bm3d":
        # basic estimate only (one stage), FFmpeg defaults otherwise (block 16, step 4, group 1)
        for f in [2.5, 4.0, 6.0, 9.0]:
            out.append(f"sigma={r3(s * f)}")
    elif method == "atadenoise":
        # s (frames averaged) at most 9: FFmpeg 7.1's CLI aborts (ffmpeg_filter.c assertion) when a clip
        # is shorter than s; tools/eval_run.py lowers s to the clip length for shorter clips
        for a, b, n in itertools.product([0.01, 0.02, 0.05, 0.1, 0.2, 0.3], [0.2, 0.5, 1.0, 2.0, 5.0], [5, 9]):
            out.append(f"0a={a}:1a={a}:2a={a}:0b={b}:1b={b}:2b={b}:s={n}")
    elif method == "fftdnoiz":
        # block 32, overlap 0.5, amount 1 (defaults); one previous and one next frame (3D FFT)
        vals = sorted({min(100.0, r3(s * f)) for f in [1.0, 1.5, 2.2, 3.3, 5.0, 7.5]})
        for v in vals:
            out.append(f"sigma={v}:prev=1:next=1")
    elif method == "vaguedenoiser":
        for f, pc in itertools.product([0.5, 1.0, 1.5, 2.0, 3.0], [85, 100]):
            out.append(f"threshold={r3(s * f)}:percent={pc}")
    return out


def main():
    data = os.environ.get("DENOISE_DATA", os.path.join(os.path.dirname(ROOT), "shared", "data"))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clip", default=os.path.join(data, "train-video", "bmx-trees.mp4"))
    ap.add_argument("--frames", type=int, default=10)
    ap.add_argument("--crop", default="320:240", help="crop W:H (centred), '' for the full frame")
    ap.add_argument("--sigmas", type=float, nargs="+", default=[10, 20, 30, 40, 50])
    ap.add_argument("--methods", nargs="+", default=FFMPEG_DENOISERS)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--resume", action="store_true", help="keep entries of --out whose winner is in the current grid")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "quality", "settings.json"))
    args = ap.parse_args()
    if "eval-davis4" in os.path.abspath(args.clip):
        sys.exit("refusing to tune on eval-davis4 (the data folder's README.md)")

    settings = {}
    if os.path.exists(args.out):
        with open(args.out) as f:
            settings = json.load(f)
    settings.setdefault("settings", {})
    crop = f"crop={args.crop}" if args.crop else None
    w, h = map(int, args.crop.split(":")) if args.crop else (None, None)
    t_all = time.time()
    with tempfile.TemporaryDirectory(prefix="denoise-tune-") as tmp:
        clean, noisy, out = (os.path.join(tmp, n) for n in ("clean.raw", "noisy.raw", "out.raw"))
        decode_clean(args.clip, clean, args.frames, crop)
        if w is None:
            from eval_common import clip_size
            w, h = clip_size(args.clip)
        c = read_raw(clean, w, h)
        for s in args.sigmas:
            add_noise(clean, noisy, w, h, s, args.seed)
            n_psnr = psnr(read_raw(noisy, w, h), c).mean()
            for m in args.methods:
                prev = settings["settings"].get(m, {}).get(str(int(s)))
                if args.resume and prev and prev.get("grid") == grid(m, s):
                    continue
                results = []
                t0 = time.time()
                for opts in grid(m, s):
                    run_filter(noisy, out, w, h, filter_chain(m, opts, s, args.frames), m)
                    p = float(psnr(read_raw(out, w, h), c).mean())
                    results.append((p, opts))
                results.sort(reverse=True)
                cands = grid(m, s)
                best = results[0]
                edge = best[1] in (cands[0], cands[-1])
                settings["settings"].setdefault(m, {})[str(int(s))] = {
                    "options": best[1], "train_psnr": round(best[0], 3), "noisy_train_psnr": round(float(n_psnr), 3),
                    "grid": cands, "runner_up": [[round(p, 3), o] for p, o in results[1:3]]}
                print(f"sigma {s:g} {m:14s} best {best[0]:.2f} dB (noisy {n_psnr:.2f}) {best[1]}"
                      f"{'  [first/last grid point]' if edge else ''}  ({len(cands)} runs, {time.time() - t0:.0f} s)",
                      flush=True)
                with open(args.out, "w") as f:  # save as we go
                    json.dump(settings, f, indent=1, sort_keys=True)
    settings["formats"] = {m: WORK_FMT[m] for m in FFMPEG_DENOISERS}
    note = settings.get("tuning", {}).get("note") if args.resume else None
    settings["tuning"] = {
        "command": "tools/tune_ffmpeg_denoisers.sh " + " ".join(sys.argv[1:]),
        "clip": os.path.relpath(args.clip, data) if args.clip.startswith(data) else args.clip,
        "frames": args.frames, "crop": args.crop or "full", "seed": args.seed,
        "criterion": "mean RGB PSNR (peak 1) over the frames, noise gbrpf32le unclipped",
        "seconds": round(time.time() - t_all, 1)}
    if note:
        settings["tuning"]["note"] = note
    with open(args.out, "w") as f:
        json.dump(settings, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
