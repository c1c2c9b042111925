#!/usr/bin/env python3
"""Where the CUDA engine rounds to bf16, emulated in PyTorch on the CPU: how much PSNR each
rounding point costs on a clip, against the fp32 network (the CPU engine's function).

  python3 weights/experiments/bf16_rounding.py [--weights FILE] [--sample CLIP.mkv] [--frames 8] [--sigma 20]

The clip is decoded to rgb48le by build/bin/ffmpeg (else the ffmpeg on PATH), AWGN of `sigma`
(8-bit code values, seed 1234) is added and clipped to [0, 1], as tests/gpu/api_check.cpp's sample
check does (its noise comes from another generator, so the figures are not the GPU's to the
digit). The sequence runs through model.denoise_sequence() with SwinBlock.forward, UNet.forward
and Denoiser.head_out replaced by ones that round to bf16 where a CUDA path does (weights of the
rounded ops in bf16 too). Rounding points, kernels/cuda/network.cu's value path:
  Swin blocks, always: LN1 out, qkv out (bf16 bias), the attention output O, LN2 out, the GELU out;
    P       the softmax probabilities (the fused block, swin_block_fused.cu (3));
    proj    the proj output with a bf16 bias, before its residual add;
    fc1     fc1's output with a bf16 bias, before the GELU;
  outside the blocks (the residual stream between them stays fp32):
    input   the network input (frame_in's bf16 s2d frames and sigma map) and the fusion conv's
            weights (conv3x3_tc.cu);
    merge   each patch merge's LayerNorm output and weight (patch_tc.cu / merge_s2d_layernorm);
    expand  each patch expand's input (lo), weight and output (up) and the skip linear's weight
            (patch_tc.cu / the cast + linear + d2s_concat sequence; the last variants keep one of
            lo, the two weights, up in fp32 in the whole path); the skip map enters the skip linear as
            two bf16 parts, exact to about 2^-17 (fp32 here), or with `skip` rounded once to bf16
            (the engine before it split it);
    head    the features F (the feature ring is bf16), the centre frame (the head's residual) and
            the head's weights (head_tc.cu);
    stream  the residual stream stored in bf16 (swin_block_fused.cu's kBf16Res, rounding (7)):
            each block's output, the fusion conv's, each merge's and each expand's (the skip map
            is then bf16 itself).
Variants: the correct-first block as it was (proj, fc1), with both outputs fp32 (network.cu now),
the fused block (P); then the fused path with the points outside the blocks added one at a time
and all together (the whole fused path), the whole path with the skip map rounded once, with the
bf16 residual stream, the whole path with each outside point kept fp32, and with each of the
expand's operands (lo, weights, up) kept fp32.
Prints the PSNR against the clean clip and its difference from the fp32 network's
(tests/gpu/api_check.cpp asks <= 0.05 dB of the whole CUDA network). About 3 minutes of CPU time for
8 frames of 320x192 (seventeen runs).

  python3 weights/experiments/bf16_rounding.py --random 320x192 [--weights FILE] [--seeds 3]

The inputs of tests/gpu/network_check.cpp's network checks instead of a clip: 7 frames uniform in
[-0.9, 0.9] rounded to bf16, sigma 20, the U-Net on the windows of 5 starting at frames 0, 1, 2
(F_0..F_2; no alignment: the check calls Net::features directly) and the head on those features
and frame 3. Prints the relative L2 and max abs error of each F_s and of the head output against
the fp32 network, for the whole fused path and the whole correct-first path (the same points
outside the blocks), per seed: the error a bf16 engine that rounds where ours does is expected to
show in those checks.

  python3 weights/experiments/bf16_rounding.py --moving 512x384 [--weights tests/data/golden_align_weights.safetensors]

gpu_check's aligned-model API check instead: a smooth texture whose rows pan in four bands at
their own speeds, AWGN of 20 code values, 8 bit, 7 frames (tests/gpu/align_check.cpp moving_clip, drawn
by another generator), through model.denoise_sequence (with the model's alignment) in fp32 and
along the whole fused path; the outputs compared as they are, quantised to 8-bit R'G'B', and
through 8-bit Y'CbCr (BT.601 limited range, 4:4:4), the check's yuv420p output being between the
two: a rounding that moves an output across a code boundary costs a whole code there.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # weights/: the package
import denoise_train.model as M  # noqa: E402
from denoise_train.checkpoint import load_weights  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def bf(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.bfloat16).float()


def linear(l: torch.nn.Linear, x: torch.Tensor, round_out: bool) -> torch.Tensor:
    """x W^T + b with W in bf16; round_out: bias in bf16 and the output rounded to bf16."""
    b = bf(l.bias) if round_out else l.bias
    y = x @ bf(l.weight).t() + b
    return bf(y) if round_out else y


def make_block_forward(mode: dict):
    def forward(self, x, mask=None, sdpa=False):
        B, H, W, C = x.shape
        h = bf(self.norm1(x))
        if self.shift:
            h = torch.roll(h, (-self.shift, -self.shift), (1, 2))
        a = self.attn
        w = M.window_partition(h, self.ws)
        nWB, N, _ = w.shape
        qkv = linear(a.qkv, w, True).view(nWB, N, 3, a.heads, a.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        bias = a.relative_position_bias_table[a.rpi.view(-1)].view(N, N, a.heads).permute(2, 0, 1)
        s = (q * a.scale) @ k.transpose(-2, -1) + bias
        m = self.attn_mask(H, W, x.device)
        if m is not None:
            nW = m.shape[0]
            s = (s.view(nWB // nW, nW, a.heads, N, N) + m[None, :, None]).view(nWB, a.heads, N, N)
        p = s.softmax(-1)
        if mode["P"]:
            p = bf(p)
        o = bf((p @ v).transpose(1, 2).reshape(nWB, N, C))
        h = M.window_reverse(linear(a.proj, o, mode["proj"]), self.ws, B, H, W)
        if self.shift:
            h = torch.roll(h, (self.shift, self.shift), (1, 2))
        x = x + h
        u = bf(F.gelu(linear(self.fc1, bf(self.norm2(x)), mode["fc1"]), approximate="tanh"))
        x = x + linear(self.fc2, u, False)
        return bf(x) if mode["stream"] else x
    return forward


def make_unet_forward(mode: dict):
    st = bf if mode["stream"] else (lambda t: t)

    def forward(self, z):
        if mode["input"]:
            x0 = F.conv2d(bf(z), bf(self.fusion.weight), self.fusion.bias, padding=1).permute(0, 2, 3, 1)
        else:
            x0 = self.fusion(z).permute(0, 2, 3, 1)
        x0 = self.enc0(st(x0))

        def merge(m, x):
            if not mode["merge"]:
                return st(m(x))
            return st(bf(m.norm(M.s2d_nhwc(x))) @ bf(m.reduction.weight).t())

        def expand_skip(e, skip_lin, lo, skip):
            if not mode["expand"]:
                return skip_lin(torch.cat([e(lo), skip], dim=-1))
            r = {k: mode.get(f"expand_{k}", True) for k in ("lo", "weights", "up")}
            wr = bf if r["weights"] else (lambda t: t)
            up = (lo if not r["lo"] else bf(lo)) @ wr(e.expand.weight).t() + e.expand.bias
            up = M.d2s_nhwc(bf(up) if r["up"] else up)
            s = bf(skip) if mode["skip"] else skip
            return st(torch.cat([up, s], dim=-1) @ wr(skip_lin.weight).t() + skip_lin.bias)

        x1 = self.enc1(merge(self.merge0, x0))
        x2 = self.mid(merge(self.merge1, x1))
        y1 = self.dec1(expand_skip(self.expand1, self.skip1, x2, x1))
        return self.dec0(expand_skip(self.expand0, self.skip0, y1, x0))
    return forward


def make_head_out(mode: dict, fp32_head_out):
    def head_out(self, feats, centre):
        if not mode["head"]:
            return fp32_head_out(self, feats, centre)
        w = bf(self.head.weight)
        w2 = w.permute(0, 2, 1, 3, 4).reshape(w.shape[0], -1, 3, 3)
        y = F.conv2d(torch.cat([bf(f) for f in feats], dim=-1).permute(0, 3, 1, 2), w2, self.head.bias, padding=1)
        x = F.pixel_unshuffle(bf(centre), 2)
        return F.pixel_shuffle(M.output_clamp(y + x, x, False), 2)
    return head_out


def rounded(mode, fn):
    """fn() with the network's forwards replaced by the rounding ones of `mode` (None: fp32)."""
    fp32 = (M.SwinBlock.forward, M.UNet.forward, M.Denoiser.head_out)
    if mode is not None:
        M.SwinBlock.forward = make_block_forward(mode)
        M.UNet.forward = make_unet_forward(mode)
        M.Denoiser.head_out = make_head_out(mode, fp32[2])
    try:
        with torch.no_grad():
            return fn()
    finally:
        M.SwinBlock.forward, M.UNet.forward, M.Denoiser.head_out = fp32


