#!/usr/bin/env python3
"""The network's output clamp and identity at sigma 0: what each way of forming the change does.

  python3 weights/experiments/output_clamp.py [--weights W] [--data DIR] [--frames 6] [--ffmpeg BIN] [--json OUT]

The engines computed out = clamp(y, -1, 1), y = head + s2d(x_t) (model.Denoiser.head_out), and gave
the filter the change out - x_t. Decoded Y'CbCr can give R'G'B' outside [0, 1] (x outside [-1, 1]);
the clamp then moves such a sample even when the head adds nothing, so sigma 0 cannot return the
input. Variants of that last step (network units), measured side by side on one network pass:
  clamp   out = clamp(y, -1, 1)                          the engines before (training still)
  clampx  out = x + clamp(y, -1, 1) - clamp(x, -1, 1)    the change taken against the clamped input
  none    out = y                                        no clamp
  hull    out = clamp(y, min(-1, x), max(1, x))          the clamp range widened to the input   (the engines now: model.output_clamp)
          sample: an in-range input gives exactly what clamp gives, an out-of-range one may stay
          where it is but is never pushed further out
Measurements (the network in fp32 on the CPU):
  1. identity on Y'CbCr frames: samples/car-roundabout_320x192_8bit.mkv (yuv420p, BT.601 limited
     range, chroma centre-sited, as tagged), decoded to R'G'B' without clipping as the filter does
     (kernels/cpu/frame_convert.h: bilinear chroma at its siting, the decode matrix), the change
     taken back to code values as the filter does (the inverse matrix; chroma through the
     normalised adjoint of the upsampling), the output clipped to 0..255 (dither left out): max
     |change| and the share of samples changing by more than 0.5, of Y' and of Cb/Cr, for (a) a
     network that changes nothing (head weights and bias zero) and (b) the given weights, each at
     sigma map 0 and 15 (a default sigma on clean footage).
  2. denoising on the held-out videos cows and dog (denoise_train/data.py's validation split; never
     eval-davis4), the middle --frames frames of each: R'G'B' as OpenCV decodes it (in [0, 1]) with
     AWGN unclipped at sigma 10/30/50 (the benchmark's protocol) and 8-bit clipped and quantised
     AWGN at 15/30: RGB PSNR, peak 1, per frame, mean over frames and videos.
  3. the Y'CbCr path with noise: the same videos' own Y'CbCr frames plus white Gaussian noise of
     10 code values on each plane (chroma at its 4:2:0 resolution), rounded and clipped to 8 bit,
     decoded unclipped; the sigma map is the RMS of the R'G'B' noise in code values; PSNR of the Y'
     and of the Cb/Cr code values of the output (formed as in 1) against the clean frames.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # weights/: the package
from denoise_train.data import data_path  # noqa: E402
from denoise_train.model import reflect_index, reflect_pad  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VARIANTS = ("clamp", "clampx", "none", "hull")
KR_KB = {"bt601": (0.299, 0.114), "bt709": (0.2126, 0.0722)}


def apply_variant(v: str, y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The network output for variant v from y (head + residual) and x (the input), network units."""
    if v == "clamp":
        return y.clamp(-1, 1)
    if v == "clampx":
        return x + y.clamp(-1, 1) - x.clamp(-1, 1)
    if v == "none":
        return y
    if v == "hull":
        return torch.minimum(torch.maximum(y, x.clamp(max=-1.0)), x.clamp(min=1.0))
    raise ValueError(v)


@torch.no_grad()
def raw_outputs(model, frames: torch.Tensor, sigma: torch.Tensor, ts: list[int]) -> torch.Tensor:
    """y = head + s2d(x_t) before the clamp, for outputs ts of a sequence frames (N, 3, H, W) in
    network units (any range): (len(ts), 3, H, W). sigma (N,) per output index or a scalar map.
    Features are computed once per time index as the engines do (model.denoise_sequence)."""
    N, C, H, W = frames.shape
    cfg = model.cfg
    if cfg.align:
        raise ValueError("output_clamp.py builds the head's input itself and does not move features (Config.align)")
    r, m = cfg.fusion_radius, cfg.pad_multiple
    ph, pw = (-H) % m, (-W) % m
    x = reflect_pad(frames, ph, pw) if (ph or pw) else frames
    feats, outs = {}, []
    for j, t in enumerate(ts):
        s_map = sigma[j:j + 1]
        need = [t - 1, t, t + 1]
        f = []
        for s in need:
            key = (s, float(s_map))
            if key not in feats:
                taps = [reflect_index(s + k, N) for k in range(-r, r + 1)]
                feats[key] = model.features(x[taps][None], s_map)
            f.append(feats[key])
        centre = x[t:t + 1]
        hd = model.head(torch.stack([q.permute(0, 3, 1, 2) for q in f], dim=2)).squeeze(2)
        y = torch.nn.functional.pixel_shuffle(hd + torch.nn.functional.pixel_unshuffle(centre, 2), 2)
        outs.append(y[0, :, :H, :W])
    return torch.stack(outs)


