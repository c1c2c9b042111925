#!/usr/bin/env python3
"""Training throughput, side by side in one process: model v1's recipe against the new engines.

  python3 weights/bench_train.py [--seconds 10] [--variants v1,compile-overlap,compile,...]
                                 [--candidate NAME] [--json OUT] [--budget 150]
  python3 weights/bench_train.py --device cpu --patch 32 --batch-div 16 --seconds 1
                                 --compile-backend aot_eager     (a smoke test of this script)

Every variant trains model v1's network (Config()), or with --candidate NAME that candidate's
network (denoise_train/candidates.py: wide64, deep, ...; the variant keeps its own recipe; not
shipped-net, which keeps the shipped network), on 7-frame 128x128 clips built on the GPU by
data.Batcher from synthetic frames and photo tiles (the same gather / grid_sample work as real
data; throughput does not depend on the pixels; batch_feed.training_batch, as train.py builds
them), for --seconds of steady state after its set-up and warm-up. Timing: a CUDA event pair around every step (batch generation, noise, forward,
backward, clipping, AdamW), read after the run; clips/s = clips / (last end - first start).

Variants (denoise_train/train_step.py engines; every one but v1 with NHWC convolutions and head):
  v1             model v1's recipe: the v1 attention code, batch 64, AWGN (data.make_noisy), L1,
                 eager (the v1 run compiled the whole model instead: a cold compile took 300 s;
                 its training log has a median of about 1,290 clips/s).
  sdpa-b64       SDPA attention, the v2 recipe (noise mixture, synthetic clips, low-pass loss), batch 64
  sdpa           the same at batch 128
  graph          sdpa + the whole step as one CUDA graph, batch 128
  graph-math     graph with SDPA held to its math backend (the attention kernels of the first GPU
                 bench, before the mask was made contiguous): what the fused kernel gains
  graph-nchw     graph with the convolutions and head in NCHW (model v1's layout): what
                 channels-last gains
  graph-b256     graph at batch 256 (also compile-graph-overlap-b256, compile-overlap-b256)
  compile-graph-overlap-v2h  compile-graph-overlap with recipe v2h's batches (grey clips, pattern
                 backgrounds, 12 % synthetic) and loss terms
  shipped-net    compile-graph-overlap-v2h on the shipped network's config (weights/
                 denoise-v2.safetensors: widths, depths, sigma gate, alignment R 24), fresh plain
                 qkv weights (a session resumes with --qkv-reparam): the network a training session
                 runs (the others train Config() or --candidate's); shipped-net-noalign the same with the alignment
                 off, so the two give what the alignment costs
  compile        sdpa + torch.compile'd Swin blocks, batch 128
  compile-graph  compile + CUDA graph, batch 128
  X-overlap      X (sdpa, graph, compile, compile-graph) with the batches built one step ahead on a
                 side CUDA stream (batch_feed.BatchFeed), overlapping the step; the others build
                 each batch on the step's stream just before it (feed "sync")
Modifiers: a variant name is any of the above followed by any of these, each starting with "+"
(e.g. compile-graph-overlap+windows+explicit): the same function (tests/weights/
check_block_variants.py), other kernels or another crop; train.py's flag in brackets:
  +explicit      attention written out, (q k^T) in bf16, bias + shift mask + softmax in fp32, @ v
                 (model.WindowAttention.forward_explicit), for torch.compile to fuse the bias, mask
                 and softmax around two batched products, instead of SDPA's memory-efficient
                 kernel [--attention explicit]
  +flex          attention through flex_attention, bias + shift mask in its score_mod, 64 x 64
                 tiles (model.WindowAttention.forward_flex); compile engines only [--attention flex]
  +windows       token layout "windows": a stage's tokens stay in window order from block to
                 block, each block writing its output in the next block's window order (model.
                 window_block), so LayerNorm, MLP and attention read contiguous rows with no roll
                 or partition in the block [--token-layout windows]
  +cudnn         SDPA held to cuDNN attention (SDPBackend.CUDNN_ATTENTION), the bias (+ shift mask)
                 folded into q and k (head dim 32 + 64 for q, k; 32 for v), since cuDNN takes no
                 bias that must learn (model.WindowAttention.forward_cudnn) [--attention cudnn]
  +triton        attention as one Triton kernel forward and one backward per group of windows,
                 q, k, v read out of (and their gradients written into) the packed qkv, the bias
                 gradient summed in the kernel (denoise_train/window_attention.py) [--attention triton]
  +glue          compile engines: the U-Net's parts between the blocks compiled too (the fusion
                 input and conv, patch merging, expand + skip: model.GLUE_UNITS), their layout
                 copies fused with their neighbours [--glue]
  +autotune      compile engines: Inductor's GEMM autotuning (train_step.AUTOTUNE_OPTIONS; GELU and
                 bias into the GEMM epilogues where a Triton template wins); the summary gives its
                 compile seconds against the same variant without it [--autotune]
  +fixedbatch    one batch built before the timing and fed to every step (no batch building while
                 the steps run): against the same variant without it, what building the batches
                 (on the side stream with overlap) costs the step; bench only
  +align24       the fusion windows aligned per 64 px tile, R 24 (as the shipped model and a main run
                 train: model.Config align), on any network: against the same variant without it,
                 what the training-time block matching costs [--align 24]
  +crop1.5x      crops 1.5x --patch (192 at 128) at batch round(B / 1.5^2) (57 at 128): about the
                 pixels per batch of the base variant in fewer, larger clips [--patch 192 --batch 57]
  +crop2x        crops 2x --patch (256) at batch B / 4 (32) [--patch 256 --batch 32]; at 256 a
                 photo clip is its whole 256 x 256 tile (data.TILE), so its motion (a shift of up
                 to about 16 px at the clip's ends, plus rotation and zoom) samples past the
                 tile's edge, where grid_sample reflects it: mirrored borders that 128 and 192 crops do not have (a data question for
                 training, not for this bench's timing)
Clips/s of different crops do not compare; MFU and Mpx/s (output pixels per second: clips/s x
crop^2) do.
For each variant: clips/s, its crop, Mpx/s, model FLOPs per clip and MFU against the bf16 GEMM rate
measured at the start of the run (denoise_train/flops.py), step time, set-up (compile / capture / first step), peak memory, the
time of batch generation alone (data ms: clips, noise, augmentation, CUDA events over 20 batches),
the host's time to queue one batch and one step onto an idle GPU (host ms batch/step, median of
5: when their sum reaches the step time, the loop is bound by the host, not the GPU) and which
SDPA backend its kernels ran, forward and backward (denoise_train.sdpa_backends on
one step of the same kernels, after the timing). The recommendation (printed last and written to
--json as "recommended", the engine, and "recommended_feed") is the fastest variant at batch 128
(no modifier) in a default form (sdpa, graph, compile, compile-graph, each also with -overlap) whose set-up
took at most 85 s, so that data loading plus set-up stays under 90 s per training run; an
overlap variant only when the feed check passed. A compile variant after another one finds
Inductor's compiled code in its on-disk cache: put the one whose cold set-up matters first.
--compile-cache DIR hot-loads DIR's bench compile cache before the checks and saves what
the run compiled at the end (denoise_train/compile_cache.py): set-up then shows a warm compile on a
fresh machine. Variants that would start after --budget seconds are skipped (and say so).
--profile N adds, per variant, N more steps under torch.profiler (CUPTI: kernels inside a CUDA
graph's replay included): the GPU time per kernel class (attention, GEMM, convolution,
Triton-generated, optimiser, other) and the kernels with the most GPU time, beside the steps'
wall time (busy = kernel time / wall time: above 1 the two streams overlapped, below it the GPU
idled), and the same for N batches built alone. First,
tests/weights/check_attention.py (the training kernels vs the v1 code, fp32 and bf16, and which SDPA
backend ran) and tests/weights/check_feed.py (batches built ahead on the side stream are bit-identical
to synchronous ones, also with both streams held busy; the augmentation folded into the clip
sources and the tile resampling against their old formulations) run on the device; --skip-check leaves them out.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import statistics
import sys
import time

import torch

from denoise_train import candidates, compile_cache
from denoise_train.batch_feed import BatchFeed, training_batch
from denoise_train.checkpoint import load_weights
from denoise_train.data import TILE, Batcher
from denoise_train.flops import bf16_gemm_tflops, train_flop_per_clip
from denoise_train.model import Config, Denoiser
from denoise_train.noise_models import NoiseRecipe
from denoise_train.sdpa_backends import describe_backends
from denoise_train.train_step import LossWeights, StepEngine

# the attention and batch-feed checks that the bench runs first (--skip-check: not)
CHECKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "weights")

V1_LOGGED_CLIPS_PER_S = 1290.0
VARIANTS = {  # name: (engine, batch, recipe, options)
    "v1": ("math", 64, "v1", {}),
    "sdpa-b64": ("sdpa", 64, "v2", {}),
    "sdpa": ("sdpa", 128, "v2", {}),
    "graph": ("graph", 128, "v2", {}),
    "graph-math": ("graph", 128, "v2", {"sdpa_math": True}),
    "graph-nchw": ("graph", 128, "v2", {"channels_last": False}),
    "graph-b256": ("graph", 256, "v2", {}),
    "compile": ("compile", 128, "v2", {}),
    "compile-graph": ("compile-graph", 128, "v2", {}),
    "sdpa-overlap": ("sdpa", 128, "v2", {"feed": "overlap"}),
    "graph-overlap": ("graph", 128, "v2", {"feed": "overlap"}),
    "compile-overlap": ("compile", 128, "v2", {"feed": "overlap"}),
    "compile-graph-overlap": ("compile-graph", 128, "v2", {"feed": "overlap"}),
    "compile-graph-overlap-b256": ("compile-graph", 256, "v2", {"feed": "overlap"}),
    "compile-overlap-b256": ("compile", 256, "v2", {"feed": "overlap"}),
    "compile-graph-overlap-v2h": ("compile-graph", 128, "v2h", {"feed": "overlap"}),
    # the shipped network (weights/denoise-v2.safetensors' config: widths, depths, sigma gate, align
    # 24), fresh weights: the network a training session runs, with and without its alignment
    "shipped-net": ("compile-graph", 128, "v2h", {"feed": "overlap", "config": "shipped"}),
    "shipped-net-noalign": ("compile-graph", 128, "v2h", {"feed": "overlap", "config": "shipped", "align": 0}),
}
# "+name" after a variant: kernel options of the same function, or another crop at about the same
# pixels per batch (crop: the factor on --patch; the batch divided by its square)
MODIFIERS = {"explicit": {"attention": "explicit"}, "flex": {"attention": "flex"}, "windows": {"layout": "windows"},
             "cudnn": {"attention": "cudnn"}, "triton": {"attention": "triton"}, "glue": {"glue": True},
             "autotune": {"autotune": True}, "fixedbatch": {"fixed_batch": True},
             "align24": {"align": 24}, "crop1.5x": {"crop": 1.5}, "crop2x": {"crop": 2.0}}
SHIPPED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "denoise-v2.safetensors")
DEFAULT_FORMS = ("sdpa", "graph", "compile", "compile-graph")
RECOMMENDABLE = DEFAULT_FORMS + tuple(f"{v}-overlap" for v in DEFAULT_FORMS)
SETUP_LIMIT_S = 85.0   # compile / capture / first step; data loading takes the rest of 90 s


def synthetic_sources(dev, n_frames=240, n_tiles=512, H=480, W=854):
    """Smooth random frames (F, H, W, 3) and tiles (N, TILE, TILE, 3), uint8, on dev."""
    g = torch.Generator(device=dev).manual_seed(3)

    def smooth(n, h, w):
        lo = torch.rand(n, 3, h // 16 + 1, w // 16 + 1, device=dev, generator=g)
        x = torch.nn.functional.interpolate(lo, size=(h, w), mode="bilinear", align_corners=False)
        x = x + 0.1 * torch.rand(n, 3, h, w, device=dev, generator=g)
        return (x.clamp(0, 1) * 255).to(torch.uint8).permute(0, 2, 3, 1).contiguous()
    frames = torch.cat([smooth(40, H, W) for _ in range(n_frames // 40)])
    return frames, torch.arange(len(frames) - 6, device=dev), smooth(n_tiles, TILE, TILE)


class Stamp:
    """A CUDA event (or, on the CPU, a host clock reading after the work: CPU ops are synchronous)."""

    def __init__(self, dev):
        self.ev = torch.cuda.Event(enable_timing=True) if dev.type == "cuda" else None
        self.t = None

    def record(self):
        if self.ev is not None:
            self.ev.record()
        else:
            self.t = time.perf_counter()

    def synchronize(self):
        if self.ev is not None:
            self.ev.synchronize()

    def ms_to(self, other: "Stamp") -> float:
        return self.ev.elapsed_time(other.ev) if self.ev is not None else (other.t - self.t) * 1000


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


KERNEL_CLASSES = (  # (class, substrings of the kernel name, lower case), first match wins
    ("attention", ("fmha", "attention", "flash", "mem_eff")),
    ("optimiser", ("adam", "multi_tensor", "foreach")),
    ("triton", ("triton",)),
    ("convolution", ("conv", "cudnn", "implicit", "wgrad", "dgrad", "fprop")),
    ("gemm", ("gemm", "nvjet", "cutlass", "xmma", "cublas", "splitk")),
    ("copy/elementwise", ("elementwise", "vectorized", "copy", "fill", "cat", "index", "gather", "reduce")),
)


def kernel_class(name: str) -> str:
    n = name.lower()
    return next((c for c, keys in KERNEL_CLASSES if any(k in n for k in keys)), "other")


def profile_steps(one, steps: int, dev) -> dict:
    """GPU time per kernel class and the top kernels over `steps` steps of one() under the
    profiler; times in ms per step."""
    from torch.profiler import ProfilerActivity, profile
    sync(dev)
    t = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            one(1e-4)
        sync(dev)
    wall = (time.perf_counter() - t) * 1000 / steps
    per = {}
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA and ev.device_time_total > 0:
            per[ev.name] = per.get(ev.name, 0.0) + ev.device_time_total / 1000 / steps
    classes = {}
    for k, ms in per.items():
        c = kernel_class(k)
        classes[c] = classes.get(c, 0.0) + ms
    busy = sum(per.values())
    top = sorted(per.items(), key=lambda kv: -kv[1])[:25]
    return {"steps": steps, "wall_ms_per_step": round(wall, 3), "kernel_ms_per_step": round(busy, 3),
            "busy": round(busy / wall, 3) if wall else None,
            "classes_ms": {c: round(v, 3) for c, v in sorted(classes.items(), key=lambda kv: -kv[1])},
            "top_kernels_ms": [[k[:160], round(v, 3)] for k, v in top]}


def parse_variant(name: str) -> tuple:
    """'base+modifier+...' -> (engine, batch, recipe, options) of VARIANTS[base] with the MODIFIERS'
    options added; ValueError for an unknown base or modifier, or two modifiers that set the same
    option."""
    base, *mods = name.split("+")
    if base not in VARIANTS:
        raise ValueError(f"unknown variant {base!r}; known: {', '.join(VARIANTS)}")
    engine, B, recipe, opts = VARIANTS[base]
    opts = dict(opts)
    for m in mods:
        if m not in MODIFIERS:
            raise ValueError(f"{name}: unknown modifier +{m}; known: {', '.join('+' + k for k in MODIFIERS)}")
        for k, v in MODIFIERS[m].items():
            if k in opts and opts[k] != v:
                raise ValueError(f"{name}: two modifiers set {k}")
            opts[k] = v
    return engine, B, recipe, opts


def bench_variant(name, frames, starts, tiles, dev, seconds, patch, log, batch_div=1, compile_backend="inductor",
                  profile=0, base_cfg: Config | None = None):
    """One variant (a VARIANTS name with MODIFIERS) on base_cfg's network (None: Config()), or the
    shipped one for the shipped-net variants."""
    engine, B, recipe_name, opts = parse_variant(name)
    crop = opts.get("crop", 1.0)
    if crop != 1.0:   # about the same pixels per batch in larger clips
        B = round(B / crop ** 2)
        patch = round(patch * crop)
    with contextlib.ExitStack() as stack:
        if opts.get("sdpa_math"):
            from torch.nn.attention import SDPBackend, sdpa_kernel
            stack.enter_context(sdpa_kernel([SDPBackend.MATH]))
        return _bench_variant(name, engine, max(2, B // batch_div), recipe_name, opts, frames, starts, tiles,
                              dev, seconds, patch, log, compile_backend, profile, base_cfg or Config())


def _bench_variant(name, engine, B, recipe_name, opts, frames, starts, tiles, dev, seconds, patch, log,
                   compile_backend, profile, cfg):
    recipe = candidates.RECIPES[recipe_name]
    t0 = time.time()
    torch.manual_seed(0)
    if opts.get("config") == "shipped":
        cfg = load_weights(SHIPPED).cfg
    if "align" in opts:
        cfg = dataclasses.replace(cfg, align=opts["align"])
    model = Denoiser(cfg).to(dev)
    eng = StepEngine(model, engine, LossWeights.of(recipe), 4e-4 if B == 64 else 5.6e-4, log=log,
                     compile_backend=compile_backend, channels_last=opts.get("channels_last", True),
                     attention=opts.get("attention", "sdpa"), layout=opts.get("layout", "image"),
                     glue=opts.get("glue", False), autotune=opts.get("autotune", False))
    batcher = Batcher(tiles, frames, starts, dev, seed=1, pattern_bg=recipe["pattern_bg"])
    gen = torch.Generator(device=dev).manual_seed(2)
    noise = NoiseRecipe(compile=dev.type == "cuda") if recipe["noise"] == "v2" else None

    def make():
        return training_batch(batcher, gen, noise, B, patch, 0.5, recipe["synth_share"], recipe["pixel_loss"],
                              recipe["grey_share"])
    feed = BatchFeed(make, dev, overlap=opts.get("feed") == "overlap")
    batch = feed.next
    if opts.get("fixed_batch"):
        fixed = feed.next()
        batch = lambda: fixed  # noqa: E731

    def one(lr):
        return eng.step(*batch(), lr)

    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    one(1e-4)                          # compile / capture / cuDNN set-up
    sync(dev)
    first = time.time() - t0
    w0 = time.time()
    while time.time() - w0 < min(2.0, seconds):      # warm-up: allocator, clocks
        one(1e-4)
    sync(dev)
    setup = time.time() - t0
    ev = []
    acc = torch.zeros((), device=dev)
    t1 = time.time()
    while time.time() - t1 < seconds or not ev:
        a, b = Stamp(dev), Stamp(dev)
        a.record()
        acc += one(1e-4)
        b.record()
        ev.append((a, b))
        if len(ev) % 50 == 0:          # keep the CPU at most ~50 steps ahead (bounded queue)
            ev[-50][1].synchronize()
    sync(dev)
    ms = [a.ms_to(b) for a, b in ev]
    total_ms = ev[0][0].ms_to(ev[-1][1])
    peak = round(torch.cuda.max_memory_allocated() / 2**30, 2) if dev.type == "cuda" else 0.0
    host_b, host_s = [], []            # host time to queue one batch / one step, from an idle GPU
    for _ in range(5 if dev.type == "cuda" else 1):
        sync(dev)
        t = time.perf_counter()
        with torch.no_grad():
            make()
        host_b.append((time.perf_counter() - t) * 1000)
        nb = batch()
        sync(dev)
        t = time.perf_counter()
        acc += eng.step(*nb, 1e-4)
        host_s.append((time.perf_counter() - t) * 1000)
        del nb
    sync(dev)
    dms = []                           # batch generation alone, on the step's stream
    for _ in range(20 if dev.type == "cuda" else 2):
        a, b = Stamp(dev), Stamp(dev)
        a.record()
        with torch.no_grad():
            make()
        b.record()
        dms.append((a, b))
    sync(dev)
    prof = profile_steps(one, profile, dev) if profile else None
    if prof:
        with torch.no_grad():
            prof["batch_alone"] = profile_steps(lambda lr: make(), profile, dev)
    backends = eng.attention_backends(*batch())
    flop_clip = train_flop_per_clip(cfg, patch)   # on the CPU, after the timings and outside set-up
    r = {"variant": name, "engine": eng.engine, "requested_engine": engine, "batch": B, "patch": patch,
         "recipe": recipe_name, "config": json.loads(cfg.to_json()),
         "options": opts, "feed": "fixed" if opts.get("fixed_batch") else "overlap" if feed.overlap else "sync",
         "feed_detail": "one batch, reused (no batch building)" if opts.get("fixed_batch") else feed.describe(),
         "channels_last": eng.describe()["channels_last"], "attention_kernel": eng.describe()["attention"],
         "layout": eng.describe()["layout"], "glue": eng.describe()["glue"], "autotune": eng.describe()["autotune"],
         "compile_seconds": round(eng.compile_seconds, 1),
         "steps": len(ev), "clips_per_s": round(len(ev) * B / (total_ms / 1000), 1),
         "step_ms_median": round(statistics.median(ms), 3), "step_ms_p90": round(sorted(ms)[int(0.9 * len(ms))], 3),
         "data_ms_median": round(statistics.median(a.ms_to(b) for a, b in dms), 3),
         "host_batch_ms_median": round(statistics.median(host_b), 3),
         "host_step_ms_median": round(statistics.median(host_s), 3),
         "first_step_seconds": round(first, 1), "setup_seconds": round(setup, 1), "peak_alloc_gib": peak,
         "mean_loss": round(acc.item() / (len(ev) + len(host_s)), 4), "sdpa_backends": backends,
         "attention": describe_backends(backends), "fallbacks": eng.fallbacks,
         "noise_compile_error": noise.compile_error if noise else None,
         "train_gflop_per_clip": round(flop_clip / 1e9, 3)}
    r["model_tflops"] = round(r["clips_per_s"] * flop_clip / 1e12, 2)
    r["mpx_per_s"] = round(r["clips_per_s"] * patch * patch / 1e6, 2)
    if prof:
        r["profile"] = prof
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0, help="steady-state seconds per variant")
    ap.add_argument("--variants", default="v1,compile-overlap,compile,graph-math,sdpa,graph,graph-overlap,graph-nchw,"
                    "graph-b256,compile-graph")
    ap.add_argument("--patch", type=int, default=128)
    ap.add_argument("--candidate", help="train this candidate's network (denoise_train/candidates.py) in every "
                    "variant but shipped-net instead of Config()")
    ap.add_argument("--budget", type=float, default=150.0, help="start no variant after this many seconds")
    ap.add_argument("--json")
    ap.add_argument("--skip-check", action="store_true")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--batch-div", type=int, default=1, help="divide every batch (CPU smoke tests)")
    ap.add_argument("--compile-backend", default="inductor")
    ap.add_argument("--compile-cache", metavar="DIR",
                    help="hot-load DIR's bench compile cache first and save it at the end (denoise_train/compile_cache.py)")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="profile N more steps of each variant (GPU time per kernel class, top kernels)")
    a = ap.parse_args()
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        print("bench_train.py: no CUDA device (use --device cpu for a smoke test)", file=sys.stderr)
        sys.exit(2)
    t_start = time.time()
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    events = []
    log = lambda d: (events.append(d), print(json.dumps(d), flush=True))  # noqa: E731
    base_cfg = None
    if a.candidate:
        try:
            base_cfg = candidates.get(a.candidate)[0]
        except KeyError as e:
            sys.exit(f"bench_train.py: {e.args[0]}")
    out = {"device": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu", "torch": torch.__version__,
           "patch": a.patch, "frames": 7, "candidate": a.candidate,
           "seconds_per_variant": a.seconds, "results": [], "skipped": [], "attention_check": None,
           "feed_check": None}
    out["compile_cache_load"] = compile_cache.load(a.compile_cache, "bench") if a.compile_cache else None
    if not a.skip_check:
        sys.path.insert(0, CHECKS)
        from check_attention import check
        t0 = time.time()
        fails, notes = check(dev)
        out["attention_check"] = {"pass": not fails, "failures": fails, "notes": notes,
                                  "seconds": round(time.time() - t0, 1)}
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        import check_feed
        t0 = time.time()
        fails, notes = check_feed.check(dev)
        out["feed_check"] = {"pass": not fails, "failures": fails, "notes": notes, "seconds": round(time.time() - t0, 1)}
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    # the MFU's denominator: the bf16 GEMM rate of this card in this run (train_step turns TF32 on
    # for the steps; the bf16 product does not use it)
    out["bf16_gemm_tflops"] = round(bf16_gemm_tflops(dev), 1) if dev.type == "cuda" else None
    frames, starts, tiles = synthetic_sources(dev, *((240, 512) if dev.type == "cuda" else (40, 16)))
    names = [n.strip() for n in a.variants.split(",") if n.strip()]
    for n in names:
        try:
            parse_variant(n)
        except ValueError as e:
            sys.exit(f"bench_train.py: {e}")
    for n in names:
        el = time.time() - t_start
        if el > a.budget:
            out["skipped"].append(f"{n}: budget of {a.budget:.0f} s used ({el:.0f} s)")
            print(f"skip {n}: {el:.0f} s elapsed > budget {a.budget:.0f} s", flush=True)
            continue
        try:
            r = bench_variant(n, frames, starts, tiles, dev, a.seconds, a.patch, log, a.batch_div, a.compile_backend,
                              a.profile, base_cfg)
        except Exception as e:  # noqa: BLE001 (report, go on with the next variant)
            r = {"variant": n, "error": f"{type(e).__name__}: {str(e)[:500]}"}
        if dev.type == "cuda":   # the variant's model, optimiser and graph pool are gone: free them
            torch.cuda.empty_cache()
        if "model_tflops" in r and out["bf16_gemm_tflops"]:
            r["mfu"] = round(r["model_tflops"] / out["bf16_gemm_tflops"], 4)
        print(json.dumps(r), flush=True)
        out["results"].append(r)
    ok = [r for r in out["results"] if "error" not in r]
    v1 = next((r for r in ok if r["variant"] == "v1"), None)
    fc = out["feed_check"]
    overlap_ok = fc is None or fc["pass"]
    cands = [r for r in ok if r["variant"] in RECOMMENDABLE and r["setup_seconds"] <= SETUP_LIMIT_S
             and r["engine"] == r["requested_engine"] and (r["feed"] == "sync" or overlap_ok)]
    best = max(cands, key=lambda r: r["clips_per_s"]) if cands else None
    out["recommended"] = best["engine"] if best else None
    out["recommended_feed"] = best["feed"] if best else None
    out["fallback_events"] = events
    out["compile_cache_save"] = compile_cache.save(a.compile_cache, "bench") if a.compile_cache else None
    out["total_seconds"] = round(time.time() - t_start, 1)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    print()
    ac = out["attention_check"]
    if out["bf16_gemm_tflops"]:
        print(f"bf16 GEMM ceiling (8192^3, median of 20): {out['bf16_gemm_tflops']:.1f} TFLOP/s; MFU = clips/s x "
              "GFLOP/clip (FlopCounterMode, forward + backward) / that ceiling")
    print(f"{out['device']}, torch {out['torch']}, network {a.candidate or 'Config() (model v1)'} (shipped-net: the "
          f"shipped one), clips 7x{a.patch}x{a.patch} unless +crop, {a.seconds:g} s per variant "
          f"after warm-up; attention check: " + ("skipped" if ac is None else
          ("PASS" if ac["pass"] else "FAIL " + "; ".join(ac["failures"])) + "; " + "; ".join(ac["notes"])))
    if fc is not None:
        print("feed check: " + ("PASS" if fc["pass"] else "FAIL " + "; ".join(fc["failures"][:4]))
              + "".join("; " + n for n in fc["notes"]))
    nw = max([21] + [len(r["variant"]) for r in out["results"]])
    print(f"{'variant':{nw}s} {'engine':14s} {'feed':7s} {'batch':>5s} {'crop':>4s} {'clips/s':>9s} {'Mpx/s':>7s} "
          f"{'x v1':>6s} {'x v1 log':>8s} "
          f"{'step ms':>8s} {'data ms':>7s} {'host ms':>11s} {'setup s':>7s} {'GiB':>6s} {'GFLOP/clip':>10s} "
          f"{'TFLOP/s':>7s} {'MFU %':>6s}  attention/layout: SDPA backend")
    for r in out["results"]:
        if "error" in r:
            print(f"{r['variant']:{nw}s} ERROR {r['error'][:100]}")
            continue
        x = f"{r['clips_per_s'] / v1['clips_per_s']:.2f}" if v1 else "-"
        print(f"{r['variant']:{nw}s} {r['engine']:14s} {r['feed']:7s} {r['batch']:5d} {r['patch']:4d} "
              f"{r['clips_per_s']:9.1f} {r['mpx_per_s']:7.1f} {x:>6s} "
              f"{r['clips_per_s'] / V1_LOGGED_CLIPS_PER_S:8.2f} {r['step_ms_median']:8.2f} {r['data_ms_median']:7.2f} "
              f"{r['host_batch_ms_median']:5.1f}/{r['host_step_ms_median']:5.1f} {r['setup_seconds']:7.1f} {r['peak_alloc_gib']:6.1f} "
              f"{r['train_gflop_per_clip']:10.2f} {r['model_tflops']:7.1f} "
              + (f"{100 * r['mfu']:6.2f}" if "mfu" in r else f"{'-':>6s}")
              + f"  {r['attention_kernel']}/{r['layout']}{'+glue' if r['glue'] else ''}"
              + f"{'+autotune' if r['autotune'] else ''}: {r['attention']}")
    by = {r["variant"]: r for r in ok}
    for v in DEFAULT_FORMS:
        if v in by and f"{v}-overlap" in by:
            print(f"{v}-overlap / {v}: {by[v + '-overlap']['clips_per_s'] / by[v]['clips_per_s']:.3f}x")
    for r in ok:   # what a modifier costs or gains against the same variant without it
        for mod, what in (("autotune", "compile"), ("fixedbatch", "feed")):
            base = "+".join(p for p in r["variant"].split("+") if p != mod)
            if f"+{mod}" not in r["variant"] or base not in by:
                continue
            b = by[base]
            if what == "compile":
                print(f"{r['variant']}: compile {r['compile_seconds']:.0f} s (set-up {r['setup_seconds']:.0f} s) "
                      f"against {b['compile_seconds']:.0f} s ({b['setup_seconds']:.0f} s) for {base}: autotuning adds "
                      f"{r['compile_seconds'] - b['compile_seconds']:.0f} s (the variant run first warms Inductor's "
                      "caches for the other)")
            else:
                print(f"{r['variant']}: step {r['step_ms_median']:.2f} ms against {b['step_ms_median']:.2f} ms "
                      f"for {base}: building the batches costs the step {b['step_ms_median'] - r['step_ms_median']:.2f} ms")
    for r in ok:
        p = r.get("profile")
        if not p:
            continue
        print(f"profile {r['variant']}: {p['wall_ms_per_step']:.2f} ms wall per step, kernels "
              f"{p['kernel_ms_per_step']:.2f} ms (busy {p['busy']:.2f}); "
              + ", ".join(f"{c} {ms:.2f}" for c, ms in p["classes_ms"].items()))
        for k, ms in p["top_kernels_ms"][:15]:
            print(f"  {ms:8.3f} ms  [{kernel_class(k)}] {k[:110]}")
        d = p["batch_alone"]
        print(f"  the batch alone (no step): kernels {d['kernel_ms_per_step']:.2f} ms per batch; "
              + ", ".join(f"{c} {ms:.2f}" for c, ms in d["classes_ms"].items()))
        for k, ms in d["top_kernels_ms"][:8]:
            print(f"  {ms:8.3f} ms  [{kernel_class(k)}] {k[:110]}")
    for s in out["skipped"]:
        print("skipped:", s)
    for k in ("compile_cache_load", "compile_cache_save"):
        c = out[k]
        if c:
            print(f"compile cache {c['action']}: {c['result']}" + (f", {c['bytes'] / 2**20:.1f} MiB" if "bytes" in c else "")
                  + (f" in {c['seconds']} s" if "seconds" in c else "") + (f" ({c['error']})" if "error" in c else ""))
    print(f"recommended: engine {out['recommended']}, feed {out['recommended_feed']}  (total {out['total_seconds']} s)")


if __name__ == "__main__":
    main()
