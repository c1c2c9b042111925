#!/bin/sh
# tests/weights_loss.sh: the training loss (weights/train_step.py loss_fn and LossWeights, checked
# by weights/check_loss.py on the CPU, PyTorch): every term against a float64 reference, what each
# term sees and does not, and the per-clip weight of the per-pixel term. Skipped (77) without
# python3 and PyTorch. About 5 s.
set -u
. "$(dirname "$0")/common/lib.sh"

make_tmp
py_check "torch" check_loss.py
finish
