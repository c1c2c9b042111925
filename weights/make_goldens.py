#!/usr/bin/env python3
"""Write the golden weights and tensors the engine tests compare against.

    python3 weights/make_goldens.py [--out tests/data] [--align | --wide]

Outputs (both safetensors, fp32):
  golden_weights.safetensors  every state_dict tensor of a randomised weights.model.Denoiser under
                              its PyTorch name; __metadata__ format/version/config as shipped files.
  golden_tensors.safetensors  a 7-frame clip (7,3,40,70), sigma 25, the output of every stage of the
                              centre U-Net pass (padded to 64x128), the other two feature maps, the
                              model output, and three sequence goldens (N = 5, 1, 2) made with
                              denoise_sequence().
With --wide, instead: golden_wide_weights.safetensors and golden_wide_tensors.safetensors, the
same goldens for channels 64/64/128 (WIDE: patch merging 4C -> C at level 0, expanding C -> 4C').
With --align, instead (the two files above are not touched): model v2's motion alignment
(Config align 8, align_tile 32) on clips with motion.
  golden_align_weights.safetensors  the same kind of randomised weights, with that config.
  golden_align_tensors.safetensors  a 7-frame clip (7,3,100,120) (padded 128x128: 4x4 tiles) whose
                              six regions move by different whole-pixel steps, odd and even, per
                              frame, plus noise (moving_clip); sigma 25; align.shifts, tile_shifts of the centre output's
                              three windows (centres 2, 3, 4; taps 0, 1, 3, 4 against tap 2; (3, 4,
                              4, 4, 2) (dy, dx)); stage.fusion_in of the centre window (aligned);
                              the model output; and sequence goldens (N = 5, 1, 2) of such clips
                              made with denoise_sequence(). Asserts that at least half of the
                              tiles of every non-centre tap move, and that the head's halved
                              shifts do too (a golden with shifts 0 could not catch a wrong warp),
                              and prints the shift maps. Made on the CPU whatever the machine:
                              kernels/cpu/block_match.cpp forms its costs as PyTorch's CPU kernels
                              do, so its shifts equal these ties included; a GPU's sums could
                              resolve a near-tie otherwise.

Why the weights are randomised beyond the default init: default LayerNorm is (1, 0) and default
biases are small, and the bias table is ~0.02, so an engine that ignored an LN affine, a bias or the
relative position bias would still pass a 1e-4 comparison. Perturbing each makes every parameter
visible in the output.

Determinism: fp32 everywhere, TF32 off, a fixed seed. Run on CUDA when available (the committed
goldens are meant to come from the device); CPU results agree within ~1e-5.
"""
from __future__ import annotations

import argparse
import dataclasses
import os

import torch
import torch.nn.functional as F

from safetensors.torch import save_file

from denoise_train import candidates
from denoise_train.align import tile_shifts
from denoise_train.model import FORMAT, Config, Denoiser, denoise_sequence, reflect_index, reflect_pad


# The wider fine levels of the v3 study's candidate "wide64" (denoise_train/candidates.py), at small
# depths: enc0 keeps two blocks so that a shifted window runs at 64 channels.
WIDE = dataclasses.replace(candidates.get("wide64")[0], depths={"enc0": 2, "enc1": 1, "mid": 1, "dec1": 1, "dec0": 1})


# Its stage outputs kept (each map at 64 channels is 0.5 MB): those of the levels whose widths
# differ from model v1's, the model output and the sequences cover the rest.
WIDE_STAGES = ("merge0", "enc1", "merge1", "mid", "expand1", "skip1", "dec1", "expand0", "dec0")


def randomise(model: Denoiser, gen: torch.Generator) -> None:
    def normal(t: torch.Tensor, mean: float, std: float) -> torch.Tensor:
        return (torch.randn(t.shape, generator=gen) * std + mean).to(t.dtype)

    with torch.no_grad():
        for name, mod in model.named_modules():
            if isinstance(mod, torch.nn.LayerNorm):
                mod.weight.copy_(normal(mod.weight, 1.0, 0.1))
                mod.bias.copy_(normal(mod.bias, 0.0, 0.1))
            elif getattr(mod, "bias", None) is not None and isinstance(mod.bias, torch.Tensor):
                mod.bias.copy_(normal(mod.bias, 0.0, 0.05))
            if hasattr(mod, "relative_position_bias_table"):
                t = mod.relative_position_bias_table
                t.copy_(normal(t, 0.0, 0.5))


def noisy_clip(gen: torch.Generator, T: int, H: int, W: int) -> torch.Tensor:
    """Smooth clean pattern in [-0.8, 0.8] plus N(0, 0.2), not clipped (like real noisy input)."""
    ys = torch.linspace(0, 1, H)[:, None]
    xs = torch.linspace(0, 1, W)[None, :]
    frames = []
    for t in range(T):
        chans = []
        for c in range(3):
            ph = 0.7 * c + 0.3 * t
            chans.append(0.8 * torch.sin(6.0 * xs + 4.0 * ys * (1 + 0.3 * c) + ph) * torch.cos(3.0 * ys - ph))
        frames.append(torch.stack(chans))
    clean = torch.stack(frames)
    return clean + 0.2 * torch.randn(clean.shape, generator=gen)


