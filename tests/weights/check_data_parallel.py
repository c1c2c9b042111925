#!/usr/bin/env python3
"""Data-parallel training (denoise_train/data_parallel.py, weights/train.py under torchrun) on the
CPU with gloo, world size 2 against world size 1.

  python3 tests/weights/check_data_parallel.py

Two checks, each printing what it saw:
  step    two ranks (torch.multiprocessing, DataParallel.from_env with torchrun's variables) each
          build a small model from a seed of their own, take rank 0's weights
          (broadcast_model) and take one train_step.StepEngine step (engine sdpa, recipe v2h's
          loss terms, per-pixel weights 1 and 0) on their half of a fixed global batch of 4
          clips, with the gradient average. Against one process's step on the whole batch from
          the same weights: the averaged gradients within GRAD_TOL (1e-5) of the largest gradient
          (the same sums in another order; a sum instead of a mean, or a rank left out, is off by
          the gradient itself), the mean of the ranks' losses the whole batch's within 1e-6, the
          weights after clipping and AdamW bit-identical on the two ranks and within STEP_TOL
          (1e-5, 1 % of one step of lr 1e-3) of the single process's. AdamW's first step moves
          each weight by lr g / (|g| + eps), eps 1e-8: about lr sign(g), except for gradients of
          order eps, where the summation order's rounding (about 1e-9 of the largest gradient)
          moves a weight by up to a few 1e-7 (7e-7 when written). Also DataParallel.agree (the
          largest signal, the slowest step time, rank 0's checkpoint timer) and broadcast_flag.
  run     weights/train.py under torchrun with 2 processes on a tiny photo set (4 random
          256x256 PNGs, entered in the decode cache with their pixels, so no image decoder is
          needed), global batch 4: SIGTERM to rank 1 alone after two logged steps stops both
          ranks (exit 0) with event "stopped", one validation and one checkpoint: the run's
          folder holds train.log, last.pt and best.pt and nothing else, every train event once
          (clips = 4 x step), world_size 2. Then a plain single process resumes the folder for
          one step: world_size 1, the step and clip counts go on from the checkpoint (with
          --diverge-db 100: the full learning rate's first step on 4 photos of noise may lose
          2 dB of validation PSNR, which the divergence guard would end the run for).
About 40 s on 2 cores. Exit status 1 when anything fails.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import zlib

from needs import WEIGHTS, need

need("torch", "numpy")
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from denoise_train import data  # noqa: E402
from denoise_train.model import Config, Denoiser  # noqa: E402
from denoise_train.train_step import LossWeights, StepEngine  # noqa: E402

ROOT = os.path.dirname(WEIGHTS)
CFG = Config(channels=(16, 32, 64), heads=(1, 2, 4), head_dim=16,
             depths={"enc0": 1, "enc1": 1, "mid": 2, "dec1": 1, "dec0": 1})
LOSS = LossWeights(lowpass=0.5, grid=1.0, chroma=1.0)     # recipe v2h's terms
B, P, LR = 4, 64, 1e-3
GRAD_TOL = 1e-5      # of the largest gradient
STEP_TOL = 1e-5      # absolute: 1 % of one AdamW step of lr LR


def fixed_batch():
    """The global batch: noisy (B, T, 3, P, P), sigma map (B,), target (B, 3, P, P), pixel weights (B,)."""
    g = torch.Generator().manual_seed(7)
    T = 2 * CFG.temporal_radius + 1
    noisy = torch.rand(B, T, 3, P, P, generator=g)
    smap = torch.tensor([5.0, 20.0, 35.0, 50.0])
    target = torch.rand(B, 3, P, P, generator=g)
    pix_w = torch.tensor([1.0, 0.0, 1.0, 1.0])
    return noisy, smap, target, pix_w


class GradRecord:
    """StepEngine's grad_average hook: runs `average` (a GradAverage, or None: one process) and
    keeps copies of the gradients it leaves, before clipping (which rescales them to norm 1 and
    would hide a wrong scale, as AdamW's first step, about lr sign(g), would)."""

    def __init__(self, model, average=None):
        self.names = [n for n, p in model.named_parameters() if p.requires_grad]
        self.average, self.capturable, self.grads = average, False, {}

    def __call__(self, params) -> None:
        if self.average is not None:
            self.average(params)
        self.grads = {n: p.grad.clone() for n, p in zip(self.names, params) if p.grad is not None}


def weights(model) -> dict:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def rank_main(rank: int, world: int, port: int, out: str) -> None:
    """One rank of the step check (torch.multiprocessing.spawn's entry); results to out/rankR.pt."""
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    from denoise_train.data_parallel import DataParallel
    dp = DataParallel.from_env("cpu")
    try:
        torch.manual_seed(100 + rank)   # rank 1 starts from other weights: broadcast_model must replace them
        model = Denoiser(CFG)
        dp.broadcast_model(model)
        record = GradRecord(model, dp.grad_average)
        eng = StepEngine(model, "sdpa", LOSS, LR, grad_average=record)
        n = B // world
        batch = [t[rank * n:(rank + 1) * n] for t in fixed_batch()]
        loss = eng.step(*batch, LR)
        agreed = dp.agree(15 if rank == 1 else 0, 0.1 + 0.2 * rank, rank == 1)
        flag = dp.broadcast_flag(rank == 0)
        torch.save(dict(grads=record.grads, weights=weights(model), loss=float(loss), agreed=agreed, flag=flag,
                        describe=dp.describe(), averaged=dp.grad_average is not None),
                   os.path.join(out, f"rank{rank}.pt"))
    finally:
        dp.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def max_diff(a: dict, b: dict) -> float:
    return max((a[k] - b[k]).abs().max().item() for k in a)


def check_step(tmp: str) -> list[str]:
    t0 = time.time()
    out = os.path.join(tmp, "step")
    os.makedirs(out)
    mp.spawn(rank_main, args=(2, free_port(), out), nprocs=2, join=True)
    r = [torch.load(os.path.join(out, f"rank{k}.pt")) for k in range(2)]

    torch.manual_seed(100)
    ref_model = Denoiser(CFG)
    ref_record = GradRecord(ref_model)
    ref_loss = float(StepEngine(ref_model, "sdpa", LOSS, LR, grad_average=ref_record).step(*fixed_batch(), LR))
    ref = {"grads": ref_record.grads, "weights": weights(ref_model)}

    fails = []
    if set(r[0]["grads"]) != set(ref["grads"]) or set(r[1]["grads"]) != set(ref["grads"]):
        fails.append("step: the ranks' gradients are not the single process's parameters")
        return fails
    gmax = max(g.abs().max().item() for g in ref["grads"].values())
    dg = max(max_diff(x["grads"], ref["grads"]) for x in r)
    ranks_equal = all(torch.equal(r[0]["weights"][k], r[1]["weights"][k]) for k in r[0]["weights"])
    dw = max(max_diff(x["weights"], ref["weights"]) for x in r)
    mean_loss = (r[0]["loss"] + r[1]["loss"]) / 2
    if not r[0]["averaged"] or r[0]["describe"]["world_size"] != 2 or r[0]["describe"]["backend"] != "gloo":
        fails.append(f"step: rank 0 ran {r[0]['describe']}, gradient average {r[0]['averaged']}")
    if dg > GRAD_TOL * gmax:
        fails.append(f"step: averaged gradients differ from the whole batch's by {dg:.3g} (limit {GRAD_TOL * gmax:.3g})")
    if not ranks_equal:
        fails.append("step: the two ranks' weights differ after the step")
    if dw > STEP_TOL:
        fails.append(f"step: weights differ from the single process's step by {dw:.3g} (limit {STEP_TOL:g})")
    if abs(mean_loss - ref_loss) > 1e-6 * abs(ref_loss):
        fails.append(f"step: mean of the ranks' losses {mean_loss:.7g}, whole batch {ref_loss:.7g}")
    want = (15, 0.1 + 0.2, False)
    for k, x in enumerate(r):
        sig, dt, ck = x["agreed"]
        if sig != want[0] or abs(dt - want[1]) > 1e-12 or ck != want[2] or x["flag"] is not True:
            fails.append(f"step: rank {k} agreed (signal, dt, checkpoint) {x['agreed']} and flag {x['flag']}, "
                         f"want {want} and True")
    print(f"step      2 ranks x {B // 2} clips vs 1 x {B}: averaged gradients within {dg:.2g} (largest {gmax:.3g}), "
          f"after clipping and AdamW weights "
          f"{'bit-identical on the ranks' if ranks_equal else 'DIFFER between the ranks'}, within {dw:.2g} of one "
          f"process's; loss {mean_loss:.6f} vs {ref_loss:.6f}; agree/broadcast_flag "
          f"{'ok' if not any('agreed' in f for f in fails) else 'FAIL'} ({time.time() - t0:.1f} s)"
          f"{'  ok' if not fails else '  FAIL'}")
    return fails


def write_png(path: str, rgb: np.ndarray) -> None:
    """rgb (H, W, 3) uint8 as an 8-bit RGB PNG (filter 0 on every row)."""
    H, W, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(H))

    def chunk(tag: bytes, d: bytes) -> bytes:
        return struct.pack(">I", len(d)) + tag + d + struct.pack(">I", zlib.crc32(tag + d))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def tiny_data(root: str) -> tuple[str, str, str]:
    """4 random 256x256 photos (data.py's split: photo 0 validates, 1..3 train), each in the decode
    cache with its pixels; an empty video folder. -> (photos, videos, cache)."""
    photos, videos, cache = (os.path.join(root, d) for d in ("photos", "videos", "cache"))
    for d in (photos, videos, cache):
        os.makedirs(d)
    rng = np.random.default_rng(5)
    for k in range(4):
        a = rng.integers(0, 256, (data.TILE, data.TILE, 3), dtype=np.uint8)
        p = os.path.join(photos, f"p{k}.png")
        write_png(p, a)
        data._cached(cache, p, lambda _path, a=a: a)
    return photos, videos, cache


