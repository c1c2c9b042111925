"""Training data on the GPU: decode once, build every batch with tensor ops.

Sources (/work/shared/data/README.md): train-photos (JPEG) and train-video (DAVIS-2016 mp4,
854x480). A few sequences and photos are held out as the validation split (VAL_VIDEOS,
every VAL_PHOTO_EVERY-th photo); eval-davis4 is never read here.

Clips are (B, 7, 3, P, P) float in [0,1]:
  - video clips: 7 consecutive frames at a random crop of a training sequence;
  - photo pseudo-video: a 256x256 tile of a photo, seen through a P x P window moving along a
    smooth random trajectory (translation with constant velocity plus acceleration, small zoom
    and rotation), resampled with bicubic grid_sample;
  - both: random flips, transposition (with flips: all 8 rotations/reflections) and time reversal.
"""
from __future__ import annotations

import glob
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

VAL_VIDEOS = ("cows", "dog")
VAL_PHOTO_EVERY = 20
TILE = 256
T = 7


def _photo_paths(root):
    return sorted(glob.glob(os.path.join(root, "*.jpg")) + glob.glob(os.path.join(root, "*.png")))


def load_photo_tiles(root: str, split: str, device) -> torch.Tensor:
    """Cut every photo of the split into overlapping TILE x TILE tiles: (N, TILE, TILE, 3) uint8."""
    from PIL import Image
    tiles = []
    for k, p in enumerate(_photo_paths(root)):
        held = k % VAL_PHOTO_EVERY == 0
        if (split == "val") != held:
            continue
        im = np.asarray(Image.open(p).convert("RGB"))
        H, W, _ = im.shape
        if H < TILE or W < TILE:
            continue
        step = TILE * 3 // 4
        ys = list(range(0, H - TILE + 1, step)) or [0]
        xs = list(range(0, W - TILE + 1, step)) or [0]
        for y in ys:
            for x in xs:
                tiles.append(im[y:y + TILE, x:x + TILE])
    return torch.from_numpy(np.stack(tiles)).to(device)


def decode_video(path: str) -> np.ndarray:
    """All frames of a video as (n, H, W, 3) uint8 RGB."""
    import cv2
    cap = cv2.VideoCapture(path)
    frames = []
    while True:
        ok, f = cap.read()
        if not ok:
            break
        frames.append(f[:, :, ::-1])
    cap.release()
    if not frames:
        raise RuntimeError(f"{path}: no frames decoded")
    return np.stack(frames)


def load_videos(root: str, split: str, device):
    """-> frames (F, H, W, 3) uint8 on device, starts (S,) long: valid first-frame indices."""
    vids, starts, off = [], [], 0
    for p in sorted(glob.glob(os.path.join(root, "*.mp4"))):
        name = os.path.splitext(os.path.basename(p))[0]
        if (split == "val") != (name in VAL_VIDEOS):
            continue
        v = decode_video(p)
        vids.append(torch.from_numpy(v))
        starts.extend(range(off, off + len(v) - T + 1))
        off += len(v)
    if not vids:
        return None, None
    frames = torch.cat(vids).to(device)
    return frames, torch.tensor(starts, device=device)


class Batcher:
    """Builds batches of clean clips on the GPU."""

    def __init__(self, photos: torch.Tensor | None, frames: torch.Tensor | None,
                 starts: torch.Tensor | None, device, seed: int = 0):
        self.photos, self.frames, self.starts = photos, frames, starts
        self.device = device
        self.g = torch.Generator(device=device)
        self.g.manual_seed(seed)

    def _rand(self, *shape):
        return torch.rand(*shape, device=self.device, generator=self.g)

    def _randint(self, hi, shape):
        return torch.randint(0, hi, shape, device=self.device, generator=self.g)

    def video_clips(self, B: int, P: int) -> torch.Tensor:
        Fr, H, W, _ = self.frames.shape
        s = self.starts[self._randint(len(self.starts), (B,))]
        y = self._randint(H - P + 1, (B,))
        x = self._randint(W - P + 1, (B,))
        ar = torch.arange(P, device=self.device)
        ti = (s[:, None] + torch.arange(T, device=self.device))[:, :, None, None]
        yi = (y[:, None] + ar)[:, None, :, None]
        xi = (x[:, None] + ar)[:, None, None, :]
        c = self.frames[ti, yi, xi]                                   # (B, T, P, P, 3)
        return c.permute(0, 1, 4, 2, 3).float() / 255.0

    def photo_clips(self, B: int, P: int) -> torch.Tensor:
        tiles = self.photos[self._randint(len(self.photos), (B,))]     # (B, TILE, TILE, 3)
        img = tiles.permute(0, 3, 1, 2).float() / 255.0
        k = torch.arange(T, device=self.device, dtype=torch.float32) - T // 2      # -3..3
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
        grid = F.affine_grid(theta.view(B * T, 2, 3), (B * T, 3, P, P), align_corners=False)
        src = img[:, None].expand(B, T, 3, TILE, TILE).reshape(B * T, 3, TILE, TILE)
        out = F.grid_sample(src, grid, mode="bicubic", padding_mode="reflection", align_corners=False)
        return out.view(B, T, 3, P, P).clamp(0, 1)

    def augment(self, c: torch.Tensor) -> torch.Tensor:
        B = c.shape[0]

        def m():
            return (self._rand(B) < 0.5).view(B, 1, 1, 1, 1)
        c = torch.where(m(), c.flip(-1), c)
        c = torch.where(m(), c.flip(-2), c)
        c = torch.where(m(), c.transpose(-1, -2), c)
        return torch.where(m(), c.flip(1), c)

    def clean(self, B: int, P: int, video_share: float = 0.5) -> torch.Tensor:
        parts = []
        bv = int(round(B * video_share)) if self.frames is not None else 0
        if self.photos is None:
            bv = B
        if bv:
            parts.append(self.video_clips(bv, P))
        if B - bv:
            parts.append(self.photo_clips(B - bv, P))
        return self.augment(torch.cat(parts))


def make_noisy(clean: torch.Tensor, gen: torch.Generator, sigma_max: float = 55.0,
               clip8_share: float = 0.25):
    """AWGN with sigma ~ U(0, sigma_max) (8-bit code values) per clip, unclipped, except a share
    of clips clipped to [0,1] and quantised to 8 bit. -> (noisy, sigma (B,))."""
    B = clean.shape[0]
    dev = clean.device
    sigma = torch.rand(B, device=dev, generator=gen) * sigma_max
    noisy = clean + (sigma / 255.0).view(B, 1, 1, 1, 1) * torch.randn(clean.shape, device=dev, generator=gen)
    q = (torch.rand(B, device=dev, generator=gen) < clip8_share).view(B, 1, 1, 1, 1)
    noisy = torch.where(q, torch.round(noisy.clamp(0, 1) * 255.0) / 255.0, noisy)
    return noisy, sigma
