#!/usr/bin/env python3
"""PyTorch side of tools/bench.sh: the reference model (model.py) on the GPU, the same per-output-
frame work as the engines' steady state (one U-Net pass on a 5-frame window + the head), bf16
eager and torch.compile, timed with CUDA events after warm-up, median of --iters.

  python3 weights/bench_torch.py [--weights weights/denoise-v1.safetensors] [--sizes 960x540,...]
"""
import argparse
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export import load_weights  # noqa: E402
from model import gflop_per_frame  # noqa: E402


def bench(fn, iters):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ms = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ms.append(a.elapsed_time(b))
    return statistics.median(ms), min(ms)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weights", default=os.path.join(os.path.dirname(__file__), "denoise-v1.safetensors"))
    ap.add_argument("--sizes", default="960x540,1920x1080,3840x2160")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--no-compile", action="store_true")
    a = ap.parse_args()
    dev = torch.device("cuda")
    model = load_weights(a.weights).to(dev).eval()
    cfg = model.cfg
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}, median of {a.iters}")
    mb = model.to(torch.bfloat16)

    def step(m, win, sig, centre):
        f = m.features(win, sig)
        return m.head_out([f, f, f], centre)

    compiled = None if a.no_compile else torch.compile(step)
    for s in a.sizes.split(","):
        W, H = (int(v) for v in s.split("x"))
        mlt = cfg.pad_multiple
        Hp, Wp = H + (-H) % mlt, W + (-W) % mlt
        win = (torch.rand(1, 2 * cfg.fusion_radius + 1, 3, Hp, Wp, device=dev) * 2 - 1).to(torch.bfloat16)
        centre = win[:, cfg.fusion_radius]
        sig = torch.full((1,), 20.0, device=dev)
        gf = gflop_per_frame(cfg, H, W)
        variants = [("bf16 eager", lambda: step(mb, win, sig, centre))]
        if compiled is not None:
            variants.append(("bf16 torch.compile", lambda: compiled(mb, win, sig, centre)))
        for name, fn in variants:
            torch.cuda.reset_peak_memory_stats()
            try:
                with torch.inference_mode():
                    med, mn = bench(fn, a.iters)
            except Exception as e:  # noqa: BLE001 (report and go on with the next variant)
                print(f"pytorch {name:18s} {W:5d}x{H:<5d} failed: {type(e).__name__}: {e}")
                continue
            peak = torch.cuda.max_memory_allocated() / 2**20
            print(f"pytorch {name:18s} {W:5d}x{H:<5d} {med:8.3f} ms/frame (min {mn:.3f})  {1000 / med:8.2f} frames/s"
                  f"  {gf:7.2f} GFLOP/frame  {gf / med:6.2f} TFLOP/s  peak alloc {peak:.0f} MiB", flush=True)


if __name__ == "__main__":
    main()
