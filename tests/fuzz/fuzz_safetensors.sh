#!/bin/sh
# tests/fuzz/fuzz_safetensors.sh: run the weight-loader fuzzer (build/fuzz/fuzz_safetensors, built by
# make check / make fuzz with clang's libFuzzer + ASan + UBSan) for DENOISE_FUZZ_TIME seconds
# (default 60) on a copy of the seed corpus tests/fuzz/corpus/ (new inputs stay in a temporary
# folder). Exit 77 (skipped) when the fuzzer could not be built (no clang / libclang-rt-14-dev).
# A crash, sanitizer report, leak or timeout fails; the reproducer is kept and its path printed.
set -u
. "$(dirname "$0")/../common/lib.sh"

BIN_FUZZ=$BUILD/fuzz/fuzz_safetensors
if [ ! -x "$BIN_FUZZ" ]; then
    skip "$BIN_FUZZ not built (needs clang++ and libclang-rt-14-dev: make fuzz-build)"
    finish
fi
make_tmp
T=${DENOISE_FUZZ_TIME:-60}
mkdir -p "$TMP/corpus" "$TMP/artifacts"
cp "$ROOT"/tests/fuzz/corpus/* "$TMP/corpus/"
if "$BIN_FUZZ" -max_total_time="$T" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
        -artifact_prefix="$TMP/artifacts/" -print_final_stats=1 "$TMP/corpus" >"$TMP/fuzz.log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$TMP/fuzz.log")
    cov=$(grep -o 'cov: [0-9]*' "$TMP/fuzz.log" | tail -n 1)
    pass "${T} s, ${runs:-?} inputs, $cov, corpus $(ls "$TMP/corpus" | wc -l) files, no crash"
else
    keep=$(mktemp -d "${TMPDIR:-/tmp}/denoise-fuzz-crash.XXXXXX")
    cp -r "$TMP/artifacts" "$TMP/fuzz.log" "$keep/" 2>/dev/null
    tail -n 40 "$TMP/fuzz.log"
    fail "the fuzzer found a problem; reproducer and log in $keep"
fi
finish
