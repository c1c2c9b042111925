#!/bin/bash
# tools/check_gpu.sh (make check-gpu): the CUDA engine against the CPU engine on a GPU machine.
#   1. build/tests/gpu_check: every CUDA op vs its CPU op, the whole network (random clip, golden
#      weights; trained weights), the golden sequences through the API, the trained weights on
#      samples/*.mkv (decoded to rgb48le by build/bin/ffmpeg) with PSNR within 0.05 dB of the CPU's;
#   2. compute-sanitizer --tool memcheck on the op checks (small shapes).
# Prints gpu_check's lines and a final "N passed, N failed" (memcheck counts as one check).
# Needs a build configured with --enable-cuda-engine. Exit 0 only when nothing failed.
set -u
ROOT=${DENOISE_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${DENOISE_BUILD_DIR:-$ROOT/build}
CHECK=$BUILD/tests/gpu_check
WEIGHTS=${DENOISE_WEIGHTS:-$ROOT/weights/denoise-v1.safetensors}
export DENOISE_TEST_DATA=${DENOISE_TEST_DATA:-$ROOT/tests/data}
cd "$ROOT" || exit 1
if [ ! -x "$CHECK" ]; then
    echo "check_gpu: $CHECK missing: configure with --enable-cuda-engine and build (docs/cuda.md)"
    echo "0 passed, 1 failed"
    exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# samples -> raw rgb48le (8 frames each), through the project's FFmpeg
args=()
FFMPEG=$BUILD/bin/ffmpeg
command -v "$FFMPEG" >/dev/null 2>&1 || FFMPEG=$(command -v ffmpeg || true)
if [ -n "$FFMPEG" ] && [ -f "$WEIGHTS" ]; then
    for s in "$ROOT"/samples/*.mkv; do
        [ -f "$s" ] || continue
        name=$(basename "$s" .mkv)
        geo=$(echo "$name" | sed -n 's/.*_\([0-9]*\)x\([0-9]*\)_.*/\1 \2/p')
        [ -n "$geo" ] || continue
        if "$FFMPEG" -v error -i "$s" -frames:v 8 -f rawvideo -pix_fmt rgb48le "$tmp/$name.raw" </dev/null; then
            n=$(( $(stat -c %s "$tmp/$name.raw") / ($(echo $geo | tr ' ' '*') * 6) ))
            args+=(--sample "$tmp/$name.raw" $geo $n "$name")
        else
            echo "check_gpu: could not decode $s (sample check skipped)"
        fi
    done
else
    echo "check_gpu: no ffmpeg or no $WEIGHTS: sample checks skipped"
fi
[ -f "$WEIGHTS" ] && args=(--weights "$WEIGHTS" "${args[@]}")

"$CHECK" "${args[@]}" 2>&1 | tee "$tmp/log"
rc=${PIPESTATUS[0]}
[ $rc -eq 77 ] && exit 77
p=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$tmp/log" | tail -n 1)
f=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$tmp/log" | tail -n 1)
p=${p:-0}
f=${f:-1}
[ $rc -ne 0 ] && [ "$f" -eq 0 ] && f=1

SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer \
      /usr/local/cuda/compute-sanitizer/compute-sanitizer /opt/nvidia/compute-sanitizer/compute-sanitizer \
      2>/dev/null | head -n 1 || true)
if [ -n "$SAN" ]; then
    echo "=== compute-sanitizer --tool memcheck gpu_check --ops-only"
    if "$SAN" --tool memcheck --error-exitcode 99 "$CHECK" --ops-only > "$tmp/san" 2>&1; then
        tail -n 3 "$tmp/san"
        echo "PASS memcheck (op checks)"
        p=$((p + 1))
    else
        tail -n 40 "$tmp/san"
        echo "FAIL memcheck (op checks)"
        f=$((f + 1))
    fi
else
    echo "FAIL memcheck: compute-sanitizer not found"
    f=$((f + 1))
fi
echo "$p passed, $f failed"
[ "$f" -eq 0 ]
