"""One training step (forward, backward, gradient clipping, AdamW) and the kernels it runs on.

The network function is model.Denoiser's whatever the engine; engines only change kernels:
  math           model v1's code: explicit (q k^T + bias + mask) softmax v attention.
  sdpa           attention through F.scaled_dot_product_attention (model.WindowAttention.forward_sdpa).
  compile        sdpa, with each Swin block torch.compile'd (regional compilation: one compiled
                 function, model.sdpa_block, reused by every block of the same shape).
  graph          sdpa, the whole step (forward, backward, clipping, AdamW) captured once as a CUDA
                 graph and replayed: no per-kernel launch cost, no host syncs.
  compile-graph  compile + graph.
Every engine falls back cleanly: a failed compile or capture is logged with its reason and the
step continues on the next simpler engine (compile-graph -> compile -> sdpa, graph -> sdpa).

Every engine but math takes these kernel options of the same function (model.py's module
docstring, "Training variants"; defaults: what the engines ran before them):
  attention  sdpa (F.scaled_dot_product_attention), explicit (q k^T + bias + mask, softmax, @ v
             written out for torch.compile to fuse), flex (flex_attention; compile engines only:
             outside torch.compile it runs unfused, so a fallback to sdpa takes attention sdpa
             with it, logged as part of the fallback), cudnn (SDPA held to cuDNN attention, the
             bias folded into q and k) or triton (denoise_train/window_attention.py's kernels;
             CUDA only, or the CPU under Triton's interpreter).
  layout     image (NHWC tokens, each block rolls and partitions its windows) or windows (the
             tokens stay in window order from block to block: model.window_block).
and the compile engines two more:
  glue       the U-Net's parts between the Swin blocks compiled too (model.GLUE_UNITS: the fusion
             input and conv of fusion "window" without alignment, each patch merging, each
             expand + concatenation + skip linear), so that their layout copies fuse with their
             neighbours; the heads and the rest stay eager.
  autotune   Inductor's GEMM autotuning (AUTOTUNE_OPTIONS: Triton GEMM templates benchmarked
             against cuBLAS per shape, and where a template wins, its epilogue takes the bias,
             GELU and the GELU's backward that follow); longer compiles (compile_seconds).

Every engine but math also runs the convolutions and the head on NHWC kernels (channels_last,
model.Denoiser.set_engine); configure_cuda() fixes the process-wide CUDA settings they rely on.

Data parallel (denoise_train/data_parallel.py): with a grad_average, each rank's gradients are
replaced by their mean over the ranks after the backward of every micro-batch and before clipping
and AdamW, inside the captured step for the graph engines (an NCCL all-reduce is captured with
it); an average that cannot be captured (gloo: ranks sharing a GPU) turns a graph engine into its
fallback at construction, logged like any fallback.

Mixed precision: bf16 autocast on CUDA (weights, AdamW and the loss in fp32); autocast's weight
cache is off (a captured graph must not depend on it). The step never reads a value back to the
host: it returns the loss as a device tensor.

Loss (loss_fn, weights LossWeights from the recipe): mean over clips of pix_w * L1(out, clean),
plus the terms below, all in [-1,1] units; pix_w (B,) is the per-clip weight of the per-pixel term
(batch_feed.training_batch: 1, or 0 for clips whose sigma map is above their real noise under
recipes v2b and v2f, which may smooth more than the clean target).
  lowpass  L1 of the mean error over each 8x8 block: a shifted mean, which the per-pixel L1
           barely sees.
  grid     L1 of the mean error at each of the 16x16 positions (y mod 16, x mod 16) of a clip, less
           the clip's mean error: a pattern fixed to the network's windows (8x8 windows on the 2x2
           space-to-depth grid, shifted by 4), which the 8x8 block means cancel.
  chroma   L1 of the per-pixel chroma of the error, err - mean over R', G', B' of err: false
           colour, e.g. on neutral detail.
The lowpass, grid and chroma terms apply to every clip (pix_w does not weigh them): a sigma above
the real noise may smooth more, but shifts no mean, draws no grid and adds no colour.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .model import ATTENTIONS, GLUE_UNITS, LAYOUTS, Denoiser, sdpa_block, window_block
from .sdpa_backends import sdpa_backends

ENGINES = ("math", "sdpa", "compile", "graph", "compile-graph")
FALLBACK = {"compile-graph": "compile", "compile": "sdpa", "graph": "sdpa", "sdpa": "math"}
COMPILED = ("compile", "compile-graph")
# torch.compile options of autotune (Inductor's config names): GEMMs only (no pointwise or
# coordinate-descent tuning, which add compile time); epilogue fusion is Inductor's default
AUTOTUNE_OPTIONS = {"max_autotune_gemm": True, "epilogue_fusion": True}


def configure_cuda() -> None:
    """Process-wide CUDA settings of the training engines (no effect without CUDA):
      - SDPA never runs on cuDNN attention, which PyTorch prefers on sm90 with a recent cuDNN:
        its backward (_scaled_dot_product_cudnn_attention_backward) returns the gradients of q, k
        and v only, none for the additive mask that carries the relative position bias (autograd
        refuses such a mask that requires grad), so the bias tables could not learn. Flash
        attention takes no mask, so SDPA runs the memory-efficient kernel (whose backward returns
        the mask's gradient), or its math backend where that cannot run;
        sdpa_backends.sdpa_backends() reports which one ran. Attention "cudnn" (the bias folded
        into q and k, no mask) turns cuDNN on for its own SDPA call only.
      - cudnn.benchmark: cuDNN times its convolution algorithms on the first call of each shape
        and keeps the fastest (training shapes are fixed).
    """
    if torch.cuda.is_available():
        torch.backends.cuda.enable_cudnn_sdp(False)
        torch.backends.cudnn.benchmark = True


def raise_recompile_limits(n: int = 64) -> None:
    """Let dynamo keep at least n compiled versions of a function (the names of the limit differ
    between PyTorch versions): the compiled Swin block is one function, compiled once per block
    shape, shift and (layout "windows") pair of token orders, and once more per autocast state."""
    import torch._dynamo as dynamo
    for k in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit", "accumulated_recompile_limit"):
        if hasattr(dynamo.config, k):
            setattr(dynamo.config, k, max(getattr(dynamo.config, k), n))


@dataclass(frozen=True)
class LossWeights:
    """Weights of the loss terms besides the per-pixel L1 (the module's docstring); 0: off."""
    lowpass: float = 0.0
    grid: float = 0.0
    chroma: float = 0.0

    @classmethod
    def of(cls, recipe: dict) -> "LossWeights":
        """From a recipe of candidates.RECIPES (keys lowpass_weight, grid_weight, chroma_weight)."""
        return cls(recipe["lowpass_weight"], recipe["grid_weight"], recipe["chroma_weight"])


GRID = 16   # period of the grid term, px: the window (8) on the space-to-depth grid (2)


def loss_fn(out: torch.Tensor, target: torch.Tensor, w: LossWeights, pix_w: torch.Tensor) -> torch.Tensor:
    """out, target (B, 3, P, P) in [-1,1], pix_w (B,) per-clip weights of the per-pixel L1 -> scalar.
    The grid term reads the top-left (P // 16) * 16 square."""
    err = out.float() - target
    loss = (err.abs().mean(dim=(1, 2, 3)) * pix_w).mean()
    if w.lowpass:
        loss = loss + w.lowpass * F.avg_pool2d(err, 8).abs().mean()
    if w.grid:
        B, C, H, W = err.shape
        e = err[:, :, :H // GRID * GRID, :W // GRID * GRID]
        phase = e.reshape(B, C, H // GRID, GRID, W // GRID, GRID).mean(dim=(2, 4))   # (B, C, 16, 16)
        loss = loss + w.grid * (phase - phase.mean(dim=(2, 3), keepdim=True)).abs().mean()
    if w.chroma:
        loss = loss + w.chroma * (err - err.mean(dim=1, keepdim=True)).abs().mean()
    return loss


class Schedule:
    """Learning rate as a function of progress p in [0, 1] of the planned run, plus a linear
    warm-up over the first `warmup` steps of a run that starts without a matching optimiser state.

      cosine  lr_min + (lr_max - lr_min) * (1 + cos(pi p)) / 2
      wsd     warm-up, stable, decay: lr_max until p = 1 - decay, then the cosine above over the
              last `decay` share (so a plan can grow while the run is still in its stable part).
    """

    def __init__(self, kind: str, lr_max: float, lr_min: float, decay: float = 0.2, warmup: int = 0):
        if kind not in ("cosine", "wsd"):
            raise ValueError(f"schedule must be cosine or wsd, got {kind!r}")
        self.kind, self.lr_max, self.lr_min, self.decay, self.warmup = kind, lr_max, lr_min, decay, warmup

    def __call__(self, p: float, step_in_run: int) -> float:
        p = min(max(p, 0.0), 1.0)
        if self.kind == "wsd":
            q = 0.0 if p < 1 - self.decay else (p - (1 - self.decay)) / self.decay
        else:
            q = p
        lr = self.lr_min + (self.lr_max - self.lr_min) * 0.5 * (1 + math.cos(math.pi * q))
        if step_in_run < self.warmup:
            lr *= (step_in_run + 1) / self.warmup
        return lr

    def as_dict(self) -> dict:
        return {"kind": self.kind, "lr_max": self.lr_max, "lr_min": self.lr_min, "decay": self.decay,
                "warmup": self.warmup}


def make_optimizer(model: Denoiser, lr: float, capturable: bool) -> torch.optim.Optimizer:
    """AdamW (betas 0.9/0.99, weight decay 0.01, model v1's) over the trained parameters (frozen ones,
    such as sigma_reparam's identity LayerNorms, are left out); fused on CUDA; with capturable the
    learning rate is a device tensor so that a captured step reads the current value."""
    cuda = next(model.parameters()).is_cuda
    kw = {"lr": torch.tensor(lr, device="cuda") if capturable else lr, "weight_decay": 0.01, "betas": (0.9, 0.99)}
    if cuda:
        kw["fused"] = True
    if capturable:
        kw["capturable"] = True
    return torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], **kw)


class StepEngine:
    """step(noisy (B,T,3,P,P) in [0,1], sigma map (B,), clean centre (B,3,P,P) in [0,1], per-clip
    weight of the per-pixel loss (B,), lr) -> loss (device scalar): this process's batch and
    loss. `accum` splits the batch into that many micro-batches. grad_average: None, or a
    data_parallel.GradAverage run on the trained parameters before clipping (data parallel).
    attention, layout, glue, autotune: the kernel options of the module docstring (ValueError:
    unknown, or not the defaults with the math engine, flex, glue or autotune without a compile
    engine, autotune with another backend than inductor or with compile_mode, triton on a CPU
    model outside Triton's interpreter)."""

    def __init__(self, model: Denoiser, engine: str, loss_weights: LossWeights, lr: float, accum: int = 1,
                 compile_backend: str = "inductor", compile_mode: str | None = None, log=print,
                 channels_last: bool = True, grad_average=None, attention: str = "sdpa", layout: str = "image",
                 glue: bool = False, autotune: bool = False):
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
        if attention not in ATTENTIONS or layout not in LAYOUTS:
            raise ValueError(f"attention must be one of {ATTENTIONS} and layout one of {LAYOUTS}, "
                             f"got {attention!r}, {layout!r}")
        if engine == "math" and (attention, layout) != ("sdpa", "image"):
            raise ValueError("the math engine runs the v1 code: attention and layout options need another engine")
        if attention == "flex" and engine not in COMPILED:
            raise ValueError(f"attention flex needs a compile engine ({', '.join(COMPILED)}), got {engine!r}")
        for flag, on in (("glue", glue), ("autotune", autotune)):
            if on and engine not in COMPILED:
                raise ValueError(f"{flag} needs a compile engine ({', '.join(COMPILED)}), got {engine!r}")
        if autotune and (compile_backend != "inductor" or compile_mode):
            raise ValueError(f"autotune is Inductor's: needs compile_backend inductor and no compile_mode, got "
                             f"{compile_backend!r}, {compile_mode!r}")
        if attention == "triton" and not next(model.parameters()).is_cuda:
            from .window_attention import INTERPRET
            if not INTERPRET:
                raise ValueError("attention triton runs its Triton kernels on CUDA (a CPU model only under Triton's "
                                 "interpreter, TRITON_INTERPRET=1)")
        self.attention, self.layout, self.glue, self.autotune = attention, layout, glue, autotune
        self.model, self.loss_weights, self.accum, self.log = model, loss_weights, accum, log
        self.grad_average = grad_average
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.cuda = next(model.parameters()).is_cuda
        self.channels_last = channels_last   # NHWC convolutions and head (not with the math engine)
        if self.cuda:
            configure_cuda()
        self.compile_backend, self.compile_mode = compile_backend, compile_mode
        self.requested = engine
        self.fallbacks: list[str] = []
        self.graph = None
        self.compiled = None
        self.glue_fns = None
        self.compile_seconds = 0.0
        if engine in ("graph", "compile-graph") and not self.cuda:
            engine = self._fall(engine, "CUDA graphs need a CUDA device")
        if engine in ("graph", "compile-graph") and grad_average is not None and not grad_average.capturable:
            engine = self._fall(engine, "the gradient all-reduce (gloo: ranks sharing a GPU) cannot be captured")
        if engine in ("graph", "compile-graph"):
            try:
                self.opt = make_optimizer(model, lr, capturable=True)
            except Exception as e:  # noqa: BLE001 (an optimiser that cannot be captured: no graph)
                engine = self._fall(engine, f"capturable AdamW: {type(e).__name__}: {e}")
        if engine not in ("graph", "compile-graph"):
            self.opt = make_optimizer(model, lr, capturable=False)
        self.engine = engine
        self.set_kernels()

    # -- set-up and fallbacks -------------------------------------------------------------------
    def _fall(self, engine: str, why: str) -> str:
        nxt = FALLBACK[engine]
        msg = f"engine {engine} -> {nxt}: {why}"
        self.fallbacks.append(msg)
        self.log({"event": "engine_fallback", "from": engine, "to": nxt, "reason": why[-1500:]})
        return nxt

    def set_kernels(self):
        """Point the model's Swin stages at this engine's block function (also after validation,
        which runs the plain SDPA kernels)."""
        if self.engine == "math":
            self.model.set_engine(sdpa=False)
        elif self.engine in COMPILED:
            if self.compiled is None:   # one compiled function: its cache lives as long as it does
                raise_recompile_limits()
                unit = window_block if self.layout == "windows" else sdpa_block
                self.compiled = self._compile(unit)
                if self.glue:
                    self.glue_fns = {k: self._compile(f) for k, f in GLUE_UNITS.items()}
            self.model.set_engine(sdpa=True, block_fn=self.compiled, channels_last=self.channels_last,
                                  attention=self.attention, layout=self.layout, glue=self.glue_fns)
        else:
            self.model.set_engine(sdpa=True, channels_last=self.channels_last, attention=self.attention,
                                  layout=self.layout)

    def _compile(self, fn):
        opts = {"options": dict(AUTOTUNE_OPTIONS)} if self.autotune else {"mode": self.compile_mode}
        return torch.compile(fn, backend=self.compile_backend, dynamic=False, **opts)

    def _switch(self, why: str):
        """Fall back one engine; rebuild the optimiser when capturability changes (its state moves)."""
        old = self.engine
        if self.attention == "flex" and FALLBACK[old] not in COMPILED:
            self.attention = "sdpa"
            why += "; attention flex -> sdpa (flex attention runs unfused outside torch.compile)"
        self.engine = self._fall(old, why)
        self.graph = None
        if old in ("graph", "compile-graph") and self.engine not in ("graph", "compile-graph"):
            sd = self.opt.state_dict()
            lr = float(self.opt.param_groups[0]["lr"])
            self.opt = make_optimizer(self.model, lr, capturable=False)
            for g in sd["param_groups"]:
                g["lr"] = lr
            self.opt.load_state_dict(sd)
        self.set_kernels()

    # -- the step ---------------------------------------------------------------------------------
    def _body(self, noisy, smap, target, pix_w):
        n = noisy.shape[0] // self.accum
        total = None
        for i in range(self.accum):
            sl = slice(i * n, (i + 1) * n)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.cuda, cache_enabled=False):
                out = self.model(noisy[sl] * 2 - 1, smap[sl])
            loss = loss_fn(out, target[sl] * 2 - 1, self.loss_weights, pix_w[sl]) / self.accum
            loss.backward()
            total = loss.detach() if total is None else total + loss.detach()
        if self.grad_average is not None:
            self.grad_average(self.params)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0, foreach=self.cuda)
        self.opt.step()
        return total

    def _set_lr(self, lr: float):
        for g in self.opt.param_groups:
            if isinstance(g["lr"], torch.Tensor):
                g["lr"].fill_(lr)
            else:
                g["lr"] = lr

    def _eager(self, *batch):
        self.opt.zero_grad(set_to_none=True)
        return self._body(*batch)

    def _capture(self, *batch):
        """Warm up on a side stream (compiles, cuBLAS/cuDNN set-up), then capture one step."""
        self.static = [t.clone() for t in batch]
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self.opt.zero_grad(set_to_none=True)
                self._body(*self.static)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        self.opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(g):
            self.static_loss = self._body(*self.static)
        self.graph = g

    def step(self, noisy, smap, target, pix_w, lr: float) -> torch.Tensor:
        self._set_lr(lr)
        batch = (noisy, smap, target, pix_w)
        while True:
            try:
                if self.engine in ("graph", "compile-graph"):
                    if self.graph is None:
                        t0 = time.time()
                        self._capture(*batch)
                        self.compile_seconds += time.time() - t0
                    for buf, x in zip(self.static, batch):
                        buf.copy_(x)
                    self.graph.replay()
                    return self.static_loss.clone()
                if self.engine == "compile" and not self.compile_seconds:
                    t0 = time.time()
                    loss = self._eager(*batch)
                    if self.cuda:
                        torch.cuda.synchronize()
                    self.compile_seconds = time.time() - t0
                    return loss
                return self._eager(*batch)
            except torch.cuda.OutOfMemoryError:
                raise
            except Exception as e:  # noqa: BLE001 (a kernel path that cannot run must not end the run)
                if self.engine == "math":
                    raise
                self.opt.zero_grad(set_to_none=True)
                if self.cuda:
                    torch.cuda.synchronize()
                self._switch(f"{type(e).__name__}: {e}")

    def attention_backends(self, noisy, smap, target, pix_w) -> dict:
        """Which SDPA backend this engine's kernels run, forward and backward: one forward and
        backward of the step's loss (torch.autograd.grad: no gradient is stored, no optimiser
        step) under the profiler (sdpa_backends.sdpa_backends). A captured graph replays the
        kernels of the eager sdpa path, so the graph engines report that path."""
        n = noisy.shape[0] // self.accum
        params = [p for p in self.model.parameters() if p.requires_grad]

        def fwd_bwd():
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.cuda, cache_enabled=False):
                out = self.model(noisy[:n] * 2 - 1, smap[:n])
            torch.autograd.grad(loss_fn(out, target[:n] * 2 - 1, self.loss_weights, pix_w[:n]), params)
        return sdpa_backends(fwd_bwd)

    def describe(self) -> dict:
        return {"engine": self.engine, "requested": self.requested, "accum": self.accum,
                "grad_average": self.grad_average is not None,
                "channels_last": self.channels_last and self.engine != "math",
                "attention": self.attention if self.engine != "math" else "v1 code",
                "layout": self.layout if self.engine != "math" else "image",
                "glue": self.glue and self.engine in COMPILED, "autotune": self.autotune and self.engine in COMPILED,
                "compile_backend": self.compile_backend if "compile" in self.engine else None,
                "fallbacks": self.fallbacks, "setup_seconds": round(self.compile_seconds, 1)}
