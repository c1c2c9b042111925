"""Training data on the GPU: decode once (in parallel, cached), build every batch with tensor ops.

Sources (the data folder's README.md; data_path()): train-photos (JPEG), train-video (DAVIS-2016
mp4, 854x480) and train-video2 (SA-V gallery clips and SAM 2's bedroom clip, 854x480). The validation split
holds out the sequences in VAL_VIDEOS and every VAL_PHOTO_EVERY-th photo; eval-davis4 is never
read here.

Clips are (B, T, 3, P, P) float in [0,1], T = 2R+1 frames (7 for model v1):
  - video clips: T consecutive frames at a random crop of a training sequence (every valid first
    frame equally likely, so a sequence weighs by its length);
  - photo pseudo-video: a 256x256 tile of a photo, seen through a P x P window moving along a
    smooth random trajectory (translation with constant velocity plus acceleration, small zoom
    and rotation), resampled with bicubic grid_sample; optionally (Batcher photo_warp) deformed
    by a smooth random displacement field that grows with the distance from the centre frame,
    the kind of motion a per-tile translation does not describe (docs/model.md, "Where
    val_davis's remaining error is");
  - synthetic clips (model v2's faithfulness share): flat or slowly varying backgrounds, flat
    rectangles with sharp edges, saturated 1-3 px lines and outlines, neutral 1-px checkerboards
    and stripes, static or moving by whole pixels;
  - all: random flips, transposition (with flips: all 8 rotations/reflections) and time reversal.

Decoding: Pillow (JPEG) and OpenCV (mp4) in a thread pool (both release the GIL); with a cache
folder each decoded file is kept as an .npy (written atomically), so later runs load in seconds.

  python3 -m denoise_train.data --cache DIR --photos DIR --videos DIR [DIR ...]   fill the cache
  (from weights/, or with weights/ on PYTHONPATH)
"""
from __future__ import annotations

import argparse
import glob
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
import torch.nn.functional as F

VAL_VIDEOS = ("cows", "dog", "sam2-coffee")
# The held-out sequences from DAVIS-2016, eval-davis4's source: a validation on these alone ranks
# models as eval-davis4 does where the whole split does not (docs/model.md), without reading it.
VAL_DAVIS = ("cows", "dog")
VAL_PHOTO_EVERY = 20
TILE = 256
T = 7          # model v1's clip length
VAL_T = 9      # validation clips are cut this long; a model of radius R uses the middle 2R+1
WORKERS = min(16, os.cpu_count() or 1)
DATA_ENV = "DENOISE_DATA"


def data_path(*parts: str) -> str | None:
    """A path in the data folder (train-photos, train-video, train-video2, train-video3,
    eval-davis4) named by the environment variable DENOISE_DATA; None when it is not set, and the
    commands that read the data then need their paths given. The data folder lives outside the
    repository (its sources have their own licences), so no default is assumed."""
    root = os.environ.get(DATA_ENV)
    return os.path.join(root, *parts) if root else None


def _photo_paths(root):
    return sorted(glob.glob(os.path.join(root, "*.jpg")) + glob.glob(os.path.join(root, "*.png")))


def _video_paths(roots):
    roots = [roots] if isinstance(roots, str) else list(roots)
    return sorted((p for r in roots for p in glob.glob(os.path.join(r, "*.mp4"))), key=os.path.basename)


def _name(p: str) -> str:
    return os.path.splitext(os.path.basename(p))[0]


def _cache_file(cache: str, path: str) -> str:
    return os.path.join(cache, f"{os.path.basename(path)}.{os.path.getsize(path)}.npy")


def _cached(cache: str | None, path: str, decode):
    """decode(path) -> uint8 array, through CACHE/<name>.<size>.npy when cache is set."""
    if not cache:
        return decode(path)
    f = _cache_file(cache, path)
    if os.path.exists(f):
        return np.load(f)
    a = decode(path)
    os.makedirs(cache, exist_ok=True)
    tmp = f"{f}.{os.getpid()}.tmp"
    with open(tmp, "wb") as fh:
        np.save(fh, a)
    os.replace(tmp, f)
    return a


def decode_photo(path: str) -> np.ndarray:
    from PIL import Image
    return np.asarray(Image.open(path).convert("RGB"))


