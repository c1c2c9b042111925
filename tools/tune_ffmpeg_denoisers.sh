#!/bin/sh
# Tune FFmpeg's denoisers (hqdn3d nlmeans bm3d atadenoise fftdnoiz vaguedenoiser) per sigma on a
# training clip and store the winners in docs/quality/settings.json (read by tools/eval.sh).
# Never tunes on eval-davis4. Arguments go to tools/eval_tune.py (--help).
#   tools/tune_ffmpeg_denoisers.sh                      # bmx-trees.mp4, 10 frames, 320x240 centre crop
#   DENOISE_DATA=/path/to/data tools/tune_ffmpeg_denoisers.sh --sigmas 10 30
set -e
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$here/../docs/quality"
exec python3 "$here/eval_tune.py" "$@"
