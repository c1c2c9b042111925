#!/usr/bin/env python3
"""Where the CUDA engine's Swin blocks round to bf16, emulated in PyTorch on the CPU: how much PSNR
each rounding point costs on a clip, against the fp32 network (the CPU engine's function).

  python3 weights/block_rounding.py [--weights FILE] [--sample CLIP.mkv] [--frames 8] [--sigma 20]

The clip is decoded to rgb48le by build/bin/ffmpeg (else the ffmpeg on PATH), AWGN of `sigma`
(8-bit code values, seed 1234) is added and clipped to [0, 1], as tests/gpu_check.cpp's sample
check does (its noise comes from another generator, so the figures are not the GPU's to the
digit). The sequence runs through model.denoise_sequence() with every SwinBlock.forward replaced
by one that rounds to bf16 where a CUDA path does (the linear weights rounded too; everything
outside the blocks stays fp32, so the figures are the blocks' share only):
  always       LN1 out, qkv out (bf16 bias), the attention output O, LN2 out, the GELU out;
  P            the softmax probabilities (the fused block, swin_block_fused.cu (3));
  proj         the proj output with a bf16 bias, before its residual add;
  fc1          fc1's output with a bf16 bias, before the GELU.
Variants: the correct-first sequence as it was (proj, fc1), with the proj output fp32, with
both fp32 (kernels/cuda/network.cu now), and the fused block (P). Prints the PSNR against the
clean clip and its difference from the fp32 network's (tests/gpu_check.cpp asks <= 0.05 dB of
the whole CUDA network, whose other ops add about 0.02 dB on the bedroom sample). Takes about
a minute of CPU time for 8 frames of 320x192 (five runs).
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model as M  # noqa: E402
from export import load_weights  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
        return x + linear(self.fc2, u, False)
    return forward


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--weights", default=os.path.join(ROOT, "weights", "denoise-v1.safetensors"))
    ap.add_argument("--sample", default=os.path.join(ROOT, "samples", "bedroom_320x192_8bit.mkv"))
    ap.add_argument("--frames", type=int, default=8)
    ap.add_argument("--sigma", type=float, default=20.0)
    args = ap.parse_args()

    ff = os.path.join(ROOT, "build", "bin", "ffmpeg")
    ff = ff if os.access(ff, os.X_OK) else shutil.which("ffmpeg")
    if not ff:
        sys.exit("block_rounding: no build/bin/ffmpeg and no ffmpeg on PATH to decode the sample")
    info = subprocess.run([ff, "-hide_banner", "-i", args.sample], capture_output=True, text=True).stderr
    wh = re.search(r"Video:.*?, (\d+)x(\d+)", info)
    if not wh:
        sys.exit(f"block_rounding: no video size in ffmpeg's description of {args.sample}")
    W, H = int(wh.group(1)), int(wh.group(2))
    raw = subprocess.run([ff, "-v", "error", "-i", args.sample, "-frames:v", str(args.frames), "-f", "rawvideo",
                          "-pix_fmt", "rgb48le", "-"], capture_output=True, check=True).stdout
    if not raw or len(raw) % (W * H * 6):
        sys.exit(f"block_rounding: {len(raw)} bytes decoded, not whole {W}x{H} rgb48le frames")
    n = len(raw) // (W * H * 6)
    px = np.frombuffer(raw, "<u2")[: n * H * W * 3].reshape(n, H, W, 3).astype(np.float32) / 65535
    clean = torch.from_numpy(px).permute(0, 3, 1, 2).contiguous()
    g = np.random.default_rng(1234)
    noisy = (clean + torch.from_numpy(g.normal(0, args.sigma / 255, clean.shape).astype(np.float32))).clamp(0, 1)
    net = load_weights(args.weights).eval()

    fp32_forward = M.SwinBlock.forward

    def run(mode):
        M.SwinBlock.forward = fp32_forward if mode is None else make_block_forward(mode)
        with torch.no_grad():
            return M.denoise_sequence(net, noisy * 2 - 1, args.sigma) * 0.5 + 0.5

    def psnr(a, b):
        return float(10 * torch.log10(1 / ((a.clamp(0, 1) - b) ** 2).mean()))

    ref = run(None)
    pr = psnr(ref, clean)
    print(f"{os.path.basename(args.sample)} {W}x{H} N={n} sigma {args.sigma:g}: noisy {psnr(noisy, clean):.3f} dB, "
          f"fp32 network {pr:.3f} dB")
    for name, mode in [("correct-first, proj and fc1 outputs bf16 (before)", dict(P=False, proj=True, fc1=True)),
                       ("correct-first, proj output fp32", dict(P=False, proj=False, fc1=True)),
                       ("correct-first, proj and fc1 outputs fp32 (now)", dict(P=False, proj=False, fc1=False)),
                       ("fused block (P bf16, proj and fc1 outputs fp32)", dict(P=True, proj=False, fc1=False))]:
        o = run(mode)
        p = psnr(o, clean)
        print(f"  {name:52s} {p:.3f} dB, diff {p - pr:+.4f} dB, vs the fp32 output {psnr(o, ref):.1f} dB")
    M.SwinBlock.forward = fp32_forward


if __name__ == "__main__":
    main()
