#!/bin/sh
# tests/weights_align.sh: the fusion windows' motion alignment (weights/check_align.py on the CPU,
# PyTorch): known per-tile shifts found exactly (clean and at sigma 10), a flat frame kept at
# shift 0, neighbours moved back onto the centre, the head's features moved by the halved
# shifts, Denoiser.forward equal to denoise_sequence with it on, align 0 model v1 bit for bit.
# Skipped (77) without python3 and PyTorch. About 5 s.
set -u
. "$(dirname "$0")/common/lib.sh"

make_tmp
py_check "torch, numpy" check_align.py
finish
