#!/usr/bin/env python3
"""Architecture study: candidates trained one after another, each with the whole GPU, for the same
number of clips, within a planned duration.

  python3 weights/study.py --photos DIR --videos DIR [DIR ...] --cache DIR --out RUN/study
         [--candidates v1,deep,frame32,frame32-r3,v1-awgn] [--clips 150016 | --minutes M] [--seconds 480]
         [--deadline 510] [--bench-json FILE] [--rate 1200] [--engine auto] [--feed auto]
         [-- EXTRA train.py ARGS]

Each candidate (denoise_train/candidates.py; every one within candidates.engine_limits, though
the engines do not run all of them yet: results' engine_runs, candidates.engine_runs) is one
weights/train.py process in OUT/<name>/, started when the one before it has ended: K = --clips
training clips (default 150,016 = 1,172 batches of 128) with a cosine learning rate over them,
validated at K/2 (PSNR) and at K (PSNR and the faithfulness probe) on the held-out split, noise
seed 777. Processes sharing the GPU train slower together than one alone, so each gets it whole.
With --minutes M every candidate trains M training minutes instead (train.py --minutes M
--plan-minutes M: the wsd schedule over M minutes), validated at M/2 and at M: a budget matched in
GPU time rather than in clips, so that a candidate that costs more per clip (fusion "shift") sees
fewer clips; "K" in the table is then M.

Plan. Candidates run in the given order (v1, the control, first). Before each one starts, its
duration is estimated as overhead + K * cost / rate: cost is its GFLOP per 1080p frame over v1's,
times its U-Net passes per training clip over v1's 3 (candidates.train_passes: fusion "shift" runs
one per frame, 7; its GFLOP per frame alone would plan it 2.3x too short)
(a conservative guess: the wider and deeper candidates of the first GPU study trained 1.2 to 1.4x
slower than v1 at 1.2 to 1.5x its GFLOP), rate the v1-equivalent clips/s (first from the bench
JSON for the study's engine at batch 128, else --rate; then the mean over the finished candidates
of their measured clips/s times their cost), overhead the wall time beyond training steps (first
the bench's set-up + 20 s, then the mean measured). A candidate whose estimate ends after
--seconds is skipped and the next ones are still considered. One still running at --deadline gets
SIGTERM (it checkpoints, validates and is marked incomplete). SIGTERM to this process stops the
running candidate the same way and ends the study.

Engine (--engine auto): from the bench JSON the default-form engine at batch 128 (sdpa, graph,
compile, compile-graph, each built with a synchronous or an overlapping feed, denoise_train/batch_feed.py)
with the least set-up + K / clips-per-second; without one, graph. Feed (--feed auto): that bench
result's (an overlapping one only if the bench's feed check passed); without one, train.py's own
default (sync).

Results: OUT/results.json and OUT/results.md are rewritten whenever a candidate starts or ends
(pending, running, skipped, complete, incomplete and failed rows), so a call that collects them
early gets the table so far; OUT/study.log has one JSON line per event; OUT/winner is written at
the end. The winner: among the complete v2-recipe candidates the one with the highest mean
validation PSNR at K, except that a cheaper one (fewer GFLOP per frame) within --tie-db of it
wins (equal quality at less cost); without a complete candidate, all are compared at K/2.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

import torch

from denoise_train import candidates
from denoise_train.flops import bf16_gemm_tflops, train_flop_per_clip
from denoise_train.model import Config, Denoiser, count_parameters, gflop_per_frame

DEFAULT = "v1,deep,frame32,frame32-r3,v1-awgn"
STUDY_ENGINES = ("sdpa", "graph", "compile", "compile-graph")
STUDY_VARIANTS = STUDY_ENGINES + tuple(f"{e}-overlap" for e in STUDY_ENGINES)
HERE = os.path.dirname(os.path.abspath(__file__))
OVERHEAD_S = 20.0   # start, data loading, two validations and the probe, checkpoints


def read_log(path: str) -> list[dict]:
    out = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return out


def seeded(name: str) -> tuple[str, int]:
    """A study entry "CANDIDATE-seedN" trains CANDIDATE with train.py --seed N (a repeat that
    measures the seed spread of a ranking); a plain name is seed 0. -> (candidate, seed)."""
    m = re.fullmatch(r"(.+)-seed(\d+)", name)
    return (m.group(1), int(m.group(2))) if m else (name, 0)


_FLOP_PER_CLIP: dict[str, float] = {}


def summarise(name: str, folder: str, K: int, half: int, gemm_tflops: float | None = None,
              minutes: float | None = None) -> dict:
    """A candidate's figures from its train.log (whatever it has logged so far); with gemm_tflops
    (the card's bf16 GEMM rate, measured at the study's start) its training MFU too. With minutes
    (the study's --minutes) the budget is M training minutes and K, half are unused."""
    ev = read_log(os.path.join(folder, "train.log"))
    cfg, recipe = candidates.get(seeded(name)[0])
    r = {"name": name, "recipe": recipe, "params": count_parameters(Denoiser(cfg)),
         "gflop_1080p": round(gflop_per_frame(cfg, 1080, 1920), 1), "budget_clips": K,
         "engine_runs": not candidates.engine_runs(cfg)}
    trains = [e for e in ev if e.get("event") == "train"]
    vals = [e for e in ev if e.get("event") == "val"]
    ends = [e for e in ev if e.get("event") in ("done", "stopped")]
    eng = next((e for e in ev if e.get("event") == "engine"), {})
    r["engine"] = eng.get("engine")
    r["setup_seconds"] = eng.get("setup_seconds_total")
    r["clips"] = max([e.get("clips", 0) for e in trains + vals + ends] or [0])
    done = any(e.get("event") == "done" for e in ev)
    if minutes:
        r["budget_minutes"] = minutes
        r["complete"] = done and bool(ends) and ends[-1].get("train_seconds", 0) >= 0.99 * minutes * 60
    else:
        r["complete"] = done and r["clips"] >= K
    r["clips_per_s"] = round(sum(e["clips_per_s"] for e in trains) / len(trains), 1) if trains else None
    r["train_seconds"] = round(ends[-1]["train_seconds"], 1) if ends else None
    if r["clips_per_s"]:   # counted once a candidate has trained, not in the study's planned time
        if name not in _FLOP_PER_CLIP:
            _FLOP_PER_CLIP[name] = train_flop_per_clip(cfg)
        r["train_gflop_per_clip"] = round(_FLOP_PER_CLIP[name] / 1e9, 2)
        if gemm_tflops:
            r["mfu"] = round(r["clips_per_s"] * _FLOP_PER_CLIP[name] / 1e12 / gemm_tflops, 4)
    err = [e for e in ev if e.get("event") == "error"]
    if err:
        r["error"] = err[-1]["error"]
    if minutes:
        at_half = [v for v in vals if 0.45 * minutes <= v.get("train_minutes", 0) < 0.99 * minutes]
    else:
        at_half = [v for v in vals if half <= v["clips"] < K]
    for tag, sel in (("half", at_half[:1]), ("final", vals[-1:])):
        if sel:
            v = sel[0]
            r[f"val_{tag}"] = {k: v[k] for k in v if k.startswith("val_psnr")}
            r[f"val_{tag}"]["clips"] = v["clips"]
    if vals and "probe" in vals[-1]:
        r["probe"] = vals[-1]["probe"]
        r["probe_summary"] = vals[-1].get("probe_summary")
    return r


def bench_choice(path: str | None, engine: str, K: int) -> dict | None:
    """The bench result (weights/bench_train.py JSON) of the engine the study runs: --engine, or
    for auto the one with the least set-up + K / clips-per-second (an overlapping feed only when
    the bench's feed check passed). None without a usable one."""
    if not path or not os.path.exists(path):
        return None
    with open(path) as f:
        bench = json.load(f)
    res = bench.get("results", [])
    overlap_ok = (bench.get("feed_check") or {"pass": True})["pass"]
    ok = [r for r in res if "error" not in r and r.get("variant") in STUDY_VARIANTS
          and r.get("engine") == r.get("requested_engine") and r.get("clips_per_s")
          and (r.get("feed", "sync") == "sync" or overlap_ok)]
    if engine != "auto":
        ok = [r for r in ok if r["engine"] == engine]
    return min(ok, key=lambda r: r["setup_seconds"] + K / r["clips_per_s"]) if ok else None


def pick_winner(rows: list[dict], tie_db: float) -> tuple[str | None, str]:
    """-> (winner, 'K' or 'K/2'): see the module docstring."""
    done = [r for r in rows if r.get("complete")]
    key, at = ("val_final", "K") if done else ("val_half", "K/2")
    elig = [r for r in (done or rows) if r["recipe"] == "v2" and key in r]
    if not elig:
        return None, at
    best = max(r[key]["val_psnr_mean"] for r in elig)
    close = [r for r in elig if r[key]["val_psnr_mean"] >= best - tie_db]
    return min(close, key=lambda r: (r["gflop_1080p"], -r[key]["val_psnr_mean"]))["name"], at


def table(rows: list[dict], meta: dict) -> str:
    h = ("| candidate | status | recipe | params | GFLOP/1080p frame | clips | clips/s | MFU % | train min | "
         "val PSNR s10 / s30 / s50 | mean | vs v1 | mean at K/2 | probe: identity max / flat mean / flat cast / "
         "grid8 / neutral chroma / border |")
    lines = [h, "|" + "|".join(["---"] * (h.count("|") - 1)) + "|"]
    v1 = next((r for r in rows if r["name"] == "v1" and "val_final" in r), None)
    for r in rows:
        v = r.get("val_final", {})
        p = r.get("probe", {})
        pv = " / ".join(f"{p.get(k, float('nan')):.2f}" for k in
                        ("identity_max", "flat_mean", "flat_cast", "grid8", "neutral_chroma", "border_err")) if p else "-"
        half = r.get("val_half", {}).get("val_psnr_mean")
        status = r["status"] + (f" ({r['reason']})" if r.get("reason") else "")
        d = (f"{v['val_psnr_mean'] - v1['val_final']['val_psnr_mean']:+.2f}"
             if v and v1 and r["name"] != "v1" and v1.get("complete") else "-")
        tmin = f"{r['train_seconds'] / 60:.2f}" if r.get("train_seconds") else "-"
        lines.append(f"| {r['name']} | {status} | {r['recipe']} | {r['params']:,} | {r['gflop_1080p']} | "
                     f"{r.get('clips', 0):,} | {r.get('clips_per_s') or '-'} | "
                     + (f"{100 * r['mfu']:.2f}" if r.get("mfu") else "-") + f" | {tmin} | "
                     + (f"{v['val_psnr_s10']:.2f} / {v['val_psnr_s30']:.2f} / {v['val_psnr_s50']:.2f} | "
                        f"{v['val_psnr_mean']:.2f}" if v else "- | -")
                     + f" | {d} | {half if half is not None else '-'} | {pv} |")
    budget = (f"{meta['minutes']:g} training minutes per candidate" if meta.get("minutes")
              else f"K = {meta['K']:,} clips per candidate")
    return ("\n".join(lines) + f"\n\n{budget} ({meta['patch']}x{meta['patch']}, batch {meta['batch']}), one "
            f"candidate at a time on the whole GPU, engine {meta['engine']}, feed {meta.get('feed', 'sync')}; "
            f"planned {meta['seconds']:.0f} s, "
            f"deadline {meta['deadline']:.0f} s; {meta['elapsed']:.0f} s so far. Validation: held-out split, "
            f"{meta['val_clips']} clips of {meta['val_patch']}x{meta['val_patch']}, AWGN unclipped, noise seed 777. "
            f"MFU: clips/s x training FLOP per clip "
            f"(denoise_train/flops.py) / the bf16 GEMM rate measured at the start"
            + (f" ({meta['gemm_tflops']} TFLOP/s).\n" if meta.get("gemm_tflops") else " (not measured: no GPU).\n"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--photos", required=True)
    ap.add_argument("--videos", nargs="+", required=True)
    ap.add_argument("--cache")
    ap.add_argument("--out", required=True)
    ap.add_argument("--candidates", default=DEFAULT)
    ap.add_argument("--clips", type=int, default=150016, help="K, the clip budget of every candidate")
    ap.add_argument("--minutes", type=float, help="M, the training minutes of every candidate (instead of --clips)")
    ap.add_argument("--seconds", type=float, default=480.0, help="planned duration: no candidate starts "
                    "that is estimated to end later")
    ap.add_argument("--deadline", type=float, default=510.0, help="stop a candidate still running this long after the start")
    ap.add_argument("--bench-json")
    ap.add_argument("--rate", type=float, default=1200.0, help="v1's clips/s without a bench JSON")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=5.6e-4)
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--tie-db", type=float, default=0.05)
    ap.add_argument("--engine", default="auto")
    ap.add_argument("--feed", default="auto", choices=("auto", "overlap", "sync"),
                    help="train.py --feed (auto: the chosen bench result's, else train.py's default)")
    ap.add_argument("--device", default=None)
    ap.add_argument("extra", nargs=argparse.REMAINDER, help="after --: more train.py arguments")
    a = ap.parse_args()
    t0 = time.time()
    os.makedirs(a.out, exist_ok=True)
    logf = open(os.path.join(a.out, "study.log"), "a")

    def log(**kv):
        kv["time"] = round(time.time(), 1)
        line = json.dumps(kv)
        print(line, flush=True)
        logf.write(line + "\n")
        logf.flush()

    names = [n.strip() for n in a.candidates.split(",") if n.strip()]
    for n in names:
        why = candidates.engine_limits(candidates.get(seeded(n)[0])[0])
        if why:
            sys.exit(f"study.py: candidate {n} is outside what the engines run: {'; '.join(why)}")
    K = max(1, a.clips // a.batch) * a.batch
    half = (K // a.batch // 2) * a.batch
    v1g = gflop_per_frame(Config(), 1080, 1920)
    cost = {n: gflop_per_frame(candidates.get(seeded(n)[0])[0], 1080, 1920) / v1g
               * candidates.train_passes(candidates.get(seeded(n)[0])[0]) / 3 for n in names}
    b = bench_choice(a.bench_json, a.engine, K)
    engine = b["engine"] if b else ("graph" if a.engine == "auto" else a.engine)
    feed = a.feed if a.feed != "auto" else (b.get("feed", "sync") if b else "auto")
    rate = b["clips_per_s"] if b else a.rate
    overhead = (b["setup_seconds"] if b else 0.0) + OVERHEAD_S
    # MFU's denominator, measured once before the candidates take the GPU
    gemm = None
    if (a.device or "cuda").startswith("cuda") and torch.cuda.is_available():
        gemm = round(bf16_gemm_tflops(torch.device(a.device or "cuda")), 1)
        torch.cuda.empty_cache()
    meta = {"gemm_tflops": gemm, "K": K, "minutes": a.minutes, "half": half, "batch": a.batch, "engine": engine, "feed": feed, "seconds": a.seconds,
            "deadline": a.deadline, "elapsed": 0.0, "rate_assumed": rate, "overhead_assumed": overhead}
    log(event="study_start", candidates=names, budget_clips=None if a.minutes else K, budget_minutes=a.minutes, rate=rate, overhead=overhead, engine=engine,
        feed=feed,
        cost={n: round(c, 2) for n, c in cost.items()}, seconds=a.seconds, deadline=a.deadline,
        bench=b and {k: b[k] for k in ("variant", "clips_per_s", "setup_seconds")})
    rows = {n: dict(summarise(n, os.path.join(a.out, n), K, half, gemm, a.minutes), status="pending") for n in names}

    def write(final=False):
        meta["elapsed"] = time.time() - t0
        rs = list(rows.values())
        winner, at = pick_winner(rs, a.tie_db)
        res = {"budget_clips": None if a.minutes else K, "budget_minutes": a.minutes, "half_clips": half, "engine": engine, "compared_at": at, "winner": winner,
               "final": final, "meta": meta, "candidates": rs}
        with open(os.path.join(a.out, "results.json.tmp"), "w") as f:
            json.dump(res, f, indent=1)
        os.replace(os.path.join(a.out, "results.json.tmp"), os.path.join(a.out, "results.json"))
        word = "Winner" if final else "Leading so far"
        with open(os.path.join(a.out, "results.md.tmp"), "w") as f:
            f.write(table(rs, meta) + f"\n{word} (v2 recipe, highest mean val PSNR, a cheaper one within "
                    f"{a.tie_db:g} dB preferred; compared at {at}): **{winner}**\n")
        os.replace(os.path.join(a.out, "results.md.tmp"), os.path.join(a.out, "results.md"))
        return winner, at

    extra = [x for x in a.extra if x != "--"]

    def train_arg(flag: str, default: int) -> int:
        """train.py's value of flag as the extra arguments give it (the last one wins), else its default."""
        vals = [extra[i + 1] for i, x in enumerate(extra[:-1]) if x == flag]
        return int(vals[-1]) if vals else default

    meta.update(patch=train_arg("--patch", 128), val_clips=train_arg("--val-clips", 24), val_patch=train_arg("--val-patch", 256))
    stop = {"sig": None}
    signal.signal(signal.SIGTERM, lambda s, _f: stop.__setitem__("sig", s))
    write()
    rates, overheads = [], []
    for n in names:
        if stop["sig"] is not None:
            rows[n].update(status="skipped", reason="study stopped")
            continue
        elapsed = time.time() - t0
        est = overhead + (a.minutes * 60 if a.minutes else K * cost[n] / rate)
        if elapsed + est > a.seconds:
            rows[n].update(status="skipped", reason=f"needs ~{est:.0f} s, {max(0.0, a.seconds - elapsed):.0f} s left")
            log(event="skip", candidate=n, estimate_s=round(est, 1), left_s=round(a.seconds - elapsed, 1))
            write()
            continue
        d = os.path.join(a.out, n)
        os.makedirs(d, exist_ok=True)
        cmd = [sys.executable, os.path.join(HERE, "train.py"), "--photos", a.photos, "--videos", *a.videos,
               "--out", d, "--candidate", seeded(n)[0], "--seed", str(seeded(n)[1]), "--batch", str(a.batch), "--lr", str(a.lr),
               "--warmup", str(a.warmup), "--engine", engine, "--feed", feed, "--ckpt-minutes", "1.5"]
        if a.minutes:
            cmd += ["--minutes", str(a.minutes), "--plan-minutes", str(a.minutes), "--val-minutes", str(a.minutes / 2)]
        else:
            cmd += ["--clips", str(K), "--val-minutes", "1e9", "--val-at", str(half)]
        if a.cache:
            cmd += ["--cache", a.cache]
        if a.device:
            cmd += ["--device", a.device]
        cmd += extra
        rows[n].update(status="running", estimate_s=round(est, 1))
        log(event="candidate_start", candidate=n, estimate_s=round(est, 1), elapsed_s=round(elapsed, 1))
        write()
        ts = time.time()
        p = subprocess.Popen(cmd, stdout=open(os.path.join(d, "stdout"), "a"), stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL)
        sent = False
        while p.poll() is None:
            time.sleep(1)
            if not sent and (time.time() - t0 > a.deadline or stop["sig"] is not None):
                p.send_signal(signal.SIGTERM)
                sent = True
                log(event="deadline_stop" if stop["sig"] is None else "study_stop", candidate=n,
                    seconds=round(time.time() - t0, 1))
        wall = time.time() - ts
        r = summarise(n, d, K, half, gemm, a.minutes)
        r.update(exit=p.returncode, wall_seconds=round(wall, 1), estimate_s=round(est, 1),
                 status="complete" if r["complete"] else ("failed" if p.returncode else "incomplete"))
        rows[n] = r
        if r.get("train_seconds") and r["clips"]:
            rates.append(r["clips"] / r["train_seconds"] * cost[n])
            overheads.append(wall - r["train_seconds"])
            rate, overhead = sum(rates) / len(rates), sum(overheads) / len(overheads)
        log(event="candidate", **{k: v for k, v in r.items() if k != "probe"}, rate_now=round(rate, 1),
            overhead_now=round(overhead, 1))
        write()
    winner, at = write(final=True)
    with open(os.path.join(a.out, "winner"), "w") as f:
        f.write((winner or "") + "\n")
    log(event="study_done", winner=winner, compared_at=at, seconds=round(time.time() - t0, 1))
    with open(os.path.join(a.out, "results.md")) as f:
        print(f.read())
    return 0 if winner else 1


if __name__ == "__main__":
    sys.exit(main())
