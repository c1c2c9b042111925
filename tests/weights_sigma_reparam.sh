#!/bin/sh
# tests/weights_sigma_reparam.sh: sigma-reparametrised qkv weights for training
# (tests/weights/check_sigma_reparam.py on the CPU, PyTorch): switching them on leaves the network's
# output unchanged, gamma is the effective weight's spectral norm, AdamW trains gamma and V with
# LayerNorm-1 frozen, fold() and export's model_from_checkpoint give plain weights with the same
# output. Skipped (77) without python3, PyTorch and safetensors. About 10 s.
set -u
# The check itself lives in tests/weights/ (run directly by tests/run_tests.sh once it runs
# tests/weights/check_*.py; this file then goes); it exits 0, 1, or 77 without the modules it needs.
ROOT=${DENOISE_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
command -v python3 >/dev/null 2>&1 || { echo "SKIP weights_sigma_reparam: no python3"; exit 77; }
exec python3 "$ROOT/tests/weights/check_sigma_reparam.py"
