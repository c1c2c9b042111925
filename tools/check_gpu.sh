#!/bin/bash
# tools/check_gpu.sh (make check-gpu): the CUDA engine against the CPU engine on a GPU machine.
#   1. build/tests/gpu_check: ops, frame conversions (every format family vs the CPU backend),
#      the network, the public API (CUDA vs CPU backend, memory HOST and CUDA, amounts, the golden
#      sequences, the sample clips decoded to rgb48le by build/bin/ffmpeg), tiles vs whole frames
#      (a crop PNG per tile check in $CHECK_OUT), memory caps and out-of-memory fallback, invalid
#      arguments and streams, two engines at once; each part's wall time on a "time" line;
#   2. compute-sanitizer --tool memcheck on gpu_check --quick (ops, conversions, a short API run
#      with tiles), and at the same time (independent processes, small frames)
#   3. tools/check_cuda_frames.sh: build/bin/ffmpeg on CUDA frames (hwupload_cuda, denoise,
#      hwdownload) for each sw_format against host frames and the CPU backend, NVDEC decoding, two
#      instances on one GPU, the alpha refusal, the backend line;
#   4. compute-sanitizer --tool racecheck on build/tests/fused_check --quick (every instantiated
#      fused Swin tile and the tensor-core head against the CPU reference, rel L2 < 1e-2 per
#      block, the mma-count self-check, the refusals), on fused_check --merge --quick (the fused
#      patch merges and expands) and on gpu_check --quick (every kernel as the engine launches it:
#      frame_in / frame_out, the fusion conv, the U-Net, the head, tiles, CUDA graphs):
#      shared-memory hazards; side by side with 2 and 3.
# Budgets (seconds, each part is stopped at its own and the rest still runs): gpu_check
# CHECK_GPU_TIMEOUT (200), memcheck CHECK_SAN_TIMEOUT (120), check_cuda_frames.sh
# CHECK_CF_TIMEOUT (120), racecheck CHECK_RACE_TIMEOUT (240, the three runs); parts 2, 3 and 4 run
# side by side. Measured on one H200 (2026-12-03, beside a trainer): gpu_check 52 s, parts 2, 3
# and 4 165 s (racecheck the longest) (tools/device_gpu.sh sets 230, 85, 85, 240).
# Prints every check's line and a final "N passed, N failed" (memcheck counts as one, each
# PASS/FAIL line of check_cuda_frames.sh and of fused_check as one, each racecheck verdict as
# one; gpu_check's checks under racecheck count once, as its verdict). Exit 0 only when nothing
# failed; 77 when there is no usable GPU.
# Environment: DENOISE_SOURCE_DIR, DENOISE_BUILD_DIR, DENOISE_WEIGHTS, CHECK_OUT (crops; default
# $OUT when set, else a temporary folder), CHECK_LOGS (check_cuda_frames.sh's per-run logs, in
# CHECK_LOGS/cuda_frames; default: CHECK_OUT).
set -u
ROOT=${DENOISE_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${DENOISE_BUILD_DIR:-$ROOT/build}
CHECK=$BUILD/tests/gpu_check
FUSED=$BUILD/tests/fused_check
WEIGHTS=${DENOISE_WEIGHTS:-$ROOT/weights/denoise-v2.safetensors}
export DENOISE_TEST_DATA=${DENOISE_TEST_DATA:-$ROOT/tests/data}
cd "$ROOT" || exit 1
if [ ! -x "$CHECK" ]; then
    echo "check_gpu: $CHECK missing: the CUDA engine is built whenever nvcc is found (./configure && make)"
    echo "0 passed, 1 failed"
    exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CHECK_OUT=${CHECK_OUT:-${OUT:-$tmp}}
CHECK_LOGS=${CHECK_LOGS:-$CHECK_OUT}
mkdir -p "$CHECK_OUT" "$CHECK_LOGS"
p=0 f=0
pass() { echo "PASS $*"; p=$((p + 1)); }
fail() { echo "FAIL $*"; f=$((f + 1)); }
t0=$(date +%s)
took() { echo "time check_gpu: $1 took $(( $(date +%s) - $2 )) s (at $(( $(date +%s) - t0 )) s)"; }

FFMPEG=$BUILD/bin/ffmpeg
[ -x "$FFMPEG" ] || FFMPEG=

# samples -> raw rgb48le (8 frames each)
args=()
if [ -n "$FFMPEG" ]; then
    for s in "$ROOT"/samples/*.mkv; do
        [ -f "$s" ] || continue
        name=$(basename "$s" .mkv)
        geo=$(echo "$name" | sed -n 's/.*_\([0-9]*\)x\([0-9]*\)_.*/\1 \2/p')
        [ -n "$geo" ] || continue
        if "$FFMPEG" -v error -i "$s" -frames:v 8 -f rawvideo -pix_fmt rgb48le "$tmp/$name.raw" </dev/null; then
            n=$(( $(stat -c %s "$tmp/$name.raw") / ($(echo $geo | tr ' ' '*') * 6) ))
            args+=(--sample "$tmp/$name.raw" $geo $n "$name")
        else
            echo "check_gpu: could not decode $s (its sample check is left out)"
        fi
    done
else
    echo "check_gpu: no $BUILD/bin/ffmpeg: sample checks left out"
fi
[ -f "$WEIGHTS" ] && args=(--weights "$WEIGHTS" "${args[@]}")

echo "=== gpu_check"
ts=$(date +%s)
timeout "${CHECK_GPU_TIMEOUT:-200}" "$CHECK" "${args[@]}" --out "$CHECK_OUT" 2>&1 | tee "$tmp/log"
rc=${PIPESTATUS[0]}
[ $rc -eq 77 ] && exit 77
gp=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$tmp/log" | tail -n 1)
gf=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$tmp/log" | tail -n 1)
p=$((p + ${gp:-0}))
if [ $rc -eq 124 ]; then
    # stopped at its budget: count what it printed
    p=$((p + $(grep -c '^PASS' "$tmp/log"))) f=$((f + $(grep -c '^FAIL' "$tmp/log")))
    fail "gpu_check stopped after ${CHECK_GPU_TIMEOUT:-200} s (its budget); last part timed: $(grep '^time' "$tmp/log" | tail -n 1)"
elif [ -z "$gf" ]; then
    f=$((f + 1)); echo "FAIL gpu_check exited $rc without a summary"
else
    f=$((f + gf))
    [ $rc -ne 0 ] && [ "$gf" = 0 ] && fail "gpu_check exited $rc"
fi
took gpu_check "$ts"

# memcheck, the CUDA-frames checks and racecheck side by side (separate processes on small frames)
echo "=== compute-sanitizer memcheck of gpu_check --quick, tools/check_cuda_frames.sh and racecheck of fused_check and gpu_check (side by side)"
ts=$(date +%s)
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer \
      /usr/local/cuda/compute-sanitizer/compute-sanitizer /opt/nvidia/compute-sanitizer/compute-sanitizer \
      2>/dev/null | head -n 1 || true)
