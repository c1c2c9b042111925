"""Named model configs and training recipes of the model v2 study (weights/study.py).

A candidate is a model.Config plus the recipe it trains with. Every candidate stays within the
family (input fusion -> Swin U-Net with 8x8 shifted windows -> 3x3x3 stencil head) and within
what the engines are built to run (engine_limits): channels multiples of 32 up to 256 with head
dim 32 (heads = C / 32), window 8, MLP ratio 4, at most 2x model v1's
212 GFLOP per 1080p frame
(model.gflop_per_frame); the temporal radius is Config.fusion_radius + head_radius. "v1" is the
control; "v1-awgn" is the same network trained with model v1's recipe (AWGN only, L1 only), which
measures what the faithfulness recipe costs in AWGN PSNR.

  v1              channels 32/64/128, depths 2/2/3/2/2                      212.1 GFLOP
  deep            depths 2/4/6/4/2                                          313.7
  frame32         per-frame encoder E 32 (features once per frame, reused)  255.7
  frame32-r3      frame32 with temporal radius 4 (9 frames)                 274.9
  deep-34643      depths 3/4/6/4/3 (v3 study: blocks at the finest level)   347.9
  deep-44644      depths 4/4/6/4/4                                          382.1
  deep-36663      depths 3/6/6/6/3                                          407.8
  shift           temporal shift in every block (fusion "shift", shift_div 8:   299.2
                  C/8 channels from each neighbouring frame), depths 2/4/6/4/2,
                  one U-Net pass per frame, reused; 7-frame training clips
  shift-34643     shift with depths 3/4/6/4/3                               333.5
  wide64          channels 64/64/128 (heads 2/2/4), depths 2/2/3/2/2: the    423.1
                  finest level twice as wide (merge 4x64 -> 64, expand
                  128 -> 4x64)
  wide64-12321    wide64 with one block per finest level (depths 1/2/3/2/1:   303.3
                  its blocks at 64 channels on the whole half-resolution
                  map are where wide64's 4K time goes)
  wide64-12621    wide64-12321 with six middle blocks                       345.0

Doubling the channels per level (patch merging 4C -> 2C, expand C -> 2C) at 64/128/256 costs
about 4x, so a wider candidate keeps the fine levels' width (wide64: 4x64 -> 64 merge); both
engines run any widths within engine_limits with c[i+1] <= 4 c[i] (patch merging 4C -> C',
expanding C -> 4C'). The engines do not run fusion "frame" or "shift" yet (engine_runs): those
candidates are within engine_limits (their widths, heads, window, MLP ratio and cost are what the
fused kernels are built for) and the study trains them, but a winner among them needs engine
work before it can ship.

Recipes (denoise_train/train_step.py applies them):
  v2  noise_models.NoiseRecipe (AWGN / Poisson-Gaussian / Y'CbCr 4:2:0, 8-bit clipping, clean
      clips, sigma maps up to 2x the real noise), 8 % synthetic clips (data.Batcher
      synthetic_clips), loss L1 + 0.5 * L1 of the 8x8 mean of the error (low-pass term).
  v2b v2 with the per-pixel L1 kept for clips whose sigma map equals their real noise only
      (batch_feed.training_batch pixel_loss "honest"): the mismatched clips (map up to 2x the
      noise) and the clean clips given a map teach through the low-pass term alone. Under v2 the
      per-pixel target of a map above the noise is the clean frame, which rewards estimating
      the noise and ignoring the map (docs/model.md: v2 at 31.64 min gives nearly the same PSNR
      for maps 0.8x to 1.5x the noise, where v1 peaks at 1x); tried from 31.64 to 53.64 training
      minutes, where the map response stayed flat.
  v2c the faithfulness fine-tune: v2 (the per-pixel L1 on every clip again, so that clean clips
      given a map and maps above the noise are taught the clean frame pixel by pixel, which the
      low-pass term cannot: an 8 px grid and the chroma of a 1-px grey pattern average out in
      8x8 means) with twice the synthetic share (16 %) and the low-pass term at weight 1.0. Its
      targets are the probe's (denoise_train/faithful.py) ramp_mean, grid8 and neutral_chroma, which
      recipe v2b's run missed.
  v2f v2b with two terms that act on every clip, whatever its map (train_step.loss_fn): the grid
      term (1.0: the error's mean at each position modulo 16 px, less its clip mean) and the
      chroma term (0.5: L1 of the error less its mean over R', G', B'). The luma of a clip whose
      map is above its noise stays free to smooth (v2b), but not to draw the window grid or add
      colour: v2c's per-pixel L1 on every clip fixed the probe's grid8 (1.33 -> 0.86) but made
      neutral_chroma worse (1.16 -> 1.50).
  v2g v2f with the chroma term at 1.0: at 0.5 an 8-minute fine-tune left the probe's
      neutral_chroma at 1.27 (shipped 1.16, target 1.0; GPU bf16) while its grid term fixed
      grid8.
  v2h v2g with neutral detail where the network is taught to keep it neutral: 10 % grey clips
      (batch_feed.training_batch grey_share: R' = G' = B' = Y' before the noise) and, in a
      quarter of the synthetic clips, their neutral 1-px pattern in place of the background
      (data.Batcher pattern_bg 0.25) at a 12 % synthetic share (was 8 %). A 20-minute run of
      v2g (with a deeper network) halved the output chroma of a grey natural clip at a map
      above its noise (0.98 -> 0.44) but raised the 1-px checkerboard's from 1.10 to 1.22
      (faithful.py, fp32 on the CPU), part of which follows the windows (expand_grid.py).
      Neutral 1-px patterns (checkerboard, rows, columns) were about 2.8 % of the synthetic
      clips' pixels, 0.22 % of all training pixels; v2h makes them 24 % and 2.9 %, about a
      fifth of them under a map above the noise, where the chroma and grid terms act on them.
  v1  model v1's recipe: data.make_noisy AWGN, no synthetic clips, L1.
"""
from __future__ import annotations

