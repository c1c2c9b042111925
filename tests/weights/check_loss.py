#!/usr/bin/env python3
"""Checks of the training loss (denoise_train/train_step.py loss_fn, LossWeights) on the CPU
(tests/run_tests.sh runs it).

  python3 tests/weights/check_loss.py

Each check prints "NAME: figures ok" or raises. On fresh random errors (B 4, 3 channels, 48x40:
the grid term then reads the top-left 48x32):
  - reference: loss_fn against a float64 loop over clips, channels and pixels that follows the
    docstring's definitions, every weight on and each alone (relative error < 1e-6);
  - what each term sees: an error that is the same 8x8 pattern everywhere (zero mean per block)
    gives a zero low-pass term and a grid term equal to the pattern's mean |value|; a constant
    error gives zero grid and chroma terms; the same error on R', G' and B' gives a zero chroma
    term, and a colour error (+e on R', -e on B') a chroma term of 2/3 mean |e|;
  - pix_w: a clip weighted 0 adds nothing to the per-pixel term and its full share to the others.
"""
from __future__ import annotations

import itertools
import sys

from needs import need

need("torch")
import torch  # noqa: E402

from denoise_train.train_step import GRID, LossWeights, loss_fn  # noqa: E402


def reference(out, target, w: LossWeights, pix_w) -> float:
    """The loss by loops in float64, from the definitions in train_step's docstring."""
    e = (out.double() - target.double())
    B, C, H, W = e.shape
    pix = sum(pix_w[b].item() * e[b].abs().mean().item() for b in range(B)) / B
    low = grid = chroma = 0.0
    if w.lowpass:
        blocks = [e[b, c, y:y + 8, x:x + 8].mean().item()
                  for b in range(B) for c in range(C) for y in range(0, H - 7, 8) for x in range(0, W - 7, 8)]
        low = sum(abs(v) for v in blocks) / len(blocks)
    if w.grid:
        h, wd = H // GRID * GRID, W // GRID * GRID
        tot = 0.0
        for b, c in itertools.product(range(B), range(C)):
            clip_mean = e[b, c, :h, :wd].mean().item()
            for py, px in itertools.product(range(GRID), range(GRID)):
                tot += abs(e[b, c, py:h:GRID, px:wd:GRID].mean().item() - clip_mean)
        grid = tot / (B * C * GRID * GRID)
    if w.chroma:
        chroma = (e - e.mean(dim=1, keepdim=True)).abs().mean().item()
    return pix + w.lowpass * low + w.grid * grid + w.chroma * chroma


def main() -> int:
    g = torch.Generator().manual_seed(7)
    B, C, H, W = 4, 3, 48, 40
    out = torch.rand(B, C, H, W, generator=g) * 2 - 1
    target = torch.rand(B, C, H, W, generator=g) * 2 - 1
    pix_w = torch.tensor([1.0, 0.0, 1.0, 0.5])
    worst = 0.0
    for w in (LossWeights(), LossWeights(lowpass=0.5), LossWeights(grid=1.0), LossWeights(chroma=0.5),
              LossWeights(0.5, 1.0, 0.5)):
        got, ref = loss_fn(out, target, w, pix_w).item(), reference(out, target, w, pix_w)
        rel = abs(got - ref) / abs(ref)
        assert rel < 1e-6, f"{w}: loss_fn {got} against the float64 reference {ref} (rel {rel:.2e})"
        worst = max(worst, rel)
    print(f"reference: worst relative error {worst:.1e} over 5 weightings ok")

    no_pix = torch.zeros(B)   # the terms alone
    zero = torch.zeros(B, C, H, W)
    pattern = torch.rand(8, 8, generator=g) - 0.5
    pattern -= pattern.mean()
    tiled = pattern.repeat(H // 8, W // 8).expand(B, C, H, W).contiguous()
    low = loss_fn(tiled, zero, LossWeights(lowpass=1.0), no_pix).item()
    grid = loss_fn(tiled, zero, LossWeights(grid=1.0), no_pix).item()
    assert low < 1e-7, f"an 8x8 pattern of zero mean: low-pass term {low}, expected 0"
    want = pattern.abs().mean().item()
    assert abs(grid - want) < 1e-6, f"an 8x8 pattern: grid term {grid}, expected {want}"
    const = torch.full((B, C, H, W), 0.25)
    gc = loss_fn(const, zero, LossWeights(grid=1.0, chroma=1.0), no_pix).item()
    assert gc < 1e-7, f"a constant error: grid + chroma terms {gc}, expected 0"
    e = torch.rand(B, 1, H, W, generator=g) - 0.5
    neutral = loss_fn(e.expand(B, C, H, W), zero, LossWeights(chroma=1.0), no_pix).item()
    colour = loss_fn(torch.cat([e, 0 * e, -e], 1), zero, LossWeights(chroma=1.0), no_pix).item()
    assert neutral < 1e-7, f"a neutral error: chroma term {neutral}, expected 0"
    want = 2 / 3 * e.abs().mean().item()
    assert abs(colour - want) < 1e-6, f"+e/0/-e: chroma term {colour}, expected {want}"
    print(f"terms: low-pass {low:.1e} and grid {grid:.4f} on an 8x8 pattern, chroma {neutral:.1e} neutral "
          f"and {colour:.4f} for +e/0/-e ok")

    w = LossWeights(0.5, 1.0, 0.5)
    drop = pix_w.clone()
    drop[0] = 0.0
    only_pix = (loss_fn(out, target, LossWeights(), pix_w) - loss_fn(out, target, LossWeights(), drop)).item()
    whole = (loss_fn(out, target, w, pix_w) - loss_fn(out, target, w, drop)).item()
    share = (out[0] - target[0]).abs().mean().item() / B
    assert abs(only_pix - share) < 1e-6 and abs(whole - share) < 1e-6, \
        f"clip 0 weighted 0: the loss fell by {whole} ({only_pix} without terms), expected its per-pixel share {share}"
    print(f"pix_w: a clip weighted 0 removes its per-pixel share {share:.4f} only ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