san_pid=
if [ -n "$SAN" ]; then
    ( s0=$(date +%s)
      timeout "${CHECK_SAN_TIMEOUT:-120}" "$SAN" --tool memcheck --error-exitcode 99 "$CHECK" --quick > "$tmp/san" 2>&1
      echo $? > "$tmp/san.rc"; echo $(( $(date +%s) - s0 )) > "$tmp/san.s" ) &
    san_pid=$!
fi
cf_pid=
if [ -n "$FFMPEG" ]; then
    ( s0=$(date +%s)
      OUT=$CHECK_LOGS timeout "${CHECK_CF_TIMEOUT:-120}" sh "$ROOT/tools/check_cuda_frames.sh" > "$tmp/cf" 2>&1
      echo $? > "$tmp/cf.rc"; echo $(( $(date +%s) - s0 )) > "$tmp/cf.s" ) &
    cf_pid=$!
fi
race_pid=
if [ -n "$SAN" ] && [ -x "$FUSED" ]; then
    ( s0=$(date +%s) end=$(( $(date +%s) + ${CHECK_RACE_TIMEOUT:-240} ))
      for mode in quick merge engine; do
          left=$(( end - $(date +%s) )); [ $left -gt 0 ] || left=1
          case $mode in
              quick)  set -- "$FUSED" --quick ;;
              merge)  set -- "$FUSED" --merge --quick ;;
              engine) set -- "$CHECK" --quick ;;
          esac
          timeout "$left" "$SAN" --tool racecheck --error-exitcode 99 "$@" > "$tmp/race.$mode" 2>&1
          echo $? > "$tmp/race.$mode.rc"
      done
      echo $(( $(date +%s) - s0 )) > "$tmp/race.s" ) &
    race_pid=$!
fi
[ -n "$san_pid" ] && wait "$san_pid"
[ -n "$cf_pid" ] && wait "$cf_pid"
[ -n "$race_pid" ] && wait "$race_pid"

echo "=== compute-sanitizer --tool memcheck gpu_check --quick"
if [ -z "$SAN" ]; then
    fail "memcheck: compute-sanitizer not found"
