#!/usr/bin/env python3
"""Checks of model fusion "shift" (temporal shift in every Swin block, denoise_train/model.py) on the
CPU, fp32 (TF32 off).

  python3 tests/weights/check_temporal_shift.py

  shift       model.temporal_shift against a per-stream loop: channels [0, k) of stream s from
              s-1, [k, 2k) from s+1, zeros beyond the ends, the rest unchanged (T = 1, 2, 5); a
              fusion "shift" Swin block equals the plain block run on the naively shifted input
              for its attention branch (the identity path keeps the stream's own features); the
              Config rules (align refused, shift_div range, JSON round trip, version 2).
  kernels     the "shift" candidate (depths 2/4/6/4/2) with randomised weights on a 7-frame 64x128
              clip: sdpa and sdpa + channels-last (the training engines' kernels) against the math
              path, output relative L2 < 1e-5 and max abs < 1e-4, every parameter gradient
              relative L2 < 1e-4, none missing; one SDPA call per Swin block and stream batch; the
              torch.compile'd sdpa_block (backend aot_eager: the graph, not a C++ compiler) on a
              small config, same bounds.
  locality    depths 1/1/1/1/1 (L = 5 blocks: receptive field L + 1 = 6 frames each way), a
              15-frame clip: the centre output changes when frame c-6 or c+6 changes (and c-1),
              and is bit-identical when frame c-7 or c+7 changes; a 7-frame clip's centre differs
              from a 13-frame clip's (the truncated receptive field the validation measures).
  sequence    denoise_sequence on exactly T frames gives forward(clip)'s centre output; on N = 17
              frames, output t (6 <= t <= 10) equals forward on the 13 frames t-6..t+6 (a clip
              that holds the whole receptive field), all within 1e-5; model.stream_sequence (the
              engine's schedule: frames arrive one by one, each (layer, frame) value computed once
              and freed after its last reader) equals denoise_sequence within 1e-5 on the math and
              the sdpa/channels-last kernels, emitting output t once frame t + L + 1 has arrived
              (never reading a frame before it arrives); validation.validate with
              frames = 9 feeds the network 9-frame clips (7 without), and refuses other fusions.
  flops       gflop_per_frame of "shift" vs the same depths with fusion "window": less by exactly
              the fusion conv's (61 - 13) x C0 x 9 multiply-adds per position.
  unchanged   Config() writes v1's JSON literally; the golden weights' and the shipped weights'
              configs round-trip to their metadata strings; the committed goldens
              (tests/data/golden_*tensors.safetensors: the output and denoise_sequence of 5, 1 and 2
              frames, v1 and v2-with-alignment configs) are reproduced within 2e-5.
Exit status 1 on any failure (an assertion names it); 77 without torch.
"""
from __future__ import annotations

import json
import os

from needs import need

need("torch", "numpy", "safetensors")
import torch  # noqa: E402

from denoise_train import candidates  # noqa: E402
from denoise_train.checkpoint import load_weights  # noqa: E402
from denoise_train.model import (Config, Denoiser, SwinBlock, denoise_sequence, gflop_per_frame,  # noqa: E402
                                 sdpa_block, stream_sequence, temporal_shift)
from check_attention import randomise, rel_l2  # noqa: E402  (perturbed biases and norms: every parameter shows)
from denoise_train.validation import validate  # noqa: E402
from needs import WEIGHTS  # noqa: E402

DATA = os.path.join(os.path.dirname(WEIGHTS), "tests", "data")
SMALL = {"enc0": 1, "enc1": 1, "mid": 1, "dec1": 1, "dec0": 1}
V1_JSON = ('{"channels": [32, 64, 128], "depths": {"dec0": 2, "dec1": 2, "enc0": 2, "enc1": 2, "mid": 3}, '
           '"format": "denoise-swin", "fusion_radius": 2, "head_dim": 32, "head_radius": 1, "heads": [1, 2, 4], '
           '"ln_eps": 1e-05, "mlp_ratio": 4, "pad_multiple": 64, "s2d": 2, "shift": 4, "temporal_radius": 3, '
           '"version": 1, "window": 8}')


def make(cfg: Config, seed: int = 5) -> Denoiser:
    torch.manual_seed(seed)
    m = Denoiser(cfg)
    randomise(m, torch.Generator().manual_seed(seed + 1))
    return m.eval()


def naive_shift(x: torch.Tensor, T: int, k: int) -> torch.Tensor:
    B = x.shape[0] // T
    out = x.clone()
    for b in range(B):
        for s in range(T):
            i = b * T + s
            out[i, ..., :k] = x[i - 1, ..., :k] if s > 0 else 0
            out[i, ..., k:2 * k] = x[i + 1, ..., k:2 * k] if s < T - 1 else 0
    return out


