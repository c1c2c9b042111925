#!/usr/bin/env python3
"""PSNR/SSIM and frames/s of denoise, FFmpeg's denoisers and the noisy input on eval-davis4.

  python3 tools/eval_run.py [--frames N] [--sigmas 10 20 ...] [--methods noisy denoise hqdn3d ...]
         [--seqs blackswan ...] [--no-report]
  (normally through tools/eval.sh / `make eval`; environment: DENOISE_DATA, EVAL_FRAMES,
   EVAL_SIGMAS, EVAL_METHODS, EVAL_SEQS)

Per sequence (first N frames) and sigma: clean frames decoded by build/bin/ffmpeg to raw
gbrpf32le; AWGN from build/bin/denoise-noise (seed 0, gbrpf32le, unclipped: the benchmark protocol,
identical to weights/denoise_train/awgn.py); each method run by build/bin/ffmpeg from that raw file
(filter chain in eval_common.filter_chain, FFmpeg denoisers with the settings tuned on a
training clip, docs/quality/settings.json), output decoded to raw gbrpf32le; PSNR/SSIM in numpy
against the clean frames (weights/eval.py's definitions). Results are appended to
build/eval/results.jsonl (one line per sequence x sigma x method x frame count x options); rows
already there are reused, so an interrupted or partial run continues where it stopped.
Then tools/eval_report.py writes docs/quality.md and the PNGs.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from eval_common import (METHODS, ROOT, add_noise, clip_size, decode_clean, filter_chain,  # noqa: E402
                         psnr, read_raw, run_filter, ssim)

CROP = os.environ.get("EVAL_CROP", "parkour:2:480:200")  # sequence:frame:x:y of the 160x160 crops


def machine() -> str:
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} logical CPUs, {platform.system()} {platform.release()}"


def load_done(path: str) -> set:
    done = set()
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                done.add((r["seq"], r["sigma"], r["method"], r["frames"], r["options"]))
    return done


def main():
    env = os.environ
    data = env.get("DENOISE_DATA", os.path.join(os.path.dirname(ROOT), "shared", "data"))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.path.join(data, "eval-davis4"))
    ap.add_argument("--frames", type=int, default=int(env.get("EVAL_FRAMES", "25")))
    ap.add_argument("--sigmas", type=int, nargs="+",
                    default=[int(x) for x in env.get("EVAL_SIGMAS", "10 20 30 40 50").split()])
    ap.add_argument("--methods", nargs="+", default=env.get("EVAL_METHODS", "noisy " + " ".join(METHODS)).split())
    ap.add_argument("--seqs", nargs="+", default=env.get("EVAL_SEQS", "").split() or None)
    ap.add_argument("--settings", default=os.path.join(ROOT, "docs", "quality", "settings.json"))
    ap.add_argument("--work", default=os.path.join(ROOT, "build", "eval"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-report", action="store_true")
    args = ap.parse_args()

    with open(args.settings) as f:
        tuned = json.load(f)["settings"]
    os.makedirs(os.path.join(args.work, "crops"), exist_ok=True)
    results = os.path.join(args.work, "results.jsonl")
    done = load_done(results)
    seqs = sorted(glob.glob(os.path.join(args.data, "*.mkv")))
    if args.seqs:
        seqs = [p for p in seqs if os.path.splitext(os.path.basename(p))[0] in args.seqs]
    if not seqs:
        sys.exit(f"no sequences in {args.data} (set DENOISE_DATA)")
    crop_seq, crop_frame, crop_x, crop_y = CROP.split(":")
    crop_frame, crop_x, crop_y = int(crop_frame), int(crop_x), int(crop_y)
    host = machine()

    def save_crop(name, sigma, method, frames_arr):
        if name == crop_seq and crop_frame < len(frames_arr):
            np.save(os.path.join(args.work, "crops", f"{name}_f{args.frames}_s{sigma}_{method}.npy"),
                    frames_arr[crop_frame, :, crop_y:crop_y + 160, crop_x:crop_x + 160])

    clips = {}
    for p in seqs:  # decode once
        name = os.path.splitext(os.path.basename(p))[0]
        w, h = clip_size(p)
        clean = os.path.join(args.work, f"clean_{name}_{args.frames}.raw")
        if not os.path.exists(clean):
            decode_clean(p, clean + ".tmp", args.frames)
            os.replace(clean + ".tmp", clean)
        clips[name] = (clean, w, h)
    for s in args.sigmas:  # sigma outer: a partial run still gives complete sigma rows
        for name, (clean, w, h) in clips.items():
            c = read_raw(clean, w, h)
            n_frames = len(c)
            save_crop(name, 0, "clean", c)
            todo = []
            for m in args.methods:
                opts = "" if m in ("noisy", "denoise") else tuned[m][str(s)]["options"]
                if (name, s, m, n_frames, opts) not in done:
                    todo.append((m, opts))
            if not todo:
                continue
            noisy = os.path.join(args.work, f"noisy_{name}_{n_frames}_{s}_{os.getpid()}.raw")
            out = os.path.join(args.work, f"out_{os.getpid()}.raw")
            add_noise(clean, noisy, w, h, s, args.seed)
            for m, opts in todo:
                if m == "noisy":
                    vf, secs, y = "", 0.0, read_raw(noisy, w, h)
                else:
                    vf = filter_chain(m, opts, s, n_frames)
                    secs = run_filter(noisy, out, w, h, vf, m)
                    y = read_raw(out, w, h)
                if len(y) != n_frames:
                    sys.exit(f"{m} on {name}: {len(y)} frames out for {n_frames} in")
                ps, ss = psnr(y, c), ssim(y, c)
                save_crop(name, s, m, y)
                row = {"seq": name, "sigma": s, "method": m, "frames": n_frames, "options": opts, "vf": vf,
                       "psnr": float(ps.mean()), "ssim": float(ss.mean()),
                       "psnr_frames": [round(float(v), 4) for v in ps], "seconds": round(secs, 3),
                       "size": f"{w}x{h}", "machine": host, "load1": round(os.getloadavg()[0], 2),
                       "time": time.strftime("%Y-%m-%dT%H:%M:%S")}
                with open(results, "a") as f:
                    f.write(json.dumps(row) + "\n")
                print(f"{name:12s} sigma {s:2d} {m:14s} PSNR {row['psnr']:6.2f} SSIM {row['ssim']:.4f} "
                      f"{(n_frames / secs) if secs else 0:7.3f} fps  {opts}", flush=True)
            os.remove(noisy)
            if os.path.exists(out):
                os.remove(out)
    if not args.no_report:
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "eval_report.py"), "--frames", str(args.frames),
                        "--sigmas", *map(str, args.sigmas)], check=True)


if __name__ == "__main__":
    main()
