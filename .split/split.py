import re, sys, os
src = open('docs/model.md').read().split('\n')
def L(a, b):  # 1-based inclusive
    return src[a-1:b]

J = 'docs/journal/'
E = [
 ('2026-11-29-model-v1.md', 'Model v1: the first trained weights',
  "Model v1 (972,356 parameters: the temporal Swin U-Net with the 3x3x3 stencil head, no alignment) was trained for 13 minutes on one NVIDIA H200 (15,827 steps, 1.01 M clips, AWGN only) and shipped until model v2 replaced it on 2026-12-05. On eval-davis4 it gives 36.71 / 33.34 / 31.48 / 30.20 / 29.22 dB at sigma 10..50, 2.0 to 2.7 dB short of the FastDVDnet-level target; the training budget was the binding constraint. Its weights and checkpoint are no longer in the tree: `git show a9fafd3:weights/denoise-v1.safetensors > weights/denoise-v1.safetensors` and `git show a9fafd3:weights/ckpt/last.pt` restore them; its log and eval are in docs/journal/data/training-v1/.",
  'a9fafd3..a821355 (2026-11-29; the model card of that time)', [(28, 148)]),
 ('2026-12-01-design-space.md', "Model v2's design space (weights/model.py)",
  "Model v2 adds `Config` fields to v1's network, each with v1's default so that v1 stays bit-exact: a per-frame encoder (`fusion`, `frame_channels`), the sigma gate (sigma 0 returns the input exactly) and per-tile alignment of the fusion windows (`align`, `align_tile`). The engines run the sigma gate and the alignment and refuse the per-frame encoder by name; `weights/check_attention.py` checks that the training engines compute the same function as v1's attention code.",
  '5468871..5e7d02e (2026-12-01 to 2026-12-03)', [(163, 191)]),
 ('2026-12-01-training-throughput.md', 'Training throughput (weights/train_step.py, weights/bench_train.py)',
  "How v2's training step got from v1's 944 clips/s to 3.13x that on one H200 at batch 256 (2.99x at the main run's batch 128): attention through SDPA, the whole step as one CUDA graph around compiled Swin blocks, batches built on a side stream, the synthetic clips' ops cut from 718 to 228, the three noise models from one draw, a portable Inductor compile cache (set-up 81.8 s cold, 20.4 s from the cache on an H100) and block matching without int64 candidate indices (the shipped network's alignment now 24.9 ms of an 83.8 ms step). Every bench names its command, card and output file (docs/journal/data/training-v2/).",
  'f5adda1..a820020 (2026-12-01 to 2026-12-06)', [(193, 418)]),
 ('2026-12-01-training-data-and-noise.md', "Model v2's training data and noise models (weights/data.py, weights/noise_models.py)",
  "v2 trains on all of the project's train-photos, train-video and train-video2 (never eval-davis4), with 8 % to 12 % synthetic clips, under a mix of noise models: AWGN (half the noisy clips), Poisson-Gaussian and Y'CbCr 4:2:0 chroma noise (a quarter each), 35 % clipped and quantised to 8 bit, sigma ~ U(0, 55), plus faithfulness terms (clean clips, maps above the noise, a block-mean loss). sigma is the RMS over R', G', B' of the noise's standard deviation in 8-bit code values. The section also records the synthetic clips' ops cut (718 -> 228 per batch) and the photo-warp option.",
  '5468871..c491298 (2026-12-01 to 2026-12-05)', [(420, 467)]),
 ('2026-12-01-faithfulness-probe.md', 'The faithfulness probe (weights/faithful.py, tests/cli_faithful.sh)',
  "The probe measures, in 8-bit code values, what the network does to content it should leave alone: identity at sigma 0, mean shift and colour cast of flat colours, a slow ramp, an 8 px grid, the chroma of a neutral 1-px checkerboard and the error on saturated lines and borders, with 8 noise draws since 2026-12-05. v1 is faithful only where the sigma map equals the real noise; v2 at the main run's end held 5 of 8 targets and the shipped v2h fine-tune holds all 8, and through the filter `tests/cli_faithful.sh` passes its 18 checks. It also records why the head's output clamp was widened to the input sample at inference.",
  '5468871..dedabe2 (2026-12-01 to 2026-12-05)', [(469, 536)]),
 ('2026-12-01-architecture-studies.md', 'Architecture studies (weights/study.py, weights/candidates.py)',
  "Four studies on one H200 compared candidate networks within the engines' limits and 2x v1's GFLOP. Short runs (782 steps) ranked nothing; the step-matched fourth study (3,000 steps of 128 clips each) found depth (2/4/6/4/2, 1.77 M parameters) +0.26 dB over v1 on the validation split and the per-frame encoder with a wider temporal radius -0.85 dB, so `deep` became the main run's architecture. A checkpoint bug (AdamW moments converted to bf16 in the live optimiser) found by the second study was fixed.",
  '5468871..1ac3b35 (2026-12-01)', [(538, 605)]),
 ('2026-12-06-depth-study.md', 'Depth at the finest level: an architecture study for a v3',
  "The fifth architecture study (one H100, 3,000 steps of 128 clips per candidate, one seed each, recipe v2, no alignment) put one or two more Swin blocks at the finest level against v2's depths: 3/4/6/4/3 gained +0.16 dB on the validation split and +0.14 on val_davis for 1.11x v2's inference FLOPs; 4/4/6/4/4 gained nothing (-0.09). One seed each, so a lead for a v3, not a decision.",
  '5e85371..a820020 (2026-12-06)', [(606, 639)]),
 ('2026-12-02-main-run-divergence.md', 'Model v2 main run: training in pieces, and the divergence at lr 5.6e-4 and 2.8e-4',
  "v2's main run trains in pieces of 15-20 minutes (a run folder, checkpoints every 2 minutes, a plan of warm-up, stable lr and cosine decay). Its first piece diverged at lr 5.6e-4 after 4 training minutes and its second at 2.8e-4 after about 12: the qkv weights and LayerNorm of a few attention blocks grew until the softmax saturated (attention-logit growth). Guards (attention norms logged, best.pt, a `diverged` event) and sigma-reparametrised qkv weights (`--qkv-reparam`) followed.",
  '73e0364..354d9bf (2026-12-02 to 2026-12-03)', [(641, 716)]),
 ('2026-12-03-qkv-reparam-and-sigma-gate.md', 'Sigma-reparametrised qkv, the sigma gate, and v2 against v1 at 31.64 minutes',
  "With the qkv weights sigma-reparametrised the main run was stable at lr 2.8e-4 (7.84 -> 31.64 training minutes on one H200); the sigma gate made the identity at sigma 0 exact, and the validation set moved to a CPU-drawn one that any machine reproduces. At 31.64 minutes v2 led v1 by 0.74 dB on the validation split but trailed it by 0.05 to 0.24 dB on eval-davis4: the split does not rank the two as eval-davis4 does. The engine's emulated bf16 cost for v2 is 0.03 to 0.05 dB.",
  '87a291b..a452645 (2026-12-03)', [(717, 869)]),
 ('2026-12-03-val-davis.md', 'A validation that tracks eval-davis4 (val_davis)',
  "Split by source, v2's lead on the validation split came from sam2-coffee and static clips; on the two held-out DAVIS sequences it was level with v1, as on eval-davis4. So train.py also validates on val_davis (16 clips of cows and dog, never eval-davis4), which then moved with eval-davis4 within 0.05 dB. v2 hardly uses its sigma map (its PSNR barely moves for maps 0.8x to 1.5x the noise), which led to recipe v2b.",
  '998bae1..84d5270 (2026-12-03)', [(870, 921)]),
 ('2026-12-03-recipe-v2b.md', 'Recipe v2b (31.64 -> 53.64 minutes), and the align option built',
  "22 minutes of recipe v2b (per-pixel loss only where the map equals the noise) on one H200 took the main run to 53.64 minutes: val_davis +0.20 dB, eval-davis4 36.73 / 33.41 / 31.58 / 30.34 / 29.40 dB, now above v1 at every sigma by 0.02 to 0.18 dB; the map response stayed flat. Zero-shot measurements pointed at motion (v2 leads v1 by 1.5 to 1.8 dB on static clips, 0.2 to 0.3 on moving ones), and the `align` model option (per-tile block matching before the fusion conv) was built.",
  '3a6b371..12bccae (2026-12-03)', [(923, 1055)]),
 ('2026-12-03-alignment.md', 'Per-tile alignment (align 24), 53.64 -> 70.64 minutes',
  "A branch with the fusion windows aligned per tile (`--align 24`) trained 17 minutes on one H200 and adapted within minutes: val_davis +1.14 dB, eval-davis4 +0.37 to +0.92 dB (37.10 / 34.08 / 32.41 / 31.24 / 30.31), so it became the main line, at 45 % of the throughput. It also records why the zero-shot figures said little, what the alignment costs in training, and what the engines needed to ship it.",
  '8522d1b..4d787e0 (2026-12-03)', [(1057, 1179)]),
 ('2026-12-04-lr-decay.md', "The main run's decay, 70.64 -> 103.31 minutes",
  "At the peak lr the curve had flattened (about 0.3 dB per doubling), so the plan's cosine decay was run (plan shortened to 103.3 minutes): val mean +0.53 dB, val_davis +0.11, eval-davis4 37.23 / 34.22 / 32.55 / 31.38 / 30.45 dB, v1 + 0.52 to 1.23 dB, 0.25 to 0.97 dB short of the bar (v1 + 1.5). 5 of 8 faithfulness targets held. This state was the first shipped v2 (commit 7579b70's weights).",
  'b81fa43..1f17ada (2026-12-04)', [(1181, 1284)]),
 ('2026-12-05-shipping-v2.md', 'Shipping v2: against v1, and the ship procedure',
  "The shipped v2 (the 121.29-minute recipe v2h fine-tune) against v1 and the main run's end on eval-davis4 (v1 + 0.48 to 1.21 dB; the fine-tune cost 0.02 to 0.04 dB), per sequence, through the filter on the sample clips (`tests/cli_quality.sh`), and in `make eval` (3.04 to 4.33 dB above bm3d, the best tuned FFmpeg denoiser); then the ship procedure as it ran (`weights/ship.sh`, 1 min 13 s on the 2-core development machine).",
  '7cae56e..dfb85bd (2026-12-05)', [(1286, 1339), (1432, 1469)]),
 ('2026-12-03-device-calls.md', 'Device calls for training: packs, call plans and what lost machines',
  "How training ran on the lent GPU machine: data packs under the 64 MiB carry limit, call plans for a bench, a study and a training piece, the CPU smoke test of every subcommand, and the lessons of lost calls (a machine goes back 30 s after a call; a `pgrep -f` that matched itself; background unpacks that lost their working tree: unpack in the foreground).",
  'f3b316d..6bccdbb (2026-12-01 to 2026-12-06)', [(1341, 1430)]),
 ('2026-12-05-recipe-v2c-fine-tune.md', 'Recipe v2c: a faithfulness fine-tune (not shipped)',
  "A 12-minute fine-tune of the main run's end with recipe v2c (per-pixel L1 on every clip) on one H200 held PSNR and fixed the 8 px grid (1.33 -> 0.86) but made the neutral chroma of a 1-px grey pattern worse (1.16 -> 1.50), so it was not shipped.",
  '2972852 (2026-12-05)', [(1471, 1487)]),
 ('2026-12-05-recipe-v2f.md', 'Recipe v2f: grid and chroma terms, and its fine-tune (not shipped)',
  "Where the neutral chroma comes from (a 1-px grey pattern's contrast lowered more in B' than in R'), recipe v2f's chroma and grid loss terms, and an 8-minute v2f fine-tune on one H200: through the filter 15 of 16 checks (8 px grid 1.055 -> 0.484) but the neutral chroma still 1.277; not shipped.",
  'bd205d9..3987990 (2026-12-05)', [(1489, 1538)]),
 ('2026-12-05-weight-average-and-deepening.md', 'A moving average of the weights, and function-preserving deepening',
  "Two tools prepared on the CPU: `train.py --ema` (validation, probe, best.pt and export use the weights' moving average) and `weights/deepen.py` (new Swin blocks that start as identities, so a deeper network starts at v2's exact output), with the next piece's command.",
  '1b44cb8..e7544ca (2026-12-05)', [(1540, 1579)]),
 ('2026-12-05-deeper-network-v2g.md', 'A deeper network with recipe v2g (not shipped), and where the window-periodic error comes from',
  "v2 with its middle stage deepened from 6 to 12 blocks (2.97 M parameters, 1.27x the inference cost) trained 20 minutes with recipe v2g and the weights' average on one H200: +0.03 dB val, +0.02 val_davis, 15 of 16 filter checks, the neutral chroma worse: not shipped. The decoder's sub-pixel PatchExpands carry the window-periodic error of noise-free input. Recipe v2h (grey clips, neutral 1-px pattern backgrounds) was defined.",
  '4fe08e9..7579b70 (2026-12-05)', [(1581, 1671)]),
 ('2026-12-05-recipe-v2h-fine-tune.md', 'Recipe v2h fine-tune: the shipped weights (103.31 -> 121.29 minutes)',
  "18 minutes of recipe v2h from the main run's end on one H100 brought every faithfulness target within bounds (neutral chroma 1.16 -> 0.40, 16 of 16 filter checks) for 0.02 to 0.04 dB of eval-davis4 (37.19 / 34.19 / 32.52 / 31.35 / 30.43); its 121.29-minute checkpoint is the shipped `weights/denoise-v2.safetensors` (commit f4bae0f). Also: the device time such a session takes, and the baseline of v2 and v1 under each noise model (v2 loses about 1 dB on 4:2:0 chroma noise, v1 3 to 11 dB).",
  'f4bae0f..9eecd8c (2026-12-05)', [(1673, 1772)]),
 ('2026-12-05-motion-gap.md', "Where val_davis's remaining error is: motion",
  "`weights/motion_gap.py` replaced val_davis's frames by the centre frame (perfect motion compensation): v2 would gain 3.4 dB at sigma 10, v1 only 0.6; even a global 0.25 px per frame translation costs v2 1.3 dB, and the tile alignment leaves 10.3 code values of residual that finer tiles or sub-pixel offsets barely reduce. The network has to learn to use misaligned neighbours; video share 0.75 and photo warp were planned.",
  'de9521e..c491298 (2026-12-05)', [(1774, 1824)]),
 ('2026-12-05-video-share.md', 'Video share 0.75 (121.29 -> 140.29 minutes, not shipped)',
  "19 minutes with 66 % of the clips real video instead of 44 % (one H100) gave +0.03 dB val_davis and +0.02 to +0.04 dB eval-davis4 (37.21 / 34.21 / 32.55 / 31.39 / 30.47), every colour target held, and 1,476 clips/s (+38 % against the v2h fine-tune on the same card kind); the motion gap did not shrink.",
  'fdf6b98..2725f2e (2026-12-06)', [(1826, 1887)]),
 ('2026-12-05-dense-flow.md', 'What motion compensation could still give: dense optical flow',
  "Clips warped onto the centre frame by dense optical flow from the clean frames gain the network only 0.05 dB at sigma 10 (0.32 / 0.40 at 30 / 50), and flow from noisy frames loses that; 78 % of the excess error at sigma 10 lies where the window's residual is about the noise's size, not in occlusions. The sigma-10 shortfall is spatial denoising of textured content, not motion compensation.",
  '12a6d85..f490dd4 (2026-12-06)', [(1889, 1933)]),
 ('2026-12-06-photo-warp.md', 'Photo clips warped by 2 px (140.29 -> 155.29 minutes, not shipped)',
  "15 minutes with the moving photo clips deformed by a smooth field of up to 2 px (one H100) gave +0.027 dB val_davis and eval-davis4 37.25 / 34.23 / 32.56 / 31.39 / 30.47 dB (+0.04 to +0.06 over the shipped file), every colour target held; static and moving content gained alike, so the warp did not teach the network to use misaligned texture. Not shipped; its checkpoint was the last `weights/ckpt-v2/main_last.pt` (`git show 84a8c13~1:weights/ckpt-v2/main_last.pt`).",
  'e1f9c1d..b01920c (2026-12-06)', [(1935, 1990)]),
 ('2026-12-06-end-of-v2-training.md', "Where v2's training ends: the curve has flattened",
  "From the main run's end (103.31 minutes) to 155.29 minutes eval-davis4 moved by +0.01 to +0.02 dB and val_davis by +0.02: about 0.03 dB per doubling, 0.15 from the shipped state; the bar (v1 + 1.5 dB) is 1.5 to 6.3 doublings away. More pieces of v2 are not the way to it; a v3 with more spatial capacity (depth at the finest level, within the 2x v1 inference cap) trained from scratch is. The card's status paragraph as it stood at the end of v2's training closes the file.",
  'dabe399..a820020 (2026-12-06)', [(1992, 2054), (150, 161)]),
]

