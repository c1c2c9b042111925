#!/bin/sh
# make eval: PSNR/SSIM and frames/s of denoise, FFmpeg's denoisers (hqdn3d nlmeans bm3d atadenoise
# fftdnoiz vaguedenoiser) and the noisy input on eval-davis4 at sigma 10..50 -> docs/quality.md,
# docs/quality/*.png, docs/quality/results.json. All through build/bin/ffmpeg + build/bin/denoise-noise.
#
# Environment (or make variables: make eval EVAL_FRAMES=5):
#   DENOISE_DATA   the data folder holding eval-davis4/ and train-video/ (required)
#   EVAL_FRAMES    first N frames of each sequence (default 25 = the full table; 5 = quick mode)
#   EVAL_SIGMAS    default "10 20 30 40 50"
#   EVAL_METHODS   default "noisy denoise hqdn3d nlmeans bm3d atadenoise fftdnoiz vaguedenoiser"
#   EVAL_SEQS      default: all sequences in eval-davis4
#   TUNE=1         re-tune the FFmpeg denoisers first (tools/tune_ffmpeg_denoisers.sh, training
#                  clip only) instead of reusing docs/quality/settings.json
# Results accumulate in build/eval/results.jsonl (finished rows are reused; delete it to redo).
set -e
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
: "${DENOISE_DATA:?eval.sh: set DENOISE_DATA to the data folder (eval-davis4/, train-video/)}"
export DENOISE_DATA
for b in ffmpeg denoise-noise; do
    test -x "$root/build/bin/$b" || { echo "eval.sh: build/bin/$b missing (run make)" >&2; exit 1; }
done
python3 -c 'import numpy, scipy, matplotlib' 2>/dev/null || {
    echo "eval.sh: needs python3 with numpy, scipy, matplotlib (pip install numpy scipy matplotlib," \
         "or apt-get install python3-numpy python3-scipy python3-matplotlib)" >&2; exit 1; }
if [ "${TUNE:-0}" = 1 ] || [ ! -f "$root/docs/quality/settings.json" ]; then
    "$here/tune_ffmpeg_denoisers.sh"
fi
cmd="make eval"
for v in EVAL_FRAMES EVAL_SIGMAS EVAL_METHODS EVAL_SEQS; do
    eval "val=\${$v:-}"
    [ -n "$val" ] && cmd="$cmd $v=\"$val\""
done
EVAL_COMMAND=$cmd exec python3 "$here/eval_run.py" "$@"
