#!/bin/sh
# tests/weights_align.sh: the fusion windows' motion alignment (tests/weights/check_align.py on the
# CPU, PyTorch): known per-tile shifts found exactly (clean and at sigma 10), a flat frame kept at
# shift 0, neighbours moved back onto the centre, the head's features moved by the halved shifts,
# Denoiser.forward equal to denoise_sequence with it on, align 0 model v1 bit for bit. Skipped (77)
# without python3 and PyTorch. About 5 s.
set -u
# The check itself lives in tests/weights/ (run directly by tests/run_tests.sh once it runs
# tests/weights/check_*.py; this file then goes); it exits 0, 1, or 77 without the modules it needs.
ROOT=${DENOISE_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
command -v python3 >/dev/null 2>&1 || { echo "SKIP weights_align: no python3"; exit 77; }
exec python3 "$ROOT/tests/weights/check_align.py"
