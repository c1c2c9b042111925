#!/usr/bin/env python3
"""Evaluate the noise estimator behind sigma=auto (kernels/sigma_auto.h, kernels/common/noise_estimate.h)
against the true sigma, through build/bin/denoise-estimate-sigma (the engine's C++ code).
docs/sigma-auto.md.

Clean frames are decoded with build/bin/ffmpeg to 8-bit gbrp and made R'G'B' floats v = code/255
(exact); noise is weights/denoise_train/awgn.py's counter-based Gaussian (seed 0, the project's eval protocol),
the same unit-normal field scaled by each sigma. Noise models:
  awgn    R'G'B' + sigma/255 N(0,1), float, unclipped (the benchmark protocol)
  clip8   the same, clipped to [0, 1] and rounded to 8-bit codes (awgn.py's clip8: real files)
  ycc420  R'G'B' -> 8-bit Y'CbCr 4:2:0 (BT.709, limited range, 2x2 box chroma), + white noise on
          the Y' codes and on the Cb, Cr codes (one sample per 2x2 block, chroma std = rho x luma
          std, rho = --rho), rounded and clipped to 8 bit, given to the estimator as yuv420p (the
          engine's path for subsampled formats: native planes through the decoding matrix). The
          true sigma is the network's (weights/denoise_train/noise_models.py): the RMS over R', G', B' of the
          noise's standard deviation, sqrt(sum_j gain_j s_j^2) with gain_j = (1/3) sum_c dec[c][j]^2
          for BT.709 limited range; the noise levels are set so that it equals the nominal sigma.
The estimator sees each clip as one segment: for frame t it reports the segment estimate after
frames 0..t (what sigma=auto would use for frame t) and the frame's own estimate.

  tools/eval_sigma.py --set eval  --out docs/sigma-auto/eval.json      # eval-davis4 (report only)
  tools/eval_sigma.py --set train --out /tmp/train.json                # train-video* (tuning)
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "weights"))
from denoise_train import awgn  # noqa: E402

BIN = os.path.join(os.environ.get("DENOISE_BUILD_DIR", os.path.join(ROOT, "build")), "bin")
FFMPEG = os.path.join(BIN, "ffmpeg")
ESTIMATE = os.path.join(BIN, "denoise-estimate-sigma")
DATA = os.environ.get("DENOISE_DATA_DIR", os.path.join(ROOT, "..", "shared", "data"))

SETS = {
    # held-out: evaluation only, never tuned on
    "eval": [("eval-davis4/%s.mkv" % s, 0) for s in ("blackswan", "dance-twirl", "kite-surf", "parkour")],
    # tuning: train footage (frames from the middle of each clip)
    "train": [("train-video2/sam2-%s.mp4" % s, 40) for s in ("bedroom", "blocks", "coffee", "cups", "dog",
                                                             "default_juggle")]
    + [("train-video/%s.mp4" % s, 20) for s in ("bmx-trees", "cows", "goat", "libby", "paragliding-launch",
                                                "soapbox")],
}

# BT.709 luma coefficients; limited range 8-bit: Y' 16..235, Cb/Cr 16..240
KR, KB = 0.2126, 0.0722
KG = 1 - KR - KB


def ycc_gains() -> tuple[float, float, float]:
    """gain_j = (1/3) sum_c d[c][j]^2, d = dR'G'B'(8-bit) / dcode_j for BT.709 limited range 8-bit."""
    ky, kc = 255 / 219, 255 / 224
    d = np.array([[ky, 0, kc * 2 * (1 - KR)],
                  [ky, -kc * 2 * (1 - KB) * KB / KG, -kc * 2 * (1 - KR) * KR / KG],
                  [ky, kc * 2 * (1 - KB), 0]])
    g = (d ** 2).sum(axis=0) / 3
    return float(g[0]), float(g[1]), float(g[2])


def estimate_yuv(y: np.ndarray, cb: np.ndarray, cr: np.ndarray, decay: float | None) -> list[dict]:
    """Run denoise-estimate-sigma --pix-fmt yuv420p on 8-bit planes (N,H,W), (N,H/2,W/2) x 2."""
    n, h, w = y.shape
    cmd = [ESTIMATE, "--size", "%dx%d" % (w, h), "--pix-fmt", "yuv420p", "--matrix", "bt709"]
    if decay is not None:
        cmd += ["--decay", str(decay)]
    data = b"".join(y[k].astype(np.uint8).tobytes() + cb[k].astype(np.uint8).tobytes() +
                    cr[k].astype(np.uint8).tobytes() for k in range(n))
    return parse(subprocess.run(cmd, input=data, capture_output=True, check=True).stdout.decode(), n)


def parse(out: str, n: int) -> list[dict]:
    rows = []
    for line in out.splitlines():
        f = line.split()
        if f[0] == "frame":
            rows.append({f[k]: float(f[k + 1]) for k in range(2, len(f), 2)})
    if len(rows) != n:
        raise RuntimeError("estimator printed %d frames for %d" % (len(rows), n))
    return rows