OUTSIDE = ("input", "merge", "expand", "head")


WHOLE = dict(P=True, proj=False, fc1=False, skip=False, stream=False, **dict.fromkeys(OUTSIDE, True))


def size_arg(opt: str, v: str, multiple: int):
    m = re.fullmatch(r"(\d+)x(\d+)", v)
    if not m or int(m.group(1)) % multiple or int(m.group(2)) % multiple:
        sys.exit(f"bf16_rounding: {opt} {v}: want WxH, multiples of {multiple}")
    return int(m.group(1)), int(m.group(2))


def moving_clip(args):
    W, H = size_arg("--moving", args.moving, 4)
    N, pad = 7, 8 * 7
    g = np.random.default_rng(977)
    r = torch.from_numpy(g.uniform(-1, 1, (1, 3, H + pad, W + pad)).astype(np.float32))
    base = F.avg_pool2d(F.pad(r, (3, 3, 3, 3), mode="replicate"), 7, stride=1)[0]
    clean = torch.zeros(N, 3, H, W)
    for t in range(N):
        for y in range(H):
            band = y * 4 // H
            sy, sx = y + pad // 2 + (band - 1) * t, pad // 2 + (3 - 2 * band) * t
            clean[t, :, y] = 0.5 + 0.4 * (3 * base[:, sy, sx:sx + W]).clamp(-1, 1)
    noisy = ((clean + torch.from_numpy(g.normal(0, 20 / 255, clean.shape).astype(np.float32))) * 255).round()
    x = noisy.clamp(0, 255) / 255 * 2 - 1
    net = load_weights(args.weights).eval()
    ref = rounded(None, lambda: M.denoise_sequence(net, x, 20.0))
    out = rounded(WHOLE, lambda: M.denoise_sequence(net, x, 20.0))
    print(f"{os.path.basename(args.weights)} (align {net.cfg.align}, tile {net.cfg.align_tile}): moving clip {W}x{H} "
          f"N={N}, sigma 20; the whole fused path against the fp32 network (network units):")
    ycc = torch.tensor([[65.481, 128.553, 24.966], [-37.797, -74.203, 112.0], [112.0, -93.786, -18.214]]) / 255
    off = torch.tensor([16.0, 128.0, 128.0]).view(1, 3, 1, 1)

    def rgb8(t):
        return ((t * 0.5 + 0.5) * 255).round().clamp(0, 255) / 255 * 2 - 1

    def ycc8(t):
        y = (torch.einsum("ij,njhw->nihw", ycc, t * 0.5 + 0.5) * 255 + off).round().clamp(0, 255)
        return torch.einsum("ij,njhw->nihw", torch.linalg.inv(ycc), (y - off) / 255) * 2 - 1

    for name, q in (("as computed", lambda t: t), ("8-bit R'G'B'", rgb8), ("8-bit Y'CbCr 4:4:4", ycc8)):
        a, b = q(out), q(ref)
        d = a - b
        print(f"  {name:20s} rel L2 {float(d.norm() / b.norm()):.2e}, max abs {float(d.abs().max()):.2e}, "
              f"PSNR {float(10 * torch.log10(4 / (d ** 2).mean())):.2f} dB")


