#!/bin/sh
# tests/weights_ema.sh: the weights' moving average of training
# (weights/denoise_train/weight_ema.py, checked by tests/weights/check_ema.py on the CPU, PyTorch):
# the average against a float64 reference, its checkpoint form, the in-place swap, and export taking
# the average. Skipped (77) without python3, PyTorch and safetensors. About 30 s.
set -u
# The check itself lives in tests/weights/ (run directly by tests/run_tests.sh once it runs
# tests/weights/check_*.py; this file then goes); it exits 0, 1, or 77 without the modules it needs.
ROOT=${DENOISE_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
command -v python3 >/dev/null 2>&1 || { echo "SKIP weights_ema: no python3"; exit 77; }
exec python3 "$ROOT/tests/weights/check_ema.py"
