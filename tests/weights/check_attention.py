#!/usr/bin/env python3
"""The training kernels compute the same network as the v1 code (denoise_train/model.py), and which SDPA
backend they run.

  python3 tests/weights/check_attention.py [--device cpu|cuda] [--bf16]

For four configs (v1; v1 widths with head_dim 16, i.e. 2/4/8 heads; a per-frame-encoder design;
fusion "shift" with v1's depths: the 7 frames as 7 streams, the temporal shift in every block)
with randomised weights (LayerNorm affines, biases and the relative position bias tables
perturbed, as weights/make_goldens.py does, so that each one shows in the output), a random
7-frame clip of 64x128 (4 x 8 windows at the first level, so shifted blocks have all 9 mask
regions) and random sigmas, two kernel sets against the v1 code:
  sdpa     Denoiser.set_engine(sdpa=True): attention through F.scaled_dot_product_attention;
  sdpa-cl  set_engine(sdpa=True, channels_last=True): the same plus NHWC convolutions and head
           (what the training engines run).
fp32 (TF32 off): the output, and the gradient of a random projection of the output for every
parameter (the relative position bias tables included, which SDPA gets through its float mask).
Pass: relative L2 < 1e-5 and max abs < 1e-4 for the outputs; relative L2 < 1e-4 for every
parameter gradient; no gradient missing.

bf16 autocast (on CUDA always, on the CPU with --bf16): the kernels training runs. Reference: the
fp32 v1 code. The v1 code under the same autocast has its own error against it (every matmul
rounds to bf16 on the way back through the network, and a bias table's gradient is a sum over all
windows of terms that nearly cancel, since each softmax row's gradient sums to 0: 3 to 8 %
relative L2 for the tables of these configs under CPU autocast on the development machine, the
largest for the smallest gradients), and the SDPA path may not be less accurate than that: per
bias table, rel L2(sdpa-cl, fp32) <= 2 rel L2(v1 code, fp32) + 1e-3; for the output the same rule
(+ 1e-4) and < 2e-2. Comparing the two bf16 paths with each other, as this check first did,
measures the sum of two bf16 errors, not the kernels: up to 1.0e-1 on the CPU and 1.2e-1 on the
H200 for frame16's mid-level tables.

Backends: denoise_train/sdpa_backends.py's sdpa_backends() records, with the profiler, which SDPA backend ran
forward and backward (efficient, flash, cudnn, math). On CUDA the memory-efficient kernel is
expected (train_step.configure_cuda() keeps SDPA off cuDNN attention, flash takes no mask); when
the math backend ran instead, SDPA's reasons are printed (a run with the math backend excluded,
which makes SDPA raise with them). Math is still correct, only slower: a note, not a failure.
Exit status 1 when anything fails, with the tensor that failed.
"""
from __future__ import annotations

import argparse
import sys

from needs import need

need("torch")
import torch  # noqa: E402

from denoise_train.model import Config, Denoiser  # noqa: E402
from denoise_train.sdpa_backends import describe_backends, sdpa_backends  # noqa: E402

CONFIGS = {
    "v1": Config(),
    "heads-2-4-8": Config(heads=(2, 4, 8), head_dim=16),
    "frame16": Config(fusion="frame", frame_channels=16),
    "shift": Config(fusion="shift"),
}
KERNELS = {"sdpa": {"sdpa": True}, "sdpa-cl": {"sdpa": True, "channels_last": True}}
def randomise(model: Denoiser, gen: torch.Generator) -> None:
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, torch.nn.LayerNorm):
                mod.weight.add_(torch.randn(mod.weight.shape, generator=gen) * 0.1)
                mod.bias.add_(torch.randn(mod.bias.shape, generator=gen) * 0.1)
            elif isinstance(getattr(mod, "bias", None), torch.Tensor):
                mod.bias.add_(torch.randn(mod.bias.shape, generator=gen) * 0.05)
            if hasattr(mod, "relative_position_bias_table"):
                t = mod.relative_position_bias_table
                t.copy_(torch.randn(t.shape, generator=gen) * 0.5)


def rel_l2(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30)).item()


def run(model, clip, sigma, proj, kernels: dict | None, autocast=False):
    """-> output, gradients (None where a parameter got none); kernels None: the v1 code, else
    set_engine(**kernels). Fails when an SDPA path did not call SDPA once per Swin block."""
    model.set_engine(**(kernels or {}))
    model.zero_grad(set_to_none=True)
    calls = []
    sdpa_fn = torch.nn.functional.scaled_dot_product_attention

    def counted(*a, **k):
        calls.append(1)
        return sdpa_fn(*a, **k)
    torch.nn.functional.scaled_dot_product_attention = counted
    try:
        with torch.autocast(clip.device.type, dtype=torch.bfloat16, enabled=autocast):
            y = model(clip, sigma)
    finally:
        torch.nn.functional.scaled_dot_product_attention = sdpa_fn
    blocks = sum(model.cfg.depths.values())
    if len(calls) != (blocks if kernels else 0):
        raise AssertionError(f"{len(calls)} SDPA calls, expected {blocks if kernels else 0}")
    (y.float() * proj).sum().backward()
    grads = {n: (p.grad.detach().clone() if p.grad is not None else None) for n, p in model.named_parameters()}
    return y.detach().float(), grads