class YCbCr:
    """8-bit limited-range Y'CbCr 4:2:0 <-> R'G'B' in [0, 1] units, as the filter converts
    (libplacebo's decode matrix for the system and levels; bilinear chroma at the siting)."""

    def __init__(self, H: int, W: int, matrix: str = "bt601", xpos: float = 0.5, ypos: float = 0.5):
        kr, kb = KR_KB[matrix]
        kg = 1 - kr - kb
        # R'G'B' = M (Y', Cb, Cr) with Y' in [0,1] and Cb, Cr in [-0.5, 0.5]
        M = np.array([[1, 0, 2 * (1 - kr)], [1, -2 * kb * (1 - kb) / kg, -2 * kr * (1 - kr) / kg], [1, 2 * (1 - kb), 0]])
        S = np.diag([255 / 219, 255 / 224, 255 / 224])        # normalised code -> Y', Cb, Cr
        self.dec = torch.tensor(M @ S, dtype=torch.float64)   # on normalised codes v = code / 255
        self.off = torch.tensor(M @ np.array([-16 / 219, -128 / 224, -128 / 224]), dtype=torch.float64)
        self.enc = torch.linalg.inv(self.dec)                 # for changes: no offsets
        self.Uy = self._taps(H, (H + 1) // 2, ypos)
        self.Ux = self._taps(W, (W + 1) // 2, xpos)
        self.wsum = (self.Uy.sum(0)[:, None] * self.Ux.sum(0)[None, :])

    @staticmethod
    def _taps(full: int, n: int, pos: float) -> torch.Tensor:
        """(full, n) bilinear upsampling matrix: chroma k sits at luma coordinate 2k + pos."""
        U = torch.zeros(full, n, dtype=torch.float64)
        for i in range(full):
            c = (i - pos) / 2
            c0 = int(np.floor(c))
            w = c - c0
            U[i, min(max(c0, 0), n - 1)] += 1 - w
            U[i, min(max(c0 + 1, 0), n - 1)] += w
        return U

    def to_rgb(self, y, u, v) -> torch.Tensor:
        """uint8 planes (H, W), (h, w), (h, w) -> R'G'B' (3, H, W) float64, unclipped."""
        Y = torch.from_numpy(y).double() / 255
        Cb = self.Uy @ (torch.from_numpy(u).double() / 255) @ self.Ux.T
        Cr = self.Uy @ (torch.from_numpy(v).double() / 255) @ self.Ux.T
        return torch.einsum("ij,jhw->ihw", self.dec, torch.stack([Y, Cb, Cr])) + self.off.view(3, 1, 1)

    def change_codes(self, d: torch.Tensor):
        """R'G'B' change (3, H, W) in [0,1] units -> Y' change (H, W) and Cb, Cr changes (2, h, w)
        in code values (the filter's add_change before dither)."""
        e = torch.einsum("ij,jhw->ihw", self.enc, d.double()) * 255
        c = torch.stack([(self.Uy.T @ e[k] @ self.Ux) / self.wsum for k in (1, 2)])
        return e[0], c


def read_yuv420(path: str, ffmpeg: str, n: int, start: int = 0):
    """Frames start..start+n-1 of a yuv420p video as uint8 planes: Y (n, H, W), U, V (n, h, w)."""
    ffprobe = os.path.join(os.path.dirname(ffmpeg), os.path.basename(ffmpeg).replace("ffmpeg", "ffprobe"))
    info = subprocess.run([ffprobe, "-v", "error", "-select_streams", "v:0",
                           "-show_entries", "stream=width,height", "-of", "csv=p=0", path],
                          capture_output=True, text=True, check=True).stdout.strip().split(",")
    W, H = int(info[0]), int(info[1])
    h, w = (H + 1) // 2, (W + 1) // 2
    raw = subprocess.run([ffmpeg, "-v", "error", "-i", path, "-vf", f"select=gte(n\\,{start})", "-frames:v", str(n),
                          "-f", "rawvideo", "-pix_fmt", "yuv420p", "-"], capture_output=True, check=True).stdout
    fs = H * W + 2 * h * w
    k = len(raw) // fs
    a = np.frombuffer(raw[:k * fs], np.uint8).reshape(k, fs).copy()
    return (a[:, :H * W].reshape(k, H, W), a[:, H * W:H * W + h * w].reshape(k, h, w),
            a[:, H * W + h * w:].reshape(k, h, w))


def read_rgb(path: str, n: int, start: int) -> torch.Tensor:
    """Frames start..start+n-1 as OpenCV decodes them: (n, 3, H, W) float in [0, 1]."""
    import cv2
    cap = cv2.VideoCapture(path)
    out, i = [], 0
    while len(out) < n:
        ok, f = cap.read()
        if not ok:
            break
        if i >= start:
            out.append(torch.from_numpy(f[:, :, ::-1].copy()).permute(2, 0, 1).float() / 255)
        i += 1
    cap.release()
    return torch.stack(out)


def psnr(a, b, peak=1.0) -> float:
    mse = ((a.double() - b.double()) ** 2).mean().item()
    return 10 * np.log10(peak * peak / max(mse, 1e-20))


def identity(model, clip: str, ffmpeg: str, n: int) -> dict:
    """Measurement 1 for one network: {variant: {map: {...}}}."""
    y, u, v = read_yuv420(clip, ffmpeg, n)
    conv = YCbCr(y.shape[1], y.shape[2])
    rgb = torch.stack([conv.to_rgb(y[i], u[i], v[i]) for i in range(len(y))]).float()
    x = rgb * 2 - 1
    t = len(y) // 2
    res = {"out_of_range_share": round(((rgb < 0) | (rgb > 1)).float().mean().item(), 5)}
    for smap in (0.0, 15.0):
        raw = raw_outputs(model, x, torch.tensor([smap]), [t])[0]
        for var in VARIANTS:
            d = (apply_variant(var, raw, x[t]) - x[t]) / 2          # R'G'B' change, [0,1] units
            dy, dc = conv.change_codes(d)
            oy = (torch.from_numpy(y[t]).double() + dy).clamp(0, 255) - torch.from_numpy(y[t]).double()
            uv = torch.stack([torch.from_numpy(u[t]), torch.from_numpy(v[t])]).double()
            oc = (uv + dc).clamp(0, 255) - uv
            res.setdefault(var, {})[f"map{smap:g}"] = {
                "y_max": round(oy.abs().max().item(), 3), "y_share": round((oy.abs() > 0.5).double().mean().item(), 5),
                "c_max": round(oc.abs().max().item(), 3), "c_share": round((oc.abs() > 0.5).double().mean().item(), 5)}
    return res


def denoising(model, videos: list[str], ffmpeg: str, n: int, seed: int = 0) -> dict:
    """Measurements 2 and 3: {case: {variant: PSNR}}."""
    g = torch.Generator().manual_seed(seed)
    R = model.cfg.temporal_radius
    acc: dict = {}

    def add(case, var, val):
        acc.setdefault(case, {}).setdefault(var, []).append(val)
    for path in videos:
        cap_n = n + 2 * R
        import cv2
        total = int(cv2.VideoCapture(path).get(cv2.CAP_PROP_FRAME_COUNT))
        start = max(0, total // 2 - cap_n // 2)
        clean = read_rgb(path, cap_n, start)
        ts = list(range(R, R + n))
        for kind, sigmas in (("awgn", (10, 30, 50)), ("awgn8", (15, 30))):
            for s in sigmas:
                noisy = clean + s / 255 * torch.randn(clean.shape, generator=g)
                if kind == "awgn8":
                    noisy = torch.round(noisy.clamp(0, 1) * 255) / 255
                x = noisy * 2 - 1
                raw = raw_outputs(model, x, torch.full((n,), float(s)), ts)
                for var in VARIANTS:
                    out = (apply_variant(var, raw, x[ts]) + 1) / 2
                    for j in range(n):
                        add(f"{kind}{s}", var, psnr(out[j], clean[ts[j]]))
        y, u, v = read_yuv420(path, ffmpeg, cap_n, start)
        conv = YCbCr(y.shape[1], y.shape[2])
        ny = np.clip(np.round(y + 10 * torch.randn(y.shape, generator=g).numpy()), 0, 255).astype(np.uint8)
        nu = np.clip(np.round(u + 10 * torch.randn(u.shape, generator=g).numpy()), 0, 255).astype(np.uint8)
        nv = np.clip(np.round(v + 10 * torch.randn(v.shape, generator=g).numpy()), 0, 255).astype(np.uint8)
        rgb_c = torch.stack([conv.to_rgb(y[i], u[i], v[i]) for i in range(len(y))])
        rgb_n = torch.stack([conv.to_rgb(ny[i], nu[i], nv[i]) for i in range(len(y))])
        sig = ((rgb_n - rgb_c) ** 2).mean().sqrt().item() * 255
        x = (rgb_n * 2 - 1).float()
        raw = raw_outputs(model, x, torch.full((n,), sig), ts)
        for var in VARIANTS:
            for j, t in enumerate(ts):
                dy, dc = conv.change_codes((apply_variant(var, raw[j], x[t]) - x[t]) / 2)
                oy = (torch.from_numpy(ny[t]).double() + dy).clamp(0, 255)
                oc = (torch.stack([torch.from_numpy(nu[t]), torch.from_numpy(nv[t])]).double() + dc).clamp(0, 255)
                add("ycbcr10_y", var, psnr(oy, torch.from_numpy(y[t]), 255))
                add("ycbcr10_c", var, psnr(oc, torch.stack([torch.from_numpy(u[t]), torch.from_numpy(v[t])]), 255))
        acc.setdefault("ycbcr10_sigma_map", {}).setdefault("all", []).append(sig)
    return {c: {v: round(sum(x) / len(x), 3) for v, x in d.items()} for c, d in acc.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", default=os.path.join(ROOT, "weights", "denoise-v2.safetensors"))
    ap.add_argument("--data", default=data_path(), help="the data folder (default: $DENOISE_DATA)")
    ap.add_argument("--clip", default=os.path.join(ROOT, "samples", "car-roundabout_320x192_8bit.mkv"))
    ap.add_argument("--frames", type=int, default=6, help="outputs per held-out video")
    ap.add_argument("--ffmpeg", default=None, help="default: build/bin/ffmpeg, else ffmpeg on PATH")
    ap.add_argument("--json")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    ffmpeg = a.ffmpeg or (os.path.join(ROOT, "build", "bin", "ffmpeg") if os.path.exists(
        os.path.join(ROOT, "build", "bin", "ffmpeg")) else shutil.which("ffmpeg"))
    if not ffmpeg:
        sys.exit("output_clamp.py: no ffmpeg (build the project or pass --ffmpeg)")
    from denoise_train.checkpoint import load_weights
    model = load_weights(a.weights).eval()
    zero = load_weights(a.weights).eval()
    with torch.no_grad():
        zero.head.weight.zero_()
        zero.head.bias.zero_()
    res = {"weights": os.path.basename(a.weights), "identity_zero_head": identity(zero, a.clip, ffmpeg, 8),
           "identity": identity(model, a.clip, ffmpeg, 8)}
    for k in ("identity_zero_head", "identity"):
        r = res[k]
        print(f"{k}: R'G'B' samples outside [0,1]: {r['out_of_range_share']:.3%}")
        for var in VARIANTS:
            print("  " + f"{var:7s} " + "   ".join(
                f"map {m[3:]:>2s}: Y' max {q['y_max']:6.2f} ({q['y_share']:.3%} > 0.5), Cb/Cr max {q['c_max']:6.2f} "
                f"({q['c_share']:.3%})" for m, q in r[var].items()))
    if not a.data:
        sys.exit("output_clamp.py: --data is needed (or DENOISE_DATA: the data folder)")
    vids = [os.path.join(a.data, "train-video", f"{v}.mp4") for v in ("cows", "dog")]
    for v in vids:
        if not os.path.exists(v):
            sys.exit(f"output_clamp.py: {v} not found (--data: the shared data folder)")
    res["denoising"] = denoising(model, vids, ffmpeg, a.frames)
    print(f"denoising PSNR (dB), {a.frames} frames each of cows, dog:")
    for case, d in res["denoising"].items():
        print(f"  {case:18s} " + "  ".join(f"{v} {x:.3f}" for v, x in d.items()))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
