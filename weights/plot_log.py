#!/usr/bin/env python3
"""Plot a training log (weights/train.py's JSON lines) to a PNG: L1 loss and validation PSNR.

  python3 weights/plot_log.py weights/ckpt/train.log docs/model/training.png
"""
import json
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(log, png):
    tr, va = [], []
    for line in open(log):
        d = json.loads(line)
        if d.get("event") == "train":
            tr.append(d)
        elif d.get("event") == "val":
            va.append(d)
    clips_per_step = None
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    a.plot([d["step"] for d in tr], [d["loss"] for d in tr], lw=1)
    a.set_xlabel("step (batch 64 of 7x128x128 clips)")
    a.set_ylabel("training L1 loss ([-1,1] units, mean of 200 steps)")
    a.grid(alpha=.3)
    for s in (10, 30, 50):
        b.plot([d["step"] for d in va], [d[f"val_psnr_s{s}"] for d in va], "o-", label=f"sigma {s}")
    b.set_xlabel("step")
    b.set_ylabel("validation PSNR (dB), held-out split")
    b.legend()
    b.grid(alpha=.3)
    fig.suptitle("denoise v1 training on one NVIDIA H200 (weights/train.py)")
    fig.tight_layout()
    fig.savefig(png, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
