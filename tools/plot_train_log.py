#!/usr/bin/env python3
"""Plot training logs (weights/train.py's JSON lines) to a PNG: training L1 loss and validation PSNR.

  python3 tools/plot_train_log.py LOG [LOG ...] PNG [--title TEXT]

Several logs are the parts of one run in order (a part started with --init from the previous
part's checkpoint goes on from its training minutes), read as one log.
The x axis is training minutes when the log records them (model v2's logs), else steps (model v1's).
The right panel shows val_psnr at sigma 10 / 30 / 50 and, where the log has it, the val_davis mean
(the validation that tracks eval-davis4, docs/model.md). Every start of a changed recipe, model
option or data mix (a `start` event whose recipe, align, sigma_gate, qkv_reparam, video_share or
photo_warp differs from the one before; a log without the last two had train.py's defaults) is a
dotted vertical line labelled with the change; a repeated validation is plotted once.
"""
import argparse
import json

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

WATCHED = ("recipe", "align", "sigma_gate", "qkv_reparam", "video_share", "photo_warp")
DEFAULTS = {"video_share": 0.5, "photo_warp": 0.0}  # train.py's, for logs from before the option


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("logs", nargs="+", metavar="LOG")
    ap.add_argument("png")
    ap.add_argument("--title", default="denoise training (weights/train.py)")
    args = ap.parse_args()
    tr, va, marks, seen, last = [], [], [], set(), None
    for line in (line for log in args.logs for line in open(log)):
        d = json.loads(line)
        ev = d.get("event")
        if ev == "train":
            tr.append(d)
        elif ev == "val":
            key = d.get("train_minutes", d.get("step"))
            if key not in seen:
                seen.add(key)
                va.append(d)
        elif ev == "start":
            cur = {k: d.get(k, (d.get("config") or {}).get(k, DEFAULTS.get(k))) for k in WATCHED}
            if last is not None and cur != last:
                change = ", ".join(f"{k} {cur[k]}" for k in WATCHED if cur[k] != last[k])
                marks.append((d.get("train_seconds", 0) / 60 if "train_seconds" in d else d["step"], change))
            last = cur
    minutes = bool(tr) and "train_minutes" in tr[0]
    x = (lambda d: d["train_minutes"]) if minutes else (lambda d: d["step"])
    xlabel = "training minutes" if minutes else "step"
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    a.plot([x(d) for d in tr], [d["loss"] for d in tr], lw=1)
    a.set_xlabel(xlabel)
    a.set_ylabel("training L1 loss ([-1,1] units, mean of 200 steps)")
    a.set_yscale("log")
    a.grid(alpha=.3)
    for s in (10, 30, 50):
        b.plot([x(d) for d in va], [d[f"val_psnr_s{s}"] for d in va], "o-", ms=3, label=f"val sigma {s}")
    dv = [d for d in va if "val_davis_mean" in d]
    if dv:
        b.plot([x(d) for d in dv], [d["val_davis_mean"] for d in dv], "s--", ms=3, color="k",
               label="val_davis mean (sigma 10/30/50)")
    for ax in (a, b):
        for m, text in marks:
            ax.axvline(m, ls=":", color="gray", lw=1)
    for m, text in marks:
        b.annotate(text, (m, b.get_ylim()[0]), rotation=90, fontsize=7, color="gray",
                   xytext=(2, 4), textcoords="offset points", va="bottom")
    b.set_xlabel(xlabel)
    b.set_ylabel("validation PSNR (dB), held-out split")
    b.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=4)
    b.grid(alpha=.3)
    fig.suptitle(args.title)
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)


if __name__ == "__main__":
    main()
