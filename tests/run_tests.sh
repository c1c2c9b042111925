#!/bin/bash
# tests/run_tests.sh: run every test and print a final line "N passed, N failed".
#
#   - GoogleTest binaries build/tests/*_test (built by make from tests/unit/*_test.cpp and
#     tests/emu/*_test.cpp; named unit/NAME or emu/NAME here): each test case counts (from
#     GoogleTest's own summary); a binary that crashes or prints no summary counts as one failure.
#   - GPU checks build/tests/gpu/*_check --quick (built with the CUDA engine from
#     tests/gpu/*_check.cpp, one program per area): each counts once; 77 (no usable GPU) =
#     skipped;
#   - shell tests tests/*.sh and tests/KIND/*.sh (except this file, sourced helpers lib.sh,
#     *_lib.sh, and tests/asan/run_asan.sh, which tests/asan/asan_check.sh runs) and the weights
#     package's checks tests/weights/check_*.py (run with python3): each counts once; exit 0 =
#     pass, 77 = skipped (automake's convention), anything else = fail.
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

# count_exit NAME RC: one test's exit status into the tally
count_exit() {
    case $2 in
        0) passed=$((passed + 1)) ;;
        77) skipped=$((skipped + 1)); echo "--- $1: skipped${3:+ ($3)}" ;;
        *) failed=$((failed + 1)); failures+=("$1"); echo "*** $1 failed (exit $2)" ;;
    esac
}

shopt -s nullglob
for t in "$BUILD"/tests/*_test; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    # the kind is the folder of its source
    for kind in unit emu; do
        [ -f "$ROOT/tests/$kind/$name.cpp" ] && { name=$kind/$name; break; }
    done
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

# GPU checks (built with the CUDA engine), one program per area, each its quick set;
# tools/check_gpu.sh runs everything. Exit 77 = no usable GPU here = skipped.
for t in "$BUILD"/tests/gpu/*_check; do
    [ -x "$t" ] || continue
    name=gpu/$(basename "$t")
    [ -z "$PATTERN" ] || [[ $name == *"$PATTERN"* ]] || continue
    echo "=== $name --quick"
    run_timed "$t" --quick
    count_exit "$name" $? "no usable GPU"
done

for t in "$ROOT"/tests/*.sh "$ROOT"/tests/*/*.sh; do
    name=${t#"$ROOT"/tests/}
    # weights/smoke_device_train.sh is run by hand: it needs the data folder and about 20 minutes
    case $name in run_tests.sh|*/lib.sh|*_lib.sh|asan/run_asan.sh|weights/smoke_device_train.sh) continue ;; esac
    [ -z "$PATTERN" ] || [[ $name == *"$PATTERN"* ]] || continue
    echo "=== $name"
    run_timed sh "$t"
    count_exit "$name" $?
done

for t in "$ROOT"/tests/weights/check_*.py; do
    name=${t#"$ROOT"/tests/}
    [ -z "$PATTERN" ] || [[ $name == *"$PATTERN"* ]] || continue
    echo "=== $name"
    run_timed python3 "$t"
    count_exit "$name" $?
done

echo
[ ${#failures[@]} -eq 0 ] || echo "failed: ${failures[*]}"
[ "$skipped" -eq 0 ] || echo "skipped: $skipped"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
