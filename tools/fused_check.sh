#!/bin/bash
# tools/fused_check.sh: the fused Swin block kernel and the tensor-core head on a GPU machine, in
# one go (about 2-3 min on an H200); builds nothing:
#   1. build/tests/gpu/fused_check: every instantiated tile against the CPU reference block, the mma
#      count self-check, the refusals, the tensor-core head vs the two-pass head vs the CPU head,
#      the correct-first sequence (whole and chunked) against the CPU;
#   2. denoise-cuda-bench --swin, the timings (fused vs the correct-first op sequence vs the
#      cuBLASLt bf16 GEMM ceiling at 540p / 1080p / 4K, model v1's eleven blocks per frame, the
#      C 32 size sweep; counted as one check; log cuda_bench_swin.log);
#   3. compute-sanitizer --tool memcheck  fused_check --quick and
#   4. compute-sanitizer --tool racecheck fused_check --quick, side by side.
# --head: the head's checks only (fused_check --head; the sanitizers on --head --quick), then
# denoise-cuda-bench --head (tensor-core vs two-pass head, its GEMMs and stencil alone, at 1080p
# and 4K token maps, counted as one check; log cuda_bench_head.log): about a minute.
# Budgets (s): FUSED_CHECK_TIMEOUT 200, FUSED_BENCH_TIMEOUT 200 (the timings), FUSED_SAN_TIMEOUT
# 120 (each sanitizer pass).
# Timings are only worth having with the GPU to ourselves: the compute processes nvidia-smi lists
# before the run are printed, and the summary warns when there were any (pause them, e.g. a
# trainer with kill -STOP, for the run) and when the bench itself saw contended samples.
# Full logs in $OUT (the device tool's output folder; default: a new folder under /tmp): fused_check.log,
# cuda_bench_swin.log, memcheck.log, racecheck.log, device.txt. Prints a summary and a final "N passed, N failed"
# (each sanitizer pass counts as one check). Exit 0 only when nothing failed. With --merge, the
# patch merge / expand checks and timings instead (see the --merge section below).
# Needs build/tests/gpu/fused_check: built here, or unpacked from .device/build.tar.xz
# (tools/device_gpu.sh --pack) when that is carried instead; and, on a machine without the build
# machine's Debian libraries (OpenBLAS for the CPU reference), .devlibs/libs.tar.xz from
# the workplace's device-libs.sh (tools/device_gpu.sh --pack), unpacked here.
set -u
MODE=()
[ "${1:-}" = --head ] && MODE=(--head)
ROOT=${DENOISE_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${DENOISE_BUILD_DIR:-$ROOT/build}
BIN=$BUILD/tests/gpu/fused_check
OUT=${OUT:-$(mktemp -d /tmp/fused_check.XXXXXX)}
mkdir -p "$OUT"
cd "$ROOT" || exit 1
if [ ! -x "$BIN" ] && [ -f "$ROOT/.device/build.tar.xz" ]; then
    tar xJf "$ROOT/.device/build.tar.xz" -C "$ROOT" build/tests/gpu/fused_check || exit 1
fi
if [ ! -x "$BUILD/bin/denoise-cuda-bench" ] && [ -f "$ROOT/.device/build.tar.xz" ]; then
    tar xJf "$ROOT/.device/build.tar.xz" -C "$ROOT" build/bin/denoise-cuda-bench || exit 1
fi
if [ ! -x "$BIN" ]; then
    echo "fused_check.sh: $BIN missing: ./configure && make $BIN (or carry .device from tools/device_gpu.sh --pack)"
    echo "0 passed, 1 failed"
    exit 1
fi
if [ -f "$ROOT/.devlibs/libs.tar.xz" ]; then
    mkdir -p /tmp/devlibs && tar xJf "$ROOT/.devlibs/libs.tar.xz" -C /tmp/devlibs &&
        export LD_LIBRARY_PATH=/tmp/devlibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
others=$(nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader 2>/dev/null)
{ nvidia-smi 2>&1; echo "compute processes before the run: ${others:-none}"; ldd "$BIN" 2>&1; } > "$OUT/device.txt"
if ldd "$BIN" | grep -q 'not found'; then
    echo "fused_check.sh: libraries missing for $BIN (carry .devlibs):"
    ldd "$BIN" | grep 'not found'
    echo "0 passed, 1 failed"
    exit 1
fi

# The last "N passed, N failed" line of a log (sanitizers print their own summary after it).
summary_of() { grep -E '^[0-9]+ passed, [0-9]+ failed$' "$1" | tail -n 1; }

# run_check NAME LOG TIMEOUT SHOW ARGS...: fused_check ARGS into LOG (exit 77 without a GPU); the
# lines of LOG that match the regular expression SHOW, then p and f from its summary line
run_check() {
    local name=$1 log=$2 to=$3 show=$4 rc t0=$SECONDS last
    shift 4
    echo "=== $name (log: $log)"
    timeout "$to" "$BIN" "$@" > "$log" 2>&1
    rc=$?
    echo "$name took $((SECONDS - t0)) s"
    [ $rc -eq 77 ] && { echo "no GPU: nothing run"; exit 77; }
    grep -E "$show" "$log"
    last=$(summary_of "$log")
    if [[ $last =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
        p=${BASH_REMATCH[1]} f=${BASH_REMATCH[2]}
    else
        echo "$name: no summary line (exit $rc; timeout $to s: 124):"
        tail -n 20 "$log"
        f=1
    fi
    [ $rc -ne 0 ] && [ "$f" -eq 0 ] && f=1
}

# run_sanitizers PREFIX TIMEOUT ARGS...: compute-sanitizer memcheck and racecheck of fused_check
# ARGS --quick side by side (logs $OUT/memcheck.log and $OUT/racecheck.log, each name preceded by
# PREFIX, e.g. patch_), one check
# each in p / f: the sanitizer's own verdict clean and the run's checks all passed
run_sanitizers() {
    local pre=$1 to=$2 tool log src verdict clean checks t0=$SECONDS san
    shift 2
    local -A spid
    san=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer \
          /usr/local/cuda/compute-sanitizer/compute-sanitizer 2>/dev/null | head -n 1 || true)
    if [ -n "$san" ]; then
        for tool in memcheck racecheck; do
            timeout "$to" "$san" --tool $tool --error-exitcode 99 "$BIN" "$@" --quick > "$OUT/$pre$tool.log" 2>&1 &
            spid[$tool]=$!
        done
    fi
    for tool in memcheck racecheck; do
        log=$OUT/$pre$tool.log
        echo "=== compute-sanitizer --tool $tool fused_check $* --quick (log: $log)"
        if [ -z "$san" ]; then
            echo "FAIL $tool: compute-sanitizer not found"
            f=$((f + 1))
            continue
        fi
        wait "${spid[$tool]}"
        src=$?
        echo "$tool done after $((SECONDS - t0)) s"
        # the sanitizer's own verdict: memcheck "ERROR SUMMARY: 0 errors", racecheck "RACECHECK
        # SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"
        verdict=$(grep -E '^========= (ERROR|RACECHECK) SUMMARY' "$log" | tail -n 1)
        clean=no
        [[ $verdict =~ ERROR\ SUMMARY:\ 0\ errors ]] && clean=yes
        [[ $verdict =~ \(0\ errors, ]] && clean=yes
        checks=$(summary_of "$log")
        if [ $src -eq 0 ] && [ $clean = yes ] && [[ $checks =~ \ 0\ failed$ ]]; then
            echo "PASS $tool: ${verdict#========= } ($checks under $tool)"
            p=$((p + 1))
        else
            echo "FAIL $tool (exit $src; 99: errors found, 124: timeout; checks: ${checks:-no summary line}; ${verdict:-no sanitizer summary}):"
            grep -E '^=========|^FAIL' "$log" | head -n 30
            f=$((f + 1))
        fi
    done
}

# the compute processes that shared the GPU with the timings, if there were any
warn_others() {
    if [ -n "$others" ]; then
        echo "WARNING: other compute processes were on the GPU when the run started (timings are shared with them):"
        echo "$others" | sed 's/^/  /'
    fi
}

# --merge: the fused patch merge / patch expand (kernels/cuda/patch_tc.cu) instead, about 1.5-2.5
# min: 1. fused_check --merge (checks against a host reference and the op sequence, refusals;
# log patch_check.log); 2. denoise-cuda-bench --patch at 1080p and
# 4K (the same with the model's weights, then the whole-frame kernels line and per-op table of
# both paths; patch_bench.log; needs build/bin and build/lib, unpacked from .device/build.tar.xz
# when carried); 3. compute-sanitizer memcheck and racecheck of fused_check --merge --quick side
# by side (patch_memcheck.log, patch_racecheck.log). Budgets (s): PATCH_CHECK_TIMEOUT 70,
# PATCH_BENCH_TIMEOUT 50, PATCH_SAN_TIMEOUT 50.
if [ "${1:-}" = --merge ]; then
    if [ ! -x "$BUILD/bin/denoise-cuda-bench" ] && [ -f "$ROOT/.device/build.tar.xz" ]; then
        tar xJf "$ROOT/.device/build.tar.xz" -C "$ROOT" build/bin build/lib || exit 1
    fi
    export LD_LIBRARY_PATH=$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    p=0 f=0
    run_check "fused_check --merge" "$OUT/patch_check.log" "${PATCH_CHECK_TIMEOUT:-70}" '^(PASS|FAIL|SKIP)' --merge
    echo "=== denoise-cuda-bench --patch (log: $OUT/patch_bench.log)"
    t0=$SECONDS
    (cd "$ROOT" && timeout "${PATCH_BENCH_TIMEOUT:-50}" "$BUILD/bin/denoise-cuda-bench" --patch --iters 20 \
        --sizes 1920x1080,3840x2160) > "$OUT/patch_bench.log" 2>&1
    brc=$?
    echo "denoise-cuda-bench --patch took $((SECONDS - t0)) s"
    if [ $brc -eq 0 ]; then
        echo "PASS denoise-cuda-bench --patch (fused vs sequence outputs within rel L2 1e-2)"
        p=$((p + 1))
    else
        echo "FAIL denoise-cuda-bench --patch (exit $brc; 124: timeout):"
        grep -E 'MISMATCH|failed|error' "$OUT/patch_bench.log" | head -n 10
        tail -n 5 "$OUT/patch_bench.log"
        f=$((f + 1))
    fi
    run_sanitizers patch_ "${PATCH_SAN_TIMEOUT:-50}" --merge
    echo
    echo "=== summary (full logs: $OUT/patch_check.log, $OUT/patch_bench.log)"
    grep -E '^device' "$OUT/patch_check.log"
    grep -E '^cuda-bench patch|^cuda-bench .*kernels|per op kind|patch (merge|expand)|^  total' "$OUT/patch_bench.log"
    warn_others
    echo "$p passed, $f failed"
    [ "$f" -eq 0 ]
    exit
fi

p=0 f=0
run_check "fused_check ${MODE[*]}" "$OUT/fused_check.log" "${FUSED_CHECK_TIMEOUT:-200}" '^(FAIL|SKIP)' "${MODE[@]}"

if [ ${#MODE[@]} -eq 0 ]; then
    echo "=== denoise-cuda-bench --swin (log: $OUT/cuda_bench_swin.log)"
    t0=$SECONDS
    timeout "${FUSED_BENCH_TIMEOUT:-200}" "$BUILD/bin/denoise-cuda-bench" --swin > "$OUT/cuda_bench_swin.log" 2>&1
    brc=$?
    echo "denoise-cuda-bench --swin took $((SECONDS - t0)) s"
    if [ $brc -eq 0 ]; then
        echo "PASS denoise-cuda-bench --swin"
        p=$((p + 1))
    else
        echo "FAIL denoise-cuda-bench --swin (exit $brc; 124: timeout):"
        tail -n 10 "$OUT/cuda_bench_swin.log"
        f=$((f + 1))
    fi
else
    echo "=== denoise-cuda-bench --head (log: $OUT/cuda_bench_head.log)"
    timeout 60 "$BUILD/bin/denoise-cuda-bench" --head --sizes 960x544,1920x1088 > "$OUT/cuda_bench_head.log" 2>&1
    brc=$?
    if [ $brc -eq 0 ]; then
        echo "PASS denoise-cuda-bench --head"
        p=$((p + 1))
    else
        echo "FAIL denoise-cuda-bench --head (exit $brc; 124: timeout):"
        tail -n 10 "$OUT/cuda_bench_head.log"
        f=$((f + 1))
    fi
fi

# both sanitizer passes side by side (after the timings, which want the GPU to themselves)
run_sanitizers "" "${FUSED_SAN_TIMEOUT:-120}" "${MODE[@]}"

echo
echo "=== summary (full logs: $OUT/fused_check.log, $OUT/cuda_bench_swin.log)"
grep -E '^device' "$OUT/fused_check.log"
if [ ${#MODE[@]} -eq 0 ]; then
    grep -E '^cuda-bench ceilings' "$OUT/cuda_bench_swin.log"
    sed -n '/^per block/,$p' "$OUT/cuda_bench_swin.log"
else
    grep -E '^PASS head ' "$OUT/fused_check.log" | cut -c1-200
    grep -E '^cuda-bench head' "$OUT/cuda_bench_head.log" 2>/dev/null
fi
warn_others
echo "$p passed, $f failed"
[ "$f" -eq 0 ]
