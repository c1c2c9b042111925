#!/usr/bin/env python3
"""Cross-check of the CPU block matching (kernels/cpu/block_match.cpp) against its reference,
weights/denoise_train/align.py's tile_shifts on PyTorch's CPU: fresh random frames (fixed seed) at several
(radius, tile) settings, written for `block_match_test --ref IN OUT`; every tile's shift must be
identical, ties included (both scan candidates nearest-first and keep the first minimum, and form
every cost in fp32 in the same order; the first check confirms that this PyTorch's channel mean and
avg_pool2d sum in that order). Reports, per case, how many tile searches had a tied least cost
(where only the scan order decides). Run by tests/unit/block_match_ref.sh.

  python3 tests/unit/block_match_ref.py BLOCK_MATCH_TEST TMPDIR
"""
from __future__ import annotations

import os
import struct
import subprocess
import sys

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "weights"))
from denoise_train import align  # noqa: E402
from denoise_train.align import shift_tiles, tile_shifts  # noqa: E402

TIES = [0]
_costs = align._costs


def _counting_costs(lc, lo, base, r, t):
    """align._costs, counting the tiles whose least cost is shared by several candidates (where
    the scan order decides), to show that the cases exercise the tie rule."""
    cost, dy, dx = _costs(lc, lo, base, r, t)
    TIES[0] += int(((cost == cost.min(dim=1, keepdim=True).values).sum(dim=1) > 1).sum())
    return cost, dy, dx


align._costs = _counting_costs


def textured(h: int, w: int, g: torch.Generator) -> torch.Tensor:
    return F.avg_pool2d(torch.rand(1, 3, h, w, generator=g) * 2 - 1, 3, 1, 1)


