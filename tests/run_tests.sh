#!/bin/bash
# tests/run_tests.sh: run every test and print a final line "N passed, N failed".
#
#   - GoogleTest binaries build/tests/*_test (built from tests/*_test.cpp by make): each test
#     case counts (from GoogleTest's own summary); a binary that crashes or prints no summary
#     counts as one failure.
#   - build/tests/gpu_check --quick (built with the CUDA engine): counts once; 77 (no usable GPU)
#     = skipped;
#   - shell tests tests/*.sh (except this file and sourced helpers lib.sh, *_lib.sh): each script
#     counts once; exit 0 = pass, 77 = skipped (automake's convention), anything else = fail.
#
# Usage: tests/run_tests.sh [PATTERN]   (PATTERN: run only tests whose name contains it)
# Environment: DENOISE_SOURCE_DIR, DENOISE_BUILD_DIR (defaults: this repo and its build/),
#   DENOISE_TEST_TIMEOUT (seconds per test binary or script, default 1800).
# Exit status: 0 when nothing failed.
set -u
ROOT=${DENOISE_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${DENOISE_BUILD_DIR:-$ROOT/build}
export DENOISE_SOURCE_DIR=$ROOT DENOISE_BUILD_DIR=$BUILD
export PATH=$BUILD/bin:$PATH
TIMEOUT=${DENOISE_TEST_TIMEOUT:-1800}
PATTERN=${1:-}
cd "$ROOT" || exit 1

passed=0 failed=0 skipped=0
failures=()

run_timed() {
    if command -v timeout >/dev/null 2>&1; then timeout "$TIMEOUT" "$@"; else "$@"; fi
}

shopt -s nullglob
for t in "$BUILD"/tests/*_test; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    [ -z "$PATTERN" ] || [[ $name == *"$PATTERN"* ]] || continue
    echo "=== $name"
    log=$(mktemp)
    run_timed "$t" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\..*/\1/p' "$log" | tail -n 1)
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) tests\{0,1\}, listed below.*/\1/p' "$log" | tail -n 1)
    s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\}, listed below.*/\1/p' "$log" | tail -n 1)
    rm -f "$log"
    p=${p:-0} f=${f:-0} s=${s:-0}
    if [ -z "$p$f" ] || { [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; }; then
        # no summary, or a non-zero exit without failed cases (crash, timeout, leak checker...)
        f=$((f + 1)); echo "*** $name exited with status $rc"
    fi
    passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
    [ "$f" -eq 0 ] || failures+=("$name")
done

# GPU checks (built with the CUDA engine): the quick set (ops, frame conversions, a short API run);
# tools/check_gpu.sh runs everything. Exit 77 = no usable GPU here = skipped.
for t in "$BUILD"/tests/gpu_check; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    [ -z "$PATTERN" ] || [[ $name == *"$PATTERN"* ]] || continue
    echo "=== $name --quick"
    run_timed "$t" --quick
    rc=$?
    case $rc in
        0) passed=$((passed + 1)) ;;
        77) skipped=$((skipped + 1)); echo "--- $name: skipped (no usable GPU)" ;;
        *) failed=$((failed + 1)); failures+=("$name"); echo "*** $name failed (exit $rc)" ;;
    esac
done

for t in "$ROOT"/tests/*.sh; do
    name=$(basename "$t")
    case $name in run_tests.sh|lib.sh|*_lib.sh) continue ;; esac
    [ -z "$PATTERN" ] || [[ $name == *"$PATTERN"* ]] || continue
    echo "=== $name"
    run_timed sh "$t"
    rc=$?
    case $rc in
        0) passed=$((passed + 1)) ;;
        77) skipped=$((skipped + 1)); echo "--- $name: skipped" ;;
        *) failed=$((failed + 1)); failures+=("$name"); echo "*** $name failed (exit $rc)" ;;
    esac
done

echo
[ ${#failures[@]} -eq 0 ] || echo "failed: ${failures[*]}"
[ "$skipped" -eq 0 ] || echo "skipped: $skipped"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