QUOTES = {
 'Thirteenth piece': ('recipe v2h fine-tune', '2026-12-05-recipe-v2h-fine-tune.md'),
 'Fourteenth piece': ('video share 0.75', '2026-12-05-video-share.md'),
 'Fifteenth piece': ('photo warp', '2026-12-06-photo-warp.md'),
 'Eighth and ninth pieces': ("the main run's decay", '2026-12-04-lr-decay.md'),
 'Training throughput': ('Training throughput', '2026-12-01-training-throughput.md'),
 'On the H200': ('On the H200', '2026-12-01-training-throughput.md'),
 'Faithfulness': ('Faithfulness', '2026-12-01-faithfulness-probe.md'),
 'Architecture study': ('Architecture studies', '2026-12-01-architecture-studies.md'),
 "Where v2's training ends": ("Where v2's training ends", '2026-12-06-end-of-v2-training.md'),
 'v2 against v1': ('v2 against v1', '2026-12-05-shipping-v2.md'),
 'Reproduce (v2): ship': ('Reproduce (v2): ship', '2026-12-05-shipping-v2.md'),
 'Data': ('Data', '2026-12-01-training-data-and-noise.md'),
 "Where val_davis's remaining error is": ("Where val_davis's remaining error is", '2026-12-05-motion-gap.md'),
 'What motion compensation could still give': ('What motion compensation could still give', '2026-12-05-dense-flow.md'),
 'The curve and what it says': ('The curve and what it says', '2026-12-03-recipe-v2b.md'),
 'A validation that tracks eval-davis4': ('A validation that tracks eval-davis4', '2026-12-03-val-davis.md'),
 'Where the window-periodic error comes from': ('Where the window-periodic error comes from', '2026-12-05-deeper-network-v2g.md'),
 'Evaluation': ('Evaluation', '2026-11-29-model-v1.md'),
 'Model v2': ('Model v2', '2026-12-01-design-space.md'),
}
HEAD = {
 '### The main run so far (weights/ckpt-v2/)': '## The main run (docs/journal/data/training-v2/)',
}