def moving_clip(gen: torch.Generator, T: int, H: int, W: int) -> torch.Tensor:
    """Six regions (3 bands x 2 halves, borders off the 32 px tile grid) of smoothed random texture
    in about [-0.8, 0.8], each translated by its own whole-pixel step per frame: a velocity of 2 or
    3 px per axis plus a jitter of -1, 0 or 1 px per frame (odd and even steps, up to 4 px, so
    that two frames apart stay within align 8); plus N(0, 0.1), not clipped."""
    velocity = ((2, 3), (-3, 2), (-2, -3), (3, -2), (2, -2), (-3, 3))
    m = 4 * T + 8
    ys, xs = (0, H // 3, 2 * H // 3, H), (0, W // 2, W)
    frames = torch.empty(T, 3, H, W)
    for b in range(6):
        y0, y1, x0, x1 = ys[b // 2], ys[b // 2 + 1], xs[b % 2], xs[b % 2 + 1]
        canvas = F.avg_pool2d(torch.rand(1, 3, H + 2 * m, W + 2 * m, generator=gen) * 2 - 1, 3, 1, 1)[0] * 2.4
        jitter = torch.randint(-1, 2, (T, 2), generator=gen).tolist()
        oy = ox = 0
        for t in range(T):
            frames[t, :, y0:y1, x0:x1] = canvas[:, m + oy + y0:m + oy + y1, m + ox + x0:m + ox + x1]
            oy, ox = oy + velocity[b][0] + jitter[t][0], ox + velocity[b][1] + jitter[t][1]
    return frames + 0.1 * torch.randn(frames.shape, generator=gen)


def check_shifts(name: str, shifts: torch.Tensor) -> None:
    """shifts (..., th, tw, 2) of non-centre taps: print them, assert that at least half of the
    tiles move and that at least half move under the head's halving (floor)."""
    moving = (shifts != 0).any(-1).float().mean().item()
    halved = (torch.div(shifts, 2, rounding_mode="floor") != 0).any(-1).float().mean().item()
    print(f"{name}: {moving:.0%} of tiles moved, {halved:.0%} after halving; (dy, dx) per tile:")
    for m in shifts.reshape(-1, *shifts.shape[-3:]):
        print("   " + " | ".join(" ".join(f"{dy:+d},{dx:+d}" for dy, dx in row) for row in m.tolist()))
    assert moving >= 0.5 and halved >= 0.5, f"{name}: too few moving tiles for a golden of the warp"


def write_align_goldens(out_dir: str, dev: torch.device) -> None:
    torch.manual_seed(1234)
    model = Denoiser(Config(align=8, align_tile=32))
    gen = torch.Generator().manual_seed(1234)
    randomise(model, gen)
    model = model.float().eval().to(dev)
    cfg = model.cfg
    sd = {k: v.detach().float().contiguous().cpu() for k, v in model.state_dict().items()}
    meta = {"format": FORMAT, "version": str(cfg.version), "config": cfg.to_json()}
    save_file(sd, os.path.join(out_dir, "golden_align_weights.safetensors"), metadata=meta)

    g = {}
    with torch.no_grad():
        clip = moving_clip(gen, 7, 100, 120).to(dev)
        sigma = torch.tensor([25.0], device=dev)
        g["input.clip"] = clip
        g["input.sigma"] = sigma
        m = cfg.pad_multiple
        H, W = clip.shape[-2:]
        padded = reflect_pad(clip, (-H) % m, (-W) % m)                    # (7,3,128,128)
        r = cfg.fusion_radius
        shifts = torch.stack([torch.stack([tile_shifts(padded[c:c + 1], padded[k:k + 1], cfg.align, cfg.align_tile)[0]
                                           for k in range(c - r, c + r + 1) if k != c]) for c in (2, 3, 4)])
        check_shifts("clip windows 2, 3, 4", shifts)
        g["align.shifts"] = shifts.float()
        g["stage.fusion_in"] = model.fusion_input(padded[None, 1:6], sigma)[0]
        g["output"] = model(clip[None], sigma)[0]

        for key, n, s in (("seq", 5, 20.0), ("seq1", 1, 20.0), ("seq2", 2, 20.0)):
            x = moving_clip(gen, n, 100, 120).to(dev)
            if n > 1:
                xp = reflect_pad(x, (-H) % m, (-W) % m)
                head = torch.stack([tile_shifts(xp[t:t + 1], xp[reflect_index(t + d, n)][None], cfg.align,
                                                cfg.align_tile)[0] for t in range(n) for d in (-1, 1)])
                check_shifts(f"{key}: the head's x_(t-1), x_(t+1) against x_t", head)
            g[f"{key}.input"] = x
            g[f"{key}.sigma"] = torch.tensor([s], device=dev)
            g[f"{key}.output"] = denoise_sequence(model, x, s)

    g = {k: v.detach().float().contiguous().cpu() for k, v in g.items()}
    save_file(g, os.path.join(out_dir, "golden_align_tensors.safetensors"),
              metadata={"device": str(dev), "torch": torch.__version__, "seed": "1234"})
    for k, v in g.items():
        print(f"{k:22s} {tuple(v.shape)}  rms {v.pow(2).mean().sqrt().item():.4f}")


def stage_outputs(model: Denoiser, frames5: torch.Tensor, sigma: torch.Tensor) -> dict:
    """Run one U-Net pass submodule by submodule; frames5 (1,5,3,H,W) padded."""
    u = model.unet
    out = {}

    def keep(name: str, x: torch.Tensor) -> torch.Tensor:
        out["stage." + name] = x[0]
        return x

    z = keep("fusion_in", model.fusion_input(frames5, sigma))
    x = keep("fusion", u.fusion(z).permute(0, 2, 3, 1))
    x = keep("enc0.block0", u.enc0.blocks[0](x))
    for b in u.enc0.blocks[1:]:
        x = b(x)
    x0 = keep("enc0", x)
    x = keep("merge0", u.merge0(x0))
    x1 = keep("enc1", u.enc1(x))
    x = keep("merge1", u.merge1(x1))
    x2 = keep("mid", u.mid(x))
    up = keep("expand1", u.expand1(x2))
    x = keep("skip1", u.skip1(torch.cat([up, x1], dim=-1)))
    y1 = keep("dec1", u.dec1(x))
    up = keep("expand0", u.expand0(y1))
    x = keep("skip0", u.skip0(torch.cat([up, x0], dim=-1)))
    f = keep("dec0", u.dec0(x))
    # The stage-by-stage path must be the module's own forward.
    ref = model.features(frames5, sigma)
    assert torch.equal(ref, f) or (ref - f).abs().max().item() < 1e-6
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data"))
    ap.add_argument("--wide", action="store_true",
                    help="write golden_wide_{weights,tensors}.safetensors (channels 64/64/128: patch merging "
                    "4C -> C and expanding C -> 4C' at undoubled widths) instead")
    ap.add_argument("--align", action="store_true",
                    help="write golden_align_{weights,tensors}.safetensors (model option align) instead")
    args = ap.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if args.align:
        os.makedirs(args.out, exist_ok=True)
        write_align_goldens(args.out, torch.device("cpu"))
        return

    os.makedirs(args.out, exist_ok=True)
    if args.wide:
        write_goldens(args.out, "golden_wide", dev, WIDE, WIDE_STAGES)
    else:
        write_goldens(args.out, "golden", dev, Config())


def write_goldens(out_dir: str, name: str, dev: torch.device, cfg: Config, keep: tuple | None = None) -> None:
    """NAME_weights.safetensors (cfg's randomised weights) and NAME_tensors.safetensors; keep: the
    stage outputs written (None: all)."""
    torch.manual_seed(1234)
    model = Denoiser(cfg)
    gen = torch.Generator().manual_seed(1234)
    randomise(model, gen)
    model = model.float().eval().to(dev)
    cfg = model.cfg

    sd = {k: v.detach().float().contiguous().cpu() for k, v in model.state_dict().items()}
    meta = {"format": FORMAT, "version": str(cfg.version), "config": cfg.to_json()}
    save_file(sd, os.path.join(out_dir, f"{name}_weights.safetensors"), metadata=meta)

    g = {}
    with torch.no_grad():
        clip = noisy_clip(gen, 7, 40, 70).to(dev)
        sigma = torch.tensor([25.0], device=dev)
        g["input.clip"] = clip
        g["input.sigma"] = sigma
        m = cfg.pad_multiple
        H, W = clip.shape[-2:]
        padded = reflect_pad(clip, (-H) % m, (-W) % m)[None]            # (1,7,3,64,128)
        g.update(stage_outputs(model, padded[:, 1:6], sigma))
        g["stage.F_tm1"] = model.features(padded[:, 0:5], sigma)[0]
        g["stage.F_tp1"] = model.features(padded[:, 2:7], sigma)[0]
        g["output"] = model(clip[None], sigma)[0]

        for key, n, s in (("seq", 5, 10.0), ("seq1", 1, 10.0), ("seq2", 2, 10.0)):
            x = torch.rand((n, 3, 24, 40), generator=gen) * 2 - 1
            x = x.to(dev)
            g[f"{key}.input"] = x
            g[f"{key}.sigma"] = torch.tensor([s], device=dev)
            g[f"{key}.output"] = denoise_sequence(model, x, s)

    g = {k: v.detach().float().contiguous().cpu() for k, v in g.items() if keep is None or not k.startswith("stage.")
         or k[len("stage."):] in keep}
    save_file(g, os.path.join(out_dir, f"{name}_tensors.safetensors"),
              metadata={"device": str(dev), "torch": torch.__version__, "seed": "1234"})
    for k, v in g.items():
        print(f"{k:22s} {tuple(v.shape)}  rms {v.pow(2).mean().sqrt().item():.4f}")


if __name__ == "__main__":
    main()
