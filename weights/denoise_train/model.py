"""The denoise network: a temporal Swin U-Net with a 3x3x3 stencil head. Config's defaults are model
v1 (the widths and depths below); the v2 options (further below) and other depths make a model v2.
The shipped weights, weights/denoise-v2.safetensors, are a model v2 (its __metadata__ "config":
deeper enc1, mid and dec1 stages, the sigma gate and alignment).

This module is the source of truth for the network; the CPU engine (kernels/cpu/) and the CUDA
engine (kernels/cuda/) reproduce it, and the notes below fix every detail an engine must match.

Domain and shapes
  - Frames are RGB, v in [0,1] (non-linear code value / max), the network value is x = 2v - 1.
  - A clip is (B, T, 3, H, W) float, T = 7 (frames t-3..t+3); the output is the centre frame
    (B, 3, H, W) in [-1,1]. H and W are reflect-padded to a multiple of 64 and cropped after.
  - sigma is in 8-bit code values; the network sees a constant map channel sigma/255.
  - Space-to-depth 2x2 (pixel_unshuffle): channel index c*4 + dy*2 + dx. Patch merging and the
    expand use the same convention (merge: channel c*4 + dy*2 + dx of the 4C vector; expand:
    linear C -> 4C', then pixel_shuffle; C' = C/2 in models v1/v2).
  - Inside the U-Net tensors are NHWC (B, H, W, C).

Network (per output time t, features F_s for s = t-1, t, t+1)
  F_s = UNet(concat(s2d(x_{s-2}), ..., s2d(x_{s+2}), sigma/255)):
    fusion conv 3x3 (61 -> 32, zero padding) -> enc0 (2 blocks, C 32, 1 head)
    -> merge (LN 128, linear 128 -> 64 no bias) -> enc1 (2 blocks, C 64, 2 heads)
    -> merge (LN 256, linear 256 -> 128 no bias) -> mid (3 blocks, C 128, 4 heads)
    -> expand (linear 128 -> 256, pixel_shuffle -> 64), concat [up, enc1] -> linear 128 -> 64
    -> dec1 (2 blocks) -> expand (64 -> 128 -> 32), concat [up, enc0] -> linear 64 -> 32
    -> dec0 (2 blocks) = F_s (32 ch at H/2 x W/2)
  out_t = clamp(conv3d_3x3x3(F_{t-1}, F_t, F_{t+1}) + s2d(x_t), lo, hi), then depth-to-space, with
  [lo, hi] = [-1, 1] in training and [min(-1, x_t), max(1, x_t)] per sample at inference
  (output_clamp: what both engines do).
  conv3d: 32 -> 12 channels, kernel (3,3,3) over (time, y, x), no time padding (exactly three
  inputs), spatial zero padding 1.

Swin block (Liu et al., "Swin Transformer", ICCV 2021; pre-norm):
  x += proj(W-MSA(LN1(x)));  x += fc2(GELU_tanh(fc1(LN2(x))))
  window 8x8, odd blocks (1, 3, ...) of a stage use a cyclic shift of 4 (torch.roll by -4 on
  H and W before, +4 after) with Swin's region mask (tokens from different regions of the
  shifted image never attend to each other). Head dim 32, scale 32**-0.5, relative position
  bias table (15*15, heads) indexed by (dy + 7) * 15 + (dx + 7) with dy = y_q - y_k,
  dx = x_q - x_k. qkv is one linear C -> 3C whose output is [q | k | v], each split into heads
  as (head, 32). LayerNorm eps 1e-5. GELU is the tanh approximation.

Temporal edges: frames outside [0, N-1] are mirrored by reflect_index(), features outside
too (F_{-1} is the U-Net of the mirrored window, not a copy of F_1).

Model v2 options (Config fields with v1 defaults; a config that leaves them at their defaults is
model v1 and writes exactly v1's config JSON, version 1; any other value makes it version 2; a
field left at its default is not written, e.g. shift_div 8 or align_tile 64):
  fusion "window" (v1): the fusion conv reads the 5 raw space-to-depth frames, as above.
  fusion "frame": a per-frame encoder E_j = conv3x3(GELU_tanh(conv3x3(concat(s2d(x_j), sigma/255))))
    (13 -> E -> E channels, zero padding, E = frame_channels) is computed once per input frame and
    reused by every window that contains it (an engine keeps E_j in its ring buffer); the fusion
    conv 3x3 reads concat(E_{s-r}, ..., E_{s+r}, sigma/255): (2r+1)*E + 1 -> C0 channels.
  sigma_gate G > 0: the output is centre + min(1, sigma / G) (out - centre) (sigma_gate()): sigma
    0 returns the input exactly, whatever the weights. The engines run it (kernels/engine.cpp, as
    a factor on the amounts); they do not run the per-frame encoder.
  align R > 0 (fusion "window" only): before the fusion conv, every frame of F_s's window is moved
    onto x_s by one whole-pixel shift per align_tile x align_tile tile, |dy|, |dx| <= R,
    estimated on the noisy frames by block matching of their luma (denoise_train/align.py
    align_window); F_s stays one pass per time index. The head reads F_{t-1} and F_{t+1} moved
    onto x_t by the halved shifts of x_{t-1} and x_{t+1} against x_t (align_features). Both
    engines run it (kernels/cpu/block_match.cpp, shift_tiles.cpp; kernels/cuda/block_match.cu,
    shift_tiles.cu).

  fusion "shift" (shift_div D, default 8; the study's candidate for temporal mixing in every block,
    issue 36; TSM, Lin et al., ICCV 2019; BSVD, Qi et al., ACM MM 2022): no fusion window. Every
    input frame j is its own stream: z_j = concat(s2d(x_j), sigma/255) (13 channels) -> fusion
    conv 3x3 (13 -> C0) -> the U-Net above, computed once per frame and reused by every output
    that reads it. In every Swin block the attention branch reads the temporally shifted input
    (temporal_shift, TSM's "residual shift"; the identity path keeps the stream's own features):
      x += proj(W-MSA(LN1(shift(x))));  x += fc2(GELU_tanh(fc1(LN2(x))))
    shift(x) of stream s: channels [0, k) from stream s-1, [k, 2k) from stream s+1, the rest its
    own, k = C // D at the block's width C (32/64/128: k = 4/8/16 for D 8); zeros where the
    neighbour does not exist (the first and last frame of a sequence, or of a training clip; an
    engine would also reset at a scene cut). Patch merging, expand and the skips stay per stream.
    The head is the conv3d above over F_{t-1}, F_t, F_{t+1} of the streams plus s2d(x_t), then
    output_clamp and the sigma gate as for the other modes. align must be 0.
    Receptive field: each block moves information one frame, so output t depends on frames
    t - (L+1) .. t + (L+1), L = sum(depths) Swin blocks (L = 18 for depths 2/4/6/4/2: 19 frames
    each way). forward(clip, sigma) takes any odd T >= 3 frames as T streams and returns the
    centre frame's output; training uses T = 2R+1 with R = temporal_radius = fusion_radius +
    head_radius (3 with the defaults: the 7 frames of a training clip are the 7 streams), which
    truncates that receptive field: the centre frame of a training clip sees zeros 4 frames away
    in its deeper blocks, where the streaming inference (denoise_sequence: the whole sequence
    as N streams, zeros beyond its ends only) sees real frames. Training and streaming inference
    therefore differ; validation.validate(frames=9) (VAL_T) and weights/val.py --frames N measure
    the gap by evaluating the same centre frames with longer clips.
    Streaming (what an engine would run): block b of frame s can run once block b-1 of frame s+1
    is done, so block b lags one frame behind block b-1 and the output lags L + 1 frames behind
    the input; each block keeps a ring buffer of its input (frame s whole, channels [0, k) of
    s-1, frame s+1 as it arrives), and the skips x0 and x1 (enc0's and enc1's outputs) wait in
    ring buffers until the decoder reaches the same frame (depths 2/4/6/4/2: x0 from block 2 to
    block 16, 14 frames, x1 from block 6 to block 12, 6 frames, plus the frame in flight).
    stream_sequence() is this schedule's reference (frames arrive one at a time, every layer's
    value of a frame computed once and freed after its last reader; it reports the frames each
    layer held: 3 for a block's input, 16 and 8 for the skips at depths 2/4/6/4/2). The engines
    do not run fusion "shift" yet (candidates.engine_runs).

Kernels (same function, chosen by Denoiser.set_engine; the default is the v1 code, bit for bit):
  attention "math": (q * scale) @ k^T + bias (+ shift mask), softmax, @ v, as in WindowAttention.
  attention "sdpa": F.scaled_dot_product_attention with the relative position bias (plus, in
    shifted blocks, the region mask) as one additive float mask, contiguous (PyTorch's fused CUDA
    kernels need the mask's last dimension at stride 1): (1, h, N, N) broadcast over the windows of
    an unshifted block; (nWB, h, N, N), the per-window sum repeated over the batch, in a shifted one.
    Of the fused kernels only the memory-efficient one returns the mask's gradient (which the bias
    tables learn from); train_step.configure_cuda() keeps SDPA off cuDNN attention for that reason.
  layout "channels_last" (with sdpa): the 3x3 convolutions run on NHWC tensors (PyTorch's
    channels-last memory format) with their input channels zero-padded to a multiple of 8 (the
    weight too: the same sums plus zero terms), the head's conv3d runs as the equal conv2d over
    [F_{t-1} | F_t | F_{t+1}] (3C channels, index k*C + c, weight W2[o, k*C + c] = W[o, c, k]),
    and patch merging keeps its LayerNorm output in bf16 (layer_norm_lowp). No NCHW <-> NHWC
    copies around the U-Net.
  fusion "shift": the temporal shift runs inside SwinBlock.forward on every path (math, sdpa, and
    the torch.compile'd sdpa_block, which gets the stream count as an argument).
  Training variants of the sdpa path (Denoiser.set_engine attention= and layout=; same function,
  tests/weights/check_block_variants.py):
  attention "explicit": (q * scale) @ k^T in the input dtype, then in fp32 + bias (+ shift mask),
    softmax, cast back, @ v (WindowAttention.forward_explicit): the v1 code's order of operations
    with the bias, mask and softmax in fp32, written for torch.compile to fuse the bias, mask and
    softmax (and their backward) around two batched matrix products, where SDPA calls its
    memory-efficient kernel (tiled for long sequences; a window is 64 tokens).
  attention "flex": torch.nn.attention.flex_attention with the bias plus the shift mask added by
    its score_mod (WindowAttention.forward_flex); compiled (compile engines) it is one fused Triton
    kernel forward and one backward, the bias gradient accumulated inside the backward kernel.
  attention "cudnn": SDPA held to its cuDNN backend with the bias (plus the shift mask) folded
    into q and k, q' = [q, e_i], k' = [k, M[:, j] / scale] (WindowAttention.forward_cudnn): cuDNN
    attention is not differentiable with respect to an attn_mask, and the bias must learn.
  attention "triton": denoise_train/window_attention.py's kernels, one forward and one backward
    over groups of windows, q, k and v read out of the packed qkv, the bias gradient summed in
    the kernel (WindowAttention.forward_triton).
  glue (Denoiser.set_engine glue=): the parts of the U-Net between the Swin blocks as units a
    training engine may torch.compile (GLUE_UNITS: window_stem, patch_merge, expand_skip), so
    that their layout copies (pixel_unshuffle, NHWC transposition and channel padding of the
    fusion input, space-to-depth before a merge's LayerNorm, depth-to-space and concatenation on
    the way up) fuse with their neighbours instead of each being a pass of its own.
  layout "windows": the tokens of a stage stay in window order from block to block (window_block):
    each block runs on (B * nW, ws*ws, C) in the order of its own windows (unshifted, or of the
    image rolled by -shift), and writes its output in the order of the next block's windows (the
    image order after the last), so the LayerNorms, the MLP and the attention read and write
    contiguous rows; the reorder (reorder_tokens: window_reverse, roll, window_partition) is
    data movement at the end of a block, left for torch.compile to fuse into the residual add
    that writes it.
"""
from __future__ import annotations

