"""Windowed multi-head attention with an additive bias as one Triton kernel forward and one backward
(attention "triton" of denoise_train/model.py; the Swin blocks' 8x8 windows: N = 64 tokens, head
dim 32).

  out = window_attention(qkv, m, heads, scale)

qkv (nWB, N, 3C): the qkv linear's output, token n of window w at [w, n], [q | k | v] each split
into heads as (head, D), D = C / heads (model.WindowAttention's layout); m (nWm, heads, N, N)
float32, the additive bias of window w: m[w mod nWm] (nWm = 1: one bias for every window; the
relative position bias plus, in shifted blocks, Swin's region mask, -inf across regions, nWm = the
windows per image); out (nWB, N, C), heads side by side as the proj linear reads them:

  out[w, :, h*D:(h+1)*D] = softmax(scale * q_h k_h^T + m[w mod nWm, h]) v_h

Why a kernel of its own: the bias is learned, so its gradient (the sum over all windows of the
scores' gradient) is needed. PyTorch's fused SDPA kernels either take no bias (flash), return no
bias gradient (cuDNN: _scaled_dot_product_cudnn_attention is not differentiable with respect to
attn_bias), or write the bias gradient at the full broadcast size (memory-efficient: a
(nWB, heads, N, N) tensor that autograd then sums, 0.4 GB per block at the finest level of a
128-clip batch); flex_attention accumulates it with atomic adds. Here one program takes WPP
windows of one head and one bias (windows b * nWm + wm for WPP consecutive b): a window's scores
(64 x 64) stay in registers, the softmax needs no online rescaling, q, k and v are read straight
out of the packed qkv and the gradients written straight into a packed dqkv (no unbind / stack
copies), and the bias gradient of the program's windows is summed in registers and written once
per program, then summed over the programs (deterministic, no atomics).

Numerics (as PyTorch's fused kernels): scores and softmax in float32 (fp32 accumulation of the
products), the probabilities cast to the input dtype for the product with v; the backward
recomputes the probabilities from the saved log-sum-exp and uses delta = rowsum(dO * O)
(Dao et al., "FlashAttention", NeurIPS 2022, algorithm 4, with the whole row in one block).
float32 inputs use IEEE float32 products (no TF32): the CPU check runs them.

Devices: CUDA; on the CPU only under Triton's interpreter (TRITON_INTERPRET=1 set before this
module is imported: tests/weights/check_block_variants.py), else RuntimeError. The kernels are
wrapped as custom ops (denoise::window_attention, denoise::window_attention_backward) so that
torch.compile treats them as opaque calls and CUDA graphs capture them.
"""
from __future__ import annotations

import os

import torch

WPP_FWD = 4     # windows per program, forward
WPP_BWD = 8     # windows per program, backward (the bias gradient partials: one (heads, N, N) per program)
INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

try:
    import triton
    import triton.language as tl
except ImportError:   # the op refuses to run (window_attention's check)
    triton = None

