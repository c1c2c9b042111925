#!/usr/bin/env python3
"""The training batches are the same when built ahead on a side stream (denoise_train/batch_feed.py)
and with the augmentation folded into the sources and the tile resampling of denoise_train/data.py.

  python3 tests/weights/check_feed.py [--device cpu|cuda]

Eight checks, on fresh random inputs (never zeros), each printing what differs:
  augment   data.Batcher.clean (each source built straight in its augmented order) against the
            batch as it was built before: the clips as drawn (video: three broadcast index tensors
            into the frames; photo: resample_tiles without swap; synthetic: four index tensors
            into the canvas), then flipped, transposed and time reversed in four steps (torch.where
            of x flip, y flip, transposition, time reversal), from two Batchers with the same seed;
            with and without photo_warp. Video and synthetic clips only move samples: bit-identical.
            Photo clips are resampled at the grid points of the augmented samples (theta's
            columns negated for the flips, theta reordered for the time reversal, the grid
            transposed): bit-identical expected (the base grid is symmetric, a negated factor
            negates a product); max abs difference <= 1e-5 passes with a note (a sampling grid
            off by one ulp).
  resample  data.resample_tiles (one grid of T*P rows per tile) against grid_sample on the tile
            copied T times (B*T images): bit-identical expected (every output sample comes from the
            same grid point and tile); max abs difference <= 1e-6 passes with a note.
  feed      batch_feed.BatchFeed with overlap against overlap=False, the same seeds, model v2's
            batch (data.Batcher with photo, video and synthetic clips, noise_models.NoiseRecipe):
            every tensor of every batch must be bit-identical. On CUDA the check also provokes the
            two hazards of a side stream: before each batch is read, the caller's stream is held
            busy (torch.cuda._sleep) while the next batches are queued on the side stream, and the
            host drops its reference to the batch before the (queued) read runs; a missing event
            wait or Tensor.record_stream shows as a difference. It also times the same loop with
            and without overlap (a note: a side stream that ran concurrently takes less time).
  grey      batch_feed.training_batch's grey clips (grey_share 0.5, 64 clips) against the same
            batch without them: every grey clip's target has R' = G' = B' = the BT.709 luma of
            the plain target (max abs difference <= 1e-6), every other target is bit-identical,
            about half the clips are grey (16..48 of 64), and the noise of a grey clip is
            channel-correlated only as its noise model makes it (its noisy input is not neutral).
  pattern   data.Batcher pattern_bg: the share of synthetic clip pixels in a neutral 1-px pattern
            (R' = G' = B', each sample unlike its horizontal or vertical neighbours and like the
            one after them) is under 5 % at 0 and over 50 % at 1.
  warp      data.Batcher photo_warp A: on photo tiles that are ramps (R' = x, G' = y, exact under
            bicubic resampling) the displacement of each sample is read back in px: the centre
            frame and the static clips are bit-identical to a Batcher without the warp, the outer
            frames move by at most 1.3 A (mean at least 0.25 A over the moving clips), frame t-1
            by a third of frame t-3's (within 0.05 A: PyTorch's bicubic, a = -0.75, reproduces a
            ramp only to about 0.05 px), smoothly (neighbouring samples within 0.2 A).
  noise     noise_models.NoiseRecipe's noise models one at a time: RMS = sigma, AWGN's channels
            uncorrelated, Poisson-Gaussian's variance per level, Y'CbCr 4:2:0's chroma constant on
            2x2 blocks and its R'/B' covariance, 8-bit and clean clips; on CUDA the compiled mix
            against the eager one (check_noise's docstring gives the tolerances).
  ops       the tensor ops one training batch of model v2's recipe dispatches (128 clips of
            128x128 at the recipes' largest synthetic share, 16 %, 10 % grey clips and pattern_bg
            0.25; counted with a TorchDispatchMode): each is a host-side launch of the training
            loop, which the batch building bounds. Fails above MAX_BATCH_OPS (the batch took 935
            before its synthetic clips were drawn all at once, about 465 after, 490 with the
            augmentation folded into the sources: a few dozen small index ops in place of one
            gather over the whole batch).
Exit status 1 when anything fails.
"""
from __future__ import annotations

import argparse
import sys
import time

from needs import need