import contextlib
import json
from dataclasses import asdict, dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from .align import align_features, align_window

FORMAT = "denoise-swin"
VERSION = 1          # the version of a v1 config; Config.version gives 2 for a v2 design
VERSIONS = (1, 2)    # what load_weights() accepts
V2_DEFAULTS = {"fusion": "window", "frame_channels": 0, "sigma_gate": 0.0, "align": 0, "align_tile": 64,
               "shift_div": 8}
FUSIONS = ("window", "frame", "shift")
ATTENTIONS = ("sdpa", "explicit", "flex", "cudnn", "triton")   # the sdpa path's attention kernels (module docstring)
LAYOUTS = ("image", "windows")              # token order inside a stage: NHWC, or window-major
# flex_attention tiles: 64 x 64, one window per tile (the defaults may take 128-row tiles, half of
# them masked off for 64-token sequences); the backward's ratios as the kernel requires
# (BLOCK_N1 % BLOCK_M1 == 0, BLOCK_M2 % BLOCK_N2 == 0)
FLEX_KERNEL_OPTIONS = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_M1": 32, "BLOCK_N1": 64, "BLOCK_M2": 64, "BLOCK_N2": 32}
FLEX_BIAS_COPIES = 64   # unshifted blocks: bias copies flex's backward accumulates into (see forward_flex)
CUDA_GRID_YZ = 65535    # CUDA's limit on a grid's y and z size (flex_attention's windows x heads, see forward_flex)
FOLD_MASKED = 2.0 ** 20  # forward_cudnn: the shift mask's -inf as a finite score offset (exp underflows to 0)


def output_clamp(y: torch.Tensor, x: torch.Tensor, training: bool) -> torch.Tensor:
    """The head's output clamp. y: head output plus the residual x (the s2d centre frame), both in
    network units [-1, 1] for in-range samples, same shape.

    Training: clamp(y, -1, 1): the clean targets lie in [-1, 1].
    Inference (eval mode, and what both engines compute): clamp(y, min(-1, x), max(1, x)), the range
    widened to the input sample. Identical to the plain clamp for every sample inside [-1, 1] (all
    R'G'B' frames); a sample outside it (decoded Y'CbCr beyond the R'G'B' cube, float input) may stay
    where it is but is never pushed further out, so a network that adds nothing returns the input
    exactly (weights/experiments/output_clamp.py "hull": with a zero head the plain clamp moved 0.54 % of a
    yuv420p clip's Y' samples by up to 6 code values, this moves none).
    """
    if training:
        return y.clamp(-1.0, 1.0)
    return torch.minimum(torch.maximum(y, x.clamp(max=-1.0)), x.clamp(min=1.0))


@dataclass
class Config:
    channels: tuple = (32, 64, 128)      # enc0/dec0, enc1/dec1, mid
    heads: tuple = (1, 2, 4)
    depths: dict = field(default_factory=lambda: {"enc0": 2, "enc1": 2, "mid": 3, "dec1": 2, "dec0": 2})
    window: int = 8
    shift: int = 4
    head_dim: int = 32
    mlp_ratio: int = 4
    fusion_radius: int = 2               # frames s-2..s+2 feed F_s
    head_radius: int = 1                 # F_{t-1}, F_t, F_{t+1} feed the head
    s2d: int = 2
    pad_multiple: int = 64
    ln_eps: float = 1e-5
    fusion: str = "window"               # "window" (v1), "frame" (per-frame encoder) or "shift" (temporal shift)
    frame_channels: int = 0              # E, the per-frame encoder's width (fusion "frame")
    sigma_gate: float = 0.0              # G (8-bit code values): the change scaled by min(1, sigma / G); 0: none
    align: int = 0                       # R: fusion windows aligned to their centre, shifts up to R px; 0: none
    align_tile: int = 64                 # the alignment's tile (px), a multiple of 4 dividing pad_multiple
    shift_div: int = 8                   # fusion "shift": C // shift_div channels from each neighbouring frame

    def __post_init__(self):
        if self.fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {FUSIONS}, got {self.fusion!r}")
        if (self.fusion == "frame") != (self.frame_channels > 0):
            raise ValueError("frame_channels > 0 exactly when fusion is 'frame'")
        if not 0.0 <= self.sigma_gate <= 255.0:
            raise ValueError(f"sigma_gate must be in [0, 255] (8-bit code values), got {self.sigma_gate}")
        if not 0 <= self.align <= 64:
            raise ValueError(f"align must be in [0, 64] px, got {self.align}")
        if not self.align:
            self.align_tile = V2_DEFAULTS["align_tile"]   # no alignment: the tile means nothing, v1's JSON
        elif self.align_tile <= 0 or self.align_tile % 4 or self.pad_multiple % self.align_tile:
            raise ValueError(f"align_tile must be a multiple of 4 dividing pad_multiple {self.pad_multiple}, "
                             f"got {self.align_tile}")
        if self.align and self.fusion == "shift":
            raise ValueError("align must be 0 with fusion 'shift': the streams are never aligned (each frame's "
                             "features are computed once, on the frame as it is, and shared by its neighbours)")
        if self.align and self.fusion != "window":
            raise ValueError("align needs fusion 'window' (it moves the raw frames of a fusion window)")
        if self.fusion != "shift":
            self.shift_div = V2_DEFAULTS["shift_div"]   # no temporal shift: the divisor means nothing, v1's JSON
        elif not isinstance(self.shift_div, int) or not 2 <= self.shift_div <= min(self.channels):
            raise ValueError(f"shift_div must be an integer in [2, {min(self.channels)}] (C // shift_div channels "
                             f"from each neighbour, at least one), got {self.shift_div!r}")
        for c, h in zip(self.channels, self.heads):
            if c != h * self.head_dim:
                raise ValueError(f"channels {tuple(self.channels)} != heads {tuple(self.heads)} * head_dim {self.head_dim}")

    @property
    def temporal_radius(self) -> int:
        """Frames t-R..t+R are needed for output t (fusion "shift": the training clip's radius; its
        receptive field is sum(depths) + head_radius frames each way, see the module docstring)."""
        return self.fusion_radius + self.head_radius

    @property
    def blocks(self) -> int:
        """Swin blocks per U-Net pass (fusion "shift": each one moves information one frame)."""
        return sum(self.depths.values())

    @property
    def version(self) -> int:
        """1 when every v2 field has its v1 default (the v1 engines run it), else 2."""
        return 1 if all(getattr(self, k) == v for k, v in V2_DEFAULTS.items()) else 2

    def to_json(self) -> str:
        d = asdict(self)
        for k, v in V2_DEFAULTS.items():
            if d[k] == v:
                del d[k]
        d["channels"] = list(self.channels)
        d["heads"] = list(self.heads)
        d["temporal_radius"] = self.temporal_radius
        d["format"] = FORMAT
        d["version"] = self.version
        return json.dumps(d, sort_keys=True)

    @staticmethod
    def from_json(s: str) -> "Config":
        d = json.loads(s)
        for k in ("temporal_radius", "format", "version"):
            d.pop(k, None)
        d["channels"] = tuple(d["channels"])
        d["heads"] = tuple(d["heads"])
        return Config(**d)


