#!/bin/sh
# tests/weights_sigma_reparam.sh: sigma-reparametrised qkv weights for training
# (weights/check_sigma_reparam.py on the CPU, PyTorch): switching them on leaves the network's
# output unchanged, gamma is the effective weight's spectral norm, AdamW trains gamma and V with
# LayerNorm-1 frozen, fold() and export's model_from_checkpoint give plain weights with the same
# output. Skipped (77) without python3, PyTorch and safetensors. About 10 s.
set -u
. "$(dirname "$0")/lib.sh"

python3 -c "import torch, numpy, safetensors" 2>/dev/null || { skip "python3 with torch, numpy and safetensors not available"; finish; }
make_tmp
if python3 "$ROOT/weights/check_sigma_reparam.py" >"$TMP/out" 2>&1; then
    pass "$(grep -c ' ok$' "$TMP/out") checks: $(tr '\n' ' ' <"$TMP/out" | sed 's/  */ /g' | cut -c1-300)"
else
    cat "$TMP/out"
    fail "weights/check_sigma_reparam.py: $(tail -n 1 "$TMP/out")"
fi
finish
