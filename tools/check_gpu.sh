#!/bin/bash
# tools/check_gpu.sh (make check-gpu): the CUDA engine against the CPU engine on a GPU machine.
#   1. the GPU check programs build/tests/gpu/AREA_check (tests/gpu/, one per area), in turn:
#      ops, conversions (every format family vs the CPU backend), network, api (CUDA vs CPU
#      backend, memory HOST and CUDA, amounts, the golden sequences, the sample clips decoded to
#      rgb48le by build/bin/ffmpeg), tiles (tiles vs whole frames, a crop PNG per tile check in
#      $CHECK_OUT; memory caps and out-of-memory fallback, invalid arguments and streams, two
#      engines at once), graphs, align, noise (sigma=auto); each part's wall time on a "time" line;
#   2. compute-sanitizer --tool memcheck on each area's --quick set (ops, conversions, a short API
#      run with tiles, the alignment ops, two noise sources), and at the same time (independent
#      processes, small frames)
#   3. tools/check_cuda_frames.sh: build/bin/ffmpeg on CUDA frames (hwupload_cuda, denoise,
#      hwdownload) for each sw_format against host frames and the CPU backend, NVDEC decoding, two
#      instances on one GPU, the alpha refusal, the backend line;
#   4. compute-sanitizer --tool racecheck on build/tests/gpu/fused_check --quick (every
#      instantiated fused Swin tile and the tensor-core head against the CPU reference, rel L2 <
#      1e-2 per block, the mma-count self-check, the refusals), on fused_check --merge --quick (the
#      fused patch merges and expands) and on each area's --quick set (every kernel as the engine
#      launches it: frame_in / frame_out, the fusion conv, the U-Net, the head, tiles, CUDA
#      graphs): shared-memory hazards; side by side with 2 and 3;
#   5. tools/check_batch_exact.sh: denoise-batch's segments (the commands of its --dry-run, 5
#      segments, no Ray) joined as denoise-batch joins them equal one ffmpeg -vf denoise run on
#      CUDA (framemd5), with the source's pts; side by side with 2, 3 and 4.
# Budgets (seconds, each part is stopped at its own and the rest still runs): the check programs
# CHECK_GPU_TIMEOUT (200, all areas together), memcheck CHECK_SAN_TIMEOUT (120), check_cuda_frames.sh
# CHECK_CF_TIMEOUT (120), racecheck CHECK_RACE_TIMEOUT (240, all its runs), check_batch_exact.sh
# CHECK_BE_TIMEOUT (120); parts 2, 3, 4 and 5 run side by side. Measured on one H200
# (2026-12-03, beside a trainer, with the areas in one program, before part 5): checks 52 s,
# parts 2, 3 and 4 165 s (racecheck the longest) (tools/device_gpu.sh sets 230, 85, 85, 240, 85).
# Prints every check's line, then a summary with one PASS/FAIL line per area ("PASS gpu ops: 40
# checks"), per sanitizer run and for the CUDA frames, and a final "N passed, N failed" (each
# check of the areas counts as one, memcheck of each area as one, each PASS/FAIL line of
# check_cuda_frames.sh, of check_batch_exact.sh and of fused_check as one, each racecheck
# verdict as one; the areas' checks under racecheck count once, as its verdict). Exit 0 only
# when nothing failed; 77 when there is no usable GPU.
# Environment: DENOISE_SOURCE_DIR, DENOISE_BUILD_DIR, DENOISE_WEIGHTS, CHECK_OUT (crops; default
# $OUT when set, else a temporary folder), CHECK_LOGS (check_cuda_frames.sh's per-run logs, in
# CHECK_LOGS/cuda_frames, and check_batch_exact.sh's in CHECK_LOGS/batch_exact; default: CHECK_OUT).
set -u
ROOT=${DENOISE_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${DENOISE_BUILD_DIR:-$ROOT/build}
GPU=$BUILD/tests/gpu
# the areas, in the order they run (tests/gpu/AREA_check.cpp)
AREAS="ops conversions network api tiles graphs align noise"
FUSED=$GPU/fused_check
WEIGHTS=${DENOISE_WEIGHTS:-$ROOT/weights/denoise-v2.safetensors}
export DENOISE_TEST_DATA=${DENOISE_TEST_DATA:-$ROOT/tests/data}
cd "$ROOT" || exit 1
if [ ! -x "$GPU/ops_check" ]; then
    echo "check_gpu: $GPU/ops_check missing: the CUDA engine is built whenever nvcc is found (./configure && make)"
    echo "0 passed, 1 failed"
    exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CHECK_OUT=${CHECK_OUT:-${OUT:-$tmp}}
CHECK_LOGS=${CHECK_LOGS:-$CHECK_OUT}
mkdir -p "$CHECK_OUT" "$CHECK_LOGS"
p=0 f=0
summary=()
pass() { echo "PASS $*"; p=$((p + 1)); summary+=("PASS $*"); }
fail() { echo "FAIL $*"; f=$((f + 1)); summary+=("FAIL $*"); }
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

# 1. each area's program in turn, within one budget for all; each area's checks count one by one,
# and the area gets its own line in the summary
end1=$(( $(date +%s) + ${CHECK_GPU_TIMEOUT:-200} ))
for area in $AREAS; do
    bin=$GPU/${area}_check
    echo "=== gpu $area ($bin)"
    if [ ! -x "$bin" ]; then
        f=$((f + 1)); summary+=("FAIL gpu $area: $bin missing")
        continue
    fi
    ts=$(date +%s) left=$(( end1 - $(date +%s) ))
    [ $left -gt 0 ] || left=1
    timeout "$left" "$bin" "${args[@]}" --out "$CHECK_OUT" 2>&1 | tee "$tmp/$area.log"
    rc=${PIPESTATUS[0]}
    [ $rc -eq 77 ] && exit 77
    gp=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$tmp/$area.log" | tail -n 1)
    gf=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p' "$tmp/$area.log" | tail -n 1)
    if [ $rc -eq 124 ]; then
        # stopped at the budget: count what it printed
        gp=$(grep -c '^PASS' "$tmp/$area.log") gf=$(grep -c '^FAIL' "$tmp/$area.log")
        p=$((p + gp)) f=$((f + gf))
        fail "gpu $area: stopped after the checks' budget of ${CHECK_GPU_TIMEOUT:-200} s ($gp passed, $gf failed by then; last part timed: $(grep '^time' "$tmp/$area.log" | tail -n 1))"
    elif [ -z "$gf" ]; then
        f=$((f + 1)); summary+=("FAIL gpu $area: exited $rc without a summary")
    else
        p=$((p + gp)) f=$((f + gf))
        if [ "$gf" -ne 0 ]; then summary+=("FAIL gpu $area: $gf of $((gp + gf)) checks failed")
        elif [ $rc -ne 0 ]; then fail "gpu $area: exited $rc"
        else summary+=("PASS gpu $area: $gp checks"); fi
    fi
    took "gpu $area" "$ts"
done

# memcheck, the CUDA-frames checks, racecheck and the batch check side by side (separate
# processes on small frames)
echo "=== compute-sanitizer memcheck of the areas' --quick sets, tools/check_cuda_frames.sh, racecheck of fused_check and the areas, and tools/check_batch_exact.sh (side by side)"
ts=$(date +%s)
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer \
      /usr/local/cuda/compute-sanitizer/compute-sanitizer /opt/nvidia/compute-sanitizer/compute-sanitizer \
      2>/dev/null | head -n 1 || true)
