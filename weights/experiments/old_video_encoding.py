#!/usr/bin/env python3
"""The data control of the model v3 study: train-video as model v2 saw it, re-made from today's.

Until 2026-12-07 the 16 DAVIS sequences of train-video were H.264 crf 15 re-encodes of a
quality-75 JPEG copy of the DAVIS frames (about 31.5 dB from the package's quality-90
originals); today's train-video is encoded from those originals (39-43 dB from them) and the old
files are gone. This re-creates the old pipeline on today's files: every frame through JPEG
quality 75 (Pillow, 4:2:0, as the quality-75 copy was made) and the sequence re-encoded with
libx264 crf 15 yuv420p at 25 fps, so that "v2's recipe on the old and the new data at equal
steps" can be run. It prints the PSNR of each re-made sequence against today's file (RGB, peak
255, all frames), which should land near the old files' distance from the originals.

  python3 weights/experiments/old_video_encoding.py --src DATA/train-video --out DIR [--ffmpeg PATH]

Needs ffmpeg with libx264 (the build's build/bin/ffmpeg has it), numpy and Pillow.
"""
from __future__ import annotations

import argparse
import glob
import io
import os
import subprocess
import sys

import numpy as np
from PIL import Image


def probe_size(ffmpeg: str, path: str) -> tuple[int, int]:
    ffprobe = os.path.join(os.path.dirname(ffmpeg), "ffprobe") if os.path.dirname(ffmpeg) else "ffprobe"
    out = subprocess.run([ffprobe, "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=width,height",
                          "-of", "csv=p=0", path], capture_output=True, text=True, check=True).stdout
    w, h = out.strip().split(",")[:2]
    return int(w), int(h)


def frames(ffmpeg: str, path: str, w: int, h: int):
    p = subprocess.Popen([ffmpeg, "-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
                         stdout=subprocess.PIPE)
    n = w * h * 3
    while True:
        buf = p.stdout.read(n)
        if len(buf) < n:
            break
        yield np.frombuffer(buf, np.uint8).reshape(h, w, 3)
    if p.wait():
        raise RuntimeError(f"{path}: ffmpeg could not decode it (exit {p.returncode})")


def jpeg75(rgb: np.ndarray) -> np.ndarray:
    b = io.BytesIO()
    Image.fromarray(rgb).save(b, format="JPEG", quality=75, subsampling="4:2:0")
    return np.asarray(Image.open(io.BytesIO(b.getvalue())).convert("RGB"))


def remake(ffmpeg: str, src: str, dst: str) -> float:
    """Writes dst; returns the PSNR (dB) of dst against src over all frames."""
    w, h = probe_size(ffmpeg, src)
    enc = subprocess.Popen([ffmpeg, "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{w}x{h}",
                            "-r", "25", "-i", "-", "-c:v", "libx264", "-crf", "15", "-pix_fmt", "yuv420p",
                            "-movflags", "+faststart", dst + ".tmp.mp4"], stdin=subprocess.PIPE)
    for f in frames(ffmpeg, src, w, h):
        enc.stdin.write(jpeg75(f).tobytes())
    enc.stdin.close()
    if enc.wait():
        raise RuntimeError(f"{dst}: the libx264 encode failed (exit {enc.returncode})")
    os.replace(dst + ".tmp.mp4", dst)
    se, n = 0.0, 0
    for a, b in zip(frames(ffmpeg, src, w, h), frames(ffmpeg, dst, w, h)):
        se += float(np.mean((a.astype(np.float64) - b) ** 2))
        n += 1
    return 10 * np.log10(255.0 ** 2 / (se / n))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", required=True, help="today's train-video folder (*.mp4)")
    ap.add_argument("--out", required=True, help="folder for the re-made sequences (same names)")
    ap.add_argument("--ffmpeg", default="ffmpeg")
    a = ap.parse_args()
    paths = sorted(glob.glob(os.path.join(a.src, "*.mp4")))
    if not paths:
        sys.exit(f"old_video_encoding.py: no .mp4 in {a.src}")
    os.makedirs(a.out, exist_ok=True)
    ps = []
    for p in paths:
        q = remake(a.ffmpeg, p, os.path.join(a.out, os.path.basename(p)))
        ps.append(q)
        print(f"{os.path.basename(p)}: {q:.2f} dB from today's file", flush=True)
    print(f"mean {np.mean(ps):.2f} dB over {len(ps)} sequences")
    return 0


if __name__ == "__main__":
    sys.exit(main())
