#!/bin/bash
# tools/device_gpu.sh: every GPU check and benchmark of the CUDA engine in one run on a GPU
# machine that builds nothing (docs/cuda.md, "Running on a GPU machine").
#
#   here (the build machine):   ./configure && make && tools/device_gpu.sh --pack DEVICE_LIBS_SH
#       packs build/bin, build/lib, build/tests/gpu/ (the GPU check programs) into .device/build.tar.xz and the Debian
#       libraries the GPU machine lacks into .devlibs/libs.tar.xz (made by DEVICE_LIBS_SH, the
#       workplace's device-libs.sh, or $DEVICE_LIBS_SH); both folders are git-ignored. When the two
#       do not fit one call beside the working tree, .devlibs/libs.tar.xz is split into
#       .devlibs/libs.tar.xz.part-N, each carried by a call of its own on the same warm machine
#       (the output says how); the first part run there joins them.
#   there (repository root, .device and .devlibs carried):   bash tools/device_gpu.sh [check|bench|batch]
#       unpacks, runs tools/check_gpu.sh then tools/bench.sh and prints the failures, the key
#       checks and the bench summary last; `check` or `bench` runs that part alone (the checks
#       can share the GPU with a trainer, the bench wants it to itself: pause the trainer around
#       it, tools/device_train.py pause / resume). The PyTorch side by side (eager, and static-shape
#       torch.compile at 1920x1080 and 3840x2160: a few cold compiles) only with DEVICE_TORCH=1
#       (bench budget 480 s instead of 125).
#       `candidates` times each weight file in DEVICE_WEIGHTS (default: .bench/*.safetensors, e.g.
#       weights/random_weights.py's untrained study candidates) with denoise-cuda-bench at
#       DEVICE_SIZES (1920x1080,3840x2160): the network's kernel-only ms and the alignment's, per
#       file (GPU to itself, as the bench).
#       `swin-sweep` checks and times every fused Swin-block kernel built (SWIN_FUSED_KERNELS:
#       tile plans and register builds; docs/fused.md, "Occupancy variants"): fused_check --quick
#       (each kernel against the CPU reference, its mma count, bit for bit against the engine's
#       kernel), then denoise-cuda-bench --swin-sweep (ms per block at the 4K frame's level 0 / 1 /
#       2 token grids for C 32 / 64 / 128, registers, spills, resident CTAs, and the
#       SWIN_FUSED_PREFERENCE rows that would make the fastest the engine's): about a minute, GPU
#       to itself (as the bench); log swin_sweep.log.
#       `mlp-probe` checks and times the Hopper MLP probe (kernels/cuda/swin_mlp_wgmma.cu, sm_90a
#       only; docs/fused.md, "Hopper path: first probe"): build/tests/gpu/mlp_wgmma_check (every
#       wgmma kernel against the CPU reference, the correct-first sequence, bit for bit across
#       grids; refusals), then denoise-cuda-bench --mlp-probe (ms and TFLOP/s at the 4K frame's
#       level 0 / 1 / 2 token grids and an L2-resident map for C 64 and C 128, against cuBLASLt's
#       two GEMMs alone, the correct-first MLP sequence and the fused block): about a minute on an
#       H100 or H200, GPU to itself (as the bench); log mlp_probe.log. On another GPU both say SKIP.
#       `batch` runs only tools/batch_overhead.sh (denoise-batch on one GPU against one ffmpeg
#       run; wants the GPU to itself, as the bench), which needs Ray: the wheel parts of
#       tools/device_wheels.sh, carried one a call by earlier calls on the same warm machine
#       (docs/scale-out.md, "Measuring on the GPU machine").
# Output, always in $OUT (./device-out when OUT is unset), at most 8 files: device.log (each
# part's exit status and duration), check_gpu.log, bench.log, batch.log, candidates.log, swin_sweep.log and mlp_probe.log (written as the parts
# run, so that a run stopped from outside still leaves them), the tile crops (tile_crop_*.png) and
# logs.tar.gz (the per-run logs of check_cuda_frames.sh, check_batch_exact.sh, bench.sh's and
# batch_overhead.sh's ffmpeg runs; written after each part).
# Budgets: check_gpu.sh 480 s (the check programs 230: the API checks run both Swin-block paths; then
# memcheck, the CUDA-frames checks and the batch exactness check within 85 s each, side by side
# with racecheck of fused_check and the areas within 240 s), bench.sh 150 s (cuda_bench 90: both
# paths, the per-op split and the CUDA-graph lines): about 6 minutes on one H200 (check 218 s,
# bench 123 s on 2026-12-03), 10 at most; batch_overhead.sh alone 540 s (DEVICE_BATCH_TIMEOUT).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1