def moved_path(m):
    s = m.string; i = m.start()
    if i > 0 and s[i-1] == ':':
        return m.group(0)   # git show REV:path names the old place at a commit
    p = m.group(0)
    if p.startswith('weights/ckpt-v2/main_last.pt') or p.startswith('weights/ckpt/last.pt'):
        return p
    p = p.replace('weights/ckpt-v2', 'docs/journal/data/training-v2', 1)
    p = p.replace('weights/ckpt/', 'docs/journal/data/training-v1/', 1)
    return p

def fix(t, fname):
    t = re.sub(r'weights/ckpt(-v2)?(/[A-Za-z0-9_.+-]*)*', moved_path, t)
    t = re.sub(r'(?<!:)docs/model/study-', 'docs/journal/data/study-', t)
    t = re.sub(r'(?<!:)docs/device/', 'docs/journal/data/device/', t)
    t = t.replace('](model/training', '](../model/training')
    t = t.replace('../shared/data', '<data>')
    t = t.replace('/root/', '<home>/')
    t = t.replace("lead's checkout (/work/main)", "lead's checkout (the repository root)")
    t = t.replace('/tmp/v2-121.29.pt', 'v2-121.29.pt').replace('/tmp/deep12.pt', 'deep12.pt')
    t = t.replace('/tmp/unpack.lock', '<tmp>/unpack.lock')
    def q(m):
        k = m.group(1)
        if k in QUOTES:
            text, f = QUOTES[k]
            if f == fname: return '"%s" (in this file)' % k if False else '"%s"' % k
            return '[%s](%s)' % (text, f)
        return m.group(0)
    t = re.sub(r'"([^"\n]{2,60})"', q, t)
    return t

