#!/usr/bin/env python3
"""Checks of denoise_train/weight_ema.py on the CPU (tests/run_tests.sh runs it).

  python3 tests/weights/check_ema.py

Each check prints "NAME: figures ok" or raises. On a small random model (widths 16/32/64, head
dim 16, two blocks per stage) with sigma-reparametrised qkv weights, trained a few AdamW steps:
  - average: after each step the EMA equals the formula's average computed in float64 from the
    recorded iterates (max abs error < 1e-6), warm-up included;
  - checkpoint: state_dict() (differences in bf16) restored onto the same live weights gives the
    average back within 2^-8 of the largest difference;
  - swap: inside swapped() the parameters are the average (and prepare's power-iteration steps
    moved the vectors), after it the live weights and buffers bit for bit;
  - export: denoise_train/checkpoint.py's model_from_checkpoint gives the average's output (average=True,
    the default) and the live weights' (average=False), both folded to plain weights.
"""
from __future__ import annotations

import sys

from needs import need

need("torch", "numpy", "safetensors")
import torch  # noqa: E402

from denoise_train import sigma_reparam  # noqa: E402
from denoise_train.checkpoint import model_from_checkpoint  # noqa: E402
from denoise_train.model import Config, Denoiser  # noqa: E402
from denoise_train.weight_ema import WeightEMA  # noqa: E402


def model_params(m, ema):
    """The model's own parameters in the EMA's order (not the EMA's views of them)."""
    p = dict(m.named_parameters())
    return [p[n] for n in ema.names]


def main() -> int:
    torch.manual_seed(0)
    cfg = Config(channels=(16, 32, 64), heads=(1, 2, 4), head_dim=16,
                 depths={"enc0": 2, "enc1": 2, "mid": 2, "dec1": 2, "dec0": 2})
    m = Denoiser(cfg)
    sigma_reparam.enable(m)
    ema = WeightEMA(m, 0.9)
    names = ema.names
    ref = {n: p.detach().double().clone() for n, p in m.named_parameters() if n in names}
    g = torch.Generator().manual_seed(1)
    T = 2 * cfg.temporal_radius + 1
    x = torch.rand(2, T, 3, 64, 64, generator=g) * 2 - 1
    s = torch.tensor([15.0, 35.0])
    opt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=3e-3)
    m.train()
    for k in range(12):
        opt.zero_grad()
        (m(x, s) - x[:, T // 2]).abs().mean().backward()
        opt.step()
        d = min(0.9, (1 + k) / (10 + k))
        live = dict(m.named_parameters())
        for n in names:
            ref[n] = d * ref[n] + (1 - d) * live[n].detach().double()
        ema.update()
    err = max((e.double() - ref[n]).abs().max().item() for n, e in zip(names, ema.ema))
    moved = max((e - p.detach()).abs().max().item() for e, p in zip(ema.ema, model_params(m, ema)))
    assert err < 1e-6 and moved > 0, (err, moved)
    print(f"average: {ema.updates} updates, max error vs float64 {err:.1e}, average - live up to {moved:.1e} ok")

    sd = ema.state_dict()
    back = WeightEMA(m, 0.9, sd)
    worst = max((a - b).abs().max().item() for a, b in zip(back.ema, ema.ema))
    assert worst <= moved * 2 ** -8 and back.updates == ema.updates, (worst, moved)
    print(f"checkpoint: restored within {worst:.1e} (bound {moved * 2 ** -8:.1e}), updates {back.updates} ok")

    live = [p.detach().clone() for p in model_params(m, ema)]
    bufs = [b.clone() for b in m.buffers()]
    with ema.swapped(prepare=lambda: sigma_reparam.power_steps(m)):
        inside = max((p - e).abs().max().item() for p, e in zip(model_params(m, ema), ema.ema))
        moved_u = max((b - v).abs().max().item() for b, v in zip(m.buffers(), bufs))
    after = all(torch.equal(p, v) for p, v in zip(model_params(m, ema), live))
    after_b = all(torch.equal(b, v) for b, v in zip(m.buffers(), bufs))
    assert inside == 0 and moved_u > 0 and after and after_b, (inside, moved_u, after, after_b)
    print(f"swap: the average and its power-iteration vectors (moved {moved_u:.1e}) inside, "
          "the live weights and buffers after ok")

    m.eval()
    with torch.no_grad(), ema.swapped(prepare=lambda: sigma_reparam.power_steps(m)):
        y_avg = m(x, s)
    with torch.no_grad():
        y_live = m(x, s)
    ck = {"config": cfg.to_json(), "model": m.state_dict(), "state": {"qkv_reparam": True}, "ema": ema.state_dict()}
    with torch.no_grad():
        a = model_from_checkpoint(ck).eval()(x, s)
        b = model_from_checkpoint(ck, average=False).eval()(x, s)
    ea, eb, gap = (a - y_avg).abs().max().item(), (b - y_live).abs().max().item(), (y_avg - y_live).abs().max().item()
    assert ea < 1e-3 and eb < 1e-5 and gap > 10 * ea, (ea, eb, gap)
    print(f"export: average output within {ea:.1e}, live {eb:.1e} (the two differ by {gap:.1e}) ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
