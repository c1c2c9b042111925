"""Exponential moving average of a model's weights during training (Polyak averaging; the "model
EMA" that SwinIR's training code, KAIR, keeps with decay 0.999 and evaluates instead of the raw
weights).

After every optimiser step, for every trainable parameter p (fp32):

    ema <- ema + (1 - d_n) (p - ema),     d_n = min(decay, (1 + n) / (10 + n))

n the number of updates so far (the warm-up keeps the first averages from leaning on the start).
With decay 0.999 the average spans about the last 1,000 steps (about 1.2 training minutes of
model v2 on one H200). At a constant learning rate the average sits nearer the loss's valley
floor than the iterate, which is what a learning-rate decay buys (Morales-Brotons, Vogels &
Hendrikx, "Exponential moving average of weights in deep learning: dynamics and benefits", TMLR
2024): each training session can end on a usable network without a decay phase.

Buffers are not averaged: sigma_reparam's power-iteration vectors follow the live weights, so
whoever puts the average in place (swapped()'s `prepare`, weights/export.py) runs power-iteration
steps on the averaged weights first (sigma_reparam.power_steps), and swapped() restores the
buffers with the parameters.
Checkpoint form (weights/train.py save_ckpt "ema"): decay, updates, and per parameter the
difference ema - p in bf16 (the two stay within a few learning-rate steps of each other, so bf16
keeps the average to about 2^-9 of that difference while the file grows by 2 bytes per
parameter, not 4).
"""
from __future__ import annotations

from contextlib import contextmanager

import torch


class WeightEMA:
    def __init__(self, model: torch.nn.Module, decay: float, saved: dict | None = None):
        """decay in (0, 1); saved: a state_dict() of an earlier WeightEMA of the same model (its
        difference form is applied to the model's current weights), else the average starts at
        the weights as they are."""
        if not 0.0 < decay < 1.0:
            raise ValueError(f"EMA decay {decay} outside (0, 1)")
        self.decay = decay
        self.model = model
        self.names = [n for n, p in model.named_parameters() if p.requires_grad]
        params = dict(model.named_parameters())
        # detached views of the trainable parameters, made once (update() runs every step);
        # writing into them writes the parameters
        self.live = [params[n].detach() for n in self.names]
        if any(p.dtype != torch.float32 for p in self.live):
            raise TypeError("WeightEMA averages fp32 parameters (training keeps them fp32 under autocast)")
        self.ema = [p.clone() for p in self.live]
        self.updates = 0
        if saved:
            diff = saved["diff"]
            missing = [n for n in self.names if n not in diff]
            if missing:
                raise KeyError(f"saved EMA lacks {len(missing)} parameters, e.g. {missing[0]}")
            with torch.no_grad():
                for e, n in zip(self.ema, self.names):
                    e.add_(diff[n].to(e.device, torch.float32))
            self.updates = int(saved["updates"])

    def rate(self) -> float:
        """The weight of the newest iterate in the next update, 1 - d_n."""
        n = self.updates
        return 1.0 - min(self.decay, (1.0 + n) / (10.0 + n))

    @torch.no_grad()
    def update(self) -> None:
        """After an optimiser step: ema += rate (p - ema), on the parameters' device and stream."""
        torch._foreach_lerp_(self.ema, self.live, self.rate())
        self.updates += 1

    def state_dict(self) -> dict:
        with torch.no_grad():
            diff = {n: (e - p).to(torch.bfloat16).cpu() for n, e, p in zip(self.names, self.ema, self.live)}
        return {"decay": self.decay, "updates": self.updates, "diff": diff}

    @contextmanager
    def swapped(self, prepare=None):
        """The model's parameters hold the average inside the block, then prepare() runs (e.g.
        power-iteration steps on them); after the block the parameters and every buffer are as
        they were (copies in place: captured CUDA graphs keep their addresses)."""
        bufs = list(self.model.buffers())
        with torch.no_grad():
            live = [p.clone() for p in self.live]
            live_bufs = [b.clone() for b in bufs]
            for p, e in zip(self.live, self.ema):
                p.copy_(e)
            if prepare is not None:
                prepare()
        try:
            yield
        finally:
            with torch.no_grad():
                for p, v in zip(self.live, live):
                    p.copy_(v)
                for b, v in zip(bufs, live_bufs):
                    b.copy_(v)


def averaged_state(model_state: dict, saved: dict) -> dict:
    """A checkpoint's model state dict with its EMA (WeightEMA.state_dict()) applied: parameter
    p -> p + diff (fp32), everything else as it is. For export and evaluation."""
    out = dict(model_state)
    for n, d in saved["diff"].items():
        out[n] = model_state[n].float() + d.float()
    return out