def compare_grads(g, ref) -> tuple[float, str, list[str]]:
    """-> (worst rel L2, its parameter, parameters without a gradient)."""
    missing = [n for n in ref if g[n] is None]
    worst = max(((rel_l2(g[n], ref[n]), n) for n in ref if g[n] is not None), default=(0.0, "-"))
    return worst[0], worst[1], missing


def check(device: torch.device, bf16: bool | None = None) -> tuple[list[str], list[str]]:
    """-> (failures, notes); prints one line per measurement. bf16: run the autocast comparison
    (default: on CUDA only)."""
    if bf16 is None:
        bf16 = device.type == "cuda"
    if device.type == "cuda":
        from train_step import configure_cuda
        configure_cuda()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    failures, notes = [], []
    for name, cfg in CONFIGS.items():
        gen = torch.Generator().manual_seed(11)
        torch.manual_seed(5)
        model = Denoiser(cfg)
        randomise(model, gen)
        model = model.to(device)
        T = 2 * cfg.temporal_radius + 1
        clip = (torch.rand(2, T, 3, 64, 128, generator=gen) * 2 - 1).to(device)
        sigma = torch.tensor([7.0, 43.0]).to(device)
        proj = torch.randn(2, 3, 64, 128, generator=gen).to(device)
        y0, g0 = run(model, clip, sigma, proj, None)
        bias_names = [n for n in g0 if n.endswith("relative_position_bias_table")]
        if any(g0[n] is None or not g0[n].abs().max() > 0 for n in bias_names):
            failures.append(f"{name}: a relative position bias gradient is zero (the test cannot see it)")
        for kname, kw in KERNELS.items():
            y1, g1 = run(model, clip, sigma, proj, kw)
            r, m = rel_l2(y1, y0), (y1 - y0).abs().max().item()
            ok = r < 1e-5 and m < 1e-4
            print(f"{name:12s} {kname:8s} forward fp32: rel L2 {r:.2e}, max abs {m:.2e}  {'ok' if ok else 'FAIL'}")
            if not ok:
                failures.append(f"{name} {kname} forward")
            worst, wn, missing = compare_grads(g1, g0)
            ok = worst < 1e-4 and not missing
            print(f"{name:12s} {kname:8s} gradients fp32: worst rel L2 {worst:.2e} ({wn})"
                  + (f", no gradient for {len(missing)} parameters ({missing[0]}, ...)" if missing else "")
                  + f"  {'ok' if ok else 'FAIL'}")
            if not ok:
                failures.append(f"{name} {kname} gradient {wn if not missing else missing[0]}")
        if bf16:   # the kernels training runs, against the fp32 reference, beside the v1 code's own error
            yb0, gb0 = run(model, clip, sigma, proj, None, autocast=True)
            yb1, gb1 = run(model, clip, sigma, proj, KERNELS["sdpa-cl"], autocast=True)
            e0, e1 = rel_l2(yb0, y0), rel_l2(yb1, y0)
            ok = e1 <= 2 * e0 + 1e-4 and e1 < 2e-2
            print(f"{name:12s} bf16 forward: rel L2 vs fp32 v1 code {e0:.2e}, sdpa-cl {e1:.2e}  {'ok' if ok else 'FAIL'}")
            if not ok:
                failures.append(f"{name} bf16 forward")
            bad, worst = [], (0.0, "-", 0.0, 0.0)
            for n in bias_names:
                if gb1[n] is None:
                    bad.append(f"{n}: no gradient")
                    continue
                b0, b1 = rel_l2(gb0[n], g0[n]), rel_l2(gb1[n], g0[n])
                if b1 > 2 * b0 + 1e-3:
                    bad.append(f"{n}: {b1:.2e} > 2 x {b0:.2e} + 1e-3")
                if b1 / max(b0, 1e-12) > worst[0]:
                    worst = (b1 / max(b0, 1e-12), n, b0, b1)
            print(f"{name:12s} bf16 bias-table gradients vs fp32: worst ratio sdpa-cl / v1 code {worst[0]:.2f} "
                  f"({worst[1]}: {worst[3]:.2e} / {worst[2]:.2e})  {'ok' if not bad else 'FAIL ' + '; '.join(bad)}")
            if bad:
                failures.append(f"{name} bf16 bias-table gradient")
        backends = sdpa_backends(lambda: run(model, clip, sigma, proj, KERNELS["sdpa-cl"], autocast=bf16))
        note = f"{name}: SDPA {describe_backends(backends)}"
        if device.type == "cuda" and set(backends["forward"]) != {"efficient"}:
            note += f"; {fused_kernel_reasons(model, clip, sigma, proj)}"
        notes.append(note)
        print(f"{name:12s} {note.split(': ', 1)[1]}")
        model.set_engine()
    return failures, notes


def fused_kernel_reasons(model, clip, sigma, proj) -> str:
    """Why SDPA did not run its memory-efficient kernel here: the run again with only that kernel
    allowed makes SDPA raise, and print its reasons as warnings."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    try:
        with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]):
            run(model, clip, sigma, proj, KERNELS["sdpa-cl"], autocast=True)
        return "the memory-efficient kernel runs when it is the only one allowed"
    except RuntimeError as e:
        return f"memory-efficient kernel refused ({str(e)[:300]}; SDPA's warnings above say why)"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    ap.add_argument("--bf16", action="store_true", help="also the bf16 comparison on the CPU (slow)")
    a = ap.parse_args()
    dev = torch.device(a.device)
    failures, _ = check(dev, bf16=True if a.bf16 else None)
    print("attention check:", "PASS" if not failures else "FAIL: " + "; ".join(failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