need("torch", "numpy")
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from denoise_train.batch_feed import BatchFeed, training_batch  # noqa: E402
from denoise_train.data import TILE, Batcher, resample_tiles  # noqa: E402
from denoise_train.noise_models import BT709_K, NoiseRecipe, mix_noise  # noqa: E402


def flip_transpose_steps(c, fx, fy, tr, ft):
    """The augmentation in four steps: x flip, y flip, transposition, time reversal."""
    B = c.shape[0]
    c = torch.where(fx.view(B, 1, 1, 1, 1), c.flip(-1), c)
    c = torch.where(fy.view(B, 1, 1, 1, 1), c.flip(-2), c)
    c = torch.where(tr.view(B, 1, 1, 1, 1), c.transpose(-1, -2), c)
    return torch.where(ft.view(B, 1, 1, 1, 1), c.flip(1), c)


def clean_before(batcher, B, P, video_share, synth_share):
    """Batcher.clean as the batch was built before the augmentation moved into the sources: every
    source's draws, its clips as drawn, then the augmentation's draws and flip_transpose_steps."""
    bs = int(round(B * synth_share))
    rest = B - bs
    bv = int(round(rest * video_share)) if batcher.frames is not None else 0
    if batcher.photos is None:
        bv = rest
    out = torch.empty((B, batcher.T, 3, P, P), device=batcher.device)
    dev, T = batcher.device, batcher.T
    if bv:
        s, y, x = batcher._video_draw(bv, P)
        ar = torch.arange(P, device=dev)
        ti = (s[:, None] + torch.arange(T, device=dev))[:, :, None, None]
        c = batcher.frames[ti, (y[:, None] + ar)[:, None, :, None], (x[:, None] + ar)[:, None, None, :]]
        torch.div(c.permute(0, 1, 4, 2, 3), 255.0, out=out[:bv])
    if rest - bv:
        img, theta, flow = batcher._photo_draw(rest - bv, P)
        resample_tiles(img, theta, P, out[bv:rest], flow)
    if bs:
        img, oy, ox = batcher._synthetic_draw(bs, P)
        ar = torch.arange(P, device=dev)
        yi = (oy[..., None] + ar)[:, :, None, :, None]
        xi = (ox[..., None] + ar)[:, :, None, None, :]
        bi = torch.arange(bs, device=dev).view(bs, 1, 1, 1, 1)
        ci = torch.arange(3, device=dev).view(1, 1, 3, 1, 1)
        out[rest:] = img[bi, ci, yi, xi]
    fx, fy, tr, ft = (batcher._rand(B) < 0.5 for _ in range(4))
    return flip_transpose_steps(out, fx, fy, tr, ft), (bv, rest)


def resample_tiles_copied(img, theta, P):
    """The formulation data.resample_tiles replaces: the tile copied once per frame."""
    B, T = theta.shape[:2]
    grid = F.affine_grid(theta.reshape(B * T, 2, 3), (B * T, 3, P, P), align_corners=False)
    src = img[:, None].expand(B, T, 3, TILE, TILE).reshape(B * T, 3, TILE, TILE)
    out = F.grid_sample(src, grid, mode="bicubic", padding_mode="reflection", align_corners=False)
    return out.view(B, T, 3, P, P).clamp(0, 1)


def max_diff(a, b) -> float:
    return (a.double() - b.double()).abs().max().item()


def check_augment(dev, g) -> tuple[list[str], list[str]]:
    B, P = 48, 32
    frames = (torch.rand(12, 40, 56, 3, device=dev, generator=g) * 255).to(torch.uint8)
    tiles = (torch.rand(5, TILE, TILE, 3, device=dev, generator=g) * 255).to(torch.uint8)
    starts = torch.arange(len(frames) - 6, device=dev)
    fails, notes, parts = [], [], []
    for warp in (0.0, 2.0):
        new = Batcher(tiles, frames, starts, dev, seed=31, photo_warp=warp).clean(B, P, 0.5, 0.25)
        old, (bv, rest) = clean_before(Batcher(tiles, frames, starts, dev, seed=31, photo_warp=warp), B, P, 0.5, 0.25)
        moved = [name for name, sl in (("video", slice(0, bv)), ("synthetic", slice(rest, B)))
                 if not torch.equal(new[sl], old[sl])]
        fails += [f"augment: {name} clips (photo_warp {warp:g}) differ" for name in moved]
        d = max_diff(new[bv:rest], old[bv:rest])
        if d > 1e-5:
            fails.append(f"augment: photo clips (photo_warp {warp:g}) differ by up to {d:.3g} (limit 1e-5)")
        elif d:
            notes.append(f"augmented photo clips (photo_warp {warp:g}) not bit-identical on {dev.type}: "
                         f"max |diff| {d:.3g}")
        parts.append(f"photo_warp {warp:g}: video/synthetic {'DIFFER' if moved else 'bit-identical'}, photo "
                     + ("bit-identical" if d == 0 else f"max |diff| {d:.3g}"))
    print(f"augment   Batcher.clean vs clips as drawn then augmented in four steps, {B} clips 7x3x{P}x{P} "
          f"(video, photo, synthetic): " + "; ".join(parts) + ("  ok" if not fails else "  FAIL"))
    return fails, notes