def decode(path: str, first: int, frames: int) -> np.ndarray:
    """(N, 3, H, W) float32 R'G'B' in [0, 1], frames first..first+frames-1."""
    probe = subprocess.run([os.path.join(BIN, "ffprobe"), "-v", "error", "-select_streams", "v:0",
                            "-show_entries", "stream=width,height", "-of", "csv=p=0", path],
                           capture_output=True, text=True, check=True).stdout.strip().split(",")
    w, h = int(probe[0]), int(probe[1])
    raw = subprocess.run([FFMPEG, "-nostdin", "-v", "error", "-i", path, "-vf",
                          "select='gte(n\\,%d)',format=gbrp" % first, "-fps_mode", "passthrough",
                          "-frames:v", str(frames), "-f", "rawvideo", "-pix_fmt", "gbrp", "pipe:1"],
                         capture_output=True, check=True).stdout
    a = np.frombuffer(raw, np.uint8).reshape(-1, 3, h, w)[:, [2, 0, 1]]
    return a.astype(np.float32) / np.float32(255)


def to_yuv420(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(N,3,H,W) R'G'B' [0,1] -> float 8-bit code values Y' (N,H,W), Cb, Cr (N,H/2,W/2), unrounded."""
    r, g, b = rgb[:, 0].astype(np.float64), rgb[:, 1].astype(np.float64), rgb[:, 2].astype(np.float64)
    y = KR * r + KG * g + KB * b
    cb = (b - y) / (2 * (1 - KB))
    cr = (r - y) / (2 * (1 - KR))
    def box(c):
        return 0.25 * (c[:, 0::2, 0::2] + c[:, 1::2, 0::2] + c[:, 0::2, 1::2] + c[:, 1::2, 1::2])
    return 16 + 219 * y, 128 + 224 * box(cb), 128 + 224 * box(cr)


def upsample2(c: np.ndarray) -> np.ndarray:
    """Centre-sited bilinear 2x upsampling (weights 3/4, 1/4), edges replicated: (N,h,w) -> (N,2h,2w)."""
    def up(a, axis):
        a = np.moveaxis(a, axis, -1)
        prev = np.concatenate([a[..., :1], a[..., :-1]], axis=-1)
        nxt = np.concatenate([a[..., 1:], a[..., -1:]], axis=-1)
        out = np.empty(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
        out[..., 0::2] = 0.75 * a + 0.25 * prev
        out[..., 1::2] = 0.75 * a + 0.25 * nxt
        return np.moveaxis(out, -1, axis)
    return up(up(c, 1), 2)


def from_yuv420(y: np.ndarray, cb: np.ndarray, cr: np.ndarray) -> np.ndarray:
    """8-bit code values -> (N,3,H,W) float32 R'G'B' (unclipped, as the engine decodes)."""
    yy = (y - 16) / 219
    pb = upsample2((cb - 128) / 224)
    pr = upsample2((cr - 128) / 224)
    r = yy + 2 * (1 - KR) * pr
    b = yy + 2 * (1 - KB) * pb
    g = (yy - KR * r - KB * b) / KG
    return np.stack([r, g, b], axis=1).astype(np.float32)


def estimate(frames: np.ndarray, decay: float | None) -> list[dict]:
    """Run denoise-estimate-sigma on (N,3,H,W) R'G'B' floats; one dict per frame."""
    n, _, h, w = frames.shape
    cmd = [ESTIMATE, "--size", "%dx%d" % (w, h), "--pix-fmt", "gbrpf32le"]
    if decay is not None:
        cmd += ["--decay", str(decay)]
    data = np.ascontiguousarray(frames[:, [1, 2, 0]], dtype="<f4").tobytes()  # R,G,B -> G,B,R planes
    return parse(subprocess.run(cmd, input=data, capture_output=True, check=True).stdout.decode(), n)


def markdown(results: list[dict]) -> str:
    """Per sigma: mean |error| and bias of the segment estimate after each frame (all clips and
    frames), per noise model; yuv420 against the nominal sigma and against the R'G'B' std."""
    sigmas = sorted({r["sigma"] for r in results})
    modes = [m for m in ("awgn", "clip8", "yuv420", "ycc420") if any(r["mode"] == m for r in results)]
    cols = []
    for m in modes:
        cols.append((m, "sigma"))
        if m == "yuv420":
            cols.append((m, "sigma_rgb"))
    head = ["sigma"] + ["%s%s |err| / bias" % (m, " vs R'G'B' std" if ref == "sigma_rgb" else "")
                        for m, ref in cols]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in sigmas:
        row = ["%g" % s]
        for m, ref in cols:
            rs = [r for r in results if r["mode"] == m and r["sigma"] == s]
            e = np.concatenate([np.array(r["estimate"]) - r[ref] for r in rs])
            extra = " (%.1f)" % np.mean([r["sigma_rgb"] for r in rs]) if ref == "sigma_rgb" else ""
            row.append("%.2f / %+.2f%s" % (np.mean(np.abs(e)), np.mean(e), extra))
        lines.append("| " + " | ".join(row) + " |")
    band = [s for s in sigmas if 5 <= s <= 50]
    for m, ref in cols:
        e = np.concatenate([np.array(r["estimate"]) - r[ref] for r in results
                            if r["mode"] == m and r["sigma"] in band])
        lines.append("")
        lines.append("%s%s, sigma %g..%g: mean |error| %.2f, bias %+.2f, largest |error| %.2f" % (
            m, " vs R'G'B' std" if ref == "sigma_rgb" else "", band[0], band[-1], np.mean(np.abs(e)), np.mean(e),
            np.max(np.abs(e))))
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", choices=sorted(SETS), default="eval")
    ap.add_argument("--frames", type=int, default=25, help="frames per clip (one segment)")
    ap.add_argument("--sigmas", default="0,2,5,10,15,20,25,30,40,50")
    ap.add_argument("--modes", default="awgn,clip8,ycc420")
    ap.add_argument("--rho", type=float, default=1.0, help="ycc420: chroma std / luma std (code values)")
    ap.add_argument("--decay", type=float, default=None, help="override the estimator's decay")
    ap.add_argument("--out", help="write the per-clip results as JSON")
    ap.add_argument("--report", metavar="JSON", help="only print the markdown table of a saved run")
    args = ap.parse_args()
    if args.report:
        with open(args.report) as f:
            print(markdown(json.load(f)["results"]))
        return 0
    sigmas = [float(s) for s in args.sigmas.split(",")]
    modes = args.modes.split(",")
    results = []
    t0 = time.time()
    for rel, first in SETS[args.set]:
        clean = decode(os.path.join(DATA, rel), first, args.frames)
        n, _, h, w = clean.shape
        z = awgn.gaussian(0, 0, n, h, w).numpy()
        if "yuv420" in modes or "ycc420" in modes:
            y0, cb0, cr0 = to_yuv420(clean)
            ref420 = from_yuv420(np.clip(np.rint(y0), 0, 255), np.clip(np.rint(cb0), 0, 255),
                                 np.clip(np.rint(cr0), 0, 255))
            gy, gcb, gcr = ycc_gains()
        for mode in modes:
            for s in sigmas:
                true_rgb = s
                if mode == "awgn":
                    noisy = clean + np.float32(s / 255) * z
                elif mode == "clip8":
                    noisy = (np.rint(np.clip(clean + np.float32(s / 255) * z, 0, 1) * 255) / 255).astype(np.float32)
                elif mode == "yuv420":
                    yn = np.clip(np.rint(y0 + s * z[:, 0]), 0, 255)
                    cbn = np.clip(np.rint(cb0 + s * z[:, 1, 0::2, 0::2]), 0, 255)
                    crn = np.clip(np.rint(cr0 + s * z[:, 2, 0::2, 0::2]), 0, 255)
                    noisy = from_yuv420(yn, cbn, crn)
                    true_rgb = float(np.sqrt(np.mean((255.0 * (noisy - ref420)) ** 2)))
                else:
                    # luma std sy, chroma std rho sy, with gy sy^2 + (gcb + gcr) rho^2 sy^2 = s^2
                    sy = s / np.sqrt(gy + (gcb + gcr) * args.rho ** 2)
                    sc = args.rho * sy
                    yn = np.clip(np.rint(y0 + sy * z[:, 0]), 0, 255)
                    cbn = np.clip(np.rint(cb0 + sc * z[:, 1, 0::2, 0::2]), 0, 255)
                    crn = np.clip(np.rint(cr0 + sc * z[:, 2, 0::2, 0::2]), 0, 255)
                if mode == "ycc420":
                    rows = estimate_yuv(yn, cbn, crn, args.decay)
                else:
                    rows = estimate(noisy, args.decay)
                results.append({"clip": rel, "mode": mode, "sigma": s, "sigma_rgb": true_rgb,
                                "estimate": [r["sigma"] for r in rows],
                                "frame_estimate": [r["frame_sigma"] for r in rows]})
                print("%-28s %-6s sigma %5.1f (R'G'B' %5.2f): segment %6.2f  last frame alone %6.2f  [%.0f s]" % (
                    rel, mode, s, true_rgb, rows[-1]["sigma"], rows[-1]["frame_sigma"], time.time() - t0),
                    flush=True)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump({"set": args.set, "frames": args.frames, "decay": args.decay, "rho": args.rho,
                       "results": results}, f)
    # summary: per mode and sigma, over clips and frames (segment estimate after each frame)
    print("\nmode    sigma  mean|err|  bias   (segment estimate after each frame; frame alone: mean|err| bias)")
    for mode in modes:
        for s in sigmas:
            rs = [r for r in results if r["mode"] == mode and r["sigma"] == s]
            for ref in (["sigma", "sigma_rgb"] if mode == "yuv420" else ["sigma"]):
                e = np.concatenate([np.array(r["estimate"]) - r[ref] for r in rs])
                fe = np.concatenate([np.array(r["frame_estimate"]) - r[ref] for r in rs])
                tag = mode if ref == "sigma" else mode + "/rgb"
                print("%-10s %5.1f  %6.2f  %+6.2f    %6.2f  %+6.2f" % (tag, s, np.mean(np.abs(e)), np.mean(e),
                                                                 np.mean(np.abs(fe)), np.mean(fe)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