san_pid=
if [ -n "$SAN" ]; then
    ( s0=$(date +%s) end=$(( $(date +%s) + ${CHECK_SAN_TIMEOUT:-120} ))
      for area in $AREAS; do
          left=$(( end - $(date +%s) )); [ $left -gt 0 ] || left=1
          timeout "$left" "$SAN" --tool memcheck --error-exitcode 99 "$GPU/${area}_check" --quick > "$tmp/san.$area" 2>&1
          echo $? > "$tmp/san.$area.rc"
      done
      echo $(( $(date +%s) - s0 )) > "$tmp/san.s" ) &
    san_pid=$!
fi
cf_pid=
if [ -n "$FFMPEG" ]; then
    ( s0=$(date +%s)
      OUT=$CHECK_LOGS timeout "${CHECK_CF_TIMEOUT:-120}" sh "$ROOT/tools/check_cuda_frames.sh" > "$tmp/cf" 2>&1
      echo $? > "$tmp/cf.rc"; echo $(( $(date +%s) - s0 )) > "$tmp/cf.s" ) &
    cf_pid=$!
fi
be_pid=
if [ -n "$FFMPEG" ]; then
    ( s0=$(date +%s)
      OUT=$CHECK_LOGS timeout "${CHECK_BE_TIMEOUT:-120}" sh "$ROOT/tools/check_batch_exact.sh" --backend cuda > "$tmp/be" 2>&1
      echo $? > "$tmp/be.rc"; echo $(( $(date +%s) - s0 )) > "$tmp/be.s" ) &
    be_pid=$!