else
    src=$(cat "$tmp/san.rc" 2>/dev/null || echo 1)
    if [ "$src" -eq 124 ]; then
        grep -v '^PASS' "$tmp/san" | tail -n 10
        fail "memcheck: gpu_check --quick did not finish within ${CHECK_SAN_TIMEOUT:-120} s ($(grep -c '^PASS' "$tmp/san") checks done by then; memcheck errors reported: $(grep -c '^========= Invalid\|^========= Program hit' "$tmp/san"))"
    elif [ "$src" -eq 0 ]; then
        tail -n 2 "$tmp/san"
        pass "memcheck: gpu_check --quick ($(grep -c '^PASS' "$tmp/san") checks under memcheck, no error)"
    else
        grep -v '^PASS' "$tmp/san" | tail -n 40
        fail "memcheck: gpu_check --quick (exit $src)"
    fi
    echo "time check_gpu: memcheck took $(cat "$tmp/san.s" 2>/dev/null || echo '?') s"
fi

echo "=== ffmpeg: CUDA frames (tools/check_cuda_frames.sh)"
if [ -z "$FFMPEG" ]; then
    fail "ffmpeg CUDA frames: no $BUILD/bin/ffmpeg"
else
    crc=$(cat "$tmp/cf.rc" 2>/dev/null || echo 1)
    cat "$tmp/cf"
    cp=$(grep -c '^PASS' "$tmp/cf") cfl=$(grep -c '^FAIL' "$tmp/cf")
    p=$((p + cp)) f=$((f + cfl))
    [ "$crc" -eq 124 ] && fail "check_cuda_frames.sh stopped after ${CHECK_CF_TIMEOUT:-120} s (its budget)"
    [ "$crc" -ne 0 ] && [ "$crc" -ne 124 ] && [ "$crc" -ne 77 ] && [ "$cfl" -eq 0 ] && fail "check_cuda_frames.sh exited $crc"
    [ "$crc" -eq 77 ] && echo "SKIP ffmpeg CUDA frames: check_cuda_frames.sh ran nothing (exit 77)"
    echo "time check_gpu: check_cuda_frames.sh took $(cat "$tmp/cf.s" 2>/dev/null || echo '?') s"
fi

echo "=== compute-sanitizer --tool racecheck fused_check --quick, fused_check --merge --quick, gpu_check --quick"
if [ -z "$SAN" ]; then
    fail "racecheck: compute-sanitizer not found"
elif [ ! -x "$FUSED" ]; then
    fail "racecheck: $FUSED missing (built with the CUDA engine)"
else
    for mode in quick merge engine; do
        log=$tmp/race.$mode
        case $mode in
            quick)  what="fused_check --quick" ;;
            merge)  what="fused_check --merge --quick" ;;
            engine) what="gpu_check --quick" ;;
        esac
        rrc=$(cat "$log.rc" 2>/dev/null || echo 124)
        nf=$(grep -c '^FAIL' "$log" 2>/dev/null)
        if [ $mode = engine ]; then
            # gpu_check's own checks ran under memcheck already: here only their failures count,
            # inside the verdict
            grep -E '^FAIL' "$log" 2>/dev/null
        else
            grep -E '^(PASS|FAIL)' "$log" 2>/dev/null
            np=$(grep -c '^PASS' "$log" 2>/dev/null)
            p=$((p + ${np:-0})) f=$((f + ${nf:-0}))
        fi
        # racecheck's own verdict, "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)":
        # clean when E is 0 (warnings are printed above, as fused_check.sh counts them); exit 99
        # is racecheck's (--error-exitcode), 124 the budget, 1 a failed check (fused_check's are
        # counted on their own lines above; gpu_check's fail the verdict)
        verdict=$(grep -E '^========= RACECHECK SUMMARY' "$log" 2>/dev/null | tail -n 1)
        ok=1
        [ $mode = engine ] && [ "${nf:-0}" -ne 0 ] && ok=0
        if [ $ok = 1 ] && [ "$rrc" -ne 99 ] && [ "$rrc" -ne 124 ] && [[ $verdict =~ \(0\ errors, ]]; then
            pass "racecheck: $what: ${verdict#========= }"
        else
            grep -E '^=========' "$log" 2>/dev/null | head -n 20
            fail "racecheck: $what (exit $rrc; 99: hazards found, 124: budget of ${CHECK_RACE_TIMEOUT:-240} s; ${nf:-0} checks failed; ${verdict:-no racecheck summary})"
        fi
    done
    echo "time check_gpu: racecheck took $(cat "$tmp/race.s" 2>/dev/null || echo '?') s"
fi
took "memcheck, CUDA frames and racecheck (side by side)" "$ts"
echo "$p passed, $f failed"
[ "$f" -eq 0 ]