def check_shift() -> None:
    g = torch.Generator().manual_seed(1)
    for T in (1, 2, 5):
        for C, k in ((32, 4), (64, 8), (128, 16), (16, 5)):
            x = torch.randn(3 * T, 4, 6, C, generator=g)
            y = temporal_shift(x, T, k)
            assert torch.equal(y, naive_shift(x, T, k)), f"temporal_shift T {T} C {C} k {k}"
    # the block: its attention branch reads the shifted input, the identity path the stream's own
    cfg = Config(fusion="shift")
    torch.manual_seed(3)
    blk = SwinBlock(64, 2, cfg, shifted=True)
    with torch.no_grad():
        blk.norm1.bias.normal_()
    x = torch.randn(2 * 5, 16, 16, 64, generator=g)
    with torch.no_grad():
        got = blk(x, streams=5)
        xs = naive_shift(x, 5, 64 // 8)
        h = blk.norm1(xs)
        h = torch.roll(h, (-4, -4), (1, 2))
        from denoise_train.model import window_partition, window_reverse
        w = blk.attn(window_partition(h, 8), blk.attn_mask(16, 16, x.device))
        h = torch.roll(window_reverse(w, 8, 10, 16, 16), (4, 4), (1, 2))
        y = x + h
        ref = y + blk.fc2(torch.nn.functional.gelu(blk.fc1(blk.norm2(y)), approximate="tanh"))
        unshifted = blk(x)
    assert (got - ref).abs().max() < 1e-5, f"shift block vs naive: {(got - ref).abs().max()}"
    assert (got - unshifted).abs().max() > 1e-3, "the temporal shift changed nothing"
    # Config rules
    for bad in ({"align": 8}, {"shift_div": 1}, {"shift_div": 64}):
        try:
            Config(fusion="shift", **bad)
        except ValueError:
            pass
        else:
            raise AssertionError(f"Config(fusion='shift', {bad}) accepted")
    c = Config(fusion="shift", shift_div=4)
    d = json.loads(c.to_json())
    assert d["fusion"] == "shift" and d["shift_div"] == 4 and d["version"] == 2, d
    assert Config.from_json(c.to_json()) == c
    c8 = candidates.get("shift")[0]
    assert "shift_div" not in json.loads(c8.to_json()) and c8.shift_div == 8, c8.to_json()
    assert Config(shift_div=4).to_json() == Config().to_json(), "shift_div without fusion 'shift' changed the JSON"
    print("shift: temporal_shift = per-stream loop (T 1/2/5, k 4/8/16/5); block = plain block on the naive "
          "shift (attention branch only); Config rules and JSON ok")


def run(model, clip, sigma, proj, **kernels):
    model.set_engine(**kernels)
    model.zero_grad(set_to_none=True)
    calls = []
    f0 = torch.nn.functional.scaled_dot_product_attention

    def counted(*a, **k):
        calls.append(1)
        return f0(*a, **k)
    torch.nn.functional.scaled_dot_product_attention = counted
    try:
        y = model(clip, sigma)
    finally:
        torch.nn.functional.scaled_dot_product_attention = f0
    want = model.cfg.blocks if kernels.get("sdpa") else 0
    assert len(calls) == want, f"{len(calls)} SDPA calls, expected {want}"
    (y * proj).sum().backward()
    grads = {n: None if p.grad is None else p.grad.detach().clone() for n, p in model.named_parameters()}
    model.set_engine()
    return y.detach(), grads


def compare(name, y, g, y0, g0) -> None:
    r, m = rel_l2(y, y0), (y - y0).abs().max().item()
    assert r < 1e-5 and m < 1e-4, f"{name}: output rel L2 {r:.2e}, max abs {m:.2e}"
    missing = [n for n in g0 if g[n] is None]
    assert not missing, f"{name}: no gradient for {missing[:3]}"
    worst = max((rel_l2(g[n], g0[n]), n) for n in g0)
    assert worst[0] < 1e-4, f"{name}: gradient {worst[1]} rel L2 {worst[0]:.2e}"
    print(f"kernels: {name}: output rel L2 {r:.2e}, max abs {m:.2e}; gradients worst rel L2 {worst[0]:.2e} ok")


def check_kernels() -> None:
    model = make(candidates.get("shift")[0]).train()
    g = torch.Generator().manual_seed(7)
    clip = torch.rand(2, 7, 3, 64, 128, generator=g) * 2 - 1
    sigma = torch.tensor([7.0, 43.0])
    proj = torch.randn(2, 3, 64, 128, generator=g)
    y0, g0 = run(model, clip, sigma, proj)
    tables = [n for n in g0 if n.endswith("bias_table")]
    assert all(g0[n] is not None and g0[n].abs().max() > 0 for n in tables), "a zero bias-table gradient"
    compare("shift sdpa vs math", *run(model, clip, sigma, proj, sdpa=True), y0, g0)
    compare("shift sdpa channels-last vs math", *run(model, clip, sigma, proj, sdpa=True, channels_last=True), y0, g0)
    # the compiled unit of the compile engines (train_step: torch.compile(sdpa_block)), on a small config
    small = make(Config(fusion="shift", depths=dict(SMALL), shift_div=8)).train()
    clip5 = clip[:, :5]
    y0, g0 = run(small, clip5, sigma, proj)
    import torch._dynamo as dynamo
    dynamo.reset()
    compiled = torch.compile(sdpa_block, backend="aot_eager", dynamic=False)
    compare("small shift compiled sdpa_block (aot_eager) channels-last vs math",
            *run(small, clip5, sigma, proj, sdpa=True, block_fn=compiled, channels_last=True), y0, g0)


def check_locality() -> None:
    cfg = Config(fusion="shift", depths=dict(SMALL))
    model = make(cfg, seed=9)
    L = cfg.blocks
    g = torch.Generator().manual_seed(11)
    T, c = 15, 7
    clip = torch.rand(1, T, 3, 64, 64, generator=g) * 2 - 1
    sigma = torch.tensor([25.0])
    with torch.no_grad():
        y = model(clip, sigma)
        for d in (-(L + 2), -(L + 1), -1, 1, L + 1, L + 2):
            c2 = clip.clone()
            c2[:, c + d] = torch.rand(3, 64, 64, generator=g) * 2 - 1
            diff = (model(c2, sigma) - y).abs().max().item()
            if abs(d) <= L + 1:   # beyond the field the output is bit-identical, so any change is real
                assert diff > 0.0, f"locality: frame c{d:+d} (within {L + 1}) does not reach the centre ({diff:.1e})"
            else:
                assert diff == 0.0, f"locality: frame c{d:+d} (beyond {L + 1}) changed the centre by {diff:.1e}"
            print(f"locality: frame c{d:+d} changed -> centre output max abs change {diff:.2e} ok")
        short = model(clip[:, c - 3:c + 4], sigma)
        long = model(clip[:, c - 6:c + 7], sigma)
        gap = (short - long).abs().max().item()
        assert gap > 1e-6, "a 7-frame clip's centre equals a 13-frame clip's (no truncation?)"
        e = (long - y).abs().max().item()
        assert e < 1e-5, f"a 13-frame clip's centre differs from the 15-frame clip's by {e:.1e} (field 6 frames)"
    print(f"locality: receptive field {L + 1} frames each way ok; 7- vs 13-frame clip centre max abs {gap:.2e} "
          f"(the training clip's truncation)")


def check_sequence() -> None:
    cfg = Config(fusion="shift", depths=dict(SMALL))
    model = make(cfg, seed=13)
    D = cfg.blocks + 1
    g = torch.Generator().manual_seed(17)
    with torch.no_grad():
        seq = torch.rand(7, 3, 40, 70, generator=g) * 2 - 1
        whole = denoise_sequence(model, seq, 20.0)
        one = model(seq[None], torch.tensor([20.0]))[0]
        e = (whole[3] - one).abs().max().item()
        assert e < 1e-5, f"sequence: denoise_sequence of 7 frames, frame 3 vs forward {e:.2e}"
        N = 2 * D + 5
        seq = torch.rand(N, 3, 40, 70, generator=g) * 2 - 1
        whole = denoise_sequence(model, seq, 20.0)
        worst = 0.0
        for t in range(D, N - D):
            y = model(seq[None, t - D:t + D + 1], torch.tensor([20.0]))[0]
            worst = max(worst, (whole[t] - y).abs().max().item())
        assert worst < 1e-5, f"sequence: denoise_sequence vs forward on the receptive field: {worst:.2e}"
    print(f"sequence: 7 frames: frame 3 = forward(clip) ({e:.1e}); {N} frames: outputs {D}..{N - 1 - D} = forward on "
          f"their {2 * D + 1} frames (max abs {worst:.1e}) ok")
    # the streaming schedule: frame by frame, every (layer, frame) once, freed after its last reader
    for kernels in ({}, {"sdpa": True, "channels_last": True}):
        model.set_engine(**kernels)
        streamed, st = stream_sequence(model, seq, 20.0)
        e = (streamed - whole).abs().max().item()
        assert e < 1e-5, f"stream_sequence vs denoise_sequence ({kernels}): {e:.2e}"
        assert st["delay"][:N - D] == [D] * (N - D), f"stream_sequence delays {st['delay']}, expected {D} inside"
        # a block's input: frames s-1, s, s+1 at most (the skips wait longer: their own ring buffers)
        ring = [h for i, (h, k) in enumerate(zip(st["held"], st["layers"][1:]))
                if k == "block" and i not in (st["x0"], st["x1"])]
        assert max(ring) <= 3, f"a block's input held {max(ring)} frames: {st['held']}"
    model.set_engine()
    print(f"sequence: stream_sequence (frame by frame, each layer's value computed once) = denoise_sequence "
          f"({e:.1e}), output t emitted after frame t+{D}; frames held per layer {st['held']} ok")
    val = torch.rand(8, 9, 3, 64, 64, generator=g)
    lengths = []
    fwd = model.forward
    model.forward = lambda clip, sigma: (lengths.append(clip.shape[1]), fwd(clip, sigma))[1]
    r7, r9 = validate(model, val, sigmas=(30,)), validate(model, val, sigmas=(30,), frames=9)
    del model.forward
    assert lengths == [7, 9], f"validate's clip lengths {lengths}, expected [7, 9]"
    try:
        validate(Denoiser(Config()), val, sigmas=(30,), frames=9)
    except ValueError:
        pass
    else:
        raise AssertionError("validate(frames=9) accepted a fusion 'window' model")
    print(f"sequence: validate reads 7- and 9-frame clips ({r7['val_psnr_s30']} / {r9['val_psnr_s30']} dB, random "
          f"weights) and refuses frames for fusion 'window' ok")


def check_flops() -> None:
    for name in ("shift", "shift-34643"):
        cfg = candidates.get(name)[0]
        win = Config(depths=dict(cfg.depths))
        n0 = (1088 // 2) * (1920 // 2)
        d = gflop_per_frame(win, 1080, 1920) - gflop_per_frame(cfg, 1080, 1920)
        want = 2 * n0 * (61 - 13) * cfg.channels[0] * 9 / 1e9
        assert abs(d - want) < 1e-9, f"flops: {name}: {d} vs {want}"
        assert not candidates.engine_limits(cfg), candidates.engine_limits(cfg)
        assert candidates.engine_runs(cfg), "engine_runs says the engines run fusion 'shift'"
        print(f"flops: {name} {gflop_per_frame(cfg, 1080, 1920):.1f} GFLOP per 1080p frame (window fusion "
              f"{gflop_per_frame(win, 1080, 1920):.1f}); within engine_limits, engine_runs names the shift ok")


def check_unchanged() -> None:
    from safetensors import safe_open
    from safetensors.torch import load_file
    assert Config().to_json() == V1_JSON, Config().to_json()
    for fn in ("golden_weights", "golden_align_weights"):
        with safe_open(os.path.join(DATA, fn + ".safetensors"), "pt") as f:
            meta = f.metadata()
        assert Config.from_json(meta["config"]).to_json() == meta["config"], fn
    with safe_open(os.path.join(WEIGHTS, "denoise-v2.safetensors"), "pt") as f:
        meta = f.metadata()
    assert Config.from_json(meta["config"]).to_json() == meta["config"], "shipped config"
    for w, t in (("golden_weights", "golden_tensors"), ("golden_align_weights", "golden_align_tensors")):
        model = load_weights(os.path.join(DATA, w + ".safetensors")).eval()
        gt = load_file(os.path.join(DATA, t + ".safetensors"))
        worst = 0.0
        with torch.no_grad():
            worst = (model(gt["input.clip"][None], gt["input.sigma"])[0] - gt["output"]).abs().max().item()
            for key in ("seq", "seq1", "seq2"):
                y = denoise_sequence(model, gt[f"{key}.input"], float(gt[f"{key}.sigma"]))
                worst = max(worst, (y - gt[f"{key}.output"]).abs().max().item())
        assert worst < 2e-5, f"unchanged: {t}: max abs {worst:.2e}"
        print(f"unchanged: {t} (config version {model.cfg.version}): output and sequences max abs {worst:.1e} ok")
    print("unchanged: v1 JSON literal, golden and shipped configs round-trip ok")


def main() -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    check_shift()
    check_flops()
    check_unchanged()
    check_locality()
    check_sequence()
    check_kernels()
    print("temporal shift check: PASS")


if __name__ == "__main__":
    main()
