"""Shared pieces of tools/eval_run.py and tools/eval_tune.py (see docs/quality.md).

Everything goes through build/bin/ffmpeg and build/bin/denoise-noise; frames are exchanged as raw
gbrpf32le files (planes G, B, R, row after row, float32 little-endian, [0,1], unclipped).
PSNR/SSIM follow weights/eval.py exactly (RGB, peak 1.0, per frame; SSIM: 11x11 Gaussian
window sigma 1.5 'valid', K1 0.01, K2 0.03, per channel, averaged), reimplemented with numpy/scipy.
"""
from __future__ import annotations

import os
import subprocess
import time

import numpy as np
from scipy.ndimage import correlate1d

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(os.environ.get("DENOISE_BUILD_DIR", os.path.join(ROOT, "build")), "bin")
FFMPEG = os.path.join(BIN, "ffmpeg")
NOISE = os.path.join(BIN, "denoise-noise")

# Pixel format each FFmpeg denoiser runs in: the highest-precision format it accepts
# (checked against the pix_fmts lists in FFmpeg 7.1's libavfilter/vf_*.c).
#   denoise: gbrpf32le natively (float end to end, no clipping)
#   hqdn3d: YUV only (no gbrp): yuv444p16le, full range, BT.709 matrix (from/to gbrp16le)
#   nlmeans: 8-bit only: gbrp
#   bm3d, atadenoise, fftdnoiz, vaguedenoiser: gbrp16le
WORK_FMT = {
    "denoise": "gbrpf32le",
    "hqdn3d": "yuv444p16le",
    "nlmeans": "gbrp",
    "bm3d": "gbrp16le",
    "atadenoise": "gbrp16le",
    "fftdnoiz": "gbrp16le",
    "vaguedenoiser": "gbrp16le",
}
METHODS = ["denoise", "hqdn3d", "nlmeans", "bm3d", "atadenoise", "fftdnoiz", "vaguedenoiser"]
FFMPEG_DENOISERS = METHODS[1:]


def frame_floats(w: int, h: int) -> int:
    return 3 * w * h


def read_raw(path: str, w: int, h: int, first: int = 0, count: int | None = None) -> np.ndarray:
    """gbrpf32le raw file -> (N, 3, H, W) float32 in R, G, B order."""
    n = frame_floats(w, h)
    a = np.fromfile(path, dtype="<f4", offset=first * n * 4, count=-1 if count is None else count * n)
    a = a.reshape(-1, 3, h, w)
    return a[:, [2, 0, 1]]  # stored G, B, R -> R, G, B


def decode_clean(src: str, out: str, frames: int, vf: str | None = None) -> int:
    """Decode a clip to raw gbrpf32le (first `frames` frames, optional filter such as a crop).

    FFmpeg decodes to gbrp (8 bit; lossless for the FFV1 gbrp eval sequences) and numpy makes
    v = code / 255 exactly: swscale's own gbrp -> gbrpf32le path in FFmpeg 7.1 dithers and scales
    by ~254/255 (255 -> 253.93/255, errors up to 1.07 code values), which would not match
    weights/eval.py's clean frames."""
    cmd = [FFMPEG, "-nostdin", "-v", "error", "-y", "-i", src]
    if vf:
        cmd += ["-vf", vf]
    cmd += ["-frames:v", str(frames), "-f", "rawvideo", "-pix_fmt", "gbrp", "pipe:1"]
    raw = subprocess.run(cmd, check=True, capture_output=True).stdout
    (np.frombuffer(raw, np.uint8).astype(np.float32) / np.float32(255)).astype("<f4").tofile(out)
    return frames


def clip_size(src: str) -> tuple[int, int]:
    ffprobe = os.path.join(BIN, "ffprobe")
    r = subprocess.run([ffprobe, "-v", "error", "-select_streams", "v:0", "-show_entries",
                        "stream=width,height", "-of", "csv=p=0", src], capture_output=True, text=True, check=True)
    w, h = r.stdout.strip().split(",")[:2]
    return int(w), int(h)


def add_noise(clean: str, noisy: str, w: int, h: int, sigma: float, seed: int = 0) -> None:
    """build/bin/denoise-noise, benchmark protocol: gbrpf32le, unclipped."""
    with open(clean, "rb") as fi, open(noisy, "wb") as fo:
        subprocess.run([NOISE, "--sigma", str(sigma), "--seed", str(seed), "--size", f"{w}x{h}",
                        "--pix-fmt", "gbrpf32le"], stdin=fi, stdout=fo, check=True)


