#!/usr/bin/env python3
"""PyTorch side of tools/bench.sh: the reference model (denoise_train/model.py) running the same per-output-
frame work as the engines' steady state (one U-Net pass on a 5-frame window + the head), bf16,
timed after warm-up (CUDA events on the GPU), median of --iters. Variants, all on the same inputs:

  eager v1       the model's own code (explicit attention, NCHW convolutions)
  eager sdpa     PyTorch's fastest eager kernels for the same function: attention through
                 F.scaled_dot_product_attention, convolutions and head NHWC (Denoiser.set_engine)
  compile MODE   eager sdpa through torch.compile(dynamic=False, mode=MODE): one static-shape
                 compile per size (dynamo reset before each, so nothing recompiles or goes
                 dynamic); the first call's time is reported as the compile time
Each line gives the output's relative L2 distance from eager v1's (all bf16: about 1e-2 apart).

  python3 tools/bench_torch.py [--weights weights/denoise-v2.safetensors] [--sizes 960x540,...]
      [--compile-sizes 1920x1080,3840x2160] [--compile-modes default,max-autotune] [--device cpu]
"""
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "weights"))
from denoise_train.checkpoint import load_weights  # noqa: E402
from denoise_train.model import gflop_per_frame  # noqa: E402


def bench(fn, iters, cuda):
    """fn's median and minimum time in ms over iters calls, after 3 warm-up calls."""
    for _ in range(3):
        fn()
    if cuda:
        torch.cuda.synchronize()
    ms = []
    for _ in range(iters):
        if cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            ms.append(a.elapsed_time(b))
        else:
            t0 = time.perf_counter()
            fn()
            ms.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ms), min(ms)


def step(m, win, sig, centre):
    """One output frame: features of the window, the head on them (as the engines' steady state)."""
    f = m.features(win, sig)
    return m.head_out([f, f, f], centre)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weights", default=os.path.join(os.path.dirname(__file__), "denoise-v2.safetensors"))
    ap.add_argument("--sizes", default="960x540,1920x1080,3840x2160", help="eager variants' frame sizes")
    ap.add_argument("--compile-sizes", default="1920x1080,3840x2160",
                    help="torch.compile's frame sizes (each is one static compile); empty: none")
    ap.add_argument("--compile-modes", default="default,reduce-overhead",
                    help="torch.compile modes, comma-separated (default, reduce-overhead, max-autotune, "
                         "max-autotune-no-cudagraphs)")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--device", default="cuda", help="cuda, or cpu for a smoke test of this script")
    a = ap.parse_args()
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    dtype = torch.bfloat16
    v1 = load_weights(a.weights).to(dev).eval().to(dtype)
    fast = load_weights(a.weights).to(dev).eval().to(dtype).set_engine(sdpa=True, channels_last=True)
    cfg = v1.cfg
    name = torch.cuda.get_device_name(0) if cuda else "CPU"
    print(f"torch {torch.__version__}, {name}, bf16, median of {a.iters}")
    sizes = [s for s in a.sizes.split(",") if s]
    csizes = [s for s in a.compile_sizes.split(",") if s]
    modes = [m for m in a.compile_modes.split(",") if m]
    for s in dict.fromkeys(sizes + csizes):
        W, H = (int(v) for v in s.split("x"))
        mlt = cfg.pad_multiple
        Hp, Wp = H + (-H) % mlt, W + (-W) % mlt
        g = torch.Generator(device=dev).manual_seed(W * 10007 + H)
        win = (torch.rand(1, 2 * cfg.fusion_radius + 1, 3, Hp, Wp, device=dev, generator=g) * 2 - 1).to(dtype)
        centre = win[:, cfg.fusion_radius]
        sig = torch.full((1,), 20.0, device=dev)
        gf = gflop_per_frame(cfg, H, W)
        with torch.inference_mode():
            ref = step(v1, win, sig, centre).float()
        variants = []
        if s in sizes:
            variants += [("eager v1", lambda: step(v1, win, sig, centre), None),
                         ("eager sdpa", lambda: step(fast, win, sig, centre), None)]
        if s in csizes:
            variants += [(f"compile {m}", None, m) for m in modes]
        for label, fn, mode in variants:
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            setup = ""
            try:
                with torch.inference_mode():
                    if mode is not None:
                        torch._dynamo.reset()
                        compiled = torch.compile(step, dynamic=False, mode=mode)
                        t0 = time.perf_counter()
                        compiled(fast, win, sig, centre)
                        if cuda:
                            torch.cuda.synchronize()
                        setup = f"  compile {time.perf_counter() - t0:.1f} s"
                        fn = lambda: compiled(fast, win, sig, centre)  # noqa: E731
                    med, mn = bench(fn, a.iters, cuda)
                    rel = ((fn().float() - ref).norm() / ref.norm()).item()
            except Exception as e:  # noqa: BLE001 (report and go on with the next variant)
                print(f"pytorch {label:32s} {W:5d}x{H:<5d} failed: {type(e).__name__}: {str(e)[:300]}", flush=True)
                continue
            peak = f"  peak alloc {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB" if cuda else ""
            print(f"pytorch {label:32s} {W:5d}x{H:<5d} {med:8.3f} ms/frame (min {mn:.3f})  {1000 / med:8.2f} frames/s"
                  f"  {gf:7.2f} GFLOP/frame  {gf / med:6.2f} TFLOP/s  rel L2 vs eager v1 {rel:.1e}{peak}{setup}",
                  flush=True)


if __name__ == "__main__":
    main()
