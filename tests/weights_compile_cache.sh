#!/bin/sh
# tests/weights_compile_cache.sh: the portable torch.compile cache of training
# (weights/denoise_train/compile_cache.py, checked by tests/weights/check_compile_cache.py on the
# CPU, PyTorch with Inductor's C++ backend): the file name, a save, a second process with empty
# Inductor caches served from the file (FX graph cache hits, no misses), and the failures that must
# not raise. Skipped (77) without python3 and PyTorch. About 30 s.
set -u
# The check itself lives in tests/weights/ (run directly by tests/run_tests.sh once it runs
# tests/weights/check_*.py; this file then goes); it exits 0, 1, or 77 without the modules it needs.
ROOT=${DENOISE_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
command -v python3 >/dev/null 2>&1 || { echo "SKIP weights_compile_cache: no python3"; exit 77; }
exec python3 "$ROOT/tests/weights/check_compile_cache.py"