def sigma_gate(out: torch.Tensor, centre: torch.Tensor, sigma: torch.Tensor, gate: float) -> torch.Tensor:
    """Model v2's sigma gate: centre + min(1, sigma / gate) (out - centre), per sample; out and
    centre (B, 3, H, W) in [-1, 1], sigma (B,) 8-bit code values; out itself when gate is 0 (v1).
    Sigma 0 then returns the input exactly whatever the network does, and the change fades in
    linearly up to sigma = gate. The engines apply the same factor to output t's amounts, with the
    sigma of F_t (kernels/engine.cpp), so the change is scaled before its rounding to code values."""
    if gate <= 0:
        return out
    g = (sigma.to(out.dtype) / gate).clamp(0.0, 1.0).view(-1, 1, 1, 1)
    return centre + g * (out - centre)


def reflect_index(i: int, n: int) -> int:
    """Mirror index i into [0, n-1] without repeating the edge (-1 -> 1, n -> n-2).

    Repeats for |i| beyond one period so any i maps (n = 1 gives 0 always). The engines use the
    same rule for time and for the spatial padding to a multiple of 64.
    """
    if n == 1:
        return 0
    p = 2 * (n - 1)
    i %= p
    return p - i if i >= n else i


def reflect_pad(x: torch.Tensor, ph: int, pw: int) -> torch.Tensor:
    """Pad (..., H, W) at the bottom and right by ph, pw rows/cols with reflect_index()."""
    H, W = x.shape[-2], x.shape[-1]
    if ph:
        iy = torch.tensor([reflect_index(i, H) for i in range(H + ph)], device=x.device)
        x = x.index_select(-2, iy)
    if pw:
        ix = torch.tensor([reflect_index(i, W) for i in range(W + pw)], device=x.device)
        x = x.index_select(-1, ix)
    return x


def relative_position_index(ws: int) -> torch.Tensor:
    """(ws*ws, ws*ws) long: (dy + ws-1) * (2ws-1) + (dx + ws-1), query row, key column."""
    ys, xs = torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij")
    ys, xs = ys.flatten(), xs.flatten()
    dy = ys[:, None] - ys[None, :] + ws - 1
    dx = xs[:, None] - xs[None, :] + ws - 1
    return dy * (2 * ws - 1) + dx


def shift_region_ids(H: int, W: int, ws: int, s: int) -> torch.Tensor:
    """(H, W) region id of Swin's shifted-window mask (3 x 3 regions), in the shifted frame."""
    ids = torch.zeros(H, W, dtype=torch.long)
    bounds = lambda n: ((0, n - ws), (n - ws, n - s), (n - s, n))
    r = 0
    for (h0, h1) in bounds(H):
        for (w0, w1) in bounds(W):
            ids[h0:h1, w0:w1] = r
            r += 1
    return ids


