#!/usr/bin/env python3
"""The training variants of the Swin blocks compute the v1 code's function (denoise_train/model.py,
"Training variants"): attention sdpa / explicit / flex / cudnn / triton, token layout image /
windows, the compiled glue between the blocks.

  python3 tests/weights/check_block_variants.py [--device cpu|cuda] [--attention A,B,...]

--attention: only these attention kernels (default: all of model.ATTENTIONS); the refusals,
token reorders and glue are checked whatever it says.

fp32 (TF32 off), weights randomised as tests/weights/check_attention.py does (LayerNorm affines,
biases, the relative position bias tables), every variant against the v1 code (Denoiser.set_engine()
with no arguments: WindowAttention.forward, its own shift mask):
  blocks   one unshifted and one shifted block (C 64, 2 heads) alone, on a 24 x 40 map: 3 x 5
           windows (odd counts on both axes), batch 2; the block as a training engine calls it
           (sdpa_block, or window_block from and to image order).
  stage    a stage of 3 blocks (unshifted, shifted, unshifted: token orders image -> 4 -> 0 ->
           image in layout windows) on the same map, plain and with fusion "shift"'s temporal
           shift (3 streams of 2 clips); eager, then each block torch.compile'd as the compile
           engines do it, on the plain stage (CPU: backend aot_eager, dynamo's graph and autograd's
           without a C++ compiler, window_block only; CUDA: inductor, the Triton kernels training
           runs, flex's included, every variant).
  model    Denoiser with channels 16/32/64 (head dim 16: 1/2/4 heads) and depths 1/2/3/2/1 on a
           7-frame 64 x 192 clip (level 2: 1 x 3 windows), channels-last kernels as the engines
           run them: fusion "window" under every variant, fusion "shift" in layout windows; and
           fusion "window" with its glue (model.GLUE_UNITS: the stem, merges and expands)
           torch.compile'd as train_step.StepEngine does with glue (CPU: aot_eager; CUDA:
           inductor).
For each: the output, the gradient of a random projection of the output for every parameter (the
bias tables included) and for the input. Pass: output rel L2 < 1e-5 and max abs < 1e-4, every
gradient rel L2 < 1e-4 (check_attention.py's bounds), none missing. Also: reorder_tokens against
torch.roll + window_partition, and set_engine / StepEngine refusing what they cannot run.
On CUDA also bf16 autocast, the compiled stage as training runs it, against the fp32 v1 code: per
output and per bias-table gradient, rel L2(variant) <= 2 rel L2(v1 code under the same autocast)
+ 1e-3 (check_attention.py's rule: the variant may not be less accurate than the v1 code).

flex_attention refuses inputs that require grad on the CPU ("does not support backward on CPU");
its eager path, the dense reference that materialises the scores, differentiates on any device,
and the function score_mod defines is what the CPU run checks: there the refusal (the private
torch.nn.attention.flex_attention._validate_device) is lifted (flex_dense_on_cpu). Its Triton
kernels are checked with --device cuda.
CUDA-only kernels: attention "cudnn" folds the bias into q and k and holds SDPA to cuDNN on CUDA;
on the CPU the fold runs through SDPA's math backend (the fold is checked, not cuDNN; in layout
windows, plain and compiled, the CPU's time), and on
CUDA cuDNN attention takes half precision only, so there its fp32 checks are skipped (said so)
and the bf16 checks run it. Attention "triton" (denoise_train/window_attention.py) runs its own
Triton kernels on CUDA; on the CPU they run under Triton's interpreter (TRITON_INTERPRET=1, set
here before anything imports triton: numpy, slow, so on the CPU the blocks and the compiled
stage check it in layout windows only, and the model check on a 64 x 64 clip), and SKIP is
printed without the triton package.
Exit status 1 when anything fails (the first failure's assertion); 77 without torch.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import sys
import warnings

ARGS = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ARGS.add_argument("--device", default="cpu", help="cpu (default) or cuda")
ARGS.add_argument("--attention", help="comma-separated attention kernels to check (default: all)")
if ARGS.parse_known_args()[0].device == "cpu":   # before triton is imported: its kernels on numpy
    os.environ["TRITON_INTERPRET"] = "1"

from needs import need  # noqa: E402

need("torch")
import torch  # noqa: E402

from check_attention import randomise, rel_l2  # noqa: E402
from denoise_train.model import (ATTENTIONS, GLUE_UNITS, IMAGE_ORDER, LAYOUTS, Config, Denoiser,  # noqa: E402
                                 Stage, reorder_tokens, sdpa_block, window_block, window_partition)
from denoise_train.train_step import LossWeights, StepEngine, raise_recompile_limits  # noqa: E402

HAS_TRITON = importlib.util.find_spec("triton") is not None
B, H, W = 2, 24, 40   # 3 x 5 windows of 8 x 8
VARIANTS: list = []   # (attention, layout), set by main() from --attention


def runs(attention: str, layout: str, dev, what: str, fp32: bool = True) -> bool:
    """Whether this check runs the variant here; prints SKIP with the reason when it does not.
    what: blocks, stage, stage-streams, stage-compiled, model."""
    if attention == "triton":
        if not HAS_TRITON:
            print(f"SKIP {what} triton/{layout}: no triton package")
            return False
        if dev.type == "cpu" and (layout != "windows" or what in ("stage", "stage-streams")):
            return False   # the interpreter's time (module docstring)
    if attention == "cudnn" and dev.type == "cpu" and (layout != "windows" or what == "stage-streams"):
        return False   # the fold is the same in every layout; the CPU's time
    if attention == "cudnn" and dev.type == "cuda" and fp32:
        print(f"SKIP {what} cudnn/{layout} fp32: cuDNN attention takes half precision only (its bf16 check runs it)")
        return False
    return True


@contextlib.contextmanager
def flex_dense_on_cpu(device: torch.device):
    """On the CPU, let flex_attention run its eager (dense) path with inputs that require grad
    (the module docstring says why); its 'called without torch.compile' warning is expected."""
    import torch.nn.attention.flex_attention as fa
    saved = getattr(fa, "_validate_device", None)
    if device.type == "cpu" and saved is not None:
        fa._validate_device = lambda *args: None
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
            yield
    finally:
        if saved is not None:
            fa._validate_device = saved


def compare(name: str, y, g, y0, g0) -> None:
    r, m = rel_l2(y, y0), (y - y0).abs().max().item()
    assert r < 1e-5 and m < 1e-4, f"{name}: output rel L2 {r:.2e}, max abs {m:.2e}"
    missing = [n for n in g0 if g.get(n) is None]
    assert not missing, f"{name}: no gradient for {missing[:3]}"
    worst = max((rel_l2(g[n], g0[n]), n) for n in g0)
    assert worst[0] < 1e-4, f"{name}: gradient of {worst[1]}: rel L2 {worst[0]:.2e}"
    print(f"{name:48s} output rel L2 {r:.1e}, max abs {m:.1e}; gradients worst rel L2 {worst[0]:.1e} ({worst[1]}) ok")


def compare_bf16(name: str, y, g, yv1, gv1, y0, g0) -> None:
    """bf16 variant (y, g) and bf16 v1 code (yv1, gv1) against the fp32 v1 code (y0, g0)."""
    tables = [n for n in g0 if n.endswith("relative_position_bias_table")]
    worst = (0.0, "-")
    for n, a, a1, ref in [("output", y, yv1, y0)] + [(n, g[n], gv1[n], g0[n]) for n in tables]:
        assert a is not None, f"{name} bf16: no gradient for {n}"
        e, e1 = rel_l2(a, ref), rel_l2(a1, ref)
        assert e <= 2 * e1 + 1e-3, f"{name} bf16: {n}: rel L2 {e:.2e} > 2 x v1 code's {e1:.2e} + 1e-3"
        worst = max(worst, (e / max(e1, 1e-12), n))
    print(f"{name + ' bf16':48s} vs fp32: worst ratio to the v1 code's bf16 error {worst[0]:.2f} ({worst[1]}) ok")


def grads(module, x, y, proj) -> dict:
    (y.float() * proj).sum().backward()
    g = {n: p.grad.detach().clone() if p.grad is not None else None for n, p in module.named_parameters()}
    g["input"] = x.grad.detach().clone() if x.grad is not None else None
    module.zero_grad(set_to_none=True)
    x.grad = None
    return g


def check_reorder(dev) -> None:
    x = torch.randn(B, H, W, 5, device=dev)
    for s in (0, 4):
        ref = window_partition(torch.roll(x, (-s, -s), (1, 2)), 8)
        assert torch.equal(reorder_tokens(x, IMAGE_ORDER, s, H, W, 8), ref), f"reorder image -> {s}"
        assert torch.equal(reorder_tokens(ref, s, IMAGE_ORDER, H, W, 8), x), f"reorder {s} -> image"
    w4 = reorder_tokens(x, IMAGE_ORDER, 4, H, W, 8)
    assert torch.equal(reorder_tokens(w4, 4, 0, H, W, 8), window_partition(x, 8)), "reorder 4 -> 0"
    print("reorder_tokens: image <-> windows (shift 0, 4), 4 -> 0 equal roll + window_partition ok")


def check_blocks(gen, dev) -> None:
    cfg = Config(channels=(64, 64, 128), heads=(2, 2, 4))
    stage = Stage(64, 2, 2, cfg)
    randomise(stage, gen)
    stage.to(dev)
    x = torch.randn(B, H, W, 64, generator=gen).to(dev).requires_grad_()
    proj = torch.randn(B, H, W, 64, generator=gen).to(dev)
    for blk in stage.blocks:
        kind = "shifted" if blk.shift else "unshifted"
        mask = blk.attn_mask(H, W, x.device) if blk.shift else None
        y0 = blk(x)
        g0 = grads(blk, x, y0, proj)
        for attention, layout in VARIANTS:
            if not runs(attention, layout, dev, "blocks"):
                continue
            if layout == "image":
                y = sdpa_block(blk, x, mask, 0, attention)
            else:
                y = window_block(blk, x, mask, IMAGE_ORDER, IMAGE_ORDER, (H, W), 0, attention)
            compare(f"block {kind} {attention}/{layout}", y, grads(blk, x, y, proj), y0, g0)


def check_stage(gen, dev, compiled: bool) -> None:
    """compiled: each block through torch.compile(sdpa_block or window_block); on CUDA also bf16."""
    import torch._dynamo as dynamo
    bf16 = compiled and dev.type == "cuda"
    raise_recompile_limits()
    for streams in (0, 3) if not compiled else (0,):   # (compile time; eager covers the streams)
        cfg = Config(channels=(64, 64, 128), heads=(2, 2, 4), fusion="shift" if streams else "window")
        stage = Stage(64, 2, 3, cfg)
        randomise(stage, gen)
        stage.to(dev)
        n = B * (streams or 1)
        x = torch.randn(n, H, W, 64, generator=gen).to(dev).requires_grad_()
        proj = torch.randn(n, H, W, 64, generator=gen).to(dev)
        stage.block_fn = None
        y0 = stage(x, streams)
        g0 = grads(stage, x, y0, proj)
        if bf16:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                yv1 = stage(x, streams)
            gv1 = grads(stage, x, yv1, proj)
        for attention, layout in VARIANTS:
            if compiled and dev.type == "cpu" and layout == "image":
                continue   # compile time; the attention kernels compile in window_block, and
                # tests/weights/check_temporal_shift.py compiles sdpa_block (aot_eager)
            what = "stage-compiled" if compiled else "stage-streams" if streams else "stage"
            fp32 = runs(attention, layout, dev, what)
            if not fp32 and not (bf16 and attention == "cudnn"):
                continue
            unit = window_block if layout == "windows" else sdpa_block
            if compiled:
                dynamo.reset()
                unit = torch.compile(unit, backend="aot_eager" if dev.type == "cpu" else "inductor", dynamic=False)
            stage.block_fn, stage.attention, stage.layout = unit, attention, layout
            what = f"stage{' compiled' if compiled else ''}{f' {streams} streams' if streams else ''}"
            if fp32:
                y = stage(x, streams)
                compare(f"{what} {attention}/{layout}", y, grads(stage, x, y, proj), y0, g0)
            if bf16:
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    y = stage(x, streams)
                compare_bf16(f"{what} {attention}/{layout}", y.float(), grads(stage, x, y, proj),
                             yv1.float(), gv1, y0, g0)
        stage.block_fn, stage.attention, stage.layout = None, "sdpa", "image"


def check_model(gen, dev) -> None:
    depths = dict(enc0=1, enc1=2, mid=3, dec1=2, dec0=1)
    import torch._dynamo as dynamo
    for fusion, width in (("window", 192), ("shift", 192), ("window", 64)):
        torch.manual_seed(3)
        model = Denoiser(Config(channels=(16, 32, 64), head_dim=16, depths=dict(depths), fusion=fusion)).train()
        randomise(model, gen)
        model.to(dev)
        clip = (torch.rand(1, 7, 3, 64, width, generator=gen) * 2 - 1).to(dev).requires_grad_()
        sigma = torch.tensor([31.0], device=dev)
        proj = torch.randn(1, 3, 64, width, generator=gen).to(dev)
        model.set_engine()
        y0 = model(clip, sigma)
        g0 = grads(model, clip, y0, proj)
        # fusion "shift": its streams through the U-Net in layout windows (the stage check runs
        # the temporal shift under every variant); the 64 x 64 clip: the interpreted Triton
        # kernels on the CPU (their time), and the compiled glue
        if fusion == "shift":
            cases = [("sdpa", "windows", False)]
        elif width == 192:
            cases = [(a, lay, False) for a, lay in VARIANTS if not (a == "triton" and dev.type == "cpu")]
        else:
            cases = ([(a, lay, False) for a, lay in VARIANTS if a == "triton" and dev.type == "cpu"]
                     + [("sdpa", "windows", True)])
        for attention, layout, glue in cases:
            if not runs(attention, layout, dev, "model"):
                continue
            fns = None
            if glue:
                dynamo.reset()
                backend = "aot_eager" if dev.type == "cpu" else "inductor"
                fns = {k: torch.compile(f, backend=backend, dynamic=False) for k, f in GLUE_UNITS.items()}
            model.set_engine(sdpa=True, channels_last=True, attention=attention, layout=layout, glue=fns)
            y = model(clip, sigma)
            name = (f"model {fusion} {attention}/{layout}{' glue compiled' if glue else ''}"
                    f"{' 64x64' if width == 64 else ''}")
            compare(name, y, grads(model, clip, y, proj), y0, g0)
        model.set_engine()


def check_refusals() -> None:
    model = Denoiser(Config(depths=dict(enc0=1, enc1=1, mid=1, dec1=1, dec0=1)))
    cases = [
        ("unknown attention", lambda: model.set_engine(sdpa=True, attention="fused")),
        ("unknown layout", lambda: model.set_engine(sdpa=True, layout="nchw")),
        ("v1 code with a layout", lambda: model.set_engine(layout="windows")),
        ("math engine with explicit", lambda: StepEngine(model, "math", LossWeights(), 1e-4, attention="explicit")),
        ("flex without compile", lambda: StepEngine(model, "sdpa", LossWeights(), 1e-4, attention="flex")),
        ("glue without compile", lambda: StepEngine(model, "sdpa", LossWeights(), 1e-4, glue=True)),
        ("autotune without compile", lambda: StepEngine(model, "graph", LossWeights(), 1e-4, autotune=True)),
        ("autotune outside inductor", lambda: StepEngine(model, "compile", LossWeights(), 1e-4, autotune=True,
                                                         compile_backend="aot_eager")),
        ("unknown glue unit", lambda: model.set_engine(sdpa=True, glue={"head": lambda *a: a})),
        ("v1 code with glue", lambda: model.set_engine(glue={"merge": lambda m, x: m(x)})),
    ]
    if HAS_TRITON:   # a CPU model outside Triton's interpreter
        import denoise_train.window_attention as wa
        cases.append(("triton on the CPU", lambda: StepEngine(model, "sdpa", LossWeights(), 1e-4, attention="triton")))
    for what, fn in cases:
        saved = None
        if what == "triton on the CPU":
            saved, wa.INTERPRET = wa.INTERPRET, False
        try:
            fn()
        except ValueError as e:
            print(f"refused: {what}: {e}")
            continue
        finally:
            if saved is not None:
                wa.INTERPRET = saved
        raise AssertionError(f"not refused: {what}")
    model.set_engine()


def main():
    a = ARGS.parse_args()
    dev = torch.device(a.device)
    chosen = a.attention.split(",") if a.attention else list(ATTENTIONS)
    bad = [c for c in chosen if c not in ATTENTIONS]
    if bad:
        sys.exit(f"check_block_variants.py: unknown attention {bad}; known: {', '.join(ATTENTIONS)}")
    VARIANTS[:] = [(att, lay) for lay in LAYOUTS for att in ATTENTIONS if att in chosen]
    if dev.type == "cpu":
        print("on the CPU: cudnn's fold runs through SDPA's math backend (cuDNN itself is CUDA-only); triton's kernels "
              + ("under Triton's interpreter" if HAS_TRITON else "SKIP (no triton package)"))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if dev.type == "cuda":
        torch.backends.cuda.enable_cudnn_sdp(False)   # train_step.configure_cuda(): the bias needs its gradient
    gen = torch.Generator().manual_seed(21)
    torch.manual_seed(4)
    check_reorder(dev)
    check_refusals()
    with flex_dense_on_cpu(dev):
        check_blocks(gen, dev)
        check_stage(gen, dev, compiled=False)
        check_stage(gen, dev, compiled=True)
        check_model(gen, dev)
    print("block variants: PASS")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"block variants: FAIL: {e}")
        sys.exit(1)
