#!/bin/sh
# tests/weights_feed.sh: the training batch feed (weights/check_feed.py on the CPU, PyTorch).
#
#   - data.flip_transpose (augmentation as one gather) is bit-identical to the four-step flips,
#     transposition and time reversal, for all 16 combinations;
#   - data.resample_tiles (photo clips without copying the tile per frame) matches grid_sample on
#     the copied tiles;
#   - batch_feed.BatchFeed with overlap hands out the same batches, in the same order, as the
#     synchronous feed (model v2's batch: photo, video and synthetic clips, NoiseRecipe noise).
# Skipped (77) without python3 and PyTorch. About 5 s.
set -u
. "$(dirname "$0")/common/lib.sh"

make_tmp
py_check "torch, numpy" check_feed.py --device cpu
finish
