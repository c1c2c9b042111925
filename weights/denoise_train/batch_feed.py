"""Training batches built one step ahead, on a side CUDA stream, so that building batch i+1 runs on
the GPU while step i does.

A training batch (data.Batcher clips, augmentation, noise_models noise) is built entirely on the
GPU from data already there, by a few hundred small and memory-bound kernels (about 10 to 18 ms
for 128 clips of 7x128x128 on the H200). On the step's stream they run between two steps; on a
second stream they fill the SMs and memory bandwidth the step leaves idle.

  feed = BatchFeed(make_batch, device)          make_batch() -> tuple of tensors
  noisy, smap, target, pix_w = feed.next()      (then enqueue the step on the current stream)

Synchronisation (nothing waits on the host):
  - next() hands out batch i, built on the side stream: the caller's stream waits for the event
    recorded after it, and every tensor of it is marked as used by the caller's stream
    (Tensor.record_stream), so the caching allocator does not give its memory to the side stream
    again before the work the caller queued on it has run;
  - then it enqueues batch i+1 on the side stream, which first waits for everything queued on the
    caller's stream so far (up to step i-1): batch i+1 runs alongside step i, and nothing the
    side stream does can overtake work queued before it.
The host-side state of the random generators advances when a kernel is queued, so the batches are
the ones a synchronous loop makes, in the same order (one extra batch is built at the end).

On the CPU, or with overlap=False, there is no side stream: with overlap the batch is still built
one call ahead (same order and data, synchronously), without it when asked for.
"""
from __future__ import annotations

import torch

from .data import make_noisy
from .noise_models import luma_bt709

FEEDS = ("overlap", "sync")


def training_batch(batcher, gen: torch.Generator, noise, B: int, P: int, video_share: float = 0.5,
                   synth_share: float = 0.0, pixel_loss: str = "all", grey_share: float = 0.0) -> tuple:
    """One training batch on the batcher's device: clean clips from data.Batcher.clean, then noise
    (noise_models.NoiseRecipe, or model v1's data.make_noisy when noise is None) drawn from gen.
    -> noisy (B, T, 3, P, P) in [0,1] plus noise, sigma map (B,) in 8-bit code values, clean
    centre frame (B, 3, P, P) in [0,1] (a view of the clean clips), pix_w (B,) float: the weight
    of each clip's per-pixel loss (train_step.loss_fn). pixel_loss "all": 1 for every clip;
    "honest": 0 for clips whose map is above their real noise (NoiseRecipe's mismatched clips and
    clean clips given a map), which then teach through the low-pass term only (keep the means,
    smooth as much as the map asks) instead of teaching the network to doubt the map.
    grey_share: each clip, with this probability (one uniform per clip from gen, drawn before the
    noise; none drawn at 0), has R' = G' = B' = its BT.709 luma Y' before the noise, so that
    neutral detail is taught to stay neutral under every noise model (4:2:0 chroma noise included)."""
    if pixel_loss not in ("all", "honest"):
        raise ValueError(f"pixel_loss must be all or honest, got {pixel_loss!r}")
    clean = batcher.clean(B, P, video_share, synth_share)
    if grey_share > 0:
        grey = torch.rand(B, device=clean.device, generator=gen) < grey_share
        clean = torch.where(grey.view(B, 1, 1, 1, 1), luma_bt709(clean, 2), clean)
    if noise is None:
        noisy, smap = make_noisy(clean, gen)
        real = smap
    else:
        noisy, smap, real = noise(clean, gen)
    pix_w = (smap <= real).float() if pixel_loss == "honest" else torch.ones_like(smap)
    return noisy, smap, clean[:, batcher.T // 2], pix_w


class BatchFeed:
    """next() -> the tuple make_batch() returns, the i-th call getting the i-th batch.

    make_batch: builds one batch from its own generators (called with torch.no_grad() in force);
    device: where it builds; overlap: build one batch ahead on a side stream (CUDA)."""

    def __init__(self, make_batch, device, overlap: bool = True):
        self.make_batch = make_batch
        self.device = torch.device(device)
        self.overlap = overlap
        self.stream = torch.cuda.Stream(self.device) if overlap and self.device.type == "cuda" else None
        self.pending = None      # (batch, event or None), built and not yet handed out

    def describe(self) -> str:
        if not self.overlap:
            return "sync"
        return "overlap (side CUDA stream)" if self.stream is not None else "overlap (synchronous: no CUDA)"

    def _launch(self):
        if self.stream is None:
            with torch.no_grad():
                self.pending = (tuple(self.make_batch()), None)
            return
        self.stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self.stream), torch.no_grad():
            batch = tuple(self.make_batch())
            ev = torch.cuda.Event()
            ev.record(self.stream)
        self.pending = (batch, ev)

    def next(self) -> tuple:
        if self.pending is None:
            self._launch()
        batch, ev = self.pending
        self.pending = None
        if ev is not None:
            cur = torch.cuda.current_stream(self.device)
            cur.wait_event(ev)
            for t in batch:
                t.record_stream(cur)
        if self.overlap:
            self._launch()
        return batch