from .model import Config, gflop_per_frame

DEEP = {"enc0": 2, "enc1": 4, "mid": 6, "dec1": 4, "dec0": 2}

CANDIDATES = {
    "v1": (Config(), "v2"),
    "v1-awgn": (Config(), "v1"),
    "deep": (Config(depths=dict(DEEP)), "v2"),
    "frame32": (Config(fusion="frame", frame_channels=32), "v2"),
    "frame32-r3": (Config(fusion="frame", frame_channels=32, fusion_radius=3), "v2"),
    "deep-34643": (Config(depths=dict(enc0=3, enc1=4, mid=6, dec1=4, dec0=3)), "v2"),
    "deep-44644": (Config(depths=dict(enc0=4, enc1=4, mid=6, dec1=4, dec0=4)), "v2"),
    "deep-36663": (Config(depths=dict(enc0=3, enc1=6, mid=6, dec1=6, dec0=3)), "v2"),
    "shift": (Config(depths=dict(DEEP), fusion="shift", shift_div=8), "v2"),
    "shift-34643": (Config(depths=dict(enc0=3, enc1=4, mid=6, dec1=4, dec0=3), fusion="shift", shift_div=8), "v2"),
    "wide64": (Config(channels=(64, 64, 128), heads=(2, 2, 4)), "v2"),
    "wide64-12321": (Config(channels=(64, 64, 128), heads=(2, 2, 4),
                            depths=dict(enc0=1, enc1=2, mid=3, dec1=2, dec0=1)), "v2"),
    "wide64-12621": (Config(channels=(64, 64, 128), heads=(2, 2, 4),
                            depths=dict(enc0=1, enc1=2, mid=6, dec1=2, dec0=1)), "v2"),
}

# what a recipe leaves out: model v2's noise, no synthetic clips, no extra loss terms, the
# per-pixel L1 on every clip, no grey clips or pattern backgrounds
RECIPE_DEFAULTS = {"noise": "v2", "synth_share": 0.0, "lowpass_weight": 0.0, "grid_weight": 0.0,
                   "chroma_weight": 0.0, "pixel_loss": "all", "grey_share": 0.0, "pattern_bg": 0.0}
