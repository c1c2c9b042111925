#!/bin/bash
# tools/bench.sh (make bench): the CUDA engine's speed at 960x540, 1920x1080, 3840x2160
# (build/bin/denoise-cuda-bench: CUDA events after warm-up, median; ms/frame, frames/s, peak GPU memory,
# GFLOP/frame, TFLOP/s; and the public API's push/pull rate), then the PyTorch reference model
# on the same sizes (weights/bench_torch.py: bf16 eager and torch.compile, CUDA events, median).
# Needs a build configured with --enable-cuda-engine; the PyTorch part needs python3 + torch.
set -u
ROOT=${DENOISE_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${DENOISE_BUILD_DIR:-$ROOT/build}
WEIGHTS=${DENOISE_WEIGHTS:-$ROOT/weights/denoise-v1.safetensors}
SIZES=${BENCH_SIZES:-960x540,1920x1080,3840x2160}
ITERS=${BENCH_ITERS:-30}
cd "$ROOT" || exit 1
rc=0
if [ -x "$BUILD/bin/denoise-cuda-bench" ]; then
    echo "=== CUDA engine (build/bin/denoise-cuda-bench)"
    "$BUILD/bin/denoise-cuda-bench" --weights "$WEIGHTS" --iters "$ITERS" --sizes "$SIZES" || rc=1
else
    echo "bench: $BUILD/bin/denoise-cuda-bench missing: configure with --enable-cuda-engine (docs/cuda.md)"
    rc=1
fi
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    echo "=== PyTorch reference (weights/bench_torch.py)"
    python3 "$ROOT/weights/bench_torch.py" --weights "$WEIGHTS" --sizes "$SIZES" --iters "$ITERS" || rc=1
else
    echo "bench: python3 with CUDA-enabled torch not available: PyTorch side-by-side skipped"
fi
exit $rc