def decode_video(path: str, max_frames: int = 0) -> np.ndarray:
    """All frames (or the first max_frames) of a video as (n, H, W, 3) uint8 RGB."""
    import cv2
    cap = cv2.VideoCapture(path)
    frames = []
    while not max_frames or len(frames) < max_frames:
        ok, f = cap.read()
        if not ok:
            break
        frames.append(f[:, :, ::-1])
    cap.release()
    if not frames:
        raise RuntimeError(f"{path}: no frames decoded")
    return np.ascontiguousarray(np.stack(frames))


def load_photo_tiles(root: str, split: str, device, cache: str | None = None, limit: int = 0) -> torch.Tensor:
    """Cut every photo of the split into overlapping TILE x TILE tiles: (N, TILE, TILE, 3) uint8.
    limit > 0 keeps only the first `limit` photos of the split (smoke tests)."""
    paths = [p for k, p in enumerate(_photo_paths(root)) if (split == "val") == (k % VAL_PHOTO_EVERY == 0)]
    if limit:
        paths = paths[:limit]
    with ThreadPoolExecutor(WORKERS) as ex:
        ims = list(ex.map(lambda p: _cached(cache, p, decode_photo), paths))
    tiles = []
    for im in ims:
        H, W, _ = im.shape
        if H < TILE or W < TILE:
            continue
        step = TILE * 3 // 4
        for y in range(0, H - TILE + 1, step):
            for x in range(0, W - TILE + 1, step):
                tiles.append(im[y:y + TILE, x:x + TILE])
    if not tiles:
        raise RuntimeError(f"{root}: no photo of at least {TILE}x{TILE} in split {split!r}")
    return torch.from_numpy(np.stack(tiles)).to(device)


def load_videos(roots, split: str, device, T: int = T, cache: str | None = None, limit: int = 0,
                names: tuple | None = None):
    """-> frames (F, H, W, 3) uint8 on device, starts (S,) long: first frames of T-frame clips;
    (None, None) when no sequence qualifies. roots: one folder or several; limit > 0 keeps the
    first `limit` frames of each sequence; names: only the sequences of the split named so."""
    paths = [p for p in _video_paths(roots) if (split == "val") == (_name(p) in VAL_VIDEOS)
             and (names is None or _name(p) in names)]
    if not paths:
        return None, None
    with ThreadPoolExecutor(WORKERS) as ex:
        vids = list(ex.map(lambda p: _cached(cache, p, decode_video), paths))
    if limit:
        vids = [v[:limit] for v in vids]
    shapes = {v.shape[1:] for v in vids}
    if len(shapes) != 1:
        raise RuntimeError(f"videos of different frame sizes {sorted(shapes)}: convert them to one size first")
    n = sum(len(v) for v in vids)
    frames = torch.empty((n, *vids[0].shape[1:]), dtype=torch.uint8, device=device)
    starts, off = [], 0
    for v in vids:
        frames[off:off + len(v)] = torch.from_numpy(v).to(device)
        starts.extend(range(off, off + len(v) - T + 1))
        off += len(v)
    if not starts:
        raise RuntimeError(f"no sequence of split {split!r} has {T} frames")
    return frames, torch.tensor(starts, device=device, dtype=torch.long)