def filter_chain(method: str, opts: str, sigma: float, frames: int = 0) -> str:
    """-vf of one method; input and output are raw io_format(method) frames."""
    fmt = WORK_FMT[method]
    if method == "atadenoise" and frames:
        # FFmpeg 7.1's CLI aborts when the clip is shorter than atadenoise's s: use the largest
        # odd s <= frames (min 5) on short (quick-mode) clips
        kv = dict(o.split("=", 1) for o in opts.split(":") if o)
        n = int(kv.get("s", 9))
        if n > frames:
            kv["s"] = str(max(5, frames - (1 - frames % 2)))
            opts = ":".join(f"{k}={v}" for k, v in kv.items())
    if method == "denoise":
        return f"denoise=sigma={sigma:g}:backend=auto{(':' + opts) if opts else ''}"
    f = f"{method}{('=' + opts) if opts else ''}"
    if fmt.startswith("yuv"):
        # gbrp16le -> full-range BT.709 Y'CbCr 4:4:4 16 bit -> filter -> gbrp16le (swscale)
        return (f"scale=out_color_matrix=bt709:out_range=full,format={fmt},{f},"
                f"scale=in_color_matrix=bt709:in_range=full,format=gbrp16le")
    return f


INT_FMT = {"gbrp": (np.uint8, 255), "gbrp16le": ("<u2", 65535)}


def io_format(method: str) -> str:
    """Raw format ffmpeg reads and writes for a method (conversions to it done exactly in numpy)."""
    fmt = WORK_FMT[method]
    return "gbrp16le" if fmt.startswith("yuv") else fmt


def run_filter(noisy: str, out: str, w: int, h: int, vf: str, method: str, threads: int = 0) -> float:
    """Run build/bin/ffmpeg on the noisy raw gbrpf32le clip; write raw gbrpf32le to `out`.

    Integer-format methods: numpy rounds and clips the float frames to the format
    (clip(round(v * (2^d - 1)))) and converts the output back exactly (/ (2^d - 1)), so the only
    losses are those the format forces; ffmpeg itself reads and writes that format raw.
    Returns the wall-clock seconds of the ffmpeg process alone."""
    fmt = io_format(method)
    src = noisy
    if fmt in INT_FMT:
        dt, peak = INT_FMT[fmt]
        src = out + ".in"
        v = np.fromfile(noisy, dtype="<f4")
        np.clip(np.rint(v * peak), 0, peak).astype(dt).tofile(src)
    cmd = [FFMPEG, "-nostdin", "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", fmt,
           "-s", f"{w}x{h}", "-r", "25", "-i", src,
           "-sws_flags", "accurate_rnd+full_chroma_int+bitexact",
           "-vf", vf, "-f", "rawvideo", "-pix_fmt", fmt, out]
    if threads:
        cmd[1:1] = ["-filter_threads", str(threads)]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    secs = time.perf_counter() - t0
    if fmt in INT_FMT:
        os.remove(src)
        dt, peak = INT_FMT[fmt]
        (np.fromfile(out, dtype=dt).astype(np.float32) / np.float32(peak)).astype("<f4").tofile(out)
    return secs


def psnr(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N, 3, H, W) -> (N,) dB, peak 1.0, double precision (weights/eval.py psnr)."""
    d = a.astype(np.float64) - b.astype(np.float64)
    mse = (d * d).reshape(len(a), -1).mean(1)
    return -10 * np.log10(mse)


_x = np.arange(11, dtype=np.float64) - 5
_g = np.exp(-_x ** 2 / (2 * 1.5 ** 2))
_G = (_g / _g.sum()).astype(np.float32)


def _filt(t: np.ndarray) -> np.ndarray:
    """Separable 11x11 Gaussian, 'valid' (as F.conv2d without padding) on (..., H, W) float32."""
    t = correlate1d(t, _G, axis=-1, mode="constant")[..., 5:-5]
    return correlate1d(t, _G, axis=-2, mode="constant")[..., 5:-5, :]


def ssim(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N, 3, H, W) -> (N,) (weights/eval.py ssim: float32 maps, per channel, averaged)."""
    out = []
    C1, C2 = 0.01 ** 2, 0.03 ** 2
    for x, y in zip(a.astype(np.float32), b.astype(np.float32)):
        mu_x, mu_y = _filt(x), _filt(y)
        sxx = _filt(x * x) - mu_x ** 2
        syy = _filt(y * y) - mu_y ** 2
        sxy = _filt(x * y) - mu_x * mu_y
        m = ((2 * mu_x * mu_y + C1) * (2 * sxy + C2)) / ((mu_x ** 2 + mu_y ** 2 + C1) * (sxx + syy + C2))
        out.append(float(m.astype(np.float64).mean()))
    return np.array(out)