def check_resample(dev, g) -> tuple[list[str], list[str]]:
    B, T, P = 6, 7, 64
    img = torch.rand(B, 3, TILE, TILE, device=dev, generator=g)
    ang = (torch.rand(B, T, device=dev, generator=g) - 0.5) * 0.1
    s = (P / TILE) * (1 + 0.05 * (torch.rand(B, T, device=dev, generator=g) - 0.5))
    cx, cy = (torch.rand(2, B, T, device=dev, generator=g) - 0.5) * 0.4
    cos, sin = torch.cos(ang) * s, torch.sin(ang) * s
    theta = torch.stack([torch.stack([cos, -sin, cx], -1), torch.stack([sin, cos, cy], -1)], -2)
    a, b = resample_tiles(img, theta, P), resample_tiles_copied(img, theta, P)
    d = max_diff(a, b)
    ok = d <= 1e-6
    print(f"resample  resample_tiles vs tile copied per frame, {B} tiles x {T} frames of {P}x{P}: "
          f"{'bit-identical' if d == 0 else f'max |diff| {d:.3g}'}  {'ok' if ok else 'FAIL'}")
    fails = [] if ok else [f"resample: resample_tiles differs by up to {d:.3g} (limit 1e-6)"]
    notes = [] if d == 0 else [f"resample_tiles not bit-identical on {dev.type}: max |diff| {d:.3g}"]
    return fails, notes


def check_feed(dev, g) -> tuple[list[str], list[str]]:
    cuda = dev.type == "cuda"
    B, P, n = (64, 128, 6) if cuda else (6, 32, 4)
    H, W = (256, 384) if cuda else (48, 64)
    frames = (torch.rand(20, H, W, 3, device=dev, generator=g) * 255).to(torch.uint8)
    tiles = (torch.rand(12, TILE, TILE, 3, device=dev, generator=g) * 255).to(torch.uint8)
    starts = torch.arange(len(frames) - 6, device=dev)
    recipe = NoiseRecipe()

    cycles_per_ms = 0.0
    if cuda:   # cycles of torch.cuda._sleep per ms on this GPU
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        torch.cuda._sleep(10_000_000)
        b.record()
        b.synchronize()
        cycles_per_ms = 10_000_000 / a.elapsed_time(b)
    busy_ms = 30.0 if cuda else 0.0

    def busy():   # hold the current stream (the side stream inside make_batch) busy_ms
        if busy_ms:
            torch.cuda._sleep(int(busy_ms * cycles_per_ms))

    def make_feed(overlap, hold=False):
        batcher = Batcher(tiles, frames, starts, dev, seed=11)
        gen = torch.Generator(device=dev).manual_seed(12)

        def make():
            if hold:
                busy()   # on the side stream: a read without the event wait would overtake the build
            return training_batch(batcher, gen, recipe, B, P, 0.5, 0.08, "honest")
        return BatchFeed(make, dev, overlap)

    sync = make_feed(False)
    ref = [[t.clone() for t in sync.next()] for _ in range(n)]

    def run(overlap, hold):
        feed = make_feed(overlap, hold)
        got = []
        for _ in range(n):
            batch = feed.next()
            got.append([t.clone() for t in batch])   # read on the caller's stream at once
            busy()                                    # the caller's stream stays busy ...
            keep = [t * 1 for t in batch]             # ... before this read, queued behind it
            del batch                                 # and the host drops the batch before it ran
            got[-1] += keep
        if cuda:
            torch.cuda.synchronize()
        return got

    got = run(True, cuda)
    names = ("noisy", "sigma map", "target", "pixel weight")
    k = len(names)
    bad = [f"batch {i} {names[j % k]} ({'read at once' if j < k else 'read late'}): "
           f"max |diff| {max_diff(r[j % k], o[j]):.3g}"
           for i, (r, o) in enumerate(zip(ref, got)) for j in range(2 * k) if not torch.equal(r[j % k], o[j])]
    what = f"{n} batches of {B} clips 7x{P}x{P}"
    if cuda:
        what += f", side and caller's streams each held {busy_ms:.0f} ms per batch"
    print(f"feed      overlap vs sync, {what}: {'bit-identical' if not bad else '; '.join(bad[:4])}  "
          f"{'ok' if not bad else 'FAIL'}")
    notes = []
    if cuda:
        times = {}
        for overlap in (False, True, False, True):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            run(overlap, True)
            times[overlap] = time.perf_counter() - t0
        notes.append(f"feed loop of {n} x (one batch after {busy_ms:.0f} ms busy, {busy_ms:.0f} ms busy caller): "
                     f"sync {times[False] * 1000:.0f} ms, overlap {times[True] * 1000:.0f} ms")
        print(f"feed      {notes[-1]}")
    fails = [f"feed: {b}" for b in bad[:4]] + ([f"feed: {len(bad) - 4} more differences"] if len(bad) > 4 else [])
    return fails, notes