RECIPES = {name: {**RECIPE_DEFAULTS, **r} for name, r in {
    "v2": {"synth_share": 0.08, "lowpass_weight": 0.5},
    "v2b": {"synth_share": 0.08, "lowpass_weight": 0.5, "pixel_loss": "honest"},
    "v2c": {"synth_share": 0.16, "lowpass_weight": 1.0},
    "v2f": {"synth_share": 0.08, "lowpass_weight": 0.5, "grid_weight": 1.0, "chroma_weight": 0.5,
            "pixel_loss": "honest"},
    "v2g": {"synth_share": 0.08, "lowpass_weight": 0.5, "grid_weight": 1.0, "chroma_weight": 1.0,
            "pixel_loss": "honest"},
    "v2h": {"synth_share": 0.12, "lowpass_weight": 0.5, "grid_weight": 1.0, "chroma_weight": 1.0,
            "pixel_loss": "honest", "grey_share": 0.1, "pattern_bg": 0.25},
    "v1": {"noise": "v1"},
}.items()}

MAX_GFLOP_RATIO = 2.0   # inference cost per 1080p frame against model v1's


def engine_limits(cfg: Config) -> list[str]:
    """What keeps cfg outside what the engines are built for (the fused kernels: channels multiples
    of 32 up to 256 with head dim 32, window 8, MLP ratio 4) or over the study's cost bound;
    [] when it is within them. The study (weights/study.py) refuses a candidate with any.

    It does not ask whether the engines run the config's fusion today: fusion "frame" and "shift"
    are within these limits (their blocks are the kernels' shapes) but need engine work to run
    (engine_runs says which)."""
    why = []
    for c, h in zip(cfg.channels, cfg.heads):
        if c % 32 or not 32 <= c <= 256:
            why.append(f"channels {c} not a multiple of 32 in 32..256")
        if h * 32 != c:
            why.append(f"heads {h} for channels {c}: head dim must be 32")
    if cfg.head_dim != 32:
        why.append(f"head_dim {cfg.head_dim} != 32")
    if cfg.window != 8 or cfg.mlp_ratio != 4:
        why.append(f"window {cfg.window} / MLP ratio {cfg.mlp_ratio}: the engines run 8 / 4")
    ratio = gflop_per_frame(cfg, 1080, 1920) / gflop_per_frame(Config(), 1080, 1920)
    if ratio > MAX_GFLOP_RATIO:
        why.append(f"{ratio:.2f}x model v1's GFLOP per 1080p frame > {MAX_GFLOP_RATIO:g}x")
    return why


ENGINE_FUSIONS = ("window",)   # what kernels/ (CPU and CUDA) run today; "frame" and "shift" not yet


def engine_runs(cfg: Config) -> list[str]:
    """What the engines (kernels/cpu, kernels/cuda, as they stand) lack to run cfg, beyond
    engine_limits: [] when they run it from its weight file today. Not a study limit: the study
    trains such candidates (e.g. frame32, shift) to decide whether the engine work pays."""
    why = list(engine_limits(cfg))
    for lo, hi in zip(cfg.channels, cfg.channels[1:]):
        if hi > 4 * lo:
            why.append(f"channels {'/'.join(map(str, cfg.channels))}: the engines run a level at most 4x as "
                       "wide as the one before (the decoder keeps y1 in the level-0 map's storage)")
            break
    if cfg.fusion not in ENGINE_FUSIONS:
        what = {"frame": "the per-frame encoder",
                "shift": "the temporal shift in every block (per-block ring buffers, one frame of delay per block)"}
        why.append(f"fusion {cfg.fusion!r}: the engines do not run {what.get(cfg.fusion, cfg.fusion)} yet")
    return why


def train_passes(cfg: Config) -> int:
    """U-Net passes of one training clip: 3 (F_{t-1}, F_t, F_{t+1}) for fusion "window" and
    "frame"; fusion "shift" runs one per frame of the clip, 2R+1 (7). A training clip costs
    about train_passes x (GFLOP per frame less the head) (denoise_train/flops.py)."""
    return 2 * cfg.temporal_radius + 1 if cfg.fusion == "shift" else 3


def get(name: str):
    """-> (Config, recipe name); KeyError names the known candidates."""
    if name not in CANDIDATES:
        raise KeyError(f"unknown candidate {name!r}; known: {', '.join(CANDIDATES)}")
    cfg, recipe = CANDIDATES[name]
    return Config.from_json(cfg.to_json()), recipe
