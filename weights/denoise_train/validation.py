"""Validation of training: fixed held-out clips drawn on the CPU (so that every machine validates
on the same clips and noise) and the PSNR of the network's centre frames on them (train.py's val
events, val.py, the experiments).
"""
from __future__ import annotations

import torch

from .data import VAL_DAVIS, VAL_T, Batcher, load_videos
from .noise_models import mix_noise


def psnr(a, b):
    mse = ((a - b) ** 2).flatten(1).mean(1)
    return -10 * torch.log10(mse.clamp_min(1e-12))


def make_val_set(photos, frames, starts, device, n=24, P=256, T=VAL_T):
    """Fixed validation clips from the held-out split, clean, (n, T, 3, P, P) in [0,1] on
    device. Drawn on the CPU (CPU generator, seed 12345) whatever the device, so that every
    machine validates on the same clips. In each group of 8 the first 4 come from the videos and
    the last 4 from the photos (data.Batcher.clean; all 8 from one source when the other is
    missing). T: the clip length (VAL_T, train.log's; a longer one, with starts from
    load_videos(..., T), gives other clips: validate(frames=...) of fusion "shift")."""
    cpu = lambda t: None if t is None else t.cpu()
    b = Batcher(cpu(photos), cpu(frames), cpu(starts), "cpu", seed=12345, T=T)
    return torch.cat([b.clean(8, P) for _ in range(max(1, n // 8))]).to(device)


def make_val_davis(videos, device, cache=None, limit=0, P=256):
    """The val_davis clips: make_val_set over the split's DAVIS sequences alone (data.VAL_DAVIS),
    16 clips, (16, VAL_T, 3, P, P) on device; None when the videos hold none of them."""
    frames, starts = load_videos(videos, "val", device, VAL_T, cache, limit, names=VAL_DAVIS)
    return None if frames is None else make_val_set(None, frames, starts, device, n=16, P=P)


VAL_NOISES = ("awgn", "awgn8", "pg", "ycc420")


@torch.no_grad()
def centre_outputs(model, noisy: torch.Tensor, sigma: float) -> torch.Tensor:
    """The network's centre frames (N, 3, H, W) in [0, 1], fp32, for noisy clips (N, T, 3, H, W)
    in [0, 1] (T the network's window) and a sigma map of sigma code values; 8 clips at a time,
    bf16 autocast on CUDA, fp32 on the CPU."""
    outs = []
    for i in range(0, len(noisy), 8):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=noisy.is_cuda):
            y = model(noisy[i:i + 8] * 2 - 1, torch.full((len(noisy[i:i + 8]),), sigma, device=noisy.device))
        outs.append((y.float() + 1) / 2)
    return torch.cat(outs)


@torch.no_grad()
def validate(model, val, sigmas=(10, 30, 50), groups=None, map_scale=1.0, noise="awgn", frames=None):
    """PSNR (dB, peak 1, centre frame) at each sigma, AWGN unclipped, noise seed 777 (drawn on
    the CPU, like the clips, so that any machine reproduces the figures). groups: optional
    {name: clip indices}; adds val_psnr_s{sigma}_{name}, the mean over those clips. map_scale:
    the network is given a sigma map of map_scale * sigma (1: the real noise; a network that
    uses its map loses PSNR above 1, where it smooths more; one that ignores it does not).
    noise (weights/val.py --noise; training always validates on awgn): the training's other
    noise models at the same sigma, from the same normal draw through noise_models.mix_noise:
    awgn8 (AWGN clipped to [0, 1] and quantised to 8 bit), pg (Poisson-Gaussian, f = 0.5), ycc420
    (4:2:0 chroma noise, rho = 0.75); the middles of the training's ranges.
    frames (fusion "shift" only, whose forward takes any odd clip length): the network reads the
    middle `frames` frames of each clip (at most val's length, data.VAL_T = 9 for make_val_set's
    clips; draw a longer set with make_val_set(T=...)) instead of its training length 2R+1: the
    same centre frames and the same noise on them, so the difference is what the training clip's
    truncated receptive field costs (model.py, fusion "shift")."""
    if noise not in VAL_NOISES:
        raise ValueError(f"noise must be one of {VAL_NOISES}, got {noise!r}")
    T = 2 * model.cfg.temporal_radius + 1
    if frames is not None and frames != T:
        if model.cfg.fusion != "shift":
            raise ValueError(f"frames={frames}: only fusion 'shift' reads clips of another length than {T}")
        if frames < 3 or frames % 2 == 0 or frames > val.shape[1]:
            raise ValueError(f"frames must be odd, >= 3 and <= the clips' {val.shape[1]}, got {frames}")
        T = frames
    model.eval()
    c = val.shape[1] // 2
    clips = val[:, c - T // 2:c + T // 2 + 1]
    g = torch.Generator()
    g.manual_seed(777)
    res = {}
    for s in sigmas:
        n = torch.randn(val.shape, generator=g).to(val.device)[:, c - T // 2:c + T // 2 + 1]
        if noise == "awgn":
            noisy = clips + s / 255.0 * n
        else:
            B = len(clips)
            full = lambda v: torch.full((B,), float(v), device=val.device)  # noqa: E731
            kind = {"awgn8": 0.0, "pg": 0.5, "ycc420": 0.9}[noise]   # kind < 1/3: awgn, < 2/3: pg, else ycc420
            noisy = mix_noise(clips, n, full(s), full(kind), full(0.5), full(0.75),
                              torch.full((B,), noise == "awgn8", device=val.device),
                              torch.zeros(B, dtype=torch.bool, device=val.device), 1 / 3, 2 / 3)
        p = psnr(centre_outputs(model, noisy, float(s) * map_scale), clips[:, T // 2])
        res[f"val_psnr_s{s}"] = round(p.mean().item(), 3)
        for name, idx in (groups or {}).items():
            res[f"val_psnr_s{s}_{name}"] = round(p[idx].mean().item(), 3)
    res["val_psnr_mean"] = round(sum(res[f"val_psnr_s{s}"] for s in sigmas) / len(sigmas), 3)
    model.train()
    return res


def validate_davis(model, val_davis, noise="awgn") -> dict:
    """validate() on the DAVIS clips of the split (data.VAL_DAVIS), keys val_davis_*: sigma 10 / 30
    / 50 and their mean, and sigma 30 with a map 1.3x the noise on the same noise
    (val_davis_s30_map1.3; logs from before this rule drew another noise for it). noise:
    validate's. {} when val_davis is None."""
    if val_davis is None:
        return {}
    r = {k.replace("val_psnr", "val_davis"): v for k, v in validate(model, val_davis, noise=noise).items()}
    # sigmas (10, 30): sigma 30's noise is then the same draw as in the call above
    r["val_davis_s30_map1.3"] = validate(model, val_davis, sigmas=(10, 30), map_scale=1.3,
                                         noise=noise)["val_psnr_s30"]
    return r