if [ "${1:-}" = --pack ]; then
    for f in build/bin/ffmpeg build/bin/denoise-cuda-bench build/tests/gpu/ops_check build/tests/gpu/fused_check \
        build/tests/gpu/mlp_wgmma_check build/lib/libavfilter.so; do
        [ -e "$f" ] || { echo "device_gpu: $f missing: run ./configure && make first" >&2; exit 1; }
    done
    mkdir -p .device
    grep -qx '/.device/' .gitignore 2>/dev/null || grep -qx '/.device/' .git/info/exclude 2>/dev/null ||
        echo '/.device/' >> .git/info/exclude
    # what the GPU runs needs, without debug info (strip --strip-debug) and without the archive
    rm -rf .device/stage && mkdir -p .device/stage/build/tests
    cp -a build/bin build/lib .device/stage/build/ && cp -a build/tests/gpu .device/stage/build/tests/
    rm -f .device/stage/build/lib/*.a .device/stage/build/bin/denoise-cpu-bench
    find .device/stage/build -type f -perm -u+x -exec strip --strip-debug {} + 2>/dev/null
    # the CUDA engine is linked into libavfilter, the bench and the GPU check programs:
    # a dictionary larger than the whole tree lets xz store it once (15.6 MB at xz's default, 6.2 MB so)
    (set -o pipefail; tar cf - -C .device/stage build | xz -T0 --lzma2=preset=6,dict=192MiB > .device/build.tar.xz) ||
        { echo "device_gpu: packing build/ failed" >&2; rm -f .device/build.tar.xz; exit 1; }
    rm -rf .device/stage
    libs=${2:-${DEVICE_LIBS_SH:-}}
    [ -f "$libs" ] || { echo "device_gpu: --pack needs the device-libs.sh script (argument or DEVICE_LIBS_SH)" >&2; exit 1; }
    libs=$(cd "$(dirname "$libs")" && pwd)/$(basename "$libs")
    # device-libs.sh records .devlibs in .git/info/exclude: give it a folder where that works
    # (a git worktree's .git is a file)
    work=$(mktemp -d)
    ln -s "$ROOT/build" "$work/build"
    mkdir -p "$work/.git/info"
    (cd "$work" && sh "$libs") || { rm -rf "$work"; exit 1; }
    rm -rf .devlibs && mv "$work/.devlibs" . && rm -rf "$work"
    du -ch .device/build.tar.xz .devlibs/libs.tar.xz
    tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
    room=$(((64 << 20) - tree - (1 << 20)))   # what one call may carry beside the working tree
    dev=$(stat -c %s .device/build.tar.xz)
    libs=$(stat -c %s .devlibs/libs.tar.xz)
    echo "device_gpu: the working tree is $((tree >> 20)) MiB; a call carries 64 MiB in all"
    [ "$dev" -lt "$room" ] || { echo "device_gpu: .device/build.tar.xz ($((dev >> 20)) MiB) does not fit beside the working tree" >&2; exit 1; }
    if [ $((dev + libs)) -lt "$room" ]; then
        echo "device_gpu: carry .device and .devlibs in one call ($(((dev + libs) >> 20)) MiB)"
    else
        # the libraries in parts, each carried by a call of its own on the same warm machine (carried
        # paths stay there while it is held); the check/bench call joins them (below)
        split -b "$room" -d -a 1 .devlibs/libs.tar.xz .devlibs/libs.tar.xz.part- && rm .devlibs/libs.tar.xz || exit 1
        n=$(ls .devlibs/libs.tar.xz.part-* | wc -l)
        echo "device_gpu: .devlibs split into $n parts: carry [\".devlibs/libs.tar.xz.part-0\"], ... one a call, then [\".device\"]"
    fi
    exit 0
fi

PARTS=${1:-all}
case $PARTS in all|check|bench|batch|candidates|swin-sweep|mlp-probe) ;;
*) echo "device_gpu: unknown part '$PARTS' (check, bench, batch, candidates, swin-sweep, mlp-probe, or none for check and bench)" >&2; exit 2 ;;
esac
OUTDIR=${OUT:-$ROOT/device-out}
mkdir -p "$OUTDIR" || exit 1
# per-run logs (many small files) live outside $OUTDIR and come back as logs.tar.gz
WORK=$(mktemp -d /tmp/device-work.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
# .devlibs in parts (--pack splits it when it does not fit beside .device): joined here once every part came
if [ ! -f .devlibs/libs.tar.xz ] && ls .devlibs/libs.tar.xz.part-* > /dev/null 2>&1; then
    cat $(ls .devlibs/libs.tar.xz.part-* | sort -V) > .devlibs/libs.tar.xz.tmp && xz -t .devlibs/libs.tar.xz.tmp &&
        mv .devlibs/libs.tar.xz.tmp .devlibs/libs.tar.xz ||
        { echo "device_gpu: joining .devlibs/libs.tar.xz.part-* failed (a part missing?)" | tee "$OUTDIR/device.log"; rm -f .devlibs/libs.tar.xz.tmp; exit 1; }
fi
[ -f .device/build.tar.xz ] && [ -f .devlibs/libs.tar.xz ] || {
    echo "device_gpu: .device/build.tar.xz or .devlibs/libs.tar.xz missing (tools/device_gpu.sh --pack, then carry both)" |
        tee "$OUTDIR/device.log"
    exit 1
}
t0=$(date +%s)
# unpacked once per machine (a second part's call finds them)
if [ ! -f build/.device-unpacked ] || [ .device/build.tar.xz -nt build/.device-unpacked ]; then
    tar xJf .device/build.tar.xz && touch build/.device-unpacked || exit 1
fi
mkdir -p /tmp/devlibs && tar xJf .devlibs/libs.tar.xz -C /tmp/devlibs || exit 1
export LD_LIBRARY_PATH=/tmp/devlibs:$ROOT/build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export DENOISE_SOURCE_DIR=$ROOT DENOISE_BUILD_DIR=$ROOT/build DENOISE_TEST_DATA=$ROOT/tests/data
export PATH=$ROOT/build/bin:/usr/local/cuda/bin:$PATH
{
    echo "device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1)"
    echo "build and libraries ready in $(( $(date +%s) - t0 )) s; $(build/bin/ffmpeg -hide_banner -version | head -n 1)"
} | tee "$OUTDIR/device.log"
pack_logs() { tar czf "$OUTDIR/logs.tar.gz" -C "$WORK" . 2>/dev/null; }

crc=0 brc=0 orc=0
if [ $PARTS = check ] || [ $PARTS = all ]; then
ts=$(date +%s)
CHECK_OUT=$OUTDIR CHECK_LOGS=$WORK CHECK_GPU_TIMEOUT=230 CHECK_SAN_TIMEOUT=85 CHECK_CF_TIMEOUT=85 CHECK_RACE_TIMEOUT=240 \
    CHECK_BE_TIMEOUT=85 \
    timeout -k 5 "${DEVICE_CHECK_TIMEOUT:-480}" bash tools/check_gpu.sh > "$OUTDIR/check_gpu.log" 2>&1
crc=$?
echo "check_gpu.sh exit $crc after $(( $(date +%s) - ts )) s (at $(( $(date +%s) - t0 )) s)" | tee -a "$OUTDIR/device.log"
pack_logs
fi
if [ $PARTS = bench ] || [ $PARTS = all ]; then
ts=$(date +%s)
mkdir -p "$WORK/bench"
torch=${DEVICE_TORCH:-0}
BENCH_TORCH=$torch BENCH_LOGS=$WORK/bench BENCH_CB_TIMEOUT=90 BENCH_RUN_TIMEOUT=25 \
    timeout -k 5 "${DEVICE_BENCH_TIMEOUT:-$([ "$torch" = 1 ] && echo 480 || echo 150)}" bash tools/bench.sh \
    > "$OUTDIR/bench.log" 2>&1
brc=$?
echo "bench.sh exit $brc after $(( $(date +%s) - ts )) s (at $(( $(date +%s) - t0 )) s)" | tee -a "$OUTDIR/device.log"
pack_logs
fi
if [ $PARTS = batch ]; then
ts=$(date +%s)
OUT=$WORK timeout -k 5 "${DEVICE_BATCH_TIMEOUT:-540}" sh tools/batch_overhead.sh > "$OUTDIR/batch.log" 2>&1
orc=$?
echo "batch_overhead.sh exit $orc after $(( $(date +%s) - ts )) s (at $(( $(date +%s) - t0 )) s)" | tee -a "$OUTDIR/device.log"
pack_logs
fi

if [ $PARTS = candidates ]; then
# each weight file's whole frame in the engine (denoise-cuda-bench's kernels and align lines)
ts=$(date +%s)
: > "$OUTDIR/candidates.log"
for w in ${DEVICE_WEIGHTS:-.bench/*.safetensors}; do
    [ -f "$w" ] || { echo "candidates: no weight file $w (carry .bench, or set DEVICE_WEIGHTS)" >> "$OUTDIR/candidates.log"; orc=1; continue; }
    echo "=== $w" >> "$OUTDIR/candidates.log"
    timeout -k 5 120 build/bin/denoise-cuda-bench --weights "$w" --sizes "${DEVICE_SIZES:-1920x1080,3840x2160}" \
        --iters 20 --frames 20 >> "$OUTDIR/candidates.log" 2>&1 || orc=1
done
echo "candidates exit $orc after $(( $(date +%s) - ts )) s (at $(( $(date +%s) - t0 )) s)" | tee -a "$OUTDIR/device.log"
fi

if [ $PARTS = swin-sweep ]; then
# every fused kernel checked (small maps), then timed at the 4K frame's token grids
ts=$(date +%s)
{
    echo "=== fused_check --quick"
    timeout -k 5 "${DEVICE_SWEEP_CHECK_TIMEOUT:-120}" build/tests/gpu/fused_check --quick
    echo "fused_check exit $? after $(( $(date +%s) - ts )) s"
    echo "=== denoise-cuda-bench --swin-sweep"
    timeout -k 5 "${DEVICE_SWEEP_TIMEOUT:-150}" build/bin/denoise-cuda-bench --swin-sweep --iters "${DEVICE_SWEEP_ITERS:-20}"
    echo "swin-sweep exit $? after $(( $(date +%s) - ts )) s"
} > "$OUTDIR/swin_sweep.log" 2>&1
grep -q '^fused_check exit 0 ' "$OUTDIR/swin_sweep.log" && grep -q '^swin-sweep exit 0 ' "$OUTDIR/swin_sweep.log" || orc=1
echo "swin-sweep exit $orc after $(( $(date +%s) - ts )) s (at $(( $(date +%s) - t0 )) s)" | tee -a "$OUTDIR/device.log"
echo
echo "===== swin-sweep (full log: swin_sweep.log): fused_check's failures and summary, then the sweep"
grep -E '^(FAIL|SKIP)' "$OUTDIR/swin_sweep.log" | head -n 30
grep -E '^[0-9]+ passed, [0-9]+ failed|^fused_check exit' "$OUTDIR/swin_sweep.log"
sed -n '/^=== denoise-cuda-bench --swin-sweep/,$p' "$OUTDIR/swin_sweep.log"
fi

if [ $PARTS = mlp-probe ]; then
# the wgmma MLP probe checked, then timed against cuBLASLt, the op sequence and the fused block
ts=$(date +%s)
{
    echo "=== mlp_wgmma_check"
    timeout -k 5 "${DEVICE_MLP_CHECK_TIMEOUT:-150}" build/tests/gpu/mlp_wgmma_check
    echo "mlp_wgmma_check exit $? after $(( $(date +%s) - ts )) s"
    echo "=== denoise-cuda-bench --mlp-probe"
    if grep -q 'did not finish within' "$OUTDIR/mlp_probe.log"; then
        echo "mlp-probe exit 1 after $(( $(date +%s) - ts )) s: not run, the check saw the kernel hang"
    else
        timeout -k 5 "${DEVICE_MLP_BENCH_TIMEOUT:-150}" build/bin/denoise-cuda-bench --mlp-probe --iters "${DEVICE_MLP_ITERS:-20}"
        echo "mlp-probe exit $? after $(( $(date +%s) - ts )) s"
    fi
} > "$OUTDIR/mlp_probe.log" 2>&1
# 77: not an sm_90a GPU (both parts say SKIP): not a failure
grep -qE '^mlp_wgmma_check exit (0|77) ' "$OUTDIR/mlp_probe.log" && grep -qE '^mlp-probe exit (0|77) ' "$OUTDIR/mlp_probe.log" || orc=1
echo "mlp-probe exit $orc after $(( $(date +%s) - ts )) s (at $(( $(date +%s) - t0 )) s)" | tee -a "$OUTDIR/device.log"
echo
echo "===== mlp-probe (full log: mlp_probe.log): the check's failures, kernels and summary, then the bench's"
grep -E '^(FAIL|SKIP|kernel |device: )' "$OUTDIR/mlp_probe.log" | cut -c1-220 | head -n 40
grep -E '^[0-9]+ passed, [0-9]+ failed|^mlp_wgmma_check exit|^mlp-probe' "$OUTDIR/mlp_probe.log"
sed -n '/^mlp-probe summary/,$p' "$OUTDIR/mlp_probe.log"
fi

if [ $PARTS = check ] || [ $PARTS = all ]; then
echo
echo "===== check_gpu (failures, then the summary; full log: check_gpu.log)"
grep -E '^(FAIL|SKIP|INFO)' "$OUTDIR/check_gpu.log" | head -n 40
grep -E '^PASS (network .*(fused path|fused vs)|sample|tiles|memory|device nearly|api .*CUDA memory|check_cuda_frames|check_batch_exact|memcheck|racecheck|CUDA graphs|two engines|stream|block_match|api (aligned|golden_align))' \
    "$OUTDIR/check_gpu.log" | cut -c1-220 | head -n 52
grep -E '^time (check_gpu|[a-z]*_check in all)' "$OUTDIR/check_gpu.log"
sed -n '/^=== check_gpu summary/,$p' "$OUTDIR/check_gpu.log"
fi
if [ $PARTS = bench ] || [ $PARTS = all ]; then
echo
echo "===== bench (full log: bench.log)"
grep -E '^bench: .* took' "$OUTDIR/bench.log"
sed -n '/^=== bench summary/,$p' "$OUTDIR/bench.log"
fi
if [ $PARTS = candidates ]; then
echo
echo "===== candidates (full log: candidates.log): per weight file, kernel-only ms of the network and of the alignment"
grep -E '^(===|candidates:|cuda-bench +[0-9]+x[0-9]+ +(kernels +[0-9]|align per output frame))' "$OUTDIR/candidates.log" | cut -c1-200
fi
if [ $PARTS = batch ]; then
echo
echo "===== batch_overhead (full log: batch.log)"
grep -E '^(batch_overhead|single|denoise-batch:.* s,|denoise-batch( job)?: [0-9.]* frames/s|ratio|PASS|FAIL|SKIP)' "$OUTDIR/batch.log"
fi
echo
cat "$OUTDIR/device.log"
[ $crc -eq 0 ] && [ $brc -eq 0 ] && [ $orc -eq 0 ]
