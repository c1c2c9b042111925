#!/usr/bin/env python3
"""Architecture study: train several candidates concurrently on one GPU, same clip budget each.

  python3 weights/study.py --photos DIR --videos DIR [DIR ...] --cache DIR --out RUN/study
         [--candidates v1,v1-awgn,...] [--seconds 270] [--deadline 390] [--bench-json FILE]
         [--clips K] [-- EXTRA train.py ARGS]

Each candidate (weights/candidates.py) is one weights/train.py process in OUT/<name>/ (all in the
study's process group, so `kill -- -PGID` ends them together), with the same budget of K
training clips: a fixed number of clips, not of minutes, so that sharing the GPU is fair.
K = seconds * 0.8 * rate / sum(cost), rounded down to whole batches, where rate is the single-run
clips/s at batch 128 of the faster uncompiled engine in the bench JSON (sdpa or graph; that engine
is used unless --engine says otherwise; without a bench JSON: --rate 2500 and train.py's default
engine), and cost a candidate's GFLOP per 1080p frame over v1's. Every run validates at K/2 (PSNR) and at K (PSNR and
the faithfulness probe) on the held-out split, noise seed 777. A run still going at --deadline
seconds after the start gets SIGTERM (it checkpoints and validates, and is marked incomplete).

Results: OUT/results.json and OUT/results.md (params, GFLOP per 1080p frame, clips, concurrent
clips/s, val PSNR at sigma 10/30/50 and their mean, probe), OUT/winner (the name). The winner is
the candidate with the v2 recipe and the highest mean val PSNR at the full budget; when a run is
incomplete, every candidate is compared at K/2 instead. OUT/study.log has one JSON line per event.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import candidates  # noqa: E402
from model import Config, Denoiser, count_parameters, gflop_per_frame  # noqa: E402

DEFAULT = "v1,v1-awgn,wide40,deep,frame32,frame32-r3"


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


def summarise(name: str, folder: str, K: int, half: int) -> dict:
    ev = read_log(os.path.join(folder, "train.log"))
    cfg, recipe = candidates.get(name)
    r = {"name": name, "recipe": recipe, "params": count_parameters(Denoiser(cfg)),
         "gflop_1080p": round(gflop_per_frame(cfg, 1080, 1920), 1), "budget_clips": K}
    trains = [e for e in ev if e.get("event") == "train"]
    vals = [e for e in ev if e.get("event") == "val"]
    eng = next((e for e in ev if e.get("event") == "engine"), {})
    r["engine"] = eng.get("engine")
    r["setup_seconds"] = eng.get("setup_seconds_total")
    r["clips"] = max([e.get("clips", 0) for e in trains + vals] or [0])
    r["complete"] = any(e.get("event") == "done" for e in ev) and r["clips"] >= K
    r["clips_per_s"] = round(sum(e["clips_per_s"] for e in trains) / len(trains), 1) if trains else None
    r["train_minutes"] = max([e.get("train_minutes", 0) for e in trains + vals] or [0])
    err = [e for e in ev if e.get("event") == "error"]
    if err:
        r["error"] = err[-1]["error"]
    at_half = [v for v in vals if v["clips"] >= half and v["clips"] < K]
    final = vals[-1:]
    for tag, sel in (("half", at_half[:1]), ("final", final)):
        if sel:
            v = sel[0]
            r[f"val_{tag}"] = {k: v[k] for k in v if k.startswith("val_psnr")}
            r[f"val_{tag}"]["clips"] = v["clips"]
    if final and "probe" in final[0]:
        r["probe"] = final[0]["probe"]
        r["probe_summary"] = final[0].get("probe_summary")
    return r


def table(rows: list[dict], K: int) -> str:
    h = ("| candidate | recipe | params | GFLOP/1080p frame | clips | clips/s (concurrent) | "
         "val PSNR s10 / s30 / s50 | mean | at K/2 mean | probe: identity max / flat mean / flat cast / grid8 / neutral chroma / border |")
    lines = [h, "|" + "|".join(["---"] * (h.count("|") - 1)) + "|"]
    for r in rows:
        v = r.get("val_final", {})
        p = r.get("probe", {})
        pv = " / ".join(f"{p.get(k, float('nan')):.2f}" for k in
                        ("identity_max", "flat_mean", "flat_cast", "grid8", "neutral_chroma", "border_err")) if p else "-"
        half = r.get("val_half", {}).get("val_psnr_mean")
        lines.append(f"| {r['name']}{'' if r.get('complete') else ' (incomplete)'} | {r['recipe']} | {r['params']:,} | "
                     f"{r['gflop_1080p']} | {r['clips']:,} | {r.get('clips_per_s') or '-'} | "
                     + (f"{v['val_psnr_s10']:.2f} / {v['val_psnr_s30']:.2f} / {v['val_psnr_s50']:.2f} | {v['val_psnr_mean']:.2f}"
                        if v else "- | -") + f" | {half if half is not None else '-'} | {pv} |")
    return "\n".join(lines) + f"\n\nBudget K = {K:,} clips per candidate (7- or 9-frame clips of 128x128).\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--photos", required=True)
    ap.add_argument("--videos", nargs="+", required=True)
    ap.add_argument("--cache")
    ap.add_argument("--out", required=True)
    ap.add_argument("--candidates", default=DEFAULT)
    ap.add_argument("--seconds", type=float, default=270.0, help="training time the budget is sized for")
    ap.add_argument("--deadline", type=float, default=390.0, help="stop runs still going this long after the start")
    ap.add_argument("--bench-json")
    ap.add_argument("--rate", type=float, default=2500.0, help="single-run clips/s without a bench JSON")
    ap.add_argument("--clips", type=int, help="fix K instead of sizing it")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=4e-4)
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--engine", default="auto")
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
        candidates.get(n)
    v1g = gflop_per_frame(Config(), 1080, 1920)
    cost = {n: gflop_per_frame(candidates.get(n)[0], 1080, 1920) / v1g for n in names}
    rate, engine = a.rate, a.engine
    if a.bench_json and os.path.exists(a.bench_json):
        with open(a.bench_json) as f:
            b = json.load(f)
        # uncompiled engines only: six processes compiling at once on the machine's cores would
        # spend minutes of the study's budget
        ok = [r for r in b.get("results", []) if "error" not in r and r.get("batch") == 128
              and r.get("engine") in ("sdpa", "graph") and r.get("engine") == r.get("requested_engine")]
        if ok:
            best = max(ok, key=lambda r: r["clips_per_s"])
            rate = best["clips_per_s"]
            if engine == "auto":
                engine = best["engine"]
    K = a.clips or max(20, int(a.seconds * 0.8 * rate / sum(cost.values()) / a.batch)) * a.batch
    half = (K // a.batch // 2) * a.batch
    log(event="study_start", candidates=names, budget_clips=K, rate=rate, engine=engine,
        cost={n: round(c, 2) for n, c in cost.items()},
        seconds=a.seconds, deadline=a.deadline)
    extra = [x for x in a.extra if x != "--"]
    env = dict(os.environ, TORCHINDUCTOR_COMPILE_THREADS=str(max(1, (os.cpu_count() or 1) // len(names))))
    procs = {}
    for n in names:
        d = os.path.join(a.out, n)
        os.makedirs(d, exist_ok=True)
        cmd = [sys.executable, os.path.join(HERE, "train.py"), "--photos", a.photos, "--videos", *a.videos,
               "--out", d, "--candidate", n, "--clips", str(K), "--batch", str(a.batch), "--lr", str(a.lr),
               "--warmup", str(a.warmup), "--engine", engine, "--val-minutes", "1e9", "--val-at", str(half),
               "--ckpt-minutes", "1.5"]
        if a.cache:
            cmd += ["--cache", a.cache]
        if a.device:
            cmd += ["--device", a.device]
        cmd += extra
        procs[n] = subprocess.Popen(cmd, stdout=open(os.path.join(d, "stdout"), "w"), stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=env)
    stopped = set()
    while any(p.poll() is None for p in procs.values()):
        time.sleep(2)
        if time.time() - t0 > a.deadline:
            for n, p in procs.items():
                if p.poll() is None and n not in stopped:
                    p.send_signal(signal.SIGTERM)
                    stopped.add(n)
                    log(event="deadline_stop", candidate=n, seconds=round(time.time() - t0, 1))
    rows = []
    for n, p in procs.items():
        r = summarise(n, os.path.join(a.out, n), K, half)
        r["exit"] = p.returncode
        rows.append(r)
        log(event="candidate", **{k: v for k, v in r.items() if k != "probe"})
    complete = all(r.get("complete") for r in rows)
    key = "val_final" if complete else "val_half"
    elig = [r for r in rows if r["recipe"] == "v2" and key in r]
    winner = max(elig, key=lambda r: r[key]["val_psnr_mean"])["name"] if elig else None
    res = {"budget_clips": K, "half_clips": half, "rate_assumed": rate, "compared_at": key, "winner": winner,
           "seconds": round(time.time() - t0, 1), "candidates": rows}
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    with open(os.path.join(a.out, "results.md"), "w") as f:
        f.write(table(rows, K) + f"\nWinner (v2 recipe, highest mean val PSNR, compared at "
                f"{'K' if complete else 'K/2'}): **{winner}**\n")
    with open(os.path.join(a.out, "winner"), "w") as f:
        f.write((winner or "") + "\n")
    log(event="study_done", winner=winner, compared_at=key, seconds=res["seconds"])
    print(table(rows, K))
    print("winner:", winner)
    return 0 if winner else 1


if __name__ == "__main__":
    sys.exit(main())