fi
race_pid=
if [ -n "$SAN" ] && [ -x "$FUSED" ]; then
    ( s0=$(date +%s) end=$(( $(date +%s) + ${CHECK_RACE_TIMEOUT:-240} ))
      for mode in quick merge $AREAS; do
          left=$(( end - $(date +%s) )); [ $left -gt 0 ] || left=1
          case $mode in
              quick)  set -- "$FUSED" --quick ;;
              merge)  set -- "$FUSED" --merge --quick ;;
              *)      set -- "$GPU/${mode}_check" --quick ;;
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
[ -n "$be_pid" ] && wait "$be_pid"

echo "=== compute-sanitizer --tool memcheck, each area's --quick set"
if [ -z "$SAN" ]; then
    fail "memcheck: compute-sanitizer not found"
else
    for area in $AREAS; do
        log=$tmp/san.$area
        src=$(cat "$log.rc" 2>/dev/null || echo 124)
        if [ "$src" -eq 124 ]; then
            grep -v '^PASS' "$log" 2>/dev/null | tail -n 10
            fail "memcheck: gpu $area --quick did not finish within the budget of ${CHECK_SAN_TIMEOUT:-120} s ($(grep -c '^PASS' "$log" 2>/dev/null) checks done by then; memcheck errors reported: $(grep -c '^========= Invalid\|^========= Program hit' "$log" 2>/dev/null))"
        elif [ "$src" -eq 0 ]; then
            tail -n 2 "$log"
            pass "memcheck: gpu $area --quick ($(grep -c '^PASS' "$log") checks under memcheck, no error)"
        else
            grep -v '^PASS' "$log" | tail -n 40
            fail "memcheck: gpu $area --quick (exit $src)"
        fi
    done
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
    summary+=("$([ "$cfl" -eq 0 ] && echo PASS || echo FAIL) ffmpeg CUDA frames: $cp passed, $cfl failed")
    [ "$crc" -eq 124 ] && fail "check_cuda_frames.sh stopped after ${CHECK_CF_TIMEOUT:-120} s (its budget)"
    [ "$crc" -ne 0 ] && [ "$crc" -ne 124 ] && [ "$crc" -ne 77 ] && [ "$cfl" -eq 0 ] && fail "check_cuda_frames.sh exited $crc"
    [ "$crc" -eq 77 ] && echo "SKIP ffmpeg CUDA frames: check_cuda_frames.sh ran nothing (exit 77)"
    echo "time check_gpu: check_cuda_frames.sh took $(cat "$tmp/cf.s" 2>/dev/null || echo '?') s"
fi