def window_partition(x: torch.Tensor, ws: int) -> torch.Tensor:
    """(B, H, W, C) -> (B * H/ws * W/ws, ws*ws, C), windows in row-major order."""
    B, H, W, C = x.shape
    x = x.view(B, H // ws, ws, W // ws, ws, C).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, ws * ws, C)


def window_reverse(w: torch.Tensor, ws: int, B: int, H: int, W: int) -> torch.Tensor:
    C = w.shape[-1]
    x = w.view(B, H // ws, W // ws, ws, ws, C).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(B, H, W, C)


class WindowAttention(nn.Module):
    def __init__(self, dim: int, heads: int, ws: int):
        super().__init__()
        self.heads, self.ws = heads, ws
        self.head_dim = dim // heads
        self.scale = self.head_dim ** -0.5
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.relative_position_bias_table = nn.Parameter(torch.zeros((2 * ws - 1) ** 2, heads))
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)
        self.register_buffer("rpi", relative_position_index(ws), persistent=False)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """x: (nWB, N=ws*ws, C); mask: (nW, N, N) additive (0 / -inf) or None."""
        nWB, N, C = x.shape
        qkv = self.qkv(x).view(nWB, N, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]                       # (nWB, h, N, d)
        bias = self.relative_position_bias_table[self.rpi.view(-1)]
        bias = bias.view(N, N, self.heads).permute(2, 0, 1)    # (h, N, N)
        attn = (q * self.scale) @ k.transpose(-2, -1) + bias.to(q.dtype)
        if mask is not None:
            nW = mask.shape[0]
            attn = attn.view(nWB // nW, nW, self.heads, N, N) + mask[None, :, None].to(attn.dtype)
            attn = attn.view(nWB, self.heads, N, N)
        attn = attn.softmax(dim=-1)
        out = (attn @ v).transpose(1, 2).reshape(nWB, N, C)
        return self.proj(out)

    def forward_sdpa(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """forward() through F.scaled_dot_product_attention, same function.

        x: (nWB, N, C) windows, window index b * nW + w; mask: (nW, N, N) additive shift mask or
        None. The bias (plus the mask) is one additive float mask, so SDPA's fused kernels
        (memory-efficient attention on CUDA) apply it and return its gradient: (1, h, N, N)
        broadcast over the windows of an unshifted block; in a shifted one (nWB, h, N, N), the
        (nW, h, N, N) sum repeated over the batch (h*N values per token: fewer bytes than
        regrouping q, k and v by window).
        """
        nWB, N, C = x.shape
        h, d = self.heads, self.head_dim
        q, k, v = self.qkv(x).view(nWB, N, 3, h, d).permute(2, 0, 3, 1, 4).unbind(0)   # (nWB, h, N, d)
        # (h, N, N), contiguous: the gathered table is (N, N, h), last dimension at stride 1
        # only after the copy (for h > 1 the permuted view has stride h there, which every fused
        # CUDA kernel refuses)
        bias = self.relative_position_bias_table[self.rpi.view(-1)].view(N, N, h).permute(2, 0, 1).contiguous()
        if mask is None:
            m = bias.to(q.dtype)[None]
        else:
            nW = mask.shape[0]
            m = (mask[:, None] + bias[None]).to(q.dtype)
            m = m.expand(nWB // nW, nW, h, N, N).reshape(nWB, h, N, N)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=self.scale)
        return self.proj(out.transpose(1, 2).reshape(nWB, N, C))

    def attend(self, x: torch.Tensor, mask: torch.Tensor | None, attention: str = "sdpa") -> torch.Tensor:
        """The attention of the sdpa path: x (nWB, N, C) windows, mask (nW, N, N) or None ->
        (nWB, N, C) through forward_sdpa, forward_explicit or forward_flex (ATTENTIONS)."""
        if attention == "sdpa":
            return self.forward_sdpa(x, mask)
        if attention == "explicit":
            return self.forward_explicit(x, mask)
        if attention == "flex":
            return self.forward_flex(x, mask)
        if attention == "cudnn":
            return self.forward_cudnn(x, mask)
        if attention == "triton":
            return self.forward_triton(x, mask)
        raise ValueError(f"attention must be one of {ATTENTIONS}, got {attention!r}")

    def _bias(self) -> torch.Tensor:
        """The relative position bias (h, N, N), in the table's dtype (fp32)."""
        N, h = self.ws * self.ws, self.heads
        return self.relative_position_bias_table[self.rpi.view(-1)].view(N, N, h).permute(2, 0, 1)

    def forward_explicit(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """forward() with the scores in fp32 from the bias on (module docstring, attention
        "explicit"): x (nWB, N, C), window index b * nW + w; mask (nW, N, N) additive or None.
        Under bf16 autocast the two products run in bf16 (fp32 accumulation), the bias, mask and
        softmax in fp32 (SDPA's path takes the bias in bf16), the probabilities cast to bf16 for
        @ v."""
        nWB, N, C = x.shape
        h, d = self.heads, self.head_dim
        q, k, v = self.qkv(x).view(nWB, N, 3, h, d).permute(2, 0, 3, 1, 4).unbind(0)   # (nWB, h, N, d)
        s = ((q * self.scale) @ k.transpose(-2, -1)).float() + self._bias()
        if mask is not None:
            nW = mask.shape[0]
            s = (s.view(nWB // nW, nW, h, N, N) + mask[None, :, None]).view(nWB, h, N, N)
        p = s.softmax(dim=-1).to(v.dtype)
        return self.proj((p @ v).transpose(1, 2).reshape(nWB, N, C))

    def forward_flex(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """forward_sdpa() through flex_attention (module docstring, attention "flex"): x (nWB, N, C),
        window index b * nW + w; mask (nW, N, N) additive or None. Each window is one batch entry
        of flex (nWB, h, N, d); score_mod adds M[b mod R, head, q, k], M the fp32 bias plus the
        shift mask: (nW, h, N, N) in a shifted block (R = nW), the bias repeated R =
        FLEX_BIAS_COPIES times in an unshifted one. Flex's compiled backward accumulates the
        gradient of M with atomic adds from every window; R copies (summed by autograd after)
        spread those adds over R times as many addresses. Compiled on CUDA, windows and heads
        are the kernel grid's y and z axes (batch x heads on y in some PyTorch versions): at most
        CUDA_GRID_YZ windows x heads, else ValueError."""
        from torch.nn.attention.flex_attention import flex_attention
        nWB, N, C = x.shape
        h, d = self.heads, self.head_dim
        if x.is_cuda and nWB * h > CUDA_GRID_YZ:
            raise ValueError(f"flex attention: {nWB} windows x {h} heads > {CUDA_GRID_YZ} (CUDA's limit on a grid "
                             "axis, which holds flex's batch x heads); use a smaller batch")
        q, k, v = self.qkv(x).view(nWB, N, 3, h, d).permute(2, 0, 3, 1, 4).unbind(0)   # (nWB, h, N, d)
        bias = self._bias()
        if mask is None:
            m = bias[None].repeat(FLEX_BIAS_COPIES, 1, 1, 1)
        else:
            m = mask[:, None] + bias[None]                                              # (nW, h, N, N)
        R = m.shape[0]

        def score_mod(score, b, head, qi, ki):
            return score + m[b % R, head, qi, ki]
        out = flex_attention(q, k, v, score_mod=score_mod, scale=self.scale,
                             kernel_options=dict(FLEX_KERNEL_OPTIONS) if x.is_cuda else None)
        return self.proj(out.transpose(1, 2).reshape(nWB, N, C))


    def forward_cudnn(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """forward_sdpa() with the bias folded into q and k, so that SDPA needs no attn_mask and its
        cuDNN kernels can run (module docstring, attention "cudnn"): x (nWB, N, C), window index
        b * nW + w; mask (nW, N, N) additive or None.

        PyTorch's cuDNN attention is not differentiable with respect to attn_mask (autograd refuses
        a mask that requires grad), and the relative position bias must learn. Instead each query
        gets the one-hot of its position in the window and each key the column of M = bias (+ the
        shift mask, -inf as -FOLD_MASKED) it meets there, divided by the scale:
          q'_i = [q_i, e_i],  k'_j = [k_j, M[:, j] / scale]  ->  scale q'_i . k'_j = scale q_i . k_j + M[i, j]
        (head dim d + N: 96 for d 32; v stays d wide), and the gradient of k' holds the bias
        gradient, summed over the windows by autograd. On CUDA SDPA is held to
        SDPBackend.CUDNN_ATTENTION (an error says why where cuDNN cannot run it); elsewhere it
        takes whatever backend runs (the CPU check: math). Under bf16 the folded bias is rounded
        to bf16 after the division by the scale (SDPA's mask path rounds the bias itself)."""
        nWB, N, C = x.shape
        h, d = self.heads, self.head_dim
        q, k, v = self.qkv(x).view(nWB, N, 3, h, d).unbind(2)                     # (nWB, N, h, d)
        bias = self._bias()
        m = bias[None] if mask is None else mask[:, None] + bias[None]             # (nW or 1, h, N_i, N_j)
        nWm = m.shape[0]
        kb = (m.clamp_min(-FOLD_MASKED) / self.scale).to(k.dtype).permute(0, 3, 1, 2)   # (nWm, N_j, h, N_i)
        kb = kb[None].expand(nWB // nWm, nWm, N, h, N).reshape(nWB, N, h, N)
        qb = torch.eye(N, dtype=q.dtype, device=q.device).view(1, N, 1, N).expand(nWB, N, h, N)
        # q', k' contiguous as (nWB, N, h, d + N) and v a view of the packed qkv: the (batch, token,
        # head, dim) layouts PyTorch's cuDNN path takes
        qf = torch.cat([q, qb], -1).transpose(1, 2)
        kf = torch.cat([k, kb], -1).transpose(1, 2)
        backend = sdpa_kernel([SDPBackend.CUDNN_ATTENTION]) if x.is_cuda else contextlib.nullcontext()
        with backend:
            out = F.scaled_dot_product_attention(qf, kf, v.transpose(1, 2), scale=self.scale)
        return self.proj(out.transpose(1, 2).reshape(nWB, N, C))

    def forward_triton(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """forward_sdpa() as one Triton kernel forward and one backward (module docstring,
        attention "triton"; denoise_train/window_attention.py): x (nWB, N, C), window index
        b * nW + w; mask (nW, N, N) additive or None. The kernels read q, k and v out of the qkv
        linear's output and take the fp32 bias (+ mask) as it is; CUDA, or the CPU under Triton's
        interpreter (RuntimeError otherwise)."""
        from .window_attention import window_attention
        bias = self._bias()
        m = bias[None] if mask is None else mask[:, None] + bias[None]
        return self.proj(window_attention(self.qkv(x), m, self.heads, self.scale))


_MASKS: dict = {}


def layer_norm_lowp(norm: nn.LayerNorm, x: torch.Tensor) -> torch.Tensor:
    """norm(x), but under autocast with a bf16/fp16 x the output stays in x's dtype (autocast
    would return fp32, which the next linear casts back): same function, half the bytes moved
    by the roll, window partition and cast that follow. Statistics are still taken in fp32."""
    if x.dtype in (torch.bfloat16, torch.float16) and torch.is_autocast_enabled(x.device.type):
        with torch.autocast(x.device.type, enabled=False):
            return F.layer_norm(x, norm.normalized_shape, norm.weight.to(x.dtype), norm.bias.to(x.dtype), norm.eps)
    return norm(x)


def conv2d_nhwc(conv: nn.Conv2d, x: torch.Tensor) -> torch.Tensor:
    """conv(x) for x (B, H, W, Cin) NHWC -> (B, H, W, Cout) NHWC, run on channels-last kernels.

    The input channels (and the weight's) are zero-padded to a multiple of 8, the tile width of
    bf16 tensor-core convolutions: the same sums plus zero terms. x.permute(0, 3, 1, 2) of a
    contiguous NHWC tensor is a channels-last NCHW tensor, and so is the output, so neither side
    needs a copy."""
    p = (-x.shape[-1]) % 8
    w = conv.weight
    x = F.pad(x, (0, p)) if p else x.contiguous()
    if p:
        w = F.pad(w, (0, 0, 0, 0, 0, p))
    y = F.conv2d(x.permute(0, 3, 1, 2), w, conv.bias, conv.stride, conv.padding)
    return y.permute(0, 2, 3, 1)


class SwinBlock(nn.Module):
    def __init__(self, dim: int, heads: int, cfg: Config, shifted: bool):
        super().__init__()
        self.ws = cfg.window
        self.shift = cfg.shift if shifted else 0
        self.shift_div = cfg.shift_div   # fusion "shift" (used only when forward gets streams)
        self.norm1 = nn.LayerNorm(dim, eps=cfg.ln_eps)
        self.attn = WindowAttention(dim, heads, cfg.window)
        self.norm2 = nn.LayerNorm(dim, eps=cfg.ln_eps)
        self.fc1 = nn.Linear(dim, cfg.mlp_ratio * dim)
        self.fc2 = nn.Linear(cfg.mlp_ratio * dim, dim)

    @torch.compiler.disable
    def attn_mask(self, H: int, W: int, device) -> torch.Tensor | None:
        """(nW, N, N) additive mask, 0 within a region and -inf across; cached per size.

        Kept out of torch.compile's graph: it is host-side set-up, built once per frame size.
        """
        if not self.shift:
            return None
        key = (H, W, str(device))
        m = _MASKS.get(key)
        if m is None:
            ids = shift_region_ids(H, W, self.ws, self.shift)
            w = window_partition(ids[None, :, :, None], self.ws).squeeze(-1)   # (nW, N)
            same = w[:, :, None] == w[:, None, :]
            m = torch.zeros(same.shape).masked_fill(~same, float("-inf")).to(device)
            _MASKS[key] = m
        return m

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, sdpa: bool = False,
                streams: int = 0, attention: str = "sdpa") -> torch.Tensor:
        """x (B, H, W, C) NHWC -> same. sdpa False: the v1 code (builds its own shift mask).
        sdpa True: attention through WindowAttention.attend(attention) (forward_sdpa by default)
        with `mask`, the stage's (nW, N, N) shift mask (used by shifted blocks only). streams T > 0
        (fusion "shift"): x is (B'T, H, W, C), stream t of clip b at batch index b * T + t, and the
        attention branch reads temporal_shift(x, T, k) (the identity path keeps x)."""
        x_in = temporal_shift(x, streams, x.shape[-1] // self.shift_div) if streams else x
        return self.branch(x, x_in, mask, sdpa, attention)

    def branch(self, x: torch.Tensor, x_in: torch.Tensor, mask: torch.Tensor | None = None,
               sdpa: bool = False, attention: str = "sdpa") -> torch.Tensor:
        """The block with x on the identity path and x_in read by the attention branch (x_in is x
        but for fusion "shift"'s temporal shift; stream_sequence calls it per frame)."""
        B, H, W, C = x.shape
        h = layer_norm_lowp(self.norm1, x_in) if sdpa else self.norm1(x_in)
        if self.shift:
            h = torch.roll(h, shifts=(-self.shift, -self.shift), dims=(1, 2))
        if sdpa:
            w = self.attn.attend(window_partition(h, self.ws), mask if self.shift else None, attention)
        else:
            w = self.attn(window_partition(h, self.ws), self.attn_mask(H, W, x.device))
        h = window_reverse(w, self.ws, B, H, W)
        if self.shift:
            h = torch.roll(h, shifts=(self.shift, self.shift), dims=(1, 2))
        x = x + h
        h = layer_norm_lowp(self.norm2, x) if sdpa else self.norm2(x)
        return x + self.fc2(F.gelu(self.fc1(h), approximate="tanh"))

    def branch_windows(self, x: torch.Tensor, x_in: torch.Tensor, mask: torch.Tensor | None = None,
                       attention: str = "sdpa") -> torch.Tensor:
        """branch() on tokens in this block's window order (layout "windows"): x, x_in (B * nW,
        ws*ws, C), the windows of the image rolled by (-shift, -shift) in window_partition's order
        -> the same order. No roll and no partition: every op reads whole rows."""
        h = layer_norm_lowp(self.norm1, x_in)
        x = x + self.attn.attend(h, mask if self.shift else None, attention)
        h = layer_norm_lowp(self.norm2, x)
        return x + self.fc2(F.gelu(self.fc1(h), approximate="tanh"))


def sdpa_block(block: SwinBlock, x: torch.Tensor, mask: torch.Tensor | None, streams: int = 0,
               attention: str = "sdpa") -> torch.Tensor:
    """One Swin block with SDPA attention (the unit a training engine may torch.compile); streams:
    SwinBlock.forward's (fusion "shift": the temporal shift is inside the compiled unit);
    attention: WindowAttention.attend's kernel (ATTENTIONS)."""
    return block(x, mask, sdpa=True, streams=streams, attention=attention)


IMAGE_ORDER = -1   # reorder_tokens: tokens in image order, (B, H, W, C)


def reorder_tokens(x: torch.Tensor, src: int, dst: int, H: int, W: int, ws: int) -> torch.Tensor:
    """The token orders of a stage with layout "windows": IMAGE_ORDER, x (B, H, W, C); s >= 0,
    x (B * nW, ws*ws, C): the windows of the image rolled by (-s, -s) (torch.roll, Swin's cyclic
    shift; 0: no shift), window_partition's order. x in order src -> the same tokens in order
    dst. Data movement only (eager: up to three copies; compiled: one gather, fused with its
    producer)."""
    if src == dst:
        return x
    if src != IMAGE_ORDER:
        x = window_reverse(x, ws, x.shape[0] // ((H // ws) * (W // ws)), H, W)
        if src:
            x = torch.roll(x, shifts=(src, src), dims=(1, 2))
    if dst != IMAGE_ORDER:
        if dst:
            x = torch.roll(x, shifts=(-dst, -dst), dims=(1, 2))
        x = window_partition(x, ws)
    return x


def window_block(block: SwinBlock, x: torch.Tensor, mask: torch.Tensor | None, src: int, dst: int,
                 hw: tuple, streams: int = 0, attention: str = "sdpa") -> torch.Tensor:
    """One Swin block in layout "windows" (the unit a training engine may torch.compile): x in
    token order src (reorder_tokens; IMAGE_ORDER for a stage's first block) -> the block's output
    in order dst (the next block's windows, IMAGE_ORDER after the last). hw = (H, W) of the
    stage's map; mask the stage's (nW, N, N) shift mask; streams: SwinBlock.forward's (the
    temporal shift moves channels between streams token by token, in any token order);
    attention: WindowAttention.attend's kernel."""
    H, W = hw
    x = reorder_tokens(x, src, block.shift, H, W, block.ws)
    x_in = x
    if streams:
        N, C = x.shape[1], x.shape[2]
        nW = (H // block.ws) * (W // block.ws)
        x_in = temporal_shift(x.view(-1, nW * N, C), streams, C // block.shift_div).view(x.shape)
    return reorder_tokens(block.branch_windows(x, x_in, mask, attention), block.shift, dst, H, W, block.ws)


def temporal_shift(x: torch.Tensor, streams: int, k: int) -> torch.Tensor:
    """Fusion "shift"'s temporal shift (TSM, Lin et al., ICCV 2019; BSVD, Qi et al., ACM MM 2022):
    x (B*T, ..., C) (NHWC: (B*T, H, W, C)), stream t of clip b at index b * T + t -> the same shape
    with channels [0, k) of stream t taken from stream t-1, channels [k, 2k) from stream t+1, zeros
    where that stream does not exist (t = 0, t = T-1: a stream's ends), the other channels
    unchanged. Data movement only: no FLOPs."""
    BT, inner = x.shape[0], x.shape[1:-1]
    x5 = x.reshape(BT // streams, streams, *inner, x.shape[-1])
    z = x5.new_zeros(BT // streams, 1, *inner, k)
    prev = torch.cat([z, x5[:, :-1, ..., :k]], dim=1)           # stream t <- t-1
    nxt = torch.cat([x5[:, 1:, ..., k:2 * k], z], dim=1)        # stream t <- t+1
    return torch.cat([prev, nxt, x5[..., 2 * k:]], dim=-1).view(x.shape)


class Stage(nn.Module):
    def __init__(self, dim: int, heads: int, depth: int, cfg: Config):
        super().__init__()
        self.blocks = nn.ModuleList(SwinBlock(dim, heads, cfg, shifted=i % 2 == 1) for i in range(depth))
        # set by Denoiser.set_engine: layout "image", (block, x, shift mask, streams, attention) -> x
        # (sdpa_block); layout "windows", window_block's arguments
        self.block_fn = None
        self.attention, self.layout = "sdpa", "image"

    def forward(self, x, streams: int = 0):
        """x (B, H, W, C) -> same; streams: SwinBlock.forward's (0: no temporal shift)."""
        if self.block_fn is None:
            for b in self.blocks:
                x = b(x, streams=streams) if streams else b(x)
            return x
        mask = None
        for b in self.blocks:
            if b.shift:   # built outside block_fn, once per stage call
                mask = b.attn_mask(x.shape[1], x.shape[2], x.device)
                break
        if self.layout == "windows":
            hw, order = (x.shape[1], x.shape[2]), IMAGE_ORDER
            for i, b in enumerate(self.blocks):
                dst = self.blocks[i + 1].shift if i + 1 < len(self.blocks) else IMAGE_ORDER
                x = self.block_fn(b, x, mask, order, dst, hw, streams, self.attention)
                order = dst
            return x
        for b in self.blocks:
            x = self.block_fn(b, x, mask, streams, self.attention)
        return x


def s2d_nhwc(x: torch.Tensor) -> torch.Tensor:
    """(B, H, W, C) -> (B, H/2, W/2, 4C), channel c*4 + dy*2 + dx."""
    B, H, W, C = x.shape
    x = x.view(B, H // 2, 2, W // 2, 2, C).permute(0, 1, 3, 5, 2, 4)
    return x.reshape(B, H // 2, W // 2, 4 * C)


def d2s_nhwc(x: torch.Tensor) -> torch.Tensor:
    """(B, h, w, 4C) -> (B, 2h, 2w, C), inverse of s2d_nhwc."""
    B, h, w, C4 = x.shape
    C = C4 // 4
    x = x.view(B, h, w, C, 2, 2).permute(0, 1, 4, 2, 5, 3)
    return x.reshape(B, 2 * h, 2 * w, C)


class PatchMerge(nn.Module):
    """2x2 patch merging (Swin): s2d to 4C, LayerNorm, linear 4C -> C' without bias (C' = 2C in
    Swin and in models v1/v2; the fine levels of a wider config may keep C' = C)."""

    def __init__(self, dim: int, dim_out: int, cfg: Config):
        super().__init__()
        self.norm = nn.LayerNorm(4 * dim, eps=cfg.ln_eps)
        self.reduction = nn.Linear(4 * dim, dim_out, bias=False)
        self.lowp = False   # set by Denoiser.set_engine (channels_last): LayerNorm output in bf16

    def forward(self, x):
        x = s2d_nhwc(x)
        return self.reduction(layer_norm_lowp(self.norm, x) if self.lowp else self.norm(x))


def patch_merge(merge: PatchMerge, x: torch.Tensor) -> torch.Tensor:
    """merge(x): the unit a training engine may torch.compile (glue "merge": the space-to-depth
    copy fused into the LayerNorm that reads it)."""
    return merge(x)


class PatchExpand(nn.Module):
    """linear C -> 4C', depth-to-space -> C' at twice the resolution (C' = C/2 in models v1/v2:
    linear C -> 2C)."""

    def __init__(self, dim: int, dim_out: int):
        super().__init__()
        self.expand = nn.Linear(dim, 4 * dim_out)

    def forward(self, x):
        return d2s_nhwc(self.expand(x))


def expand_skip(expand: PatchExpand, skip: nn.Linear, y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """skip(concat(expand(y), x)), the decoder's way up a level: y (B, h, w, C) NHWC, x the skip
    (B, 2h, 2w, C'') -> (B, 2h, 2w, skip's width); the unit a training engine may torch.compile
    (glue "up": the depth-to-space and the concatenation one copy, forward and backward)."""
    return skip(torch.cat([expand(y), x], dim=-1))


class UNet(nn.Module):
    """(B, 5*12+1, h, w) NCHW input at half resolution -> F (B, h, w, channels[0]) NHWC.

    With fusion "frame" the input is (B, 5*E+1, h, w): the per-frame features and the sigma map.
    """

    def __init__(self, cfg: Config):
        super().__init__()
        c0, c1, c2 = cfg.channels
        h0, h1, h2 = cfg.heads
        d = cfg.depths
        per_frame = cfg.frame_channels if cfg.fusion == "frame" else 3 * cfg.s2d ** 2
        nin = (2 * cfg.fusion_radius + 1) * per_frame + 1
        if cfg.fusion == "shift":   # one frame per stream: its s2d and the sigma map
            nin = 3 * cfg.s2d ** 2 + 1
        self.fusion = nn.Conv2d(nin, c0, 3, padding=1)
        self.enc0 = Stage(c0, h0, d["enc0"], cfg)
        self.merge0 = PatchMerge(c0, c1, cfg)
        self.enc1 = Stage(c1, h1, d["enc1"], cfg)
        self.merge1 = PatchMerge(c1, c2, cfg)
        self.mid = Stage(c2, h2, d["mid"], cfg)
        self.expand1 = PatchExpand(c2, c1)
        self.skip1 = nn.Linear(2 * c1, c1)
        self.dec1 = Stage(c1, h1, d["dec1"], cfg)
        self.expand0 = PatchExpand(c1, c0)
        self.skip0 = nn.Linear(2 * c0, c0)
        self.dec0 = Stage(c0, h0, d["dec0"], cfg)
        self.channels_last = False   # set by Denoiser.set_engine: the fusion conv on NHWC kernels
        self.glue: dict = {}         # set by Denoiser.set_engine: compiled "stem", "merge", "up" units

    def forward(self, z: torch.Tensor, streams: int = 0) -> torch.Tensor:
        """z (B, Cin, h, w) -> (B, h, w, C0). streams T > 0 (fusion "shift"): z is (B'T, 13, h, w),
        the T streams of each clip consecutive, and every Swin block shifts channels between them;
        everything else stays per stream."""
        return self.body(self.stem(z), streams)

    def stem(self, z: torch.Tensor) -> torch.Tensor:
        """The fusion conv: z (B, Cin, h, w) NCHW -> x0 (B, h, w, C0) NHWC."""
        if self.channels_last:
            return conv2d_nhwc(self.fusion, z.permute(0, 2, 3, 1))
        return self.fusion(z).permute(0, 2, 3, 1)

    def body(self, x0: torch.Tensor, streams: int = 0) -> torch.Tensor:
        """x0 (B, h, w, C0), the fusion conv's output -> F (B, h, w, C0): the stages, merges and
        expands (through the compiled glue units where set)."""
        merge = self.glue.get("merge", patch_merge)
        up = self.glue.get("up", expand_skip)
        x0 = self.enc0(x0, streams)
        x1 = self.enc1(merge(self.merge0, x0), streams)
        x2 = self.mid(merge(self.merge1, x1), streams)
        y1 = self.dec1(up(self.expand1, self.skip1, x2, x1), streams)
        return self.dec0(up(self.expand0, self.skip0, y1, x0), streams)


class FrameEncoder(nn.Module):
    """Per-frame features (fusion "frame"): (B, 13, h, w) NCHW, the s2d frame and the sigma map
    -> (B, E, h, w): conv 3x3 (13 -> E) -> GELU (tanh) -> conv 3x3 (E -> E), zero padding."""

    def __init__(self, cfg: Config):
        super().__init__()
        nin = 3 * cfg.s2d ** 2 + 1
        self.conv1 = nn.Conv2d(nin, cfg.frame_channels, 3, padding=1)
        self.conv2 = nn.Conv2d(cfg.frame_channels, cfg.frame_channels, 3, padding=1)
        self.channels_last = False   # set by Denoiser.set_engine: both convs on NHWC kernels

    def forward(self, z):
        if self.channels_last:   # NCHW in and out (channels-last strides), NHWC inside
            e = conv2d_nhwc(self.conv2, F.gelu(conv2d_nhwc(self.conv1, z.permute(0, 2, 3, 1)), approximate="tanh"))
            return e.permute(0, 3, 1, 2)
        return self.conv2(F.gelu(self.conv1(z), approximate="tanh"))


class Denoiser(nn.Module):
    """Model v1/v2. forward(clip (B, 2R+1, 3, H, W) in [-1,1], sigma (B,) 8-bit code values)."""

    def __init__(self, cfg: Config | None = None):
        super().__init__()
        self.cfg = cfg or Config()
        self.unet = UNet(self.cfg)
        self.head = nn.Conv3d(self.cfg.channels[0], 3 * self.cfg.s2d ** 2, 3, padding=(0, 1, 1))
        if self.cfg.fusion == "frame":
            self.frame_enc = FrameEncoder(self.cfg)
        self.channels_last = False

    def set_engine(self, sdpa: bool = False, block_fn=None, channels_last: bool = False, attention: str = "sdpa",
                   layout: str = "image", glue: dict | None = None) -> "Denoiser":
        """Choose the kernels, not the function: sdpa=True runs every Swin block through
        sdpa_block, or window_block with layout "windows" (or block_fn, e.g. torch.compile of
        that function), with the attention kernel `attention` (ATTENTIONS), and channels_last
        (with sdpa) the convolutions and the head on NHWC kernels (module docstring); glue (with
        sdpa): {"stem": f, "merge": f, "up": f}, any of them, each f standing in for window_stem,
        patch_merge or expand_skip (e.g. torch.compile of it); sdpa=False restores the v1 code
        (its own attention and layout: attention, layout and glue must be left at their
        defaults). ValueError for an unknown attention, layout or glue unit."""
        if attention not in ATTENTIONS:
            raise ValueError(f"attention must be one of {ATTENTIONS}, got {attention!r}")
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        if not sdpa and ((attention, layout) != ("sdpa", "image") or glue):
            raise ValueError(f"attention {attention!r}, layout {layout!r} and glue need sdpa=True "
                             "(the v1 code has its own)")
        if set(glue or {}) - set(GLUE_UNITS):
            raise ValueError(f"glue units must be among {tuple(GLUE_UNITS)}, got {sorted(glue)}")
        fn = (block_fn or (window_block if layout == "windows" else sdpa_block)) if sdpa else None
        nhwc = bool(sdpa and channels_last)
        for m in self.modules():
            if isinstance(m, Stage):
                m.block_fn, m.attention, m.layout = fn, attention, layout
            elif isinstance(m, (UNet, FrameEncoder, Denoiser)):
                m.channels_last = nhwc
                if isinstance(m, UNet):
                    m.glue = dict(glue or {})
            elif isinstance(m, PatchMerge):
                m.lowp = nhwc
        return self

    # -- parts the engines mirror --------------------------------------------------------------
    @staticmethod
    def sigma_map(sigma: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        """(B,) code values -> (B, 1, h, w) map sigma/255 shaped like `like` (B, *, h, w)."""
        B, _, h, w = like.shape
        return (sigma.to(like.dtype) / 255.0).view(B, 1, 1, 1).expand(B, 1, h, w)

    def fusion_input(self, frames: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        """frames (B, 5, 3, H, W) in [-1,1] (H, W multiples of 64) -> (B, 61, H/2, W/2); with
        align, the frames are first moved onto the centre one (denoise_train/align.py).

        fusion "frame": the same frames -> (B, 5E+1, H/2, W/2) through frame_features()."""
        if self.cfg.fusion == "frame":
            return self.fusion_input_frames(self.frame_features(frames, sigma), sigma)
        frames = align_window(frames, self.cfg.align, self.cfg.align_tile)
        B, T, C, H, W = frames.shape
        s = F.pixel_unshuffle(frames.reshape(B * T, C, H, W), 2).reshape(B, T * 12, H // 2, W // 2)
        smap = (sigma.to(frames.dtype) / 255.0).view(B, 1, 1, 1).expand(B, 1, H // 2, W // 2)
        return torch.cat([s, smap], dim=1)

    def frame_features(self, frames: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        """fusion "frame": frames (B, T, 3, H, W) in [-1,1] -> E (B, T, E, H/2, W/2), one
        encoder pass per frame."""
        B, T, C, H, W = frames.shape
        s = F.pixel_unshuffle(frames.reshape(B * T, C, H, W), 2)
        z = torch.cat([s, self.sigma_map(sigma.repeat_interleave(T), s)], dim=1)
        e = self.frame_enc(z)
        return e.view(B, T, *e.shape[1:])

    def fusion_input_frames(self, e: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        """fusion "frame": E (B, 2r+1, E, h, w) -> (B, (2r+1)E + 1, h, w)."""
        B, T, E, h, w = e.shape
        z = e.reshape(B, T * E, h, w)
        return torch.cat([z, self.sigma_map(sigma, z)], dim=1)

    def stream_features(self, frames: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        """fusion "shift": frames (B, T, 3, H, W) in [-1,1] (H, W multiples of 64), T >= 1 streams
        -> F (B, T, H/2, W/2, C0) NHWC: stream j's input is concat(s2d(x_j), sigma/255) (13
        channels), one U-Net pass per stream with the temporal shift in every Swin block (zeros
        beyond the first and the last stream)."""
        B, T, C, H, W = frames.shape
        s = F.pixel_unshuffle(frames.reshape(B * T, C, H, W), 2)
        z = torch.cat([s, self.sigma_map(sigma.repeat_interleave(T), s)], dim=1)
        f = self.unet(z, streams=T)
        return f.view(B, T, *f.shape[1:])

    def features(self, frames: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        """frames (B, 5, 3, H, W) -> F (B, H/2, W/2, 32) NHWC."""
        return self.unet(self.fusion_input(frames, sigma))

    def head_out(self, feats: list, centre: torch.Tensor) -> torch.Tensor:
        """feats: [F_{t-1}, F_t, F_{t+1}] each (B, h, w, channels[0]); centre (B, 3, H, W) -> (B, 3, H, W)."""
        if self.channels_last:   # conv3d over exactly 3 time taps == conv2d over the 3C concatenation
            w = self.head.weight                                              # (O, C, 3, 3, 3)
            w2 = w.permute(0, 2, 1, 3, 4).reshape(w.shape[0], -1, 3, 3)       # (O, 3C, 3, 3): k*C + c
            y = F.conv2d(torch.cat(feats, dim=-1).permute(0, 3, 1, 2), w2, self.head.bias, padding=1)
        else:
            f = torch.stack([t.permute(0, 3, 1, 2) for t in feats], dim=2)   # (B, 32, 3, h, w)
            y = self.head(f).squeeze(2)
        x = F.pixel_unshuffle(centre, 2)
        return F.pixel_shuffle(output_clamp(y + x, x, self.training), 2)

    def forward(self, clip: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        B, T, C, H, W = clip.shape
        R, r = self.cfg.temporal_radius, self.cfg.fusion_radius
        if self.cfg.fusion == "shift":
            # any odd T >= 3: T streams, the centre frame's output (training: T = 2R + 1; a longer
            # clip reaches further into the centre's receptive field, module docstring)
            if T < 3 or T % 2 == 0:
                raise ValueError(f"fusion 'shift': the clip must hold an odd number >= 3 of frames, got {T}")
            R = T // 2
        assert T == 2 * R + 1, f"clip must hold {2 * R + 1} frames, got {T}"
        m = self.cfg.pad_multiple
        ph, pw = (-H) % m, (-W) % m
        if ph or pw:
            clip = reflect_pad(clip, ph, pw)
        if self.cfg.fusion == "shift":
            f = self.stream_features(clip, sigma)
            feats = [f[:, R - 1], f[:, R], f[:, R + 1]]
            out = sigma_gate(self.head_out(feats, clip[:, R]), clip[:, R], sigma, self.cfg.sigma_gate)
            return out[..., :H, :W]
        if self.cfg.fusion == "frame":
            # One encoder pass per frame of the clip, shared by the three windows.
            e = self.frame_features(clip, sigma)
            z = torch.cat([self.fusion_input_frames(e[:, c - r:c + r + 1], sigma) for c in range(R - 1, R + 2)], dim=0)
            f = self.unet(z)
        elif "stem" in self.unet.glue and not self.cfg.align:
            f = self.unet.body(self.unet.glue["stem"](self, clip, sigma))
        else:
            f = self.unet.body(window_stem(self, clip, sigma))
        feats = align_features(list(f.chunk(3, dim=0)), clip[:, R - 1:R + 2], self.cfg.align, self.cfg.align_tile)
        out = sigma_gate(self.head_out(feats, clip[:, R]), clip[:, R], sigma, self.cfg.sigma_gate)
        return out[..., :H, :W]


def window_stem(model: Denoiser, clip: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """Fusion "window": the three fusion windows of a training clip (B, 2R+1, 3, H, W) in [-1, 1]
    (H, W multiples of 64), all in one batch (3B, 5, 3, H, W), window k centred on frame R-1+k, and
    their fusion input (fusion_input: with align, the frames moved first) through the fusion conv
    -> x0 (3B, H/2, W/2, C0) NHWC, window k's at batch index k * B + b. The unit a training engine
    may torch.compile without alignment (glue "stem": the window copies, space-to-depth, sigma
    map, NHWC transposition, channel padding and bf16 cast one pass before the conv)."""
    R, r = model.cfg.temporal_radius, model.cfg.fusion_radius
    wins = torch.cat([clip[:, c - r:c + r + 1] for c in range(R - 1, R + 2)], dim=0)
    return model.unet.stem(model.fusion_input(wins, sigma.repeat(3)))


GLUE_UNITS = {"stem": window_stem, "merge": patch_merge, "up": expand_skip}


def denoise_sequence(model: Denoiser, frames: torch.Tensor, sigma: float, chunk: int = 4) -> torch.Tensor:
    """Denoise a whole sequence as the engines do: frames (N, 3, H, W) in [-1,1] -> (N, 3, H, W).

    Each output t uses frames reflect_index(t-3..t+3); features are computed once per time index
    s in [-1, N] and reused by the three outputs that need them (fusion "frame": the per-frame
    encoder runs once per input frame and its output is reused by every window).
    """
    N, C, H, W = frames.shape
    cfg = model.cfg
    r = cfg.fusion_radius
    m = cfg.pad_multiple
    ph, pw = (-H) % m, (-W) % m
    x = reflect_pad(frames, ph, pw) if (ph or pw) else frames
    sig = torch.full((1,), float(sigma), device=frames.device)
    if cfg.fusion == "shift":
        return denoise_sequence_shift(model, x, sig, chunk)[..., :H, :W]
    enc = None
    if cfg.fusion == "frame":   # per-frame features, once per input frame
        enc = torch.cat([model.frame_features(x[i:i + chunk][None], sig)[0] for i in range(0, N, chunk)])
    feats = {}
    idx = list(range(-1, N + 1))
    for i in range(0, len(idx), chunk):
        ss = idx[i:i + chunk]
        taps = [[reflect_index(s + k, N) for k in range(-r, r + 1)] for s in ss]
        if enc is not None:
            f = model.unet(model.fusion_input_frames(torch.stack([enc[t] for t in taps]), sig.expand(len(ss))))
        else:
            f = model.features(torch.stack([x[t] for t in taps]), sig.expand(len(ss)))
        for j, s in enumerate(ss):
            feats[s] = f[j:j + 1]
    out = torch.empty_like(frames)
    for t in range(N):
        f3 = [feats[t - 1], feats[t], feats[t + 1]]
        if cfg.align:
            f3 = align_features(f3, x[[reflect_index(t - 1, N), t, reflect_index(t + 1, N)]][None],
                                cfg.align, cfg.align_tile)
        y = sigma_gate(model.head_out(f3, x[t:t + 1]), x[t:t + 1], sig, cfg.sigma_gate)
        out[t] = y[0, :, :H, :W]
    return out


def denoise_sequence_shift(model: Denoiser, x: torch.Tensor, sig: torch.Tensor, chunk: int = 4) -> torch.Tensor:
    """fusion "shift": the whole padded sequence x (N, 3, H, W) as N streams of one U-Net pass each
    (model.stream_features: zeros beyond frame 0 and frame N-1 in every block's shift), then the
    head of every frame t over F_{t-1}, F_t, F_{t+1}, features mirrored at the ends (F_{-1} = F_1,
    F_N = F_{N-2}, reflect_index: the head never saw a missing neighbour in training) -> (N, 3, H, W).

    This is the streaming function: an engine computes block b of frame s once, when block b-1
    of frame s+1 is there, and keeps it in the block's ring buffer for frames s-1 and s+1 (module
    docstring). For an output t at least sum(depths) + 1 frames from both ends it equals forward()
    on any clip centred on t that reaches that far (tests/weights/check_temporal_shift.py)."""
    N = x.shape[0]
    f = model.stream_features(x[None], sig)[0]                 # (N, h, w, C0)
    out = torch.empty_like(x)
    for i in range(0, N, chunk):
        ts = range(i, min(N, i + chunk))
        feats = [f[[reflect_index(t + d, N) for t in ts]] for d in (-1, 0, 1)]
        xc = x[i:i + len(ts)]
        out[i:i + len(ts)] = sigma_gate(model.head_out(feats, xc), xc, sig.expand(len(ts)), model.cfg.sigma_gate)
    return out


@torch.no_grad()
def stream_sequence(model: Denoiser, frames: torch.Tensor, sigma: float) -> tuple[torch.Tensor, dict]:
    """fusion "shift" as a streaming engine would run it, the reference of its schedule: frames
    (N, 3, H, W) in [-1,1] arrive one at a time; every (layer, frame) value of the U-Net is computed
    once, when its inputs exist, and freed as soon as its last reader has run (the per-block ring
    buffers); output t is emitted once frame t + L + 1 has arrived (L = cfg.blocks), or at the
    end of the sequence. -> (outputs (N, 3, H, W), stats): stats["held"] is, per layer, the most
    frames of its output held at once (an engine's ring-buffer depth: 2-3 for the input of a block,
    the encoder-decoder distance for the skips), stats["delay"] the frames of input beyond t read
    before output t was emitted (L + 1 inside the sequence). Equals denoise_sequence up to
    rounding (tests/weights/check_temporal_shift.py); slow (one frame per call), for tests."""
    cfg, u = model.cfg, model.unet
    if cfg.fusion != "shift":
        raise ValueError("stream_sequence is fusion 'shift''s schedule")
    N, _, H, W = frames.shape
    m = cfg.pad_multiple
    x = reflect_pad(frames, (-H) % m, (-W) % m)
    sig = torch.full((1,), float(sigma), device=frames.device)
    # the U-Net as a chain of layers: ("block", SwinBlock) reads the layer before at s-1, s, s+1;
    # ("frame", fn, skip) reads it at s (and the output of layer `skip` at s)
    layers = [("in", None, None)]
    def add_stage(stage):
        for b in stage.blocks:
            layers.append(("block", b, None))
    add_stage(u.enc0)
    i_x0 = len(layers) - 1
    layers.append(("frame", u.merge0, None))
    add_stage(u.enc1)
    i_x1 = len(layers) - 1
    layers.append(("frame", u.merge1, None))
    add_stage(u.mid)
    layers.append(("frame", lambda y, sk: u.skip1(torch.cat([u.expand1(y), sk], dim=-1)), i_x1))
    add_stage(u.dec1)
    layers.append(("frame", lambda y, sk: u.skip0(torch.cat([u.expand0(y), sk], dim=-1)), i_x0))
    add_stage(u.dec0)
    last = len(layers) - 1
    readers = [0] * len(layers)   # readers of layer i's value at one frame (inside the sequence)
    for i, (kind, _, skip) in enumerate(layers[1:], 1):
        readers[i - 1] += 3 if kind == "block" else 1
        if skip is not None:
            readers[skip] += 1
    val, refs, held, computed = {}, {}, [0] * len(layers), set()
    arrived = {"n": 0, "max_read": -1}

    def release(i, s):
        if 0 <= s < N and i != last:
            refs[(i, s)] -= 1
            if refs[(i, s)] == 0:
                del val[(i, s)]

    def get(i, s):
        if (i, s) in val:
            return val[(i, s)]
        assert (i, s) not in computed, f"layer {i} frame {s} computed twice"
        kind, fn, skip = layers[i]
        if kind == "in":
            assert s < arrived["n"], f"frame {s} read before it arrived"
            arrived["max_read"] = max(arrived["max_read"], s)
            z = F.pixel_unshuffle(x[s:s + 1], 2)
            z = torch.cat([z, model.sigma_map(sig, z)], dim=1)
            y = (conv2d_nhwc(u.fusion, z.permute(0, 2, 3, 1)) if u.channels_last
                 else u.fusion(z).permute(0, 2, 3, 1))
        elif kind == "block":
            cur = get(i - 1, s)
            k = cur.shape[-1] // fn.shift_div
            prev = get(i - 1, s - 1)[..., :k] if s > 0 else cur.new_zeros(*cur.shape[:-1], k)
            nxt = get(i - 1, s + 1)[..., k:2 * k] if s < N - 1 else cur.new_zeros(*cur.shape[:-1], k)
            y = fn.branch(cur, torch.cat([prev, nxt, cur[..., 2 * k:]], dim=-1),
                          fn.attn_mask(cur.shape[1], cur.shape[2], cur.device) if u.enc0.block_fn else None,
                          sdpa=u.enc0.block_fn is not None, attention=u.enc0.attention)
            for d in (-1, 0, 1):
                release(i - 1, s + d)
        else:
            y = fn(get(i - 1, s), get(skip, s)) if skip is not None else fn(get(i - 1, s))
            release(i - 1, s)
            if skip is not None:
                release(skip, s)
        computed.add((i, s))
        # readers inside the sequence (a block at frame 0 or N-1 has no reader beyond it)
        n = readers[i] - (1 if i + 1 < len(layers) and layers[i + 1][0] == "block" and s == 0 else 0) \
            - (1 if i + 1 < len(layers) and layers[i + 1][0] == "block" and s == N - 1 else 0)
        val[(i, s)], refs[(i, s)] = y, n
        held[i] = max(held[i], sum(1 for (j, _) in val if j == i))
        return y

    out = torch.empty_like(x)
    delay, t = [], 0
    L = cfg.blocks
    for n in range(N):
        arrived["n"] = n + 1
        while t < N and (t + L + 1 <= n or n == N - 1):
            f = [get(last, reflect_index(t + d, N)) for d in (-1, 0, 1)]
            delay.append(arrived["max_read"] - t)
            xc = x[t:t + 1]
            out[t] = sigma_gate(model.head_out(f, xc), xc, sig, cfg.sigma_gate)[0]
            val.pop((last, t - 1), None)   # no later output reads F_{t-1}
            t += 1
    return out[..., :H, :W], {"held": held, "delay": delay, "layers": [k for k, _, _ in layers],
                              "x0": i_x0, "x1": i_x1}


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def gflop_per_frame(cfg: Config, H: int, W: int) -> float:
    """Multiply-adds x 2 of one output frame in steady state (one U-Net pass + head, and with
    fusion "frame" one per-frame encoder pass; fusion "shift": one U-Net pass per frame, its
    fusion conv 13 -> C0, reused by every output that reads it), padded size, in GFLOP."""
    m = cfg.pad_multiple
    H, W = H + (-H) % m, W + (-W) % m
    c0, c1, c2 = cfg.channels
    n0 = (H // 2) * (W // 2)
    n1, n2 = n0 // 4, n0 // 16
    N = cfg.window ** 2
    r = cfg.mlp_ratio

    def block(C, n):  # qkv, proj, fc1, fc2 + QK^T and PV over N keys
        return n * (3 * C * C + C * C + 2 * r * C * C + 2 * N * C)

    d = cfg.depths
    nf = 2 * cfg.fusion_radius + 1
    if cfg.fusion == "frame":   # encoder once per frame (reused by every window), then fusion
        E = cfg.frame_channels
        macs = n0 * (13 * E * 9 + E * E * 9) + n0 * (nf * E + 1) * c0 * 9
    elif cfg.fusion == "shift":   # one stream per frame: its own fusion conv 13 -> C0 (the shift moves data only)
        macs = n0 * (3 * cfg.s2d ** 2 + 1) * c0 * 9
    else:
        macs = n0 * (nf * 12 + 1) * c0 * 9
    macs += block(c0, n0) * (d["enc0"] + d["dec0"]) + block(c1, n1) * (d["enc1"] + d["dec1"])
    macs += block(c2, n2) * d["mid"]
    macs += n1 * 4 * c0 * c1 + n2 * 4 * c1 * c2            # merges
    macs += n2 * c2 * 4 * c1 + n1 * 2 * c1 * c1             # expand1 + skip1
    macs += n1 * c1 * 4 * c0 + n0 * 2 * c0 * c0             # expand0 + skip0
    macs += n0 * c0 * 27 * 12                               # head
    return 2 * macs / 1e9
