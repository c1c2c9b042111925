#!/bin/sh
# tests/weights_attention.sh: the training kernels (SDPA attention, channels-last convolutions and
# head: Denoiser.set_engine) compute the same network as the v1 code, outputs and every parameter's
# gradient, fp32, on the CPU (tests/weights/check_attention.py, PyTorch), and which SDPA backend
# ran. Skipped (77) without python3 and PyTorch. About 2.5 minutes on a loaded 2-core machine.
set -u
# The check itself lives in tests/weights/ (run directly by tests/run_tests.sh once it runs
# tests/weights/check_*.py; this file then goes); it exits 0, 1, or 77 without the modules it needs.
ROOT=${DENOISE_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
command -v python3 >/dev/null 2>&1 || { echo "SKIP weights_attention: no python3"; exit 77; }
exec python3 "$ROOT/tests/weights/check_attention.py"
