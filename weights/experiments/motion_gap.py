#!/usr/bin/env python3
"""How much of a network's temporal denoising real motion costs, on val_davis (never eval-davis4).

  python3 weights/experiments/motion_gap.py WEIGHTS [WEIGHTS ...] [--videos DIR ...] [--subpixel 0.25,0.5]
         [--per-clip] [--flow] [--flow-noisy] [--by-residual] [--device cpu|cuda]

For each weight file (.safetensors or training checkpoint), PSNR (dB) at sigma 10 / 30 / 50 on
val_davis's 16 clips (validation.make_val_davis; AWGN, noise seed 777, validation.validate: fp32 on the
CPU, bf16 autocast on CUDA) in three forms of the same clips:
  real      the clips as they are: train.log's val_davis figures;
  static    every frame replaced by the clip's centre frame, the noise still independent per
            frame: the network's temporal denoising with perfect motion compensation, an upper
            bound for what alignment could give;
  subpixel  the static clips with the frame at offset k moved by k d px in x and 0.7 k d in y
            (bicubic grid_sample, reflection at the borders): a global translation of d px per
            frame, most of it below a pixel, which whole-pixel alignment cannot remove.
--per-clip adds real and static per clip at sigma 10 and 30 (validate's groups, the same noise)
with each clip's motion (the mean over tiles of max(|dy|, |dx|) of align.tile_shifts between the
centre and the frames 3 away, at radius 24: a tile that moves further counts as 24).
--flow adds a fourth form:
  flow      every other frame of the clean clip warped onto the centre frame by dense optical
            flow estimated on the clean frames (OpenCV's DIS, Kroeger et al., ECCV 2016, preset
            medium, on BT.601 luma; bicubic cv2.remap, reflection at the borders), then the noise
            added: what per-pixel motion compensation could give at best, its interpolation
            leaving the noise untouched.
--flow-noisy adds the same with the flow estimated, at each sigma, on noisy frames (an
  independent AWGN draw, seed 1000 + sigma, luma blurred by a Gaussian of 1 + sigma / 20 px
  before DIS): what dense flow from the network's own input could give.
--by-residual splits each network's squared error on the centre frame (sigma 10 and 30, real and
static, one noise draw, seed 777) by the clean residual of the network's own fusion window: the
mean over its frames of |aligned neighbour - centre| (align.tile_shifts / shift_tiles with the
network's radius and tile, on the clean frames; unaligned for a network without alignment), over
R'G'B', 5x5 box mean, in code values. Per
bin: the share of pixels, PSNR of the pooled error real and static, and the bin's share of the
whole excess (real - static error): large residuals (occlusion, deformation) or small ones
(texture moved by less than the noise).
Then, independent of the weights: the mean |neighbour - centre| of the clean clips in code values
(luma and chroma together, R'G'B' samples), unaligned and after align.shift_tiles with shifts
estimated on the clean frames (radius 24) at tiles 64 and 32, and at tile 8 refined by +-2 px
from the tile-64 shifts (and after the flow warps of --flow and --flow-noisy), 1 and 3 frames
away: what a per-tile whole-pixel translation leaves.
"""
from __future__ import annotations

import argparse
import os
import sys

import cv2
import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # weights/: the package
from denoise_train import align  # noqa: E402
from denoise_train.checkpoint import load_weights  # noqa: E402
from denoise_train.data import VAL_T, data_path  # noqa: E402
from denoise_train.validation import centre_outputs, make_val_davis, validate  # noqa: E402

SIGMAS = (10, 30, 50)


