#!/bin/sh
# tests/asan/asan_check.sh: the ASan/UBSan/LSan builds of the tests (build/asan/tests/, built by
# make check and make check-asan) run through tests/asan/run_asan.sh; one test for
# tests/run_tests.sh. Exit 77 (skipped) when they were not built.
set -u
ROOT=${DENOISE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${DENOISE_BUILD_DIR:-$ROOT/build}
ls "$BUILD"/asan/tests/*_test >/dev/null 2>&1 || {
    echo "SKIP asan_check: no instrumented tests in $BUILD/asan/tests (make asan-build)"; exit 77; }
exec bash "$ROOT/tests/asan/run_asan.sh"
