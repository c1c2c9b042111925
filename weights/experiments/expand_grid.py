#!/usr/bin/env python3
"""How much of the network's window-periodic error comes from the decoder's sub-pixel upsampling.

  python3 weights/experiments/expand_grid.py [WEIGHTS] [--data DATA] [--val-clips 24] [--val-patch 128]

model.PatchExpand is a linear C -> 2C followed by depth-to-space: each of the 2x2 output tokens
gets its own quarter of the weights, so a flat input comes out with a period of 2 tokens per
expand (a sub-pixel convolution's checkerboard: Odena, Dumoulin and Olah, "Deconvolution and
Checkerboard Artifacts", Distill 2016; Aitken et al., "Checkerboard artifact free sub-pixel
convolution", arXiv:1707.02937, 2017, whose ICNR initialisation is the tied form below). Two
expands (level 2 -> 1 -> 0) and space-to-depth 2 give a period of 4 tokens, 8 px: the window
shift. Tying an expand (its four quarters replaced by their mean: nearest-neighbour upsampling
followed by a linear C -> C/2) removes that period by construction; the engines run a tied
expand unchanged (the same weight layout).

For the weights as trained and with expand0, expand1 and both tied, on the CPU in fp32:
  token_dev   flat 0x336699 and the 1-px grey checkerboard at real noise 0, map 15: mean over the
              interior tokens (8 tokens from the border) of the max |difference| of a token's
              2x2x3 output from the interior's median token, code values (0 for an output that
              does not depend on the position);
  probe       denoise_train/faithful.py's grid8, neutral_chroma, neutral_chroma_grid, grey_chroma;
  val         with --data: denoise_train/validation.py's validate() and validate_davis() on the held-out
              split (--val-clips clips of --val-patch px; val_davis 16 clips), PSNR dB.
Untrained, a tie shows what the trained expands carry; a fine-tune with tied expands is what
would tell whether the network can do without them.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # weights/: the package
from denoise_train.checkpoint import load_weights  # noqa: E402
from denoise_train.faithful import Runner, checker, flat, probe  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def tie(model, names) -> None:
    """Replace the four sub-position quarters of each named PatchExpand (model.unet.<name>) by
    their mean, in place. Linear(C, 2C) output channel c * 4 + dy * 2 + dx (model.d2s_nhwc)."""
    with torch.no_grad():
        for n in names:
            lin = getattr(model.unet, n).expand
            for p in (lin.weight, lin.bias):
                v = p.view(lin.out_features // 4, 4, *p.shape[1:])
                v.copy_(v.mean(1, keepdim=True).expand_as(v))


def token_dev(run: Runner, img: torch.Tensor) -> float:
    out, _ = run(img, 0, 15)
    H, W = out.shape[1:]
    t = out.view(3, H // 2, 2, W // 2, 2).permute(1, 3, 0, 2, 4).reshape(H // 2, W // 2, 12)[8:-8, 8:-8]
    return (t - t.reshape(-1, 12).median(0).values).abs().amax(-1).mean().item()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("weights", nargs="?", default=os.path.join(ROOT, "weights", "denoise-v2.safetensors"))
    ap.add_argument("--data", help="the data folder: also validate (train-photos, train-video, train-video2)")
    ap.add_argument("--val-clips", type=int, default=24)
    ap.add_argument("--val-patch", type=int, default=128)
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "denoise-val-cache"))
    a = ap.parse_args()
    val = None
    if a.data:
        from denoise_train.data import VAL_T, load_photo_tiles, load_videos
        from denoise_train.validation import make_val_davis, make_val_set, validate, validate_davis
        vids = [os.path.join(a.data, d) for d in ("train-video", "train-video2")]
        photos = load_photo_tiles(os.path.join(a.data, "train-photos"), "val", "cpu", a.cache, 0)
        frames, starts = load_videos(vids, "val", "cpu", VAL_T, a.cache, 0)
        val = make_val_set(photos, frames, starts, "cpu", n=a.val_clips, P=a.val_patch)
        val_davis = make_val_davis(vids, "cpu", a.cache, 0, P=a.val_patch)
    for label, names in (("as trained", ()), ("expand0 tied", ("expand0",)), ("expand1 tied", ("expand1",)),
                         ("both tied", ("expand0", "expand1"))):
        model = load_weights(a.weights).eval()
        tie(model, names)
        run = Runner(model, "cpu")
        r = probe(model, "cpu")
        keys = ("grid8", "neutral_chroma", "neutral_chroma_grid", "grey_chroma")
        line = (f"{label:13s} token_dev flat {token_dev(run, flat((0x33, 0x66, 0x99))):.3f} checker "
                f"{token_dev(run, checker()):.3f}  " + "  ".join(f"{k} {r[k]:g}" for k in keys if k in r))
        if val is not None:
            v = validate(model, val)
            v.update(validate_davis(model, val_davis))
            line += f"  val {v['val_psnr_mean']:.2f}"
            if "val_davis_mean" in v:
                line += f" val_davis {v['val_davis_mean']:.2f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
