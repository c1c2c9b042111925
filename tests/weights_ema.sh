#!/bin/sh
# tests/weights_ema.sh: the weights' moving average of training (weights/weight_ema.py, checked by
# weights/check_ema.py on the CPU, PyTorch): the average against a float64 reference, its
# checkpoint form, the in-place swap, and export taking the average. Skipped (77) without
# python3, PyTorch and safetensors. About 30 s.
set -u
. "$(dirname "$0")/common/lib.sh"

make_tmp
py_check "torch, numpy, safetensors" check_ema.py
finish