def static_clips(clips: torch.Tensor) -> torch.Tensor:
    """(N, T, 3, H, W) -> every frame the centre frame (T // 2)."""
    return clips[:, clips.shape[1] // 2:clips.shape[1] // 2 + 1].expand_as(clips).contiguous()


def translated(clips: torch.Tensor, d: float) -> torch.Tensor:
    """Static clips (N, T, 3, H, W) in [0, 1] -> frame k moved by (k - T // 2) (0.7 d, d) px (y, x),
    bicubic, reflection padding, clipped to [0, 1]; the centre frame unchanged."""
    N, T, _, H, W = clips.shape
    out = clips.clone()
    for k in range(T):
        o = k - T // 2
        if o == 0:
            continue
        theta = torch.tensor([[1.0, 0.0, 2 * o * d / W], [0.0, 1.0, 2 * o * 0.7 * d / H]], device=clips.device)
        grid = F.affine_grid(theta.expand(N, 2, 3), (N, 3, H, W), align_corners=False)
        out[:, k] = F.grid_sample(clips[:, k], grid, mode="bicubic", padding_mode="reflection",
                                  align_corners=False).clamp(0, 1)
    return out


def flow_warped(clips: torch.Tensor, sigma: float = 0.0) -> torch.Tensor:
    """Clips (N, T, 3, H, W) in [0, 1] -> every frame but the centre one warped onto the centre
    frame by DIS optical flow estimated on 8-bit luma (module docstring): of the clean frames
    (sigma 0), or of the frames with AWGN of sigma (code values; seed 1000 + sigma) blurred by a
    Gaussian of 1 + sigma / 20 px. Clipped to [0, 1]; the centre frame unchanged."""
    N, T, _, H, W = clips.shape
    c = T // 2
    dis = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM)
    rgb = clips.permute(0, 1, 3, 4, 2).cpu().numpy().astype(np.float32)
    guide = rgb
    if sigma:
        g = torch.Generator()
        g.manual_seed(1000 + int(sigma))
        guide = rgb + sigma / 255.0 * torch.randn(rgb.shape, generator=g).numpy()
        guide = np.stack([[cv2.GaussianBlur(f, (0, 0), 1 + sigma / 20) for f in clip] for clip in guide])
    luma = lambda f: cv2.cvtColor((np.clip(f, 0, 1) * 255).round().astype(np.uint8), cv2.COLOR_RGB2GRAY)  # noqa: E731
    gy, gx = np.mgrid[0:H, 0:W].astype(np.float32)
    out = clips.clone()
    for i in range(N):
        centre = luma(guide[i, c])
        for k in (k for k in range(T) if k != c):
            f = dis.calc(centre, luma(guide[i, k]), None)    # centre(p) ~ frame k(p + f(p))
            w = cv2.remap(rgb[i, k], gx + f[..., 0], gy + f[..., 1], cv2.INTER_CUBIC, borderMode=cv2.BORDER_REFLECT)
            out[i, k] = torch.from_numpy(np.clip(w, 0, 1)).permute(2, 0, 1).to(clips.device)
    return out