def mirrored(h: int, w: int, t: int, axis: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """tests/common/align_test_util.h's mirrored_pair: gray frames c, o (1, 3, h, w) mirrored along
    `axis` (0 rows, 1 columns) about every tile's centre line, o the mean of c's two neighbours
    along it, so that the candidates -1 and +1 along the axis tie in exact arithmetic and the
    summation order alone picks one."""
    n = h if axis == 0 else w
    j = torch.arange(n) % (2 * t)
    orbit = torch.minimum(j, (t - 1 - j) % (2 * t))
    vals = torch.rand(2 * t, w if axis == 0 else h, generator=g) * 2 - 1
    c = vals[orbit]                                                   # (n, across)
    idx = torch.arange(n)
    o = (c[(idx - 1).clamp(0, n - 1)] + c[(idx + 1).clamp(0, n - 1)]) / 2
    if axis == 1:
        c, o = c.t(), o.t()
    return c.expand(1, 3, h, w).contiguous(), o.expand(1, 3, h, w).contiguous()


def cases(g: torch.Generator):
    """(name, centre, other, radius, tile), frames (1, 3, H, W) float32."""
    # textured frame moved by random per-tile shifts beyond the radius too, with noise
    img = textured(256, 256, g)
    s = torch.randint(-30, 31, (1, 4, 4, 2), generator=g)
    moved = shift_tiles(img, -s, 64)
    yield "moved+noise R24 t64", img + 0.08 * torch.randn(img.shape, generator=g), \
        moved + 0.08 * torch.randn(img.shape, generator=g), 24, 64
    yield "moved R24 t64", img, moved, 24, 64
    # unrelated noise frames: costs close together everywhere (near-ties)
    yield "noise R8 t32", torch.rand(1, 3, 128, 192, generator=g) * 2 - 1, \
        torch.rand(1, 3, 128, 192, generator=g) * 2 - 1, 8, 32
    # 8-bit codes of a low-contrast frame (few levels): exact ties between candidates
    q = lambda x: torch.round((x.clamp(-1, 1) + 1) * 127.5) / 127.5 - 1  # noqa: E731
    a = textured(96, 160, g) * 0.02
    yield "8-bit low contrast R5 t16", q(a), q(shift_tiles(a, torch.full((1, 6, 10, 2), 2), 16)), 5, 16
    yield "8-bit near-flat R12 t8", q(0.3 + 0.01 * torch.randn(1, 3, 64, 64, generator=g)), \
        q(0.3 + 0.01 * torch.randn(1, 3, 64, 64, generator=g)), 12, 8
    # tile area not a power of 2, radius not a multiple of 4, odd content
    b = textured(144, 192, g)
    yield "R13 t48", b, shift_tiles(b, torch.randint(-13, 14, (1, 3, 4, 2), generator=g), 48) + \
        0.05 * torch.randn(b.shape, generator=g), 13, 48
    yield "R0 t16", b, b.roll(3, dims=3), 0, 16
    yield "R1 t4", textured(32, 48, g), textured(32, 48, g), 1, 4
    flat = torch.full((1, 3, 64, 128), 0.3)
    yield "flat R24 t32", flat, flat, 24, 32
    # ties in exact arithmetic that the summation order decides: the rows' sum, each row's sum
    for axis in (0, 1):
        yield (f"mirrored {'rows' if axis == 0 else 'columns'} R4 t16", *mirrored(128, 192, 16, axis, g), 4, 16)


def check_summation_order(g: torch.Generator) -> None:
    """The premise of bit-identical costs: this PyTorch forms the channel mean as ((r + g) + b) / 3,
    avg_pool2d as an fp32 sum in row-major order over the window divided by its area (the box
    means), and so two avg_pool2d, (1, t) then (t, 1), as the mean of the tile's row means (each
    row summed in order and divided by t, then the row means likewise: the tile costs), as
    block_match.cpp forms them."""
    x = torch.rand(1, 3, 96, 96, generator=g) * 2 - 1
    assert torch.equal(x.mean(1), ((x[:, 0] + x[:, 1]) + x[:, 2]) / 3), "channel mean: another order"
    for t in (2, 4):
        s = torch.zeros(1, 3, 96 // t, 96 // t)
        for i in range(t):
            for j in range(t):
                s = s + x[:, :, i::t, j::t]
        assert torch.equal(F.avg_pool2d(x, t), s / (t * t)), f"avg_pool2d {t}: another summation order"
    for t in (1, 3, 16, 48):
        rows = torch.zeros(1, 3, 96, 96 // t)
        for j in range(t):
            rows = rows + x[:, :, :, j::t]
        rows = rows / t
        s = torch.zeros(1, 3, 96 // t, 96 // t)
        for i in range(t):
            s = s + rows[:, :, i::t]
        assert torch.equal(F.avg_pool2d(F.avg_pool2d(x, (1, t)), (t, 1)), s / t), \
            f"tile {t}: the mean of the row means in another order"
    print("summation order: channel mean, box means and the mean of row means as block_match.cpp forms them  ok")


def main() -> int:
    binary, tmp = sys.argv[1], sys.argv[2]
    g = torch.Generator().manual_seed(1234)
    check_summation_order(g)
    todo = list(cases(g))
    inp, outp = os.path.join(tmp, "bm_in.bin"), os.path.join(tmp, "bm_out.txt")
    with open(inp, "wb") as f:
        f.write(struct.pack("<i", len(todo)))
        for _, c, o, r, t in todo:
            H, W = c.shape[2:]
            f.write(struct.pack("<4i", H, W, r, t))
            f.write(c.float().contiguous().numpy().tobytes())
            f.write(o.float().contiguous().numpy().tobytes())
    subprocess.run([binary, "--ref", inp, outp], check=True)
    lines = open(outp).read().splitlines()
    assert len(lines) == len(todo), f"{len(lines)} result lines for {len(todo)} cases"
    bad = 0
    for (name, c, o, r, t), line in zip(todo, lines):
        TIES[0] = 0
        ref = tile_shifts(c, o, r, t)[0].reshape(-1).tolist()
        got = [int(v) for v in line.split()] if not line.startswith("error") else line
        ntiles = len(ref) // 2
        if got != ref:
            bad += 1
            diff = "?" if isinstance(got, str) else sum(
                1 for k in range(ntiles) if got[2 * k:2 * k + 2] != ref[2 * k:2 * k + 2])
            print(f"{name}: {diff} of {ntiles} tiles differ: got {got[:16]} ref {ref[:16]}  FAILED")
        else:
            print(f"{name}: {ntiles} tiles identical ({TIES[0]} tile searches with a tied least cost)  ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