for fname, title, summary, commits, ranges in E:
    body = []
    for a, b in ranges:
        chunk = L(a, b)
        # the range's own heading is replaced by the file's title
        if chunk and chunk[0].startswith('#') and (a, b) == ranges[0]:
            chunk = chunk[1:]
        elif chunk and chunk[0].startswith('#'):
            pass
        if (a, b) == (150, 161):
            chunk = ['', "## The model card's v2 status, as it stood (2026-12-06)"] + chunk[1:]
        body += chunk
    out = []
    for line in body:
        if line in HEAD: line = HEAD[line]
        elif re.match(r'^#{2,3} ', line): line = '## ' + line.lstrip('#').strip()
        out.append(line)
    text = '\n'.join(out).strip('\n')
    text = fix(text, fname)
    import textwrap
    W=lambda x: textwrap.fill(x, 100, break_on_hyphens=False, break_long_words=False)
    summary = W(summary)
    doc = '# %s\n\n%s\n\n' % (title, summary) + W('Commits: %s. Moved from docs/model.md (84a8c13) with its text kept; paths of files that moved since are given at their new place (the training logs and evals in docs/journal/data/), the project\'s data folder is written `<data>` and the GPU machine\'s home `<home>`.' % commits) + '\n\n%s\n' % text
    open(J + fname, 'w').write(doc)
    print(fname, doc.count('\n'))
