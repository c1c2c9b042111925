#!/bin/sh
# tests/weights_feed.sh: the training batch feed (tests/weights/check_feed.py on the CPU, PyTorch).
#
#   - data.flip_transpose (augmentation as one gather) is bit-identical to the four-step flips,
#     transposition and time reversal, for all 16 combinations;
#   - data.resample_tiles (photo clips without copying the tile per frame) matches grid_sample on
#     the copied tiles;
#   - batch_feed.BatchFeed with overlap hands out the same batches, in the same order, as the
#     synchronous feed (model v2's batch: photo, video and synthetic clips, NoiseRecipe noise).
# Skipped (77) without python3 and PyTorch. About 5 s.
set -u
# The check itself lives in tests/weights/ (run directly by tests/run_tests.sh once it runs
# tests/weights/check_*.py; this file then goes); it exits 0, 1, or 77 without the modules it needs.
ROOT=${DENOISE_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
command -v python3 >/dev/null 2>&1 || { echo "SKIP weights_feed: no python3"; exit 77; }
exec python3 "$ROOT/tests/weights/check_feed.py"
