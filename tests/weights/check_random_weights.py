#!/usr/bin/env python3
"""Checks of weights/random_weights.py (untrained candidate weights for timing) on the CPU.

  python3 tests/weights/check_random_weights.py

  - wide64-12321 with --align 24 --sigma-gate 2: the file loads back (checkpoint.load_weights,
    strict), its config is the candidate's with those options, every tensor is the candidate's
    initialisation under the seed rounded to bf16 (bit for bit), and the metadata says
    "untrained" (data, noise_model, steps 0);
  - another seed gives other tensors;
  - a candidate the engines do not run (shift) and an unknown name exit 1 and write nothing.
"""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile

from needs import WEIGHTS, need

need("torch", "safetensors")
import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402

from denoise_train import candidates  # noqa: E402
from denoise_train.checkpoint import load_weights  # noqa: E402
from denoise_train.model import Denoiser  # noqa: E402

SCRIPT = os.path.join(WEIGHTS, "random_weights.py")


def make(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def main() -> int:
    fails = 0

    def check(ok: bool, what: str) -> None:
        nonlocal fails
        print(("ok   " if ok else "FAIL ") + what)
        fails += not ok

    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "w.safetensors")
        r = make("wide64-12321", out, "--align", "24", "--sigma-gate", "2", "--seed", "3")
        check(r.returncode == 0 and os.path.isfile(out), f"wide64-12321 written (exit {r.returncode}) {r.stderr.strip()}")
        if r.returncode:
            return 1
        m = load_weights(out)
        cfg = dataclasses.replace(candidates.get("wide64-12321")[0], align=24, sigma_gate=2.0)
        check(m.cfg == cfg, f"config is the candidate's with align 24, sigma gate 2 ({m.cfg.to_json()})")
        torch.manual_seed(3)
        ref = Denoiser(cfg).state_dict()
        got = m.state_dict()
        same = all(torch.equal(got[k], ref[k].to(torch.bfloat16).float()) for k in ref)
        check(same and got.keys() == ref.keys(), f"{len(ref)} tensors: the seed's initialisation in bf16")
        with safe_open(out, "pt") as f:
            meta = f.metadata()
        check("untrained" in meta.get("data", "") and meta.get("steps") == "0" and "untrained" in meta.get("noise_model", ""),
              "metadata says untrained")
        out2 = os.path.join(d, "w2.safetensors")
        make("wide64-12321", out2, "--align", "24", "--sigma-gate", "2", "--seed", "4")
        m2 = load_weights(out2)
        check(not torch.equal(m2.state_dict()["unet.fusion.weight"], got["unet.fusion.weight"]), "another seed, other weights")
        for name in ("shift", "no-such-candidate"):
            bad = os.path.join(d, f"{name}.safetensors")
            r = make(name, bad)
            check(r.returncode == 1 and not os.path.exists(bad) and r.stderr.strip() != "",
                  f"{name}: exit {r.returncode}, nothing written: {r.stderr.strip()[:90]}")
    print(f"check_random_weights: {'PASS' if not fails else f'{fails} FAILED'}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
