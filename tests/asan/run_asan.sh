#!/bin/bash
# tests/asan/run_asan.sh: run the ASan/UBSan builds of the tests (make check-asan builds them
# into build/asan/tests/) with LeakSanitizer on. Prints "check-asan: N test cases PASS, N FAIL"
# (not run_tests.sh's summary format); a sanitizer report fails the binary even when its test
# cases passed. Exit status 0 when nothing failed.
#   DENOISE_ASAN_DIR   folder of the instrumented test binaries (default build/asan/tests)
#   DENOISE_VALGRIND=1 also run a short ffmpeg -vf denoise under valgrind --leak-check=full
set -u
ROOT=${DENOISE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${DENOISE_BUILD_DIR:-$ROOT/build}
DIR=${DENOISE_ASAN_DIR:-$BUILD/asan/tests}
export DENOISE_SOURCE_DIR=$ROOT DENOISE_BUILD_DIR=$BUILD
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1:detect_stack_use_after_return=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$ROOT/tests/asan/lsan.supp:print_suppressions=0}
cd "$ROOT" || exit 1
passed=0 failed=0 failures=()
for t in "$DIR"/*_test; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    echo "=== asan $name"
    log=$(mktemp)
    start=$(date +%s)
    "$t" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\..*/\1/p' "$log" | tail -n 1)
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) tests\{0,1\}, listed below.*/\1/p' "$log" | tail -n 1)
    p=${p:-0} f=${f:-0}
    if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$log" || [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=$((f + 1)); echo "*** asan $name: sanitizer report or exit status $rc"
    fi
    echo "--- asan $name: $(( $(date +%s) - start )) s"
    rm -f "$log"
    passed=$((passed + p)) failed=$((failed + f))
    [ "$f" -eq 0 ] || failures+=("$name")
done
if [ "${DENOISE_VALGRIND:-0}" = 1 ]; then
    echo "=== valgrind ffmpeg -vf denoise (32x24, 4 frames)"
    if valgrind --leak-check=full --show-leak-kinds=definite,indirect \
            --errors-for-leak-kinds=definite,indirect --error-exitcode=9 -q \
            "$BUILD/bin/ffmpeg" -nostdin -v error -f lavfi -i testsrc2=size=32x24:rate=25 -frames:v 4 \
            -vf "format=yuv420p,denoise=backend=cpu:threads=1:model=$ROOT/tests/data/golden_weights.safetensors" \
            -f null -; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1)); failures+=(valgrind)
    fi
fi
echo
[ ${#failures[@]} -eq 0 ] || echo "failed: ${failures[*]}"
echo "check-asan: $passed test cases PASS, $failed FAIL"
[ "$failed" -eq 0 ]