if triton is not None:
    @triton.jit
    def _window_attention_fwd_kernel(QKV, M, O, LSE, scale, n_b, n_wm, H: tl.constexpr, N: tl.constexpr,
                                     D: tl.constexpr, WPP: tl.constexpr, PREC: tl.constexpr):
        pid = tl.program_id(0)
        hh = tl.program_id(1)
        wm = pid % n_wm
        b0 = (pid // n_wm) * WPP
        C = H * D
        rows = tl.arange(0, N)
        cols = tl.arange(0, D)
        tok = rows[:, None] * (3 * C) + hh * D + cols[None, :]                 # (N, D) in a window of qkv
        m = tl.load(M + (wm * H + hh) * N * N + rows[:, None] * N + rows[None, :])
        for i in range(WPP):
            b = b0 + i
            ok = (tl.zeros((N, D), dtype=tl.int32) + b) < n_b          # block masks: a window past the end
            w = b * n_wm + wm
            base = QKV + w.to(tl.int64) * (N * 3 * C)
            q = tl.load(base + tok, mask=ok, other=0.0)
            k = tl.load(base + C + tok, mask=ok, other=0.0)
            v = tl.load(base + 2 * C + tok, mask=ok, other=0.0)
            s = tl.dot(q, tl.trans(k), input_precision=PREC) * scale + m
            mx = tl.max(s, 1)
            p = tl.exp(s - mx[:, None])
            den = tl.sum(p, 1)
            o = tl.dot((p / den[:, None]).to(v.dtype), v, input_precision=PREC)
            tl.store(O + w.to(tl.int64) * (N * C) + rows[:, None] * C + hh * D + cols[None, :],
                     o.to(O.dtype.element_ty), mask=ok)
            tl.store(LSE + (w.to(tl.int64) * H + hh) * N + rows, mx + tl.log(den), mask=(rows * 0 + b) < n_b)

    @triton.jit
    def _window_attention_bwd_kernel(QKV, M, O, DO, LSE, DQKV, DMP, scale, n_b, n_wm, H: tl.constexpr,
                                     N: tl.constexpr, D: tl.constexpr, WPP: tl.constexpr, PREC: tl.constexpr):
        pid = tl.program_id(0)
        hh = tl.program_id(1)
        wm = pid % n_wm
        b0 = (pid // n_wm) * WPP
        C = H * D
        rows = tl.arange(0, N)
        cols = tl.arange(0, D)
        tok = rows[:, None] * (3 * C) + hh * D + cols[None, :]
        otok = rows[:, None] * C + hh * D + cols[None, :]
        nn = rows[:, None] * N + rows[None, :]
        m = tl.load(M + (wm * H + hh) * N * N + nn)
        dm = tl.zeros((N, N), dtype=tl.float32)
        for i in range(WPP):
            b = b0 + i
            ok = (tl.zeros((N, D), dtype=tl.int32) + b) < n_b          # block masks: a window past the end
            w = (b * n_wm + wm).to(tl.int64)
            base = QKV + w * (N * 3 * C)
            q = tl.load(base + tok, mask=ok, other=0.0)
            k = tl.load(base + C + tok, mask=ok, other=0.0)
            v = tl.load(base + 2 * C + tok, mask=ok, other=0.0)
            o = tl.load(O + w * (N * C) + otok, mask=ok, other=0.0)
            do = tl.load(DO + w * (N * C) + otok, mask=ok, other=0.0)
            lse = tl.load(LSE + (w * H + hh) * N + rows, mask=(rows * 0 + b) < n_b, other=0.0)
            s = tl.dot(q, tl.trans(k), input_precision=PREC) * scale + m
            p = tl.exp(s - lse[:, None])
            p = tl.where((tl.zeros((N, N), dtype=tl.int32) + b) < n_b, p, 0.0)   # a window past the end adds nothing
            dv = tl.dot(tl.trans(p).to(do.dtype), do, input_precision=PREC)
            dp = tl.dot(do, tl.trans(v), input_precision=PREC)
            delta = tl.sum(do.to(tl.float32) * o.to(tl.float32), 1)
            ds = p * (dp - delta[:, None])
            dm += ds
            dq = tl.dot(ds.to(k.dtype), k, input_precision=PREC) * scale
            dk = tl.dot(tl.trans(ds).to(q.dtype), q, input_precision=PREC) * scale
            dbase = DQKV + w * (N * 3 * C)
            ty = DQKV.dtype.element_ty
            tl.store(dbase + tok, dq.to(ty), mask=ok)
            tl.store(dbase + C + tok, dk.to(ty), mask=ok)
            tl.store(dbase + 2 * C + tok, dv.to(ty), mask=ok)
        tl.store(DMP + (pid * H + hh) * N * N + nn, dm)


def _check(qkv: torch.Tensor, m: torch.Tensor, heads: int) -> tuple:
    """-> (nWB, N, C, nWm); RuntimeError where the kernels cannot run, ValueError for bad shapes."""
    if triton is None:
        raise RuntimeError("attention 'triton' needs the triton package")
    if qkv.device.type != "cuda" and not INTERPRET:
        raise RuntimeError(f"attention 'triton' runs its Triton kernels on CUDA (on the CPU only under Triton's "
                           f"interpreter, TRITON_INTERPRET=1), got a {qkv.device.type} tensor")
    nWB, N, C3 = qkv.shape
    C = C3 // 3
    if C3 % 3 or C % heads or m.dim() != 4 or m.shape[1:] != (heads, N, N) or nWB % m.shape[0]:
        raise ValueError(f"window_attention: qkv {tuple(qkv.shape)} and bias {tuple(m.shape)} do not fit "
                         f"(nWB, N, 3C) and (nWm, {heads}, N, N) with nWm dividing nWB")
    if N & (N - 1) or N < 16 or (C // heads) % 16:
        raise ValueError(f"window_attention: N = {N} tokens must be a power of two >= 16 and the head dim "
                         f"{C // heads} a multiple of 16 (Triton's dot tiles)")
    return nWB, N, C, m.shape[0]


def _prec(t: torch.Tensor) -> str:
    return "ieee" if t.dtype == torch.float32 else "tf32"


@torch.library.custom_op("denoise::window_attention", mutates_args=())
def _window_attention_fwd(qkv: torch.Tensor, m: torch.Tensor, heads: int,
                          scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    nWB, N, C, nWm = _check(qkv, m, heads)
    qkv, m = qkv.contiguous(), m.float().contiguous()
    out = torch.empty((nWB, N, C), device=qkv.device, dtype=qkv.dtype)
    lse = torch.empty((nWB, heads, N), device=qkv.device, dtype=torch.float32)
    n_b = nWB // nWm
    grid = (nWm * triton.cdiv(n_b, WPP_FWD), heads)
    _window_attention_fwd_kernel[grid](qkv, m, out, lse, scale, n_b, nWm, H=heads, N=N, D=C // heads,
                                       WPP=WPP_FWD, PREC=_prec(qkv), num_warps=4)
    return out, lse


@_window_attention_fwd.register_fake
def _(qkv, m, heads, scale):
    nWB, N, C3 = qkv.shape
    return qkv.new_empty((nWB, N, C3 // 3)), qkv.new_empty((nWB, heads, N), dtype=torch.float32)


@torch.library.custom_op("denoise::window_attention_backward", mutates_args=())
def _window_attention_bwd(dout: torch.Tensor, qkv: torch.Tensor, m: torch.Tensor, out: torch.Tensor,
                          lse: torch.Tensor, heads: int, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    nWB, N, C, nWm = _check(qkv, m, heads)
    qkv, m, out, dout = qkv.contiguous(), m.float().contiguous(), out.contiguous(), dout.contiguous().to(qkv.dtype)
    n_b = nWB // nWm
    n_groups = triton.cdiv(n_b, WPP_BWD)
    dqkv = torch.empty_like(qkv)
    partial = torch.empty((n_groups * nWm, heads, N, N), device=qkv.device, dtype=torch.float32)
    _window_attention_bwd_kernel[(n_groups * nWm, heads)](qkv, m, out, dout, lse, dqkv, partial, scale, n_b, nWm,
                                                          H=heads, N=N, D=C // heads, WPP=WPP_BWD,
                                                          PREC=_prec(qkv), num_warps=8)
    # program pid = group * nWm + wm holds the bias gradient of its windows
    return dqkv, partial.view(n_groups, nWm, heads, N, N).sum(0)


@_window_attention_bwd.register_fake
def _(dout, qkv, m, out, lse, heads, scale):
    return torch.empty_like(qkv), m.new_empty(m.shape, dtype=torch.float32)


def _setup(ctx, inputs, output):
    qkv, m, heads, scale = inputs
    out, lse = output
    ctx.save_for_backward(qkv, m, out, lse)
    ctx.heads, ctx.scale, ctx.m_dtype = heads, scale, m.dtype


def _backward(ctx, dout, _dlse):
    qkv, m, out, lse = ctx.saved_tensors
    dqkv, dm = _window_attention_bwd(dout, qkv, m, out, lse, ctx.heads, ctx.scale)
    return dqkv, dm.to(ctx.m_dtype), None, None


_window_attention_fwd.register_autograd(_backward, setup_context=_setup)


def window_attention(qkv: torch.Tensor, m: torch.Tensor, heads: int, scale: float) -> torch.Tensor:
    """qkv (nWB, N, 3C), m (nWm, heads, N, N) -> (nWB, N, C) (the module docstring); differentiable
    in qkv and m."""
    return _window_attention_fwd(qkv, m, heads, scale)[0]
