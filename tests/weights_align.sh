#!/bin/sh
# tests/weights_align.sh: the fusion windows' motion alignment (weights/check_align.py on the CPU,
# PyTorch): known per-tile shifts found exactly (clean and at sigma 10), a flat frame kept at
# shift 0, neighbours moved back onto the centre, the head's features moved by the halved
# shifts, Denoiser.forward equal to denoise_sequence with it on, align 0 model v1 bit for bit.
# Skipped (77) without python3 and PyTorch. About 5 s.
set -u
. "$(dirname "$0")/lib.sh"

python3 -c "import torch, numpy" 2>/dev/null || { skip "python3 with torch and numpy not available"; finish; }
make_tmp
if python3 "$ROOT/weights/check_align.py" >"$TMP/out" 2>&1; then
    pass "$(grep -c ' ok$' "$TMP/out") checks: $(tr '\n' ' ' <"$TMP/out" | sed 's/  */ /g' | cut -c1-300)"
else
    cat "$TMP/out"
    fail "weights/check_align.py: $(tail -n 1 "$TMP/out")"
fi
finish
