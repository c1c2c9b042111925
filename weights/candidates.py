"""Named model configs and training recipes of the model v2 study (weights/study.py).

A candidate is a model.Config plus the recipe it trains with. Every candidate stays within the
family (input fusion -> Swin U-Net with 8x8 shifted windows -> 3x3x3 stencil head) and within
2x model v1's 212 GFLOP per 1080p frame (model.gflop_per_frame). "v1" is the control; "v1-awgn"
is the same network trained with model v1's recipe (AWGN only, L1 only), which measures what the
faithfulness recipe costs in AWGN PSNR.

Recipes (weights/train_step.py applies them):
  v2  noise_models.NoiseRecipe (AWGN / Poisson-Gaussian / Y'CbCr 4:2:0, 8-bit clipping, clean
      clips, sigma maps up to 2x the real noise), 8 % synthetic clips (data.Batcher
      synthetic_clips), loss L1 + 0.5 * L1 of the 8x8 mean of the error (low-pass term).
  v1  model v1's recipe: data.make_noisy AWGN, no synthetic clips, L1.
"""
from __future__ import annotations

from model import Config

DEEP = {"enc0": 2, "enc1": 4, "mid": 6, "dec1": 4, "dec0": 2}

CANDIDATES = {
    "v1": (Config(), "v2"),
    "v1-awgn": (Config(), "v1"),
    "wide40": (Config(channels=(40, 80, 160), heads=(1, 2, 4), head_dim=40), "v2"),
    "deep": (Config(depths=dict(DEEP)), "v2"),
    "frame32": (Config(fusion="frame", frame_channels=32), "v2"),
    "frame32-r3": (Config(fusion="frame", frame_channels=32, fusion_radius=3), "v2"),
}

RECIPES = {
    "v2": {"noise": "v2", "synth_share": 0.08, "lowpass_weight": 0.5},
    "v1": {"noise": "v1", "synth_share": 0.0, "lowpass_weight": 0.0},
}


def get(name: str):
    """-> (Config, recipe name); KeyError names the known candidates."""
    if name not in CANDIDATES:
        raise KeyError(f"unknown candidate {name!r}; known: {', '.join(CANDIDATES)}")
    cfg, recipe = CANDIDATES[name]
    return Config.from_json(cfg.to_json()), recipe
