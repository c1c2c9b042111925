#!/usr/bin/env python3
"""Train the denoiser in resumable sessions (PyTorch; bf16 autocast on CUDA; CPU for smoke tests).

  python3 weights/train.py --photos DIR --videos DIR [DIR ...] --out RUN
         [--candidate NAME] [--minutes M | --clips K] [--plan-minutes N] [--init CKPT]
  torchrun --standalone --nproc-per-node N weights/train.py ...        (N GPUs, data parallel)

A run lives in one folder RUN: last.pt (the checkpoint), train.log (JSON lines), stdout.
  - Resume: when RUN/last.pt exists the run continues from it (model, AdamW, counters, plan);
    otherwise it starts from --init CKPT (weights and AdamW moments of another run, e.g. a study
    candidate; counters and plan start anew) or from scratch.
  - Budget of this invocation: --minutes M trains M more minutes; --clips K trains until the run
    has seen K clips in all (the study's fixed budget). Only time spent in training steps counts:
    validation, checkpoints and any interval in which the process was stopped (SIGSTOP ...
    SIGCONT, e.g. around a GPU benchmark) do not.
  - Learning-rate plan (weights/train_step.Schedule), fixed at the run's first start and kept in
    the checkpoint: with --plan-minutes N, "wsd" over N planned training minutes (warm-up, lr_max
    until 80 %, cosine decay over the last 20 %); with --clips K, a cosine over K clips. A later
    --plan-minutes replaces N (continuous while the run is still before its decay).
  - Checkpoints every --ckpt-minutes (2) of wall time and at the end, written atomically (tmp +
    rename); AdamW moments are stored in bf16 to halve the file. SIGTERM/SIGINT end the run
    early the same way (checkpoint, validation with the probe, event "stopped").
  - Data parallel (denoise_train/data_parallel.py): under torchrun, one process (rank) per GPU
    (LOCAL_RANK), NCCL between them (gloo on the CPU, or where ranks share a GPU, which turns the
    graph engines into their fallbacks: a gloo all-reduce cannot be captured). --batch stays
    the global batch: each rank builds --batch / N clips of its own (the clip and noise seeds
    offset by rank << 32; rank 0's are the single process's) and the gradients are averaged
    over the ranks before clipping and AdamW (an all-reduce inside the step, captured with it by
    the graph engines), so the step, the clip count and the lr plan are one GPU's at the same
    global batch. Rank 0 alone logs, validates, runs the probe and writes checkpoints while the
    others wait; a SIGTERM/SIGINT to any rank (or to torchrun, which passes it on) stops every
    rank after the same step, with one checkpoint. Trained seconds are the slowest rank's step
    times; a checkpoint holds nothing of the ranks and resumes under any world size. Under
    torchrun the exit status is torchrun's (not 0 when any rank's is not, 2 included).
  - Divergence guard: best.pt holds the best state of this invocation by validation mean PSNR
    (the starting state first, validated at the start); a validation more than --diverge-db (2)
    below the best (with --ema: of the live weights' means) ends the run with event
    "diverged": the state goes to diverged.pt and best.pt becomes last.pt, so that the next
    session resumes from before the fall (with a change: the same recipe falls again).
    Each val event carries the attention weights' norms (attn_norms: the largest norm of any
    block's qkv weight and bias and LayerNorm-1 weight and bias, and sigma_reparam's gamma), the
    signature of the attention-logit growth that made the first v2 runs diverge (docs/model.md).
  - --qkv-reparam: the qkv weights train sigma-reparametrised (denoise_train/sigma_reparam.py; the
    function is unchanged at the switch, AdamW starts afresh with a warm-up, the run keeps it;
    export folds it back to plain weights).
  - --sigma-gate G: model v2's sigma gate (denoise_train/model.py sigma_gate) in the run's config: the
    output's change scaled by min(1, sigma / G), so sigma 0 returns the input exactly; no
    parameters, so it can be switched on at any resume (it changes the function only below
    sigma G); the checkpoint's config keeps it.
  - --align R [--align-tile P]: the fusion windows aligned to their centre frames (denoise_train/align.py,
    Config.align), set in the run's config like the sigma gate; no parameters, but the function
    changes for every moving input, so switching it on starts a branch of a run (with --init, or a
    resume in another folder) that continues to train the same weights on aligned windows.
  - Batches: built one step ahead on a side CUDA stream, overlapping the step
    (denoise_train/batch_feed.py; --feed auto takes the bench's recommendation, else sync;
    --feed sync builds each batch on the step's stream just before it). Either way the batches
    are the same, in the same order.
  - --ema D: an exponential moving average of the weights (denoise_train/weight_ema.py, decay D, e.g.
    0.999), kept in the checkpoint beside them; validation, the probe, best.pt's ranking and
    export then use the average (val events add val_psnr_mean_raw, the live weights' mean). Set
    in the run's state; a resumed run keeps it unless given again (0 turns it off). --init from
    a checkpoint with an average: with --ema the run carries it on beside the live weights;
    without, the run starts from the average (start event: init_from_average).
  - --compile-cache DIR: hot-load DIR's train compile cache before the first compile and save
    what the run compiled once its first step is done (denoise_train/compile_cache.py; events
    compile_cache): set-up is then a warm compile on a fresh machine of the same kind.
  - --attention sdpa|explicit|flex|cudnn|triton, --token-layout image|windows, --glue and
    --autotune: the Swin blocks' kernels, the U-Net's parts between them compiled too, Inductor's
    GEMM autotuning (denoise_train/train_step.py; the same function, tests/weights/
    check_block_variants.py; weights/bench_train.py measures them as its +explicit, +flex,
    +cudnn, +triton, +windows, +glue and +autotune variants); the engine event names them.
    Defaults: SDPA, NHWC tokens, blocks compiled alone, no autotuning.
  - Log events: data, start (+ world_size, gpus, batch_per_rank, dp_backend), compile_cache, engine
    (with the feed; + engine_fallback), train (loss: the mean over the ranks, lr, clips_per_s of the
    global batch, clips_per_s_per_gpu and _per_rank, world_size, trained minutes), val (PSNR at
    sigma 10/30/50 on the held-out split, noise seed 777, AWGN unclipped, clips and noise drawn
    on the CPU since the data event that says val_rng "cpu" (before, on the device: those figures
    differ; weights/val.py reproduces them for any weight file); the same on 16 clips of the DAVIS sequences of the split alone (val_davis_*, since the
    data event that gives val_davis_clips), with val_davis_s30_map1.3 (sigma 30 given a map 1.3x
    the noise: how much the network's smoothing follows its map); for a fusion "shift" model also
    val_psnr_*_T9, the same clips' centre frames through 9-frame clips (validation.validate
    frames: the gap between its 7-frame training clips and longer inputs); and the faithfulness probe,
    denoise_train/faithful.py), ckpt, diverged, recipe_changed (--recipe at a resume, or at an --init,
    names another recipe than the checkpoint's; the state keeps the list as recipe_changes), done. Nothing is
    read back from the GPU between logs.
Never interactive; exit status 0 when the budget was trained, 1 on an error (logged), 2 when the
run diverged (logged).
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import signal
import sys
import time

import torch

from denoise_train import candidates, compile_cache, sigma_reparam
from denoise_train.batch_feed import FEEDS, BatchFeed, training_batch
from denoise_train.checkpoint import checkpoint_model
from denoise_train.data import VAL_T, Batcher, load_photo_tiles, load_videos
from denoise_train.data_parallel import DataParallel
from denoise_train.faithful import probe, summary
from denoise_train.model import ATTENTIONS, LAYOUTS, Config, Denoiser, count_parameters, gflop_per_frame
from denoise_train.noise_models import NoiseRecipe
from denoise_train.train_step import ENGINES, LossWeights, Schedule, StepEngine
from denoise_train.validation import make_val_davis, make_val_set, validate, validate_davis
from denoise_train.weight_ema import WeightEMA


class Log:
    """JSON lines to stdout and to the file at path (rank 0). path None (the other ranks of a
    data-parallel run): only the events that tell of this rank's trouble (ON_EVERY_RANK) are
    printed, tagged with the rank, and nothing is written."""
    ON_EVERY_RANK = ("error", "engine_fallback", "oom")

    def __init__(self, path: str | None, rank: int = 0):
        self.fh = open(path, "a") if path is not None else None
        self.rank = rank

    def __call__(self, d: dict | None = None, **kv):
        d = dict(d or {}, **kv)
        d["time"] = round(time.time(), 1)
        if self.fh is None:
            if d.get("event") in self.ON_EVERY_RANK:
                print(json.dumps(dict(d, rank=self.rank)), flush=True)
            return
        line = json.dumps(d)
        print(line, flush=True)
        self.fh.write(line + "\n")
        self.fh.flush()


@torch.no_grad()
def attn_norms(model) -> dict:
    """The largest norm over the Swin blocks of the (effective) qkv weight (Frobenius) and bias, of
    LayerNorm-1's weight and bias, and the largest sigma_reparam gamma: they grow together when
    the attention logits run away (docs/model.md)."""
    was = model.training
    model.eval()   # reading a reparametrised weight in training mode would step its power iteration
    out = {"qkv_max": 0.0, "qkv_bias_max": 0.0, "ln1_weight_max": 0.0, "ln1_bias_max": 0.0}
    for b in sigma_reparam.swin_blocks(model):
        for key, t in (("qkv_max", b.attn.qkv.weight), ("qkv_bias_max", b.attn.qkv.bias),
                       ("ln1_weight_max", b.norm1.weight), ("ln1_bias_max", b.norm1.bias)):
            out[key] = max(out[key], round(t.detach().float().norm().item(), 3))
    g = sigma_reparam.gammas(model)
    if g:
        out["gamma_max"] = round(max(g), 3)
    model.train(was)
    return out


def save_ckpt(path, model, opt, state, ema=None):
    """Atomic: model fp32, AdamW state with its moment tensors in bf16, the weights' average
    (WeightEMA.state_dict(), when kept)."""
    sd = opt.state_dict()
    # state_dict() shares each parameter's state dict with the live optimizer: convert copies
    sd["state"] = {i: dict(st) for i, st in sd["state"].items()}
    for st in sd["state"].values():
        for k in ("exp_avg", "exp_avg_sq"):
            if k in st:
                st[k] = st[k].to(torch.bfloat16)
    for g in sd["param_groups"]:
        if isinstance(g.get("lr"), torch.Tensor):
            g["lr"] = float(g["lr"])
    tmp = path + ".tmp"
    d = {"model": model.state_dict(), "opt": sd, "state": state, "config": model.cfg.to_json()}
    if ema is not None:
        d["ema"] = ema.state_dict()
    torch.save(d, tmp)
    os.replace(tmp, path)


def load_opt_state(opt, sd):
    """Load an AdamW state saved by save_ckpt (bf16 moments back to fp32)."""
    for st in sd["state"].values():
        for k in ("exp_avg", "exp_avg_sq"):
            if k in st:
                st[k] = st[k].float()
    lr0 = opt.param_groups[0]["lr"]
    for g in sd["param_groups"]:
        g["lr"] = lr0
    opt.load_state_dict(sd)


def bench_recommendation(bench_json: str | None, key: str, known) -> str | None:
    """The value of `key` in weights/bench_train.py's --json result ("recommended": the engine,
    "recommended_feed": the feed) when the file exists and the value is one of `known`, else None."""
    if not bench_json or not os.path.exists(bench_json):
        return None
    with open(bench_json) as f:
        rec = json.load(f).get(key)
    return rec if rec in known else None


def pick_engine(arg: str, bench_json: str | None, dev) -> str:
    """--engine auto: the bench's recommendation if a bench result is given, else 'graph' on
    CUDA ('sdpa' elsewhere)."""
    if arg != "auto":
        return arg
    return bench_recommendation(bench_json, "recommended", ENGINES) or ("graph" if dev.type == "cuda" else "sdpa")


def pick_feed(arg: str, bench_json: str | None) -> str:
    """--feed auto: the bench's recommendation (overlap only where its feed check passed on this
    machine) when a bench result is given, else sync."""
    if arg != "auto":
        return arg
    return bench_recommendation(bench_json, "recommended_feed", FEEDS) or "sync"


class PauseClock:
    """Trained seconds that skip stopped intervals: a step during which SIGCONT arrived (the
    process had been stopped) or that took over 20x the running step time counts as one
    typical step."""

    def __init__(self):
        self.resumed = False
        self.typical = None
        self.pauses = 0
        signal.signal(signal.SIGCONT, self._cont)

    def _cont(self, *_):
        self.resumed = True

    def count(self, dt: float) -> float:
        paused = self.resumed or (self.typical is not None and dt > 20 * self.typical + 1.0)
        self.resumed = False
        if paused:
            self.pauses += 1
            return self.typical or 0.0
        self.typical = dt if self.typical is None else 0.98 * self.typical + 0.02 * dt
        return dt


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--photos", required=True)
    ap.add_argument("--videos", nargs="+", required=True)
    ap.add_argument("--val-videos", nargs="+", help="the folders the held-out sequences (data.VAL_VIDEOS) are read "
                    "from (default: --videos); a data control trains on other encodings of the same sequences "
                    "and is validated on one set")
    ap.add_argument("--cache", help="decode cache folder (denoise_train/data.py)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--candidate", default="v1", help=f"one of {', '.join(candidates.CANDIDATES)}")
    ap.add_argument("--recipe", choices=sorted(candidates.RECIPES), help="override the candidate's recipe")
    ap.add_argument("--minutes", type=float, help="training minutes to add in this invocation")
    ap.add_argument("--clips", type=int, help="total clip budget of the run (cosine plan over it)")
    ap.add_argument("--plan-minutes", type=float, help="planned training minutes of the whole run (wsd plan)")
    ap.add_argument("--init", help="start a new run from this checkpoint's weights and AdamW state")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--accum", type=int, default=1, help="micro-batches per step (doubled on OOM)")
    ap.add_argument("--patch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=5.6e-4, help="peak lr (v1: 4e-4 at batch 64; sqrt batch scaling)")
    ap.add_argument("--lr-min", type=float, default=1e-6)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--decay", type=float, default=0.2, help="wsd: share of the plan spent decaying")
    ap.add_argument("--video-share", type=float, default=0.5,
                    help="share of the natural clips (not synthetic) cut from the videos, the rest photo "
                    "pseudo-video (data.Batcher.clean; in the start event)")
    ap.add_argument("--photo-warp", type=float, default=0.0, metavar="PX",
                    help="moving photo clips deformed by a smooth random field of up to about PX px at the clip's "
                    "ends (data.Batcher photo_warp; 0: none; in the start event)")
    ap.add_argument("--engine", default="auto", choices=("auto",) + ENGINES)
    ap.add_argument("--feed", default="auto", choices=("auto",) + FEEDS,
                    help="overlap: build each batch one step ahead on a side CUDA stream; sync: just before "
                    "its step; auto: the bench's recommendation (overlap where its feed check passed), else sync")
    ap.add_argument("--bench-json", help="weights/bench_train.py's result, for --engine and --feed auto")
    ap.add_argument("--attention", default="sdpa", choices=ATTENTIONS,
                    help="the Swin blocks' attention kernel (denoise_train/train_step.py; same function): SDPA, "
                         "written out for torch.compile (explicit), flex_attention (flex: compile engines), SDPA on "
                         "cuDNN with the bias folded into q and k (cudnn), or denoise_train/window_attention.py's "
                         "Triton kernels (triton: CUDA)")
    ap.add_argument("--token-layout", default="image", choices=LAYOUTS,
                    help="token order inside a stage (denoise_train/train_step.py; same function): NHWC (image) or "
                         "window order kept from block to block (windows)")
    ap.add_argument("--glue", action="store_true",
                    help="compile engines: compile the U-Net's parts between the Swin blocks too (model.GLUE_UNITS; "
                         "same function)")
    ap.add_argument("--autotune", action="store_true",
                    help="compile engines: Inductor's GEMM autotuning (train_step.AUTOTUNE_OPTIONS; longer compiles)")
    ap.add_argument("--compile-backend", default="inductor")
    ap.add_argument("--compile-cache", metavar="DIR", help="a folder for the portable compile cache (denoise_train/compile_cache.py)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--ckpt-minutes", type=float, default=2.0)
    ap.add_argument("--val-minutes", type=float, default=4.0, help="trained minutes between validations")
    ap.add_argument("--qkv-reparam", action="store_true",
                    help="train the attention's qkv weights sigma-reparametrised (denoise_train/sigma_reparam.py); "
                    "a run keeps it once on")
    ap.add_argument("--sigma-gate", type=float, default=None,
                    help="model v2's sigma gate G (8-bit code values; denoise_train/model.py sigma_gate): the output's change "
                    "scaled by min(1, sigma / G), so that sigma 0 returns the input; set in the run's config (no "
                    "parameters), a resumed run keeps it unless given again; 0 turns it off")
    ap.add_argument("--align", type=int, default=None,
                    help="fusion windows aligned to their centre frame, whole-pixel shifts up to R px per tile "
                    "(denoise_train/align.py); set in the run's config, kept by a resumed run unless given again; 0: off")
    ap.add_argument("--align-tile", type=int, default=None, help="the alignment's tile in px (default 64)")
    ap.add_argument("--ema", type=float, default=None,
                    help="keep an exponential moving average of the weights with this decay (e.g. 0.999; "
                    "denoise_train/weight_ema.py) and validate and export it; kept by a resumed run unless given again; 0: off")
    ap.add_argument("--diverge-db", type=float, default=2.0,
                    help="end the run when a validation's mean PSNR falls this far below the best of this invocation")
    ap.add_argument("--log-steps", type=int, default=200)
    ap.add_argument("--val-at", type=int, nargs="*", default=[], help="also validate (no probe) at these clip counts")
    ap.add_argument("--val-clips", type=int, default=24)
    ap.add_argument("--val-patch", type=int, default=256)
    ap.add_argument("--data-limit", type=int, default=0, help="smoke tests: photos and frames per sequence kept")
    ap.add_argument("--no-probe", action="store_true")
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (smoke tests)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if (args.minutes is None) == (args.clips is None):
        ap.error("give exactly one of --minutes and --clips")
    if not 0.0 <= args.video_share <= 1.0:
        ap.error(f"--video-share must be in [0, 1], got {args.video_share}")
    if not 0.0 <= args.photo_warp <= 16.0:
        ap.error(f"--photo-warp must be in [0, 16] px, got {args.photo_warp}")

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if args.batch % world:
        ap.error(f"--batch {args.batch} (the global batch) must be a multiple of the world size {world}")

    os.makedirs(args.out, exist_ok=True)
    dp = DataParallel.from_env(args.device)
    log = Log(os.path.join(args.out, "train.log") if dp.main else None, dp.rank)
    try:
        rc = run(args, log, dp)
    except Exception as e:  # logged for the device script's poll, then re-raised (torchrun ends the other ranks)
        import traceback
        log(event="error", error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc()[-3000:])
        raise
    dp.close()
    return rc


def run(args, log, dp):
    dev = dp.device
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    clock = PauseClock()
    stop = {"sig": None}
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, lambda n, _f: stop.__setitem__("sig", n))
    ck = os.path.join(args.out, "last.pt")

    # -- model, recipe, state --------------------------------------------------------------------
    resumed = os.path.exists(ck)
    src = torch.load(ck if resumed else args.init, map_location="cpu") if (resumed or args.init) else None
    if src is not None:
        cfg = Config.from_json(src["config"])
        recipe_name = args.recipe or src["state"].get("recipe") or candidates.get(args.candidate)[1]
    else:
        cfg, recipe_name = candidates.get(args.candidate)
        recipe_name = args.recipe or recipe_name
    recipe = candidates.RECIPES[recipe_name]
    gate_before = cfg.sigma_gate
    if args.sigma_gate is not None:
        cfg = dataclasses.replace(cfg, sigma_gate=args.sigma_gate)
    align_before = cfg.align
    if args.align is not None:
        cfg = dataclasses.replace(cfg, align=args.align)
    if args.align_tile is not None:
        cfg = dataclasses.replace(cfg, align_tile=args.align_tile)
    T = 2 * cfg.temporal_radius + 1

    t0 = time.time()
    lim = args.data_limit
    photos = load_photo_tiles(args.photos, "train", dev, args.cache, lim)
    frames, starts = load_videos(args.videos, "train", dev, T, args.cache, lim)
    val = val_davis = None
    if dp.main:   # validation is rank 0's
        vphotos = load_photo_tiles(args.photos, "val", dev, args.cache, lim)
        vframes, vstarts = load_videos(args.val_videos or args.videos, "val", dev, VAL_T, args.cache, lim)
        val = make_val_set(vphotos, vframes, vstarts, dev, n=args.val_clips, P=args.val_patch)
        val_davis = make_val_davis(args.val_videos or args.videos, dev, args.cache, lim, P=args.val_patch)
        log(event="data", photo_tiles=len(photos), video_frames=len(frames) if frames is not None else 0,
            clip_starts=len(starts) if starts is not None else 0, val_clips=len(val), val_rng="cpu",
            val_davis_clips=0 if val_davis is None else len(val_davis), seconds=round(time.time() - t0, 1))

    model = Denoiser(cfg).to(dev)
    reparam_src = bool(src is not None and src["state"].get("qkv_reparam"))
    if reparam_src:
        sigma_reparam.enable(model, fold_norm=False)
    # a new run (--init) without --ema starts from the source's average when it kept one (the
    # weights it ranked and exported); a resume, or --init with --ema, takes the live weights and
    # carries the average beside them
    init_average = bool(not resumed and src is not None and src.get("ema") and not args.ema)
    if src is not None:
        model.load_state_dict(checkpoint_model(src).state_dict() if init_average else src["model"])
    # switching sigma-reparametrised qkv weights on in a run that trained without them: the same
    # function, new parameters (a fresh AdamW with a warm-up; denoise_train/sigma_reparam.py)
    reparam_on = args.qkv_reparam and not reparam_src
    if reparam_on:
        sigma_reparam.enable(model)
    dp.broadcast_model(model)   # every rank starts from rank 0's weights (a new run's are random)
    if resumed:
        state = dict({"recipe": recipe_name, "candidate": args.candidate, "init": None}, **src["state"])
        if state["recipe"] != recipe_name:   # --recipe at a resume: the run goes on with another recipe
            change = {"from": state["recipe"], "to": recipe_name, "step": state["step"],
                      "train_minutes": round(state["train_seconds"] / 60, 3)}
            state["recipe"] = recipe_name
            state["recipe_changes"] = state.get("recipe_changes", []) + [change]
            log(event="recipe_changed", **change)
    else:
        state = {"step": 0, "clips": 0, "train_seconds": 0.0, "runs": 0, "recipe": recipe_name,
                 "candidate": args.candidate, "init": None}
        if args.init:
            st = src["state"]
            state.update(step=st.get("step", 0), clips=st.get("clips", 0), train_seconds=st.get("train_seconds", 0.0),
                         candidate=st.get("candidate", args.candidate),
                         init={"from": os.path.abspath(args.init), "clips": st.get("clips", 0)},
                         recipe_changes=list(st.get("recipe_changes", [])))
            if st.get("deepened"):   # denoise_train/deepen.py's record travels with the weights
                state["deepened"] = list(st["deepened"])
            if st.get("recipe") and st["recipe"] != recipe_name:   # a branch that trains on with another recipe
                change = {"from": st["recipe"], "to": recipe_name, "step": state["step"],
                          "train_minutes": round(state["train_seconds"] / 60, 3)}
                state["recipe_changes"].append(change)
                log(event="recipe_changed", **change)
    if "plan" not in state:   # a new run, or model v1's checkpoint (no plan recorded)
        if args.clips:
            state["plan"] = {"unit": "clips", "start": state["clips"], "total": args.clips,
                             "schedule": Schedule("cosine", args.lr, args.lr_min, warmup=args.warmup).as_dict()}
        else:
            total = (args.plan_minutes or args.minutes) * 60
            state["plan"] = {"unit": "seconds", "start": state["train_seconds"], "total": total,
                             "schedule": Schedule("wsd", args.lr, args.lr_min, args.decay, args.warmup).as_dict()}
    elif resumed and args.plan_minutes and state["plan"]["unit"] == "seconds":
        old = state["plan"]["total"]
        state["plan"]["total"] = args.plan_minutes * 60
        log(event="plan_changed", old_minutes=old / 60, new_minutes=args.plan_minutes)
    state["runs"] += 1
    state["qkv_reparam"] = reparam_src or args.qkv_reparam
    if args.ema is not None:
        state["ema_decay"] = args.ema or None
    elif not resumed:   # --init or a new run: on only when asked
        state["ema_decay"] = None
    plan = state["plan"]
    sch = Schedule(**plan["schedule"])
    # the warm-up runs whenever AdamW starts without moments: a new run, the switch to
    # sigma-reparametrised weights, or a resume of a state saved before its first step
    opt_fresh = src is None or reparam_on or not (src.get("opt") or {}).get("state")
    if resumed and not opt_fresh:
        sch.warmup = 0
    lr_at = lambda step_run: sch((progress_value() - plan["start"]) / plan["total"], step_run)  # noqa: E731

    def progress_value():
        return state["clips"] if plan["unit"] == "clips" else state["train_seconds"]

    noise = NoiseRecipe(compile=dev.type == "cuda") if recipe["noise"] == "v2" else None
    params = count_parameters(model)
    log(event="start", resumed=resumed, init=state.get("init"), candidate=state.get("candidate"),
        config=json.loads(cfg.to_json()), recipe=recipe_name, params=params,
        gflop_1080p=round(gflop_per_frame(cfg, 1080, 1920), 1), batch=args.batch, patch=args.patch,
        video_share=args.video_share, photo_warp=args.photo_warp,
        plan=plan, qkv_reparam=state["qkv_reparam"], qkv_reparam_switched_on=reparam_on,
        sigma_gate=cfg.sigma_gate, sigma_gate_before=gate_before, align=cfg.align, align_before=align_before,
        ema_decay=state.get("ema_decay"), init_from_average=init_average,
        device=torch.cuda.get_device_name() if dev.type == "cuda" else "cpu",
        world_size=dp.world, gpus=dp.gpus, batch_per_rank=args.batch // dp.world, dp_backend=dp.backend,
        noise=noise.describe() if noise else "model v1 AWGN (data.make_noisy)",
        **{k: state[k] for k in ("step", "clips", "train_seconds", "runs")})

    # -- engine ----------------------------------------------------------------------------------
    engine_name = pick_engine(args.engine, args.bench_json, dev)
    if args.compile_cache:
        compile_cache.load(args.compile_cache, "train", log)
    accum = args.accum

    def build(accum):
        eng = StepEngine(model, engine_name, LossWeights.of(recipe), lr_at(0), accum=accum,
                         compile_backend=args.compile_backend, log=log, grad_average=dp.grad_average,
                         attention=args.attention, layout=args.token_layout, glue=args.glue, autotune=args.autotune)
        if not opt_fresh:
            load_opt_state(eng.opt, src["opt"])
        return eng
    eng = build(accum)
    ema = None
    if state.get("ema_decay") and dp.main:   # the average is validated and saved, by rank 0
        saved = src.get("ema") if src is not None and not reparam_on else None
        ema = WeightEMA(model, state["ema_decay"], saved)

    # each rank draws its own clips and noise: seeds offset by rank << 32 (rank 0's are a single
    # process's, whose batches stay what they were)
    batcher = Batcher(photos, frames, starts, dev, seed=1000 + state["step"] + args.seed + (dp.rank << 32), T=T,
                      pattern_bg=recipe["pattern_bg"], photo_warp=args.photo_warp)
    gen = torch.Generator(device=dev)
    gen.manual_seed(2000 + state["step"] + args.seed + (dp.rank << 32))
    local_batch = args.batch // dp.world
    feed = BatchFeed(lambda: training_batch(batcher, gen, noise, local_batch, args.patch, args.video_share,
                                            recipe["synth_share"], recipe["pixel_loss"],
                                            recipe["grey_share"]),
                     dev, overlap=pick_feed(args.feed, args.bench_json) == "overlap")

    last_val = {"step": None}

    def checkpoint():
        save_ckpt(os.path.join(args.out, "last.pt"), model, eng.opt, state, ema)

    # divergence guard: the first validation (of the starting state, when there is one) writes
    # best.pt, so it exists before any validation can find a fall
    best = {"mean": None, "step": state["step"], "live": None}

    def val_event(probe_too=True):
        """Validate and log; keep best.pt; True when the run has diverged (see --diverge-db). Rank 0's."""
        model.set_engine(sdpa=True, channels_last=eng.channels_last)   # eager: no recompiles for the validation shapes
        r = {}
        if ema is not None:
            r["val_psnr_mean_raw"] = validate(model, val)["val_psnr_mean"]
            r["ema_updates"] = ema.updates
        avg = ema.swapped(prepare=lambda: sigma_reparam.power_steps(model)) if ema is not None else None
        with avg or contextlib.nullcontext():
            r.update(validate(model, val))
            if cfg.fusion == "shift" and val.shape[1] > T:
                # the same centre frames through a longer clip (VAL_T = 9 frames, not the training's
                # 7): what the training clip's truncated receptive field costs (model.py, fusion "shift")
                r.update({f"{k}_T{val.shape[1]}": v for k, v in validate(model, val, frames=val.shape[1]).items()})
            r.update(validate_davis(model, val_davis))
            if probe_too and not args.no_probe:
                p = probe(model, dev)
                r["probe"] = {k: v for k, v in p.items() if k != "cases"}
                r["probe_summary"] = summary(p)
        eng.set_kernels()
        log(event="val", step=state["step"], clips=state["clips"],
            train_minutes=round(state["train_seconds"] / 60, 2), attn_norms=attn_norms(model), **r)
        mean = r["val_psnr_mean"]
        state["last_val_mean"] = mean
        # the guard watches the live weights (the average lags them by its ~1 / (1 - decay) steps)
        live = r.get("val_psnr_mean_raw", mean)
        if best["live"] is not None and live < best["live"] - args.diverge_db:
            return True
        best["live"] = live if best["live"] is None else max(best["live"], live)
        if best["mean"] is None or mean > best["mean"]:
            best.update(mean=mean, step=state["step"])
            save_ckpt(os.path.join(args.out, "best.pt"), model, eng.opt, state, ema)
        return False

    def diverged():
        """The state to diverged.pt, best.pt to last.pt (the next session resumes from there)."""
        save_ckpt(os.path.join(args.out, "diverged.pt"), model, eng.opt, state, ema)
        os.replace(os.path.join(args.out, "best.pt"), os.path.join(args.out, "last.pt"))
        log(event="diverged", step=state["step"], train_minutes=round(state["train_seconds"] / 60, 3),
            val_psnr_mean=state["last_val_mean"], best_val_psnr_mean=best["mean"], best_step=best["step"],
            last_pt="best.pt (step %d)" % best["step"])
        return 2

    def validation(probe_too=True) -> bool:
        """val_event on rank 0 while the other ranks wait; on every rank: whether the run diverged."""
        last_val["step"] = state["step"]
        return dp.broadcast_flag(val_event(probe_too) if dp.main else False)

    def checkpoint_all():
        """last.pt, written by rank 0 while the other ranks wait."""
        if dp.main:
            checkpoint()
        dp.barrier()

    def budget_left():
        if args.clips:
            return state["clips"] < args.clips
        return state["train_seconds"] < session_end

    if src is not None:   # score the starting state itself (a checkpoint's last val may be older)
        validation(probe_too=False)
    session_end = state["train_seconds"] + (args.minutes or 0) * 60
    val_at = sorted(c for c in args.val_at if c > state["clips"])
    step_run, logged = 0, False
    last_ck = time.monotonic()
    next_val = state["train_seconds"] + args.val_minutes * 60
    acc = {"loss": torch.zeros((), device=dev), "n": 0, "clips": 0, "seconds": 0.0}
    # every decision of the loop is taken alike on every rank: from the state (the same on all) or
    # agreed (a signal on any rank, the slowest rank's step time, rank 0's checkpoint timer)
    stopped_by = dp.agree(stop["sig"] or 0, 0.0, False)[0]
    while budget_left() and not stopped_by:
        ts = time.monotonic()
        lr = lr_at(step_run)
        batch = feed.next()
        try:
            loss = eng.step(*batch, lr)
        except torch.cuda.OutOfMemoryError as e:
            if step_run or accum >= local_batch:
                raise
            accum *= 2
            log(event="oom", batch=args.batch, accum=accum, error=str(e)[:300])
            eng = None
            torch.cuda.empty_cache()
            eng = build(accum)
            continue
        if ema is not None:
            ema.update()
        acc["loss"] += loss
        step_run += 1
        state["step"] += 1
        state["clips"] += args.batch   # the global batch: every rank's clips
        first = not logged
        if first:   # the first step includes compilation / capture: report, do not count it
            if dev.type == "cuda":
                torch.cuda.synchronize()
            log(event="engine", **eng.describe(), feed=feed.describe(), first_step_seconds=round(time.monotonic() - ts, 1),
                setup_seconds_total=round(time.time() - t0, 1),
                noise_compile_error=noise.compile_error if noise else None)
            if args.compile_cache and dp.main:
                compile_cache.save(args.compile_cache, "train", log)
            logged = True
            acc = {"loss": torch.zeros((), device=dev), "n": 0, "clips": 0, "seconds": 0.0}
            dt = 0.0
        else:
            dt = clock.count(time.monotonic() - ts)
        stopped_by, dt, ckpt_due = dp.agree(stop["sig"] or 0, dt, time.monotonic() - last_ck > args.ckpt_minutes * 60)
        if not first:
            state["train_seconds"] += dt
            acc["n"] += 1
            acc["clips"] += args.batch
            acc["seconds"] += dt
        if acc["n"] >= args.log_steps:
            cps = acc["clips"] / max(acc["seconds"], 1e-9)
            log(event="train", step=state["step"], clips=state["clips"],
                loss=round(dp.mean(acc["loss"]).item() / acc["n"], 5), lr=lr, clips_per_s=round(cps, 1),
                clips_per_s_per_gpu=round(cps / dp.gpus, 1), clips_per_s_per_rank=round(cps / dp.world, 1),
                world_size=dp.world, train_minutes=round(state["train_seconds"] / 60, 3), pauses=clock.pauses)
            acc = {"loss": torch.zeros((), device=dev), "n": 0, "clips": 0, "seconds": 0.0}
        if state["train_seconds"] >= next_val or (val_at and state["clips"] >= val_at[0]):
            if validation(probe_too=not (val_at and state["clips"] >= val_at[0])):
                return diverged() if dp.main else 2
            while val_at and state["clips"] >= val_at[0]:
                val_at.pop(0)
            next_val = state["train_seconds"] + args.val_minutes * 60
        if ckpt_due:
            checkpoint_all()
            log(event="ckpt", step=state["step"], clips=state["clips"], train_minutes=round(state["train_seconds"] / 60, 3))
            last_ck = time.monotonic()
        if args.max_steps and step_run >= args.max_steps:
            break
    checkpoint_all()
    if last_val["step"] != state["step"]:
        if validation():
            return diverged() if dp.main else 2
        checkpoint_all()
    stopped_by = dp.agree(stop["sig"] or 0, 0.0, False)[0]   # a signal may also have come since the loop
    if stopped_by:
        log(event="stopped", signal=stopped_by, **{k: state[k] for k in ("step", "clips", "train_seconds")})
        return 0
    log(event="done", lr=lr_at(step_run), pauses=clock.pauses,
        **{k: state[k] for k in ("step", "clips", "train_seconds", "runs")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