echo "=== denoise-batch: segments joined vs one run on CUDA (tools/check_batch_exact.sh)"
if [ -z "$FFMPEG" ]; then
    fail "batch exact: no $BUILD/bin/ffmpeg"
else
    brc=$(cat "$tmp/be.rc" 2>/dev/null || echo 1)
    cat "$tmp/be"
    bp=$(grep -c '^PASS' "$tmp/be") bfl=$(grep -c '^FAIL' "$tmp/be")
    p=$((p + bp)) f=$((f + bfl))
    if [ "$brc" -eq 77 ]; then
        summary+=("SKIP batch exact:$(grep -m1 '^SKIP' "$tmp/be" | cut -d: -f2-)")
    else
        summary+=("$([ "$bfl" -eq 0 ] && [ "$bp" -gt 0 ] && echo PASS || echo FAIL) batch exact (CUDA): $bp passed, $bfl failed")
        [ "$brc" -eq 124 ] && fail "check_batch_exact.sh stopped after ${CHECK_BE_TIMEOUT:-120} s (its budget)"
        [ "$brc" -ne 0 ] && [ "$brc" -ne 124 ] && [ "$bfl" -eq 0 ] && fail "check_batch_exact.sh exited $brc"
    fi
    echo "time check_gpu: check_batch_exact.sh took $(cat "$tmp/be.s" 2>/dev/null || echo '?') s"
fi

echo "=== compute-sanitizer --tool racecheck fused_check --quick, fused_check --merge --quick, each area's --quick set"
if [ -z "$SAN" ]; then
    fail "racecheck: compute-sanitizer not found"
elif [ ! -x "$FUSED" ]; then
    fail "racecheck: $FUSED missing (built with the CUDA engine)"
else
    for mode in quick merge $AREAS; do
        log=$tmp/race.$mode
        case $mode in
            quick)  what="fused_check --quick" ;;
            merge)  what="fused_check --merge --quick" ;;
            *)      what="gpu $mode --quick" ;;
        esac
        rrc=$(cat "$log.rc" 2>/dev/null || echo 124)
        nf=$(grep -c '^FAIL' "$log" 2>/dev/null)
        if [ $mode != quick ] && [ $mode != merge ]; then
            # the areas' own checks ran under memcheck already: here only their failures count,
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
        # counted on their own lines above; the areas' fail the verdict)
        verdict=$(grep -E '^========= RACECHECK SUMMARY' "$log" 2>/dev/null | tail -n 1)
        ok=1
        [ $mode != quick ] && [ $mode != merge ] && [ "${nf:-0}" -ne 0 ] && ok=0
        if [ $ok = 1 ] && [ "$rrc" -ne 99 ] && [ "$rrc" -ne 124 ] && [[ $verdict =~ \(0\ errors, ]]; then
            pass "racecheck: $what: ${verdict#========= }"
        else
            grep -E '^=========' "$log" 2>/dev/null | head -n 20
            # every kernel with a race report, not only those in the 20 lines above
            sed -nE 's/^========= (Warning|Error): Race reported between (Read|Write) access at (.*)\+0x[0-9a-f]+$/\3/p' \
                "$log" 2>/dev/null | sed -E 's/\(denoise::cuda::swin_fused::KernelArgs\)$//; s/\((int|bool)\)//g' |
                sort | uniq -c | sed 's/^ */racecheck: race reports (read sites) in /'
            fail "racecheck: $what (exit $rrc; 99: hazards found, 124: budget of ${CHECK_RACE_TIMEOUT:-240} s; ${nf:-0} checks failed; ${verdict:-no racecheck summary})"
        fi
    done
    echo "time check_gpu: racecheck took $(cat "$tmp/race.s" 2>/dev/null || echo '?') s"
fi
took "memcheck, CUDA frames, racecheck and batch exact (side by side)" "$ts"
echo
echo "=== check_gpu summary"
printf '%s\n' "${summary[@]}"
echo "$p passed, $f failed"
[ "$f" -eq 0 ]