def events(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(ln) for ln in f if ln.strip()]


def rank_pid(parent: int, rank: int) -> int | None:
    """The pid of torchrun's worker of that RANK (a child of parent), from /proc."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != parent:
                continue
            with open(f"/proc/{d}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if f"RANK={rank}".encode() in env:
            return int(d)
    return None


def check_run(tmp: str) -> list[str]:
    t0 = time.time()
    photos, videos, cache = tiny_data(os.path.join(tmp, "data"))
    out = os.path.join(tmp, "run")
    common = ["--photos", photos, "--videos", videos, "--cache", cache, "--out", out, "--candidate", "v1",
              "--batch", str(B), "--patch", "64", "--val-clips", "8", "--val-patch", "64", "--log-steps", "1",
              "--no-probe", "--device", "cpu", "--engine", "sdpa", "--feed", "sync"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    log = os.path.join(out, "train.log")
    p = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          os.path.join(WEIGHTS, "train.py"), *common, "--minutes", "30", "--val-minutes", "100"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    fails = []
    try:
        end = time.time() + 120
        while sum(e.get("event") == "train" for e in events(log)) < 2:
            if p.poll() is not None or time.time() > end:
                raise RuntimeError(f"torchrun: no two train events (exit {p.poll()}): "
                                   f"{p.stdout.read().decode(errors='replace')[-1500:]}")
            time.sleep(0.2)
        pid = rank_pid(p.pid, 1)
        if pid is None:
            raise RuntimeError("rank 1's process not found among torchrun's children")
        os.kill(pid, signal.SIGTERM)
        text = p.communicate(timeout=120)[0].decode(errors="replace")
    except BaseException:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        raise
    ev = events(log)
    kinds = [e["event"] for e in ev]
    trains = [e for e in ev if e["event"] == "train"]
    stopped = [e for e in ev if e["event"] == "stopped"]
    start = [e for e in ev if e["event"] == "start"]
    files = sorted(os.listdir(out))
    if p.returncode != 0:
        fails.append(f"run: torchrun exit {p.returncode}: {text[-1500:]}")
    if files != ["best.pt", "last.pt", "train.log"]:
        fails.append(f"run: the run's folder holds {files}, want best.pt, last.pt, train.log")
    if len(start) != 1 or start[0].get("world_size") != 2 or start[0].get("batch_per_rank") != B // 2:
        fails.append(f"run: start events {[(e.get('world_size'), e.get('batch_per_rank')) for e in start]}, "
                     f"want one with world_size 2, batch_per_rank {B // 2}")
    steps = [e["step"] for e in trains]
    if len(set(steps)) != len(steps) or any(e["clips"] != B * e["step"] or e["world_size"] != 2 for e in trains):
        fails.append(f"run: train events (step, clips, world_size) "
                     f"{[(e['step'], e['clips'], e['world_size']) for e in trains]}")
    if len(stopped) != 1 or stopped[0]["signal"] != signal.SIGTERM or kinds.count("val") != 1 or kinds[-1] != "stopped":
        fails.append(f"run: events {kinds}, want one val and one 'stopped' (signal 15) at the end")
    ck = torch.load(os.path.join(out, "last.pt"), map_location="cpu", weights_only=False)["state"]
    S = stopped[0]["step"] if stopped else -1
    if ck["step"] != S or ck["clips"] != B * S:
        fails.append(f"run: last.pt at step {ck['step']} with {ck['clips']} clips, the stopped event at step {S}")
    # world size 1 resumes it
    r = subprocess.run([sys.executable, os.path.join(WEIGHTS, "train.py"), *common, "--minutes", "30",
                        "--max-steps", "1", "--diverge-db", "100"], capture_output=True, text=True, env=env, timeout=120)
    ev2 = events(log)[len(ev):]
    s2 = [e for e in ev2 if e["event"] == "start"]
    done = [e for e in ev2 if e["event"] == "done"]
    if r.returncode != 0:
        fails.append(f"run: the single-process resume exit {r.returncode}: {r.stdout[-800:]}{r.stderr[-800:]}")
    elif not (len(s2) == 1 and s2[0]["resumed"] and s2[0]["world_size"] == 1 and s2[0]["step"] == S
              and len(done) == 1 and done[0]["step"] == S + 1 and done[0]["clips"] == B * (S + 1)):
        fails.append(f"run: the resume's events {[(e['event'], e.get('step'), e.get('world_size')) for e in ev2]}, "
                     f"want start (resumed, world_size 1, step {S}) and done at step {S + 1}")
    print(f"run       torchrun x 2, global batch {B}: SIGTERM to rank 1 at step {S}: exit {p.returncode}, "
          f"events {' '.join(dict.fromkeys(kinds))}, files {' '.join(files)}; resumed by one process to step "
          f"{done[0]['step'] if done else '?'} ({time.time() - t0:.1f} s){'  ok' if not fails else '  FAIL'}")
    return fails


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        fails = check_step(tmp) + check_run(tmp)
    print("data-parallel check:", "PASS" if not fails else "FAIL: " + "; ".join(fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