def check_grey(dev, g) -> list[str]:
    frames = (torch.rand(20, 48, 64, 3, device=dev, generator=g) * 255).to(torch.uint8)
    tiles = (torch.rand(6, TILE, TILE, 3, device=dev, generator=g) * 255).to(torch.uint8)

    def batch(share):
        batcher = Batcher(tiles, frames, torch.arange(len(frames) - 6, device=dev), dev, seed=15)
        gen = torch.Generator(device=dev).manual_seed(16)
        return training_batch(batcher, gen, NoiseRecipe(), 64, 32, 0.5, 0.08, "honest", share)

    _, _, plain, _ = batch(0.0)
    noisy, _, target, _ = batch(0.5)
    grey = (target[:, 0] == target[:, 1]).all(-1).all(-1) & (target[:, 1] == target[:, 2]).all(-1).all(-1)
    luma = 0.2126 * plain[:, 0] + 0.7152 * plain[:, 1] + 0.0722 * plain[:, 2]   # ITU-R BT.709-6 item 3.2
    n = int(grey.sum())
    fails = []
    if not 16 <= n <= 48:
        fails.append(f"grey: {n} of 64 clips grey at share 0.5 (want 16..48)")
    if n:
        d = (target[grey, 0] - luma[grey]).abs().max().item()
        if d > 1e-6:
            fails.append(f"grey: a grey target differs from the plain target's luma by {d:.3g}")
        if (noisy[grey][:, :, 0] == noisy[grey][:, :, 2]).all():
            fails.append("grey: the noisy input of the grey clips is neutral (no per-channel noise)")
    if not torch.equal(target[~grey], plain[~grey]):
        fails.append("grey: a clip not made grey changed")
    print(f"grey      grey clips at share 0.5: {n} of 64; targets R' = G' = B' = Y' of the plain batch"
          f"{'  ok' if not fails else '  FAIL'}")
    return fails


