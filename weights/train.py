#!/usr/bin/env python3
"""Train model v1 on the device GPU (PyTorch, bf16 autocast, torch.compile).

  python3 weights/train.py --photos DIR --videos DIR --out DIR --minutes 18

Runs for a wall-clock budget of training time (compile and validation excluded), with a cosine
learning-rate schedule over that budget, so a run fits a device lease; resumes from
OUT/last.pt (model, optimiser, step, clips and minutes so far) and then starts a new cosine cycle
at --lr-resume. Logs one JSON object per line to OUT/train.log: training loss, learning rate,
clips/s, and validation PSNR (dB, peak 1, centre frame) on the held-out split (weights/data.py)
at sigma 10/30/50. Checkpoints every --ckpt-minutes to OUT/last.pt (atomic rename).

Loss: L1 between the network output and the clean centre frame, both in [-1,1].
Noise: AWGN, sigma ~ U(0, 55) in 8-bit code values per clip, unclipped, plus a share of clips
clipped and quantised to 8 bit (weights/data.py make_noisy).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from data import Batcher, load_photo_tiles, load_videos, make_noisy  # noqa: E402
from model import Config, Denoiser, count_parameters  # noqa: E402


def log(fh, **kv):
    kv["time"] = round(time.time(), 1)
    line = json.dumps(kv)
    print(line, flush=True)
    fh.write(line + "\n")
    fh.flush()


def psnr(a, b):
    mse = ((a - b) ** 2).flatten(1).mean(1)
    return (-10 * torch.log10(mse.clamp_min(1e-12)))


def make_val_set(photos, frames, starts, device, n=24, P=256):
    """Fixed validation clips from the held-out split, clean, (n, 7, 3, P, P) in [0,1]."""
    b = Batcher(photos, frames, starts, device, seed=12345)
    clips = []
    for _ in range(n // 8):
        clips.append(b.clean(8, P))
    return torch.cat(clips)


@torch.no_grad()
def validate(model, val, sigmas=(10, 30, 50)):
    model.eval()
    g = torch.Generator(device=val.device)
    g.manual_seed(777)
    res = {}
    for s in sigmas:
        noise = torch.randn(val.shape, device=val.device, generator=g)
        noisy = val + s / 255.0 * noise
        outs = []
        for i in range(0, len(val), 8):
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=val.is_cuda):
                y = model(noisy[i:i + 8] * 2 - 1, torch.full((len(noisy[i:i + 8]),), float(s), device=val.device))
            outs.append((y.float() + 1) / 2)
        out = torch.cat(outs)
        res[f"val_psnr_s{s}"] = round(psnr(out, val[:, 3]).mean().item(), 3)
        res[f"val_noisy_s{s}"] = round(psnr(noisy[:, 3], val[:, 3]).mean().item(), 3)
    model.train()
    return res


def save_ckpt(path, model, opt, state):
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "state": state,
                "config": model.cfg.to_json()}, tmp)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--photos", required=True)
    ap.add_argument("--videos", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--minutes", type=float, default=18.0, help="training-time budget of this run")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--patch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=4e-4)
    ap.add_argument("--lr-resume", type=float, default=2e-4)
    ap.add_argument("--lr-min", type=float, default=1e-6)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--video-share", type=float, default=0.5)
    ap.add_argument("--clip8-share", type=float, default=0.25)
    ap.add_argument("--ckpt-minutes", type=float, default=2.0)
    ap.add_argument("--val-minutes", type=float, default=3.0)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (smoke tests)")
    args = ap.parse_args()

    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    os.makedirs(args.out, exist_ok=True)
    fh = open(os.path.join(args.out, "train.log"), "a")

    t0 = time.time()
    photos = load_photo_tiles(args.photos, "train", dev)
    frames, starts = load_videos(args.videos, "train", dev)
    vphotos = load_photo_tiles(args.photos, "val", dev)
    vframes, vstarts = load_videos(args.videos, "val", dev)
    val = make_val_set(vphotos, vframes, vstarts, dev)
    log(fh, event="data", photo_tiles=len(photos), video_frames=len(frames) if frames is not None else 0,
        clip_starts=len(starts) if starts is not None else 0,
        val_clips=len(val), seconds=round(time.time() - t0, 1))

    model = Denoiser(Config()).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, betas=(0.9, 0.99),
                            fused=dev.type == "cuda")
    ck = os.path.join(args.out, "last.pt")
    state = {"step": 0, "clips": 0, "train_seconds": 0.0, "runs": 0}
    resumed = os.path.exists(ck)
    if resumed:
        d = torch.load(ck, map_location=dev)
        model.load_state_dict(d["model"])
        opt.load_state_dict(d["opt"])
        state = d["state"]
    state["runs"] += 1
    base_seconds = state["train_seconds"]
    lr_max = args.lr_resume if resumed else args.lr
    log(fh, event="start", resumed=resumed, params=count_parameters(model), lr_max=lr_max,
        device=torch.cuda.get_device_name() if dev.type == "cuda" else "cpu", **state)

    fwd = model if args.no_compile else torch.compile(model)
    batcher = Batcher(photos, frames, starts, dev, seed=1000 + state["step"])
    gen = torch.Generator(device=dev)
    gen.manual_seed(2000 + state["step"])

    budget = args.minutes * 60
    run_seconds, last_ck, last_val = 0.0, time.time(), time.time()
    loss_acc, n_acc, clips_acc, t_acc = 0.0, 0, 0, time.time()
    step_run = 0
    while run_seconds < budget:
        ts = time.time()
        frac = min(1.0, run_seconds / budget)
        lr = args.lr_min + (lr_max - args.lr_min) * 0.5 * (1 + math.cos(math.pi * frac))
        if step_run < args.warmup and not resumed:
            lr *= (step_run + 1) / args.warmup
        for gparam in opt.param_groups:
            gparam["lr"] = lr
        with torch.no_grad():
            clean = batcher.clean(args.batch, args.patch, args.video_share)
            noisy, sigma = make_noisy(clean, gen, clip8_share=args.clip8_share)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            try:
                out = fwd(noisy * 2 - 1, sigma)
            except Exception as e:  # a compiler failure must not cost the lease: go eager
                if fwd is model:
                    raise
                log(fh, event="compile_failed", error=str(e)[-2000:])
                fwd = model
                out = fwd(noisy * 2 - 1, sigma)
        loss = F.l1_loss(out.float(), clean[:, 3] * 2 - 1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step_run += 1
        state["step"] += 1
        state["clips"] += args.batch
        loss_acc += loss.detach()
        n_acc += 1
        clips_acc += args.batch
        if step_run == 20:  # the first steps include compilation: start the clock after them
            if dev.type == "cuda":
                torch.cuda.synchronize()
            log(fh, event="compiled", seconds=round(time.time() - t0, 1))
            loss_acc, n_acc, clips_acc, t_acc = 0.0, 0, 0, time.time()
            continue
        if step_run > 20:
            run_seconds += time.time() - ts
        if n_acc and n_acc % 200 == 0:
            el = time.time() - t_acc
            log(fh, event="train", step=state["step"], loss=round(float(loss_acc) / n_acc, 5), lr=lr,
                clips_per_s=round(clips_acc / el, 1), run_minutes=round(run_seconds / 60, 2))
            loss_acc, n_acc, clips_acc, t_acc = 0.0, 0, 0, time.time()
        now = time.time()
        if now - last_val > args.val_minutes * 60:
            log(fh, event="val", step=state["step"], **validate(model, val))
            last_val = time.time()
        if now - last_ck > args.ckpt_minutes * 60:
            state["train_seconds"] = base_seconds + run_seconds
            save_ckpt(ck, model, opt, state)
            last_ck = time.time()
        if args.max_steps and step_run >= args.max_steps:
            break
    state["train_seconds"] = base_seconds + run_seconds
    save_ckpt(ck, model, opt, state)
    log(fh, event="val", step=state["step"], **validate(model, val))
    log(fh, event="done", **state)


if __name__ == "__main__":
    main()
