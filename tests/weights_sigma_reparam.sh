#!/bin/sh
# tests/weights_sigma_reparam.sh: sigma-reparametrised qkv weights for training
# (weights/check_sigma_reparam.py on the CPU, PyTorch): switching them on leaves the network's
# output unchanged, gamma is the effective weight's spectral norm, AdamW trains gamma and V with
# LayerNorm-1 frozen, fold() and export's model_from_checkpoint give plain weights with the same
# output. Skipped (77) without python3, PyTorch and safetensors. About 10 s.
set -u
. "$(dirname "$0")/common/lib.sh"

make_tmp
py_check "torch, numpy, safetensors" check_sigma_reparam.py
finish