def random_inputs(args):
    W, H = size_arg("--random", args.random, 64)
    net = load_weights(args.weights).eval()
    cfg = net.cfg
    nf = 2 * cfg.fusion_radius + 1
    if cfg.fusion != "window":
        sys.exit("bf16_rounding: --random covers fusion 'window' models (the CUDA engine's)")
    blocks = sum(cfg.depths.values())
    print(f"{os.path.basename(args.weights)}: {blocks} Swin blocks, {nf} frames per window; "
          f"{W}x{H} px, uniform [-0.9, 0.9] bf16 frames, sigma {args.sigma:g}")
    paths = [("fused", WHOLE), ("correct-first", dict(WHOLE, P=False))]

    def network(frames):
        sig = torch.full((1,), args.sigma)
        smap = (sig / 255.0).view(1, 1, 1, 1).expand(1, 1, H // 2, W // 2)
        feats = []
        for s in range(3):
            z = F.pixel_unshuffle(frames[s:s + nf], 2).reshape(1, nf * 12, H // 2, W // 2)
            feats.append(net.unet(torch.cat([z, smap], dim=1)))
        return feats, net.head_out(feats, frames[nf // 2 + 1][None])

    def err(a, b):
        return float((a - b).norm() / b.norm()), float((a - b).abs().max())

    for seed in range(args.seeds):
        g = torch.Generator().manual_seed(seed)
        frames = bf(torch.rand(nf + 2, 3, H, W, generator=g) * 1.8 - 0.9)
        ref_f, ref_o = rounded(None, lambda: network(frames))
        for name, mode in paths:
            f, o = rounded(mode, lambda: network(frames))
            fe = [err(f[s], ref_f[s]) for s in range(3)]
            oe = err(o, ref_o)
            print(f"  seed {seed} {name:14s} F_s rel L2 " + " ".join(f"{r:.2e}" for r, _ in fe) +
                  f" (max abs {max(a for _, a in fe):.2e}); head output rel L2 {oe[0]:.2e} (max abs {oe[1]:.2e})",
                  flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--weights", default=os.path.join(ROOT, "weights", "denoise-v2.safetensors"))
    ap.add_argument("--sample", default=os.path.join(ROOT, "samples", "bedroom_320x192_8bit.mkv"))
    ap.add_argument("--frames", type=int, default=8)
    ap.add_argument("--sigma", type=float, default=20.0)
    ap.add_argument("--random", metavar="WxH", help="gpu_check's network-check inputs of this size (px) instead")
    ap.add_argument("--seeds", type=int, default=3, help="with --random: independent draws")
    ap.add_argument("--moving", metavar="WxH", help="gpu_check's aligned moving clip of this size (px) instead")
    args = ap.parse_args()
    if args.random:
        return random_inputs(args)
    if args.moving:
        return moving_clip(args)

    ff = os.path.join(ROOT, "build", "bin", "ffmpeg")
    ff = ff if os.access(ff, os.X_OK) else shutil.which("ffmpeg")
    if not ff:
        sys.exit("bf16_rounding: no build/bin/ffmpeg and no ffmpeg on PATH to decode the sample")
    info = subprocess.run([ff, "-hide_banner", "-i", args.sample], capture_output=True, text=True).stderr
    wh = re.search(r"Video:.*?, (\d+)x(\d+)", info)
    if not wh:
        sys.exit(f"bf16_rounding: no video size in ffmpeg's description of {args.sample}")
    W, H = int(wh.group(1)), int(wh.group(2))
    raw = subprocess.run([ff, "-v", "error", "-i", args.sample, "-frames:v", str(args.frames), "-f", "rawvideo",
                          "-pix_fmt", "rgb48le", "-"], capture_output=True, check=True).stdout
    if not raw or len(raw) % (W * H * 6):
        sys.exit(f"bf16_rounding: {len(raw)} bytes decoded, not whole {W}x{H} rgb48le frames")
    n = len(raw) // (W * H * 6)
    px = np.frombuffer(raw, "<u2")[: n * H * W * 3].reshape(n, H, W, 3).astype(np.float32) / 65535
    clean = torch.from_numpy(px).permute(0, 3, 1, 2).contiguous()
    g = np.random.default_rng(1234)
    noisy = (clean + torch.from_numpy(g.normal(0, args.sigma / 255, clean.shape).astype(np.float32))).clamp(0, 1)
    net = load_weights(args.weights).eval()

    def run(mode):
        """mode None: the fp32 network; else a dict of the rounding points above."""
        return rounded(mode, lambda: M.denoise_sequence(net, noisy * 2 - 1, args.sigma) * 0.5 + 0.5)

    def psnr(a, b):
        return float(10 * torch.log10(1 / ((a.clamp(0, 1) - b) ** 2).mean()))

    ref = run(None)
    pr = psnr(ref, clean)
    print(f"{os.path.basename(args.sample)} {W}x{H} N={n} sigma {args.sigma:g}: noisy {psnr(noisy, clean):.3f} dB, "
          f"fp32 network {pr:.3f} dB")
    outside = OUTSIDE
    none = dict.fromkeys(outside + ("skip", "stream"), False)
    fused = dict(P=True, proj=False, fc1=False, skip=False, stream=False)
    whole = dict(fused, **dict.fromkeys(outside, True))
    variants = [("blocks: correct-first as it was (proj, fc1 bf16)", dict(P=False, proj=True, fc1=True, **none)),
                ("blocks: correct-first now (proj, fc1 fp32)", dict(P=False, proj=False, fc1=False, **none)),
                ("blocks: fused (P bf16)", dict(fused, **none))]
    variants += [(f"fused blocks + {k}", dict(fused, **dict(none, **{k: True}))) for k in outside]
    variants += [("whole fused path (all of the above)", whole),
                 ("whole fused path, skip map rounded once", dict(whole, skip=True)),
                 ("whole fused path, bf16 residual stream", dict(whole, stream=True))]
    variants += [(f"whole fused path, {k} fp32", dict(whole, **{k: False})) for k in outside]
    variants += [(f"whole fused path, expand's {k} fp32", dict(whole, **{f"expand_{k}": False}))
                 for k in ("lo", "weights", "up")]
    for name, mode in variants:
        o = run(mode)
        p = psnr(o, clean)
        print(f"  {name:52s} {p:.3f} dB, diff {p - pr:+.4f} dB, vs the fp32 output {psnr(o, ref):.1f} dB", flush=True)

if __name__ == "__main__":
    main()
