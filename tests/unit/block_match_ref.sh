#!/bin/sh
# tests/unit/block_match_ref.sh: the CPU block matching of model option `align`
# (kernels/cpu/block_match.cpp) against its reference, weights/denoise_train/align.py's tile_shifts on PyTorch's
# CPU: tests/unit/block_match_ref.py writes fresh random frames (fixed seed: moved textures with noise,
# unrelated noise, 8-bit near-flat content with tied costs, a flat frame) at several (radius, tile)
# settings, build/tests/block_match_test --ref computes the shifts, and every tile's shift must be
# identical, ties included; also checks that PyTorch's channel mean and avg_pool2d sum in the fp32
# order block_match.cpp uses. Skipped (77) without python3 and PyTorch. About 3 s.
set -u
. "$(dirname "$0")/../common/lib.sh"

make_tmp
BM=$BUILD/tests/block_match_test
if ! python3 -c "import torch" 2>/dev/null; then
    skip "python3 with torch not available"
elif [ ! -x "$BM" ]; then
    fail "$BM not found: build it first (make tests)"
elif python3 "$ROOT/tests/unit/block_match_ref.py" "$BM" "$TMP" >"$TMP/out" 2>&1; then
    pass "$(grep -c ' ok$' "$TMP/out") checks ok (shifts identical to align.py): $(tr '\n' ' ' <"$TMP/out" | cut -c1-300)"
else
    cat "$TMP/out"
    fail "shifts differ from weights/denoise_train/align.py's tile_shifts"
fi
finish
