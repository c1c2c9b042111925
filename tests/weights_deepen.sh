#!/bin/sh
# tests/weights_deepen.sh: function-preserving deepening of a checkpoint
# (weights/denoise_train/deepen.py, checked by tests/weights/check_deepen.py on the CPU, PyTorch):
# new Swin blocks with zero-ended residual branches leave the output exactly unchanged, train from
# the first step, load through export, and bad depths are refused. Skipped (77) without python3,
# PyTorch and safetensors. About 10 s.
set -u
# The check itself lives in tests/weights/ (run directly by tests/run_tests.sh once it runs
# tests/weights/check_*.py; this file then goes); it exits 0, 1, or 77 without the modules it needs.
ROOT=${DENOISE_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
command -v python3 >/dev/null 2>&1 || { echo "SKIP weights_deepen: no python3"; exit 77; }
exec python3 "$ROOT/tests/weights/check_deepen.py"
