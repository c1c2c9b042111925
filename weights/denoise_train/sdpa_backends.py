"""Which scaled-dot-product-attention backend PyTorch ran (efficient, flash, cudnn, math; or
triton: denoise_train/window_attention.py's kernels), forward and backward: the training engines
report it (train_step.StepEngine.attention_backends, bench_train.py) and
tests/weights/check_attention.py checks it.
"""
from __future__ import annotations

BACKEND_OPS = {   # aten op name prefix -> SDPA backend
    "_scaled_dot_product_efficient_attention": "efficient",
    "_scaled_dot_product_flash_attention": "flash",
    "_scaled_dot_product_cudnn_attention": "cudnn",
    "_scaled_dot_product_attention_math": "math",
    "_scaled_dot_product_fused_attention_overrideable": "overrideable",
    "denoise::window_attention": "triton",   # denoise_train/window_attention.py's custom ops
}


def sdpa_backends(fn) -> dict:
    """Run fn() under the profiler (CPU events: the aten ops as dispatched, backward included)
    -> {"forward": {backend: calls}, "backward": {backend: calls}}. The math backend has no
    backward op of its own (autograd differentiates its decomposition)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    out = {"forward": {}, "backward": {}}
    for e in prof.events():
        name = e.name.removeprefix("aten::")
        for op, backend in BACKEND_OPS.items():
            if name.startswith(op):
                d = out["backward" if name.endswith("_backward") else "forward"]
                d[backend] = d.get(backend, 0) + 1
                break
    return out


def describe_backends(b: dict) -> str:
    """{"forward": {...}, "backward": {...}} -> 'forward efficient x11, backward efficient x11'."""
    part = lambda d: " + ".join(f"{k} x{v}" for k, v in sorted(d.items())) or "none"  # noqa: E731
    return f"forward {part(b['forward'])}, backward {part(b['backward'])}"