def pattern_share(clips: torch.Tensor) -> float:
    """clips (B, T, 3, P, P) -> the share of the centre frames' inner pixels in a neutral 1-px pattern."""
    x = clips[:, clips.shape[1] // 2]
    c = x[:, 0]
    neutral = ((x[:, 0] == x[:, 1]) & (x[:, 1] == x[:, 2]))[:, 1:-1, 1:-1]
    h = (c[:, :, :-2] != c[:, :, 1:-1]) & (c[:, :, 1:-1] != c[:, :, 2:]) & (c[:, :, :-2] == c[:, :, 2:])
    v = (c[:, :-2] != c[:, 1:-1]) & (c[:, 1:-1] != c[:, 2:]) & (c[:, :-2] == c[:, 2:])
    return (neutral & (h[:, 1:-1] | v[:, :, 1:-1])).float().mean().item()


def check_warp(dev) -> list[str]:
    A, B, P = 3.0, 24, 64
    ramp = torch.arange(TILE, device=dev, dtype=torch.float32) * (255.0 / TILE)    # / 255 in photo_clips: x / TILE
    tiles = torch.stack([ramp.view(1, TILE).expand(TILE, TILE), ramp.view(TILE, 1).expand(TILE, TILE),
                         torch.zeros(TILE, TILE, device=dev)], -1).expand(4, TILE, TILE, 3).contiguous()
    a = Batcher(tiles, None, None, dev, seed=21).photo_clips(B, P)
    b = Batcher(tiles, None, None, dev, seed=21, photo_warp=A).photo_clips(B, P)
    c = a.shape[1] // 2
    static = (a - a[:, c:c + 1]).abs().flatten(1).amax(1) == 0
    d = (b - a)[:, :, :2] * TILE                                   # (B, T, 2, P, P): displacement (x, y) in px
    core = (slice(None), slice(None), slice(4, -4), slice(4, -4))
    outer, inner = d[~static, 0][core], d[~static, c - 1][core]
    fails = []
    if not torch.equal(a[:, c], b[:, c]) or not torch.equal(a[static], b[static]):
        fails.append("warp: the centre frame or a static clip changed")
    if not (outer.abs().amax() <= 1.3 * A and outer.abs().mean() >= 0.25 * A):
        fails.append(f"warp: outer frames moved by max {outer.abs().amax():.2f} / mean {outer.abs().mean():.2f} px "
                     f"(limits {1.3 * A:g} / at least {0.25 * A:g})")
    lin = (inner - outer / c).abs().amax().item()
    if lin > 0.05 * A:
        fails.append(f"warp: frame t-1 is not a third of frame t-3's displacement (max error {lin:.2g} px, "
                     f"limit {0.05 * A:g})")
    rough = max((outer[..., 1:] - outer[..., :-1]).abs().amax().item(),
                (outer[..., 1:, :] - outer[..., :-1, :]).abs().amax().item())
    if rough > 0.2 * A:
        fails.append(f"warp: neighbouring samples' displacements differ by up to {rough:.2f} px (limit {0.2 * A:g})")
    print(f"warp      photo_warp {A:g} px: centre and {int(static.sum())} static clips bit-identical, outer frames "
          f"max {outer.abs().amax():.2f} / mean {outer.abs().mean():.2f} px, t-1 = t-3 / 3 within {lin:.2f} px, "
          f"neighbours within {rough:.2f} px{'  ok' if not fails else ''}")
    return fails


def check_pattern(dev) -> list[str]:
    share = {bg: pattern_share(Batcher(None, None, None, dev, seed=17, pattern_bg=bg).synthetic_clips(128, 64))
             for bg in (0.0, 1.0)}
    ok = share[0.0] < 0.05 and share[1.0] > 0.5
    print(f"pattern   neutral 1-px pattern pixels of synthetic clips: pattern_bg 0 {share[0.0]:.1%}, "
          f"1 {share[1.0]:.1%}{'  ok' if ok else '  FAIL'}")
    return [] if ok else [f"pattern: pattern pixel share {share[0.0]:.3f} at pattern_bg 0 (< 0.05), "
                          f"{share[1.0]:.3f} at 1 (> 0.5)"]


def check_noise(dev, g) -> list[str]:
    """NoiseRecipe's noise models one at a time through mix_noise, sigma 30 on 16 clips of
    7x3x64x64 in two groups of two levels (clips 0-7: 0.2 and 0.7, clip mean 0.45; clips 8-15: 0.1
    and 0.3, mean 0.2), Poisson-Gaussian's f = 0.8, 4:2:0's rho = 0.5; tolerances: RMS within 3 %,
    variances within 10 %.
      awgn    RMS = sigma; the variance at each level of each group sigma^2 (no signal dependence);
              R', G' uncorrelated (|r| < 0.03).
      pg      RMS = sigma; the variance at level v of a clip with mean m s^2 ((1 - f) + f v / m),
              m the clip's own mean.
      ycc420  RMS = sigma; R' - B' (= 1.5748 Cr - 1.8556 Cb) the same at the four samples of each
              2x2 block; cov(R', B') = gy^2 and var(R' - B') = gc^2 (1.5748^2 + 1.8556^2) with
              gy = sigma / sqrt(1 + K rho^2), gc = rho gy.
    The recipe (NoiseRecipe() on 4,000 clips of 1x3x2x2): sigma in [0, 55] with mean 27.5 +- 1.5;
    clean clips 6 % +- 1.5 %, unchanged, with real sigma 0; maps above the real sigma on 20 % +- 3 %
    of the clips, at most twice it; every other map equals the real sigma. 8-bit clips hold code
    values in [0, 1]. On CUDA the compiled mix matches the eager one within 1e-6 (no 8-bit clips,
    whose rounding could turn 1 ulp into a code value)."""
    B, T, P = 16, 7, 64
    h = P // 2
    clean = torch.empty((B, T, 3, P, P), device=dev)
    lv = [[0.2, 0.7], [0.1, 0.3]]
    for gi in range(2):
        clean[gi * 8:(gi + 1) * 8, ..., :h] = lv[gi][0]
        clean[gi * 8:(gi + 1) * 8, ..., h:] = lv[gi][1]
    clean += torch.rand(clean.shape, device=dev, generator=g) * 1e-3      # not constant, never zero
    means = [sum(x) / 2 for x in lv]
    fails, parts = [], []
    sig, f, rho = 30.0, 0.8, 0.5
    full = lambda v: torch.full((B,), v, device=dev)  # noqa: E731
    no = torch.zeros(B, dtype=torch.bool, device=dev)

    def var_by_level(e):   # [[group 0 low, high], [group 1 low, high]]
        return [[e[gi * 8:(gi + 1) * 8, ..., sl].square().mean().item() for sl in (slice(0, h), slice(h, P))]
                for gi in range(2)]

    def off(got, want, tol):
        return abs(got / want - 1) > tol

    for i, name in enumerate(("awgn", "pg", "ycc420")):
        kinds = [0.0, 0.0, 0.0]
        kinds[i] = 1.0
        cdf = NoiseRecipe(kinds=kinds).cdf
        n = torch.randn(clean.shape, device=dev, generator=g)
        # kind within the model's share of [0, 1)
        e = (mix_noise(clean, n, full(sig), full((0.0, 0.6, 0.9)[i]), full(f), full(rho), no, no, *cdf[:2])
             - clean) * 255.0
        rms = e.square().mean().sqrt().item()
        if off(rms, sig, 0.03):
            fails.append(f"noise: {name} RMS {rms:.2f} for sigma {sig:g}")
        if name in ("awgn", "pg"):
            got = var_by_level(e)
            want = [[sig ** 2 * ((1 - f) + f * v / means[gi]) if name == "pg" else sig ** 2 for v in lv[gi]]
                    for gi in range(2)]
            bad = any(off(got[a][b], want[a][b], 0.1) for a in range(2) for b in range(2))
            if bad:
                fails.append(f"noise: {name} variance per level {got}, want {want}")
            txt = " ".join(f"{x:.0f}" for row in got for x in row)
            extra = ""
            if name == "awgn":
                rr = torch.corrcoef(e.transpose(0, 2).reshape(3, -1))[0, 1].item()
                if abs(rr) > 0.03:
                    fails.append(f"noise: awgn R'/G' correlation {rr:.3f}")
                extra = f" r(R',G') {rr:+.3f}"
            parts.append(f"{name} rms {rms:.2f} var per level {txt}{extra}")
        else:
            d = e[:, :, 0] - e[:, :, 2]
            c = d[..., 0::2, 0::2]
            blk = max((c - d[..., y::2, x::2]).abs().max().item() for y, x in ((0, 1), (1, 0), (1, 1)))
            gy2 = sig ** 2 / (1 + BT709_K * rho * rho)
            gc2 = gy2 * rho * rho
            cov = (e[:, :, 0] * e[:, :, 2]).mean().item()
            vd, vd_want = d.square().mean().item(), gc2 * (1.5748 ** 2 + 1.8556 ** 2)
            if blk > 1e-3 or off(cov, gy2, 0.1) or off(vd, vd_want, 0.1):
                fails.append(f"noise: ycc420 R'-B' varies by {blk:.3g} in a 2x2 block, cov(R',B') {cov:.1f} "
                             f"(want {gy2:.1f}), var(R'-B') {vd:.1f} (want {vd_want:.1f})")
            parts.append(f"ycc420 rms {rms:.2f} cov(R',B') {cov:.0f} ({gy2:.0f}) var(R'-B') {vd:.0f} ({vd_want:.0f})")
    # the recipe's per-clip draws
    rec = NoiseRecipe()
    small = torch.rand((4000, 1, 3, 2, 2), device=dev, generator=g) * 0.8 + 0.1
    noisy, smap, real = rec(small, torch.Generator(device=dev).manual_seed(33))
    z = real == 0
    above = smap > real
    ratio = smap[above & ~z] / real[above & ~z]
    zs, ms = z.float().mean().item(), (above & ~z).float().mean().item()
    bad = (real.max().item() > rec.sigma_max or abs(real[~z].mean().item() - rec.sigma_max / 2) > 1.5
           or abs(zs - rec.zero_share) > 0.015 or not torch.equal(noisy[z], small[z])
           or abs(ms - rec.mismatch_share) > 0.03 or (ratio.numel() and ratio.max().item() > 2.0 + 1e-5)
           or not torch.equal(smap[~z & ~above], real[~z & ~above]))
    if bad:
        fails.append(f"noise: recipe draws off: clean share {zs:.3f}, map above sigma {ms:.3f}, "
                     f"mean sigma {real[~z].mean().item():.1f}, max map/sigma {ratio.max().item():.3f}")
    parts.append(f"recipe: clean {zs:.1%}, map above sigma {ms:.1%} (<= {ratio.max().item():.2f}x), "
                 f"mean sigma {real[~z].mean().item():.1f}")
    rec8 = NoiseRecipe(clip8_share=0.5)
    noisy = rec8(clean, torch.Generator(device=dev).manual_seed(35))[0]
    code = noisy * 255.0
    q8 = (((code - code.round()).abs() < 1e-3) & (noisy >= 0) & (noisy <= 1)).flatten(1).all(1)
    if not q8.any():
        fails.append("noise: no clip quantised to 8 bit at clip8_share 0.5")
    if dev.type == "cuda":
        rc = NoiseRecipe(clip8_share=0.0, compile=True)
        a = rc(clean, torch.Generator(device=dev).manual_seed(34))[0]
        b = NoiseRecipe(clip8_share=0.0)(clean, torch.Generator(device=dev).manual_seed(34))[0]
        dd = (a - b).abs().max().item()
        parts.append(f"compiled vs eager {dd:.2g}" + (f" (compile failed: {rc.compile_error})" if rc.compile_error else ""))
        if dd > 1e-6 or rc.compile_error:
            fails.append(f"noise: the compiled mix differs from the eager one by {dd:.3g}"
                         + (f" (compile failed: {rc.compile_error})" if rc.compile_error else ""))
    print(f"noise     sigma {sig:g}: " + "; ".join(parts) + ("  ok" if not fails else "  FAIL"))
    return fails


MAX_BATCH_OPS = 500


class OpCount(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.n += 1
        return func(*args, **(kwargs or {}))


def check_ops(dev, g) -> list[str]:
    frames = (torch.rand(20, 256, 256, 3, device=dev, generator=g) * 255).to(torch.uint8)
    tiles = (torch.rand(4, TILE, TILE, 3, device=dev, generator=g) * 255).to(torch.uint8)
    batcher = Batcher(tiles, frames, torch.arange(len(frames) - 6, device=dev), dev, seed=13, pattern_bg=0.25)
    gen = torch.Generator(device=dev).manual_seed(14)
    count = OpCount()
    with torch.no_grad(), count:
        training_batch(batcher, gen, NoiseRecipe(), 128, 128, 0.5, 0.16, "all", 0.1)
    ok = count.n <= MAX_BATCH_OPS
    print(f"ops       tensor ops per training batch (128 clips, 16 % synthetic, 10 % grey, pattern_bg 0.25): "
          f"{count.n} (<= {MAX_BATCH_OPS}){'  ok' if ok else ''}")
    return [] if ok else [f"ops: {count.n} tensor ops per batch > {MAX_BATCH_OPS}"]


def check(dev) -> tuple[list[str], list[str]]:
    """-> (failures, notes); prints one line per check."""
    g = torch.Generator(device=dev).manual_seed(20261201)
    fails, notes = check_augment(dev, g)
    f, n1 = check_resample(dev, g)
    fails += f
    notes += n1
    f, n2 = check_feed(dev, g)
    return (fails + f + check_grey(dev, g) + check_pattern(dev) + check_warp(dev) + check_noise(dev, g)
            + check_ops(dev, g), notes + n2)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    a = ap.parse_args()
    failures, _ = check(torch.device(a.device))
    print("feed check:", "PASS" if not failures else "FAIL: " + "; ".join(failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
