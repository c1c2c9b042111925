#!/bin/sh
# tests/weights_loss.sh: the training loss (weights/denoise_train/train_step.py loss_fn and
# LossWeights, checked by tests/weights/check_loss.py on the CPU, PyTorch): every term against a
# float64 reference, what each term sees and does not, and the per-clip weight of the per-pixel
# term. Skipped (77) without python3 and PyTorch. About 5 s.
set -u
# The check itself lives in tests/weights/ (run directly by tests/run_tests.sh once it runs
# tests/weights/check_*.py; this file then goes); it exits 0, 1, or 77 without the modules it needs.
ROOT=${DENOISE_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
command -v python3 >/dev/null 2>&1 || { echo "SKIP weights_loss: no python3"; exit 77; }
exec python3 "$ROOT/tests/weights/check_loss.py"
