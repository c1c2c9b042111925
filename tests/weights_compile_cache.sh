#!/bin/sh
# tests/weights_compile_cache.sh: the portable torch.compile cache of training
# (weights/compile_cache.py, checked by weights/check_compile_cache.py on the CPU, PyTorch with
# Inductor's C++ backend): the file name, a save, a second process with empty Inductor caches
# served from the file (FX graph cache hits, no misses), and the failures that must not raise.
# Skipped (77) without python3 and PyTorch. About 30 s.
set -u
. "$(dirname "$0")/common/lib.sh"

make_tmp
py_check "torch" check_compile_cache.py
finish