def centre_sq_error(model, clips: torch.Tensor, noise: torch.Tensor, sigma: float) -> torch.Tensor:
    """Squared error (N, H, W) of the network's centre frame, R'G'B' mean, [0, 1] units, on
    clips + sigma / 255 * noise (clips and noise (N, T, 3, H, W), T the network's window)."""
    out = centre_outputs(model, clips + sigma / 255.0 * noise, float(sigma))
    return ((out - clips[:, clips.shape[1] // 2]) ** 2).mean(1)


def by_residual(model, clips: torch.Tensor) -> list[str]:
    """--by-residual's lines (module docstring) for one network."""
    c = model.cfg.temporal_radius
    mid = clips.shape[1] // 2
    clips = clips[:, mid - c:mid + c + 1]
    x = clips * 2 - 1
    R, tile = model.cfg.align, model.cfg.align_tile
    res = []
    for o in [o for o in range(-model.cfg.fusion_radius, model.cfg.fusion_radius + 1) if o]:
        moved = align.shift_tiles(x[:, c + o], align.tile_shifts(x[:, c], x[:, c + o], R, tile), tile) if R else x[:, c + o]
        res.append((moved - x[:, c]).abs().mean(1) * 127.5)
    r = F.avg_pool2d(torch.stack(res).mean(0)[:, None], 5, 1, 2, count_include_pad=False)[:, 0]
    g = torch.Generator()
    g.manual_seed(777)
    still = static_clips(clips)
    edges = (0, 2, 4, 8, 16, 32, float("inf"))
    db = lambda e: -10 * torch.log10(e.mean()).item()  # noqa: E731
    lines = []
    for s in (10, 30):
        n = torch.randn(clips.shape, generator=g).to(clips.device)
        er, es = centre_sq_error(model, clips, n, s), centre_sq_error(model, still, n, s)
        excess = (er - es).sum()
        lines.append(f"  sigma {s}, error by the clean residual of the fusion window (code values): pooled real "
                     f"{db(er):.2f} dB, static {db(es):.2f} dB")
        for lo, hi in zip(edges[:-1], edges[1:]):
            m = (r >= lo) & (r < hi)
            if m.any():
                lines.append(f"    {lo:g}-{hi:g}: pixels {m.float().mean().item() * 100:.1f} %, real {db(er[m]):.2f} dB, "
                             f"static {db(es[m]):.2f} dB, share of the excess {((er - es)[m].sum() / excess).item() * 100:.1f} %")
    return lines


def figures(r: dict) -> str:
    return " / ".join(f"{r[f'val_psnr_s{s}']:.3f}" for s in SIGMAS)


@torch.no_grad()
def residuals(clips: torch.Tensor, flowed: torch.Tensor | None = None,
              noisy_flowed: dict | None = None) -> list[str]:
    """Mean |neighbour - centre| (code values) of clean clips, unaligned and aligned (module docstring)."""
    x = clips * 2 - 1
    c = x.shape[1] // 2
    lines = []
    for away in (1, 3):
        centre, other = x[:, c], x[:, c - away]
        cv = lambda a: (a - centre).abs().mean().item() * 127.5  # noqa: E731
        s64 = align.tile_shifts(centre, other, 24, 64)
        row = [f"unaligned {cv(other):.2f}", f"tile 64 {cv(align.shift_tiles(other, s64, 64)):.2f}",
               f"tile 32 {cv(align.shift_tiles(other, align.tile_shifts(centre, other, 24, 32), 32)):.2f}"]
        base = s64.repeat_interleave(8, 1).repeat_interleave(8, 2)
        s8 = align._search(centre.mean(1, keepdim=True), other.mean(1, keepdim=True), base, 2, 8).clamp(-24, 24)
        row.append(f"tile 8 (+-2 px from tile 64) {cv(align.shift_tiles(other, s8, 8)):.2f}")
        if flowed is not None:
            row.append(f"DIS flow {cv(flowed[:, c - away] * 2 - 1):.2f}")
        for s, w in (noisy_flowed or {}).items():
            row.append(f"DIS flow from sigma {s:g} {cv(w[:, c - away] * 2 - 1):.2f}")
        lines.append(f"clean |neighbour - centre|, {away} frame(s) away: " + ", ".join(row) + " code values")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("weights", nargs="+")
    ap.add_argument("--videos", nargs="+",
                    default=data_path() and [data_path(d) for d in ("train-video", "train-video2")],
                    help="default: $DENOISE_DATA/train-video and train-video2")
    ap.add_argument("--subpixel", default="0.25,0.5", help="global motion in px per frame, comma-separated")
    ap.add_argument("--per-clip", action="store_true")
    ap.add_argument("--flow", action="store_true", help="add the flow form (module docstring)")
    ap.add_argument("--flow-noisy", action="store_true", help="add the flow form with the flow from noisy frames")
    ap.add_argument("--by-residual", action="store_true", help="split the error by the fusion window's clean residual")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    if not args.videos:
        ap.error("--videos is needed (or DENOISE_DATA: the data folder)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(args.device)
    clips = make_val_davis(args.videos, dev)
    if clips is None:
        sys.exit(f"no val_davis sequence in {args.videos}")
    assert clips.shape[1] == VAL_T
    still = static_clips(clips)
    flowed = flow_warped(clips) if args.flow else None
    noisy_flowed = {s: flow_warped(clips, s) for s in SIGMAS} if args.flow_noisy else {}
    for path in args.weights:
        model = load_weights(path, dev)
        model.set_engine(sdpa=True, channels_last=False)
        real, stat = validate(model, clips), validate(model, still)
        print(f"{path}: val_davis sigma 10 / 30 / 50 real {figures(real)}, static {figures(stat)} dB", flush=True)
        if flowed is not None:
            print(f"  flow-warped clean frames, then the noise: {figures(validate(model, flowed))} dB", flush=True)
        if noisy_flowed:
            r = {f"val_psnr_s{s}": validate(model, w)[f"val_psnr_s{s}"] for s, w in noisy_flowed.items()}
            print(f"  the same with the flow from noisy frames: {figures(r)} dB", flush=True)
        for d in (float(v) for v in args.subpixel.split(",") if v.strip()):
            print(f"  static with a global motion of {d:g} px per frame: {figures(validate(model, translated(still, d)))} dB",
                  flush=True)
        if args.per_clip:
            x = clips * 2 - 1
            c = x.shape[1] // 2
            mot = sum(align.tile_shifts(x[:, c], x[:, c + o], 24, 64).abs().amax(-1).float().mean((1, 2))
                      for o in (-3, 3)) / 2
            groups = {str(i): torch.tensor([i]) for i in range(len(clips))}
            pr, ps = validate(model, clips, (10, 30), groups), validate(model, still, (10, 30), groups)
            for s in (10, 30):
                key = f"val_psnr_s{s}_"
                print(f"  sigma {s}: " + ", ".join(f"clip {i} {pr[key + str(i)]:.2f}/{ps[key + str(i)]:.2f} "
                                                   f"({mot[i]:.1f} px)" for i in range(len(clips)))
                      + "  (real/static dB, motion)", flush=True)
        if args.by_residual:
            for line in by_residual(model, clips):
                print(line, flush=True)
    for line in residuals(clips.cpu(), None if flowed is None else flowed.cpu(),
                          {s: w.cpu() for s, w in noisy_flowed.items()}):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
