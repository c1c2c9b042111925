#!/bin/sh
# tests/weights_deepen.sh: function-preserving deepening of a checkpoint (weights/deepen.py,
# checked by weights/check_deepen.py on the CPU, PyTorch): new Swin blocks with zero-ended
# residual branches leave the output exactly unchanged, train from the first step, load through
# export, and bad depths are refused. Skipped (77) without python3, PyTorch and safetensors.
# About 10 s.
set -u
. "$(dirname "$0")/common/lib.sh"

make_tmp
py_check "torch, numpy, safetensors" check_deepen.py
finish