class Batcher:
    """Builds batches of clean clips (B, T, 3, P, P) in [0,1] on the data's device."""

    def __init__(self, photos: torch.Tensor | None, frames: torch.Tensor | None,
                 starts: torch.Tensor | None, device, seed: int = 0, T: int = T, pattern_bg: float = 0.0,
                 photo_warp: float = 0.0):
        """pattern_bg: the probability that a synthetic clip's background is its neutral 1-px
        pattern (synthetic_clips). photo_warp: the amplitude (px) of the moving photo clips'
        deformation (photo_clips; 0: none, and the batches are those of a Batcher without it)."""
        self.photos, self.frames, self.starts = photos, frames, starts
        self.device, self.T, self.pattern_bg, self.photo_warp = device, T, pattern_bg, photo_warp
        self.g = torch.Generator(device=device)
        self.g.manual_seed(seed)

    def _rand(self, *shape):
        return torch.rand(*shape, device=self.device, generator=self.g)

    def _randint(self, hi, shape):
        return torch.randint(0, hi, shape, device=self.device, generator=self.g)

    def video_clips(self, B: int, P: int, out: torch.Tensor | None = None) -> torch.Tensor:
        """(B, T, 3, P, P) in [0, 1], written into out when given (one pass from the uint8 frames)."""
        return self._video_build(self._video_draw(B, P), P, source_indices(None, self.T, P, self.device), out)

    def _video_draw(self, B: int, P: int) -> tuple:
        """The random draws of B video clips of P x P: first frames s, crop corners y, x, (B,) long."""
        _, H, W, _ = self.frames.shape
        s = self.starts[self._randint(len(self.starts), (B,))]
        y = self._randint(H - P + 1, (B,))
        x = self._randint(W - P + 1, (B,))
        return s, y, x

    def _video_build(self, draw: tuple, P: int, src: tuple, out: torch.Tensor | None) -> torch.Tensor:
        """The clips of _video_draw seen through an augmentation -> (B, T, 3, P, P) in [0, 1],
        written into out when given: out[b, t, :, y, x] = frames[s_b + t', y_b + y', x_b + x'] / 255,
        src = (t', y', x') the augmentation's source of (t, y, x) (source_indices). One gather of 3
        bytes per index through one flat index (B, T, P, P) (with several broadcast index tensors
        CUDA's advanced indexing first copies each to the full shape), then one pass to float."""
        s, y, x = draw
        B = s.shape[0]
        Fr, H, W, _ = self.frames.shape
        ti, yi, xi = src
        lin = (((s[:, None] + ti)[:, :, None, None] * H + (y.view(B, 1, 1) + yi)[:, None]) * W
               + (x.view(B, 1, 1) + xi)[:, None])                                  # (B, T, P, P)
        c = self.frames.reshape(Fr * H * W, 3)[lin]                                # (B, T, P, P, 3)
        return torch.div(c.permute(0, 1, 4, 2, 3), 255.0, out=out)    # float32, as c.float() / 255

    def photo_clips(self, B: int, P: int, out: torch.Tensor | None = None) -> torch.Tensor:
        """(B, T, 3, P, P) in [0, 1], written into out when given."""
        return self._photo_build(self._photo_draw(B, P), P, None, None, out)

    def _photo_draw(self, B: int, P: int) -> tuple:
        """The random draws of B photo clips of P x P -> (tiles (B, 3, TILE, TILE) in [0, 1], affine
        maps theta (B, T, 2, 3), flow (B, T, P, P, 2) or None), resample_tiles' arguments."""
        T = self.T
        tiles = self.photos[self._randint(len(self.photos), (B,))]     # (B, TILE, TILE, 3)
        img = tiles.permute(0, 3, 1, 2).float() / 255.0
        k = torch.arange(T, device=self.device, dtype=torch.float32) - T // 2
        # Per clip: velocity up to 4 px/frame, acceleration up to 0.4 px/frame^2, zoom up to
        # 1.5 %/frame, rotation up to 1 degree/frame; a fifth of the clips are static.
        moving = (self._rand(B) > 0.2).float()[:, None]
        v = (self._rand(B, 2) * 2 - 1) * 4.0 * moving
        a = (self._rand(B, 2) * 2 - 1) * 0.4 * moving
        z = (self._rand(B, 1) * 2 - 1) * 0.015 * moving
        r = (self._rand(B, 1) * 2 - 1) * math.radians(1.0) * moving
        cx = v[:, :1] * k + a[:, :1] * k * k                            # (B, T) px
        cy = v[:, 1:] * k + a[:, 1:] * k * k
        zoom = torch.exp(z * k)
        ang = r * k
        s = (P / TILE) / zoom
        cos, sin = torch.cos(ang) * s, torch.sin(ang) * s
        theta = torch.stack([torch.stack([cos, -sin, 2 * cx / TILE], -1),
                             torch.stack([sin, cos, 2 * cy / TILE], -1)], -2)  # (B, T, 2, 3)
        flow = None
        if self.photo_warp > 0:
            # frame k is displaced by field * k / (T // 2): 0 at the centre frame (the target stays
            # exact), the whole field at the clip's ends; static clips stay static
            field = smooth_field(self._rand(B, 2, 4, 4) * 2 - 1, P) * self.photo_warp * moving[:, :, None, None]
            flow = (field[:, None] * (k / max(1, T // 2)).view(1, T, 1, 1, 1)) * (2 / TILE)
        return img, theta, flow

    def _photo_build(self, draw: tuple, P: int, aug: tuple | None, src: tuple | None,
                     out: torch.Tensor | None) -> torch.Tensor:
        """The clips of _photo_draw seen through aug = (fx, fy, tr, ft), src its source_indices (None,
        None: as drawn) -> (B, T, 3, P, P), written into out when given. The augmentation moves the
        sampling grid, not the samples (an output sample depends only on its grid point): time
        reversal reorders theta and the flow along T;
        an x (y) flip negates theta's x (y) column, which gives the grid point of the mirrored
        sample (the base grid is symmetric, x_{P-1-j} = -x_j exactly, and a product with a negated
        factor is the negated product) and flips the flow; the transposition swaps the grid's y and
        x (resample_tiles swap). The samples are those of the clips as drawn, moved as
        source_indices says."""
        img, theta, flow = draw
        if aug is None:
            return resample_tiles(img, theta, P, out, flow)
        fx, fy, tr, _ = aug
        B = theta.shape[0]
        bi = torch.arange(B, device=self.device)[:, None]
        flip = torch.stack([fx, fy, torch.zeros_like(fx)], -1).view(B, 1, 1, 3)
        theta = theta[bi, src[0]]
        theta = torch.where(flip, -theta, theta)
        if flow is not None:
            flow = flow[bi, src[0]]
            flow = torch.where(fx.view(B, 1, 1, 1, 1), flow.flip(3), flow)
            flow = torch.where(fy.view(B, 1, 1, 1, 1), flow.flip(2), flow)
        return resample_tiles(img, theta, P, out, flow, swap=tr)

    def synthetic_clips(self, B: int, P: int) -> torch.Tensor:
        """(B, T, 3, P, P) in [0, 1]: _synthetic_draw's clips."""
        return self._synthetic_build(self._synthetic_draw(B, P), P, source_indices(None, self.T, P, self.device), None)

    def _synthetic_draw(self, B: int, P: int) -> tuple:
        """-> (canvas (B, 3, S, S) in [0, 1], S = P + 4 (T // 2), top-left corners oy, ox
        (B, T) long of each frame's P x P window on it): the synthetic clips (_synthetic_build cuts
        them). Flat/slowly varying backgrounds with sharp flat rectangles, saturated thin lines and
        outlines, and neutral 1-px patterns; static or moving up to 2 px/frame (whole pixels).

        Per clip, in layers (a later layer covers an earlier one where it is drawn): a background
        colour (grey 30 %, else random; 20 % a saturated primary mix) with, half the time, a ramp
        of up to +-0.35 per axis and channel; 3 flat rectangles (each drawn with probability 0.6,
        colour as the background's with 40 % saturated); a rectangle of one of three 1-px grey
        patterns (checkerboard, rows, columns; two random greys; probability 0.5), and with
        probability pattern_bg (no draw at 0) the same pattern in place of the background wherever
        no rectangle covers it; 3 saturated shapes (probability 0.7 each, 90 % saturated colours):
        a line 1-3 px thick, horizontal or vertical, or the outline of a box with that thickness.
        All shapes are drawn at once, (B, 16)
        parameters and (B, 16, S, S) masks, so that a batch costs a fixed number of small tensor
        ops however many shapes it has (the training loop's host time per batch: 718 ops before,
        one loop step per shape)."""
        T, dev = self.T, self.device
        m = 2 * (T // 2)                      # margin: the canvas moves by up to 2 px/frame
        S = P + 2 * m
        yy = torch.arange(S, device=dev, dtype=torch.float32).view(S, 1)
        xx = torch.arange(S, device=dev, dtype=torch.float32).view(1, S)

        def cover(img, masks, colours):
            """img (B, 3, S, S) with each clip's K masks painted in order, the last one on top:
            masks (B, K, S, S) bool, colours (B, K, 3)."""
            K = masks.shape[1]
            top = (masks * torch.arange(1, K + 1, device=dev).view(1, K, 1, 1)).amax(1)   # (B, S, S), 0: none
            pal = torch.cat([torch.zeros(B, 1, 3, device=dev), colours], 1)              # (B, K + 1, 3)
            painted = torch.gather(pal, 1, top.view(B, S * S, 1).expand(B, S * S, 3))
            return torch.where((top > 0)[:, None], painted.view(B, S, S, 3).permute(0, 3, 1, 2), img)

        # colours of the background (1), the rectangles (3) and the lines (3): grey 30 %, else
        # random; 20 / 40 / 90 % of them mixes of saturated primaries
        c = self._rand(B, 7, 3)
        c = torch.where(self._rand(B, 7, 1) < 0.3, c[..., :1].expand(B, 7, 3), c)
        prim = (self._rand(B, 7, 3) < 0.5).float()
        prim[..., 0] = torch.where(prim.sum(-1) == 0, torch.ones_like(prim[..., 0]), prim[..., 0])
        us = self._rand(B, 7, 1)   # (thresholds as scalars: no host-to-device copy on the feed's stream)
        c = torch.where(torch.cat([us[:, :1] < 0.2, us[:, 1:4] < 0.4, us[:, 4:] < 0.9], 1), prim, c)
        # boxes of the rectangles (3), the pattern (1) and the lines (3): corner anywhere on the
        # canvas, sides 4 .. 4 + S/2; line thickness 1..3; the 16 masks in one go: rectangles,
        # pattern, then per line box a horizontal and a vertical line, the box and its inside
        r = self._rand(B, 7, 4)
        y0, x0 = (r[..., 0] * S).floor(), (r[..., 1] * S).floor()
        h, w = (4 + r[..., 2] * S / 2).floor(), (4 + r[..., 3] * S / 2).floor()
        t = (1 + self._randint(3, (B, 3))).float()
        ly, lx, lh, lw = y0[:, 4:], x0[:, 4:], h[:, 4:], w[:, 4:]
        Y0 = torch.cat([y0[:, :4], ly, ly, ly, ly + t], 1)
        X0 = torch.cat([x0[:, :4], lx, lx, lx, lx + t], 1)
        Hs = torch.cat([h[:, :4], t, lh * 2, lh, lh - 2 * t], 1)
        Ws = torch.cat([w[:, :4], lw * 2, t, lw, lw - 2 * t], 1)
        ry = (yy >= Y0[..., None, None]) & (yy < (Y0 + Hs)[..., None, None])      # (B, 16, S, 1)
        rx = (xx >= X0[..., None, None]) & (xx < (X0 + Ws)[..., None, None])      # (B, 16, 1, S)
        masks = ry & rx                                                          # (B, 16, S, S)
        u = self._rand(B, 13)   # rectangles on (0.6), pattern on (0.5), horizontal, line or outline, lines on (0.7)

        ramp = (self._rand(B, 3, 2) * 2 - 1) * 0.35 * (self._rand(B, 1, 1) < 0.5).float()
        img = c[:, 0, :, None, None] + ramp[..., 0, None, None] * (yy / S - 0.5) + ramp[..., 1, None, None] * (xx / S - 0.5)
        rects = masks[:, :3] & (u[:, :3] < 0.6)[..., None, None]
        img = cover(img, rects, c[:, 1:4])
        # a rectangle of a neutral 1-px pattern: checkerboard, rows or columns of two greys
        pat = torch.stack([(yy + xx) % 2, (yy % 2).expand(S, S), (xx % 2).expand(S, S)])   # (3, S, S)
        g = self._rand(B, 2)
        patt = g[:, :1, None] + (g[:, 1:] - g[:, :1])[..., None] * pat[self._randint(3, (B,))]   # (B, S, S)
        on = masks[:, 3] & (u[:, 3] < 0.5)[:, None, None]
        if self.pattern_bg > 0:
            on = on | ((self._rand(B) < self.pattern_bg)[:, None, None] & ~rects.any(1))
        img = torch.where(on[:, None], patt[:, None], img)
        # saturated thin lines (horizontal or vertical) and outlines
        line = torch.where((u[:, 4:7] < 0.5)[..., None, None], masks[:, 4:7], masks[:, 7:10])
        outline = masks[:, 10:13] & ~masks[:, 13:16]
        shape = torch.where((u[:, 7:10] < 0.5)[..., None, None], line, outline)
        img = cover(img, shape & (u[:, 10:13] < 0.7)[..., None, None], c[:, 4:7]).clamp(0, 1)
        v = self._randint(5, (B, 2)) - 2
        v = v * (self._rand(B, 1) < 0.5).long()                               # half static
        k = torch.arange(T, device=dev) - T // 2
        oy = m + k[None, :] * v[:, :1]                                        # (B, T)
        ox = m + k[None, :] * v[:, 1:]
        return img, oy, ox

    def _synthetic_build(self, draw: tuple, P: int, src: tuple, out: torch.Tensor | None) -> torch.Tensor:
        """The clips of _synthetic_draw seen through an augmentation -> (B, T, 3, P, P), written
        into out when given: out[b, t, c, y, x] = canvas[b, c, oy[b, t'] + y', ox[b, t'] + x'],
        src = (t', y', x') the augmentation's source of (t, y, x) (source_indices); one gather along
        the flattened canvas with one index (B, T, P, P) shared by the channels."""
        img, oy, ox = draw
        B, S, T = img.shape[0], img.shape[-1], self.T
        ti, yi, xi = src
        bi = torch.arange(B, device=self.device)[:, None]
        oy, ox = oy[bi, ti], ox[bi, ti]                                       # (B, T)
        idx = (oy[:, :, None, None] + yi[:, None]) * S + (ox[:, :, None, None] + xi[:, None])   # (B, T, P, P)
        c = torch.gather(img.reshape(B, 3, S * S), 2, idx.reshape(B, 1, T * P * P).expand(B, 3, T * P * P))
        c = c.view(B, 3, T, P, P).transpose(1, 2)
        if out is None:
            return c.contiguous()
        return out.copy_(c)

    def clean(self, B: int, P: int, video_share: float = 0.5, synth_share: float = 0.0) -> torch.Tensor:
        """(B, T, 3, P, P): round(B * synth_share) synthetic clips, then video_share of the rest
        from the videos and the remainder from the photos (all video when there are no photos),
        each clip then, with probability 1/2 each, x flipped, y flipped, transposed and time
        reversed (in that order; four draws of B uniforms after the clips' own draws).
        The augmentation is not a pass of its own: every source is built straight into the batch
        in its augmented order (source_indices), from its own draws, which come in the same order
        as when the clips were built first and augmented after: the same batch, sample for sample
        (tests/weights/check_feed.py "augment")."""
        bs = int(round(B * synth_share))
        rest = B - bs
        bv = int(round(rest * video_share)) if self.frames is not None else 0
        if self.photos is None:
            bv = rest
        vid = self._video_draw(bv, P) if bv else None
        pho = self._photo_draw(rest - bv, P) if rest - bv else None
        syn = self._synthetic_draw(bs, P) if bs else None
        aug = tuple(self._rand(B) < 0.5 for _ in range(4))          # fx, fy, tr, ft
        src = source_indices(aug, self.T, P, self.device)
        out = torch.empty((B, self.T, 3, P, P), device=self.device)
        if vid is not None:
            self._video_build(vid, P, tuple(a[:bv] for a in src), out[:bv])
        if pho is not None:
            self._photo_build(pho, P, tuple(a[bv:rest] for a in aug), tuple(a[bv:rest] for a in src), out[bv:rest])
        if syn is not None:
            self._synthetic_build(syn, P, tuple(a[rest:] for a in src), out[rest:])
        return out


def source_indices(aug: tuple | None, T: int, P: int, device) -> tuple:
    """The augmentation of clips (B, T, C, P, P) as the source of every output sample:
    out[b, t, :, y, x] = clip[b, t', :, y', x'] -> (t' (B, T), y' (B, P, P), x' (B, P, P)) long.
    aug = (fx, fy, tr, ft), (B,) bool each, applied in this order: x flipped where fx, y flipped
    where fy, y and x swapped where tr, time reversed where ft, so that t' = ft ? T-1-t : t,
    (y2, x2) = tr ? (x, y) : (y, x), y' = fy ? P-1-y2 : y2, x' = fx ? P-1-x2 : x2 (all 8
    rotations and reflections of the square with the flips). aug None: the identity, as
    broadcastable (1, T), (1, P, 1), (1, 1, P)."""
    t = torch.arange(T, device=device)
    p = torch.arange(P, device=device)
    if aug is None:
        return t.view(1, T), p.view(1, P, 1), p.view(1, 1, P)
    fx, fy, tr, ft = aug
    B = fx.shape[0]
    t0 = torch.where(ft[:, None], T - 1 - t, t)
    yy = p.view(1, P, 1).expand(B, P, P)
    xx = yy.transpose(1, 2)
    sw = tr.view(B, 1, 1)
    y2, x2 = torch.where(sw, xx, yy), torch.where(sw, yy, xx)
    return (t0, torch.where(fy.view(B, 1, 1), P - 1 - y2, y2), torch.where(fx.view(B, 1, 1), P - 1 - x2, x2))


def smooth_field(u: torch.Tensor, P: int) -> torch.Tensor:
    """u (B, 2, n, n) control values -> (B, P, P, 2): u bicubically interpolated over a P x P crop
    (align_corners=True: the corner values at the corner samples), channel 0 -> the last dimension's
    x, channel 1 its y. With u uniform in [-1, 1] the field is smooth on the scale of P / (n - 1)
    px and within about [-1.25, 1.25] (bicubic overshoot)."""
    return F.interpolate(u, size=(P, P), mode="bicubic", align_corners=True).permute(0, 2, 3, 1)


def resample_tiles(img: torch.Tensor, theta: torch.Tensor, P: int, dst: torch.Tensor | None = None,
                   flow: torch.Tensor | None = None, swap: torch.Tensor | None = None) -> torch.Tensor:
    """img (B, 3, TILE, TILE) in [0,1], theta (B, T, 2, 3) affine maps in F.affine_grid's
    normalised coordinates (align_corners=False), flow (B, T, P, P, 2) or None: a displacement
    (x, y) added to every frame's sampling grid, in the same coordinates, swap (B,) bool or None:
    the clips whose grid (after the flow) is transposed, y and x swapped -> clips (B, T, 3, P, P)
    in [0,1], written into dst when given (else a new tensor with grid_sample's (B, 3, T, P, P)
    layout, transposed; the clipping is the one pass out of grid_sample's buffer). Bicubic
    grid_sample with reflection padding, clipped to [0,1]. The T frames of a clip are one grid of
    T*P rows over the clip's tile, so the tile is read in place instead of being copied T times;
    each output sample is computed from the same grid point and tile as with a (B*T)-image batch,
    so the result is the same."""
    B, T = theta.shape[:2]
    grid = F.affine_grid(theta.reshape(B * T, 2, 3), (B * T, 3, P, P), align_corners=False)
    if flow is not None:
        grid = grid + flow.reshape(B * T, P, P, 2)
    if swap is not None:
        g = grid.view(B, T, P, P, 2)
        grid = torch.where(swap.view(B, 1, 1, 1, 1), g.transpose(2, 3), g)
    out = F.grid_sample(img, grid.reshape(B, T * P, P, 2), mode="bicubic", padding_mode="reflection",
                        align_corners=False)
    return torch.clamp(out.view(B, 3, T, P, P).transpose(1, 2), 0, 1, out=dst)


def make_noisy(clean: torch.Tensor, gen: torch.Generator, sigma_max: float = 55.0,
               clip8_share: float = 0.25):
    """Model v1's noise: AWGN with sigma ~ U(0, sigma_max) (8-bit code values) per clip,
    unclipped, except a share of clips clipped to [0,1] and quantised to 8 bit.
    -> (noisy, sigma (B,)). denoise_train/noise_models.py holds model v2's noise."""
    B = clean.shape[0]
    dev = clean.device
    sigma = torch.rand(B, device=dev, generator=gen) * sigma_max
    noisy = clean + (sigma / 255.0).view(B, 1, 1, 1, 1) * torch.randn(clean.shape, device=dev, generator=gen)
    q = (torch.rand(B, device=dev, generator=gen) < clip8_share).view(B, 1, 1, 1, 1)
    noisy = torch.where(q, torch.round(noisy.clamp(0, 1) * 255.0) / 255.0, noisy)
    return noisy, sigma


def main():
    ap = argparse.ArgumentParser(description="Decode the training data into an .npy cache (parallel).")
    ap.add_argument("--cache", required=True)
    ap.add_argument("--photos")
    ap.add_argument("--videos", nargs="*", default=[])
    a = ap.parse_args()
    t0 = time.time()
    jobs = ([(p, decode_photo) for p in _photo_paths(a.photos)] if a.photos and os.path.isdir(a.photos) else [])
    jobs += [(p, decode_video) for p in _video_paths([v for v in a.videos if os.path.isdir(v)])]
    todo = [j for j in jobs if not os.path.exists(_cache_file(a.cache, j[0]))]
    with ThreadPoolExecutor(WORKERS) as ex:
        nbytes = sum(ex.map(lambda j: _cached(a.cache, j[0], j[1]).nbytes, todo))
    print(f"cache {a.cache}: {len(jobs)} files, {len(todo)} decoded now ({nbytes / 2**30:.2f} GiB) in "
          f"{time.time() - t0:.1f} s with {WORKERS} threads", flush=True)


if __name__ == "__main__":
    main()
