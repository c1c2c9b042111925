#!/bin/bash
# tools/device_gpu.sh: every GPU check and benchmark of the CUDA engine in one run on a GPU
# machine that builds nothing (docs/cuda.md, "Running on a GPU machine").
#
#   here (the build machine):   ./configure && make && tools/device_gpu.sh --pack
#       packs build/bin, build/lib, build/tests/gpu_check and fused_check into .device/build.tar.xz and the Debian
#       libraries the GPU machine lacks into .devlibs/libs.tar.xz (../shared/tools/device-libs.sh,
#       or /work/shared/tools/device-libs.sh); both folders are git-ignored.
#   there (repository root, .device and .devlibs carried):   bash tools/device_gpu.sh
#       unpacks, runs tools/check_gpu.sh then tools/bench.sh (BENCH_TORCH=0: no torch.compile
#       warm-up in this run), writes device.log, check_gpu.log, bench.log, two tile crops and
#       logs.tar.gz (every log) under $OUT (or ./device-out), and prints both summary blocks
#       last. About 6 minutes on one H200.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1

if [ "${1:-}" = --pack ]; then
    for f in build/bin/ffmpeg build/bin/denoise-cuda-bench build/tests/gpu_check build/tests/fused_check build/lib/libavfilter.so; do
        [ -e "$f" ] || { echo "device_gpu: $f missing: run ./configure && make first" >&2; exit 1; }
    done
    mkdir -p .device
    grep -qx '/.device/' .gitignore 2>/dev/null || grep -qx '/.device/' .git/info/exclude 2>/dev/null ||
        echo '/.device/' >> .git/info/exclude
    # what the GPU runs needs, without debug info (strip --strip-debug) and without the archive
    rm -rf .device/stage && mkdir -p .device/stage/build/tests
    cp -a build/bin build/lib .device/stage/build/ && cp -a build/tests/gpu_check build/tests/fused_check .device/stage/build/tests/
    rm -f .device/stage/build/lib/*.a .device/stage/build/bin/denoise-cpu-bench
    find .device/stage/build -type f -perm -u+x -exec strip --strip-debug {} + 2>/dev/null
    tar cJf .device/build.tar.xz -C .device/stage build && rm -rf .device/stage
    libs=
    for d in ../shared/tools /work/shared/tools; do [ -x "$d/device-libs.sh" ] || [ -f "$d/device-libs.sh" ] && { libs=$d/device-libs.sh; break; }; done
    [ -n "$libs" ] || { echo "device_gpu: device-libs.sh not found (../shared/tools)" >&2; exit 1; }
    # device-libs.sh records .devlibs in .git/info/exclude: give it a folder where that works
    # (a git worktree's .git is a file)
    work=$(mktemp -d)
    ln -s "$ROOT/build" "$work/build"
    mkdir -p "$work/.git/info"
    (cd "$work" && sh "$libs") || { rm -rf "$work"; exit 1; }
    rm -rf .devlibs && mv "$work/.devlibs" . && rm -rf "$work"
    du -ch .device/build.tar.xz .devlibs/libs.tar.xz
    total=$(du -cb .device/build.tar.xz .devlibs/libs.tar.xz | tail -n 1 | cut -f1)
    tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
    echo "device_gpu: carry .device .devlibs ($((total >> 20)) MiB) + the working tree ($((tree >> 20)) MiB); the limit is 64 MiB"
    [ $((total + tree)) -lt $((64 << 20)) ] || { echo "device_gpu: too large for one call" >&2; exit 1; }
    exit 0
fi

# $OUT brings back at most 8 files: the logs are written to WORK, and $OUT receives device.log,
# check_gpu.log, bench.log, two tile crops and logs.tar.gz (everything, check_cuda_frames.sh's
# per-run logs included)
OUTDIR=${OUT:-$ROOT/device-out}
WORK=$(mktemp -d /tmp/device-work.XXXXXX)
mkdir -p "$OUTDIR"
[ -f .device/build.tar.xz ] && [ -f .devlibs/libs.tar.xz ] || {
    echo "device_gpu: .device/build.tar.xz or .devlibs/libs.tar.xz missing (tools/device_gpu.sh --pack, then carry both)"
    exit 1
}
t0=$(date +%s)
tar xJf .device/build.tar.xz || exit 1
mkdir -p /tmp/devlibs && tar xJf .devlibs/libs.tar.xz -C /tmp/devlibs || exit 1
export LD_LIBRARY_PATH=/tmp/devlibs:$ROOT/build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export DENOISE_SOURCE_DIR=$ROOT DENOISE_BUILD_DIR=$ROOT/build DENOISE_TEST_DATA=$ROOT/tests/data
export PATH=$ROOT/build/bin:/usr/local/cuda/bin:$PATH
{
    echo "device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1)"
    echo "unpacked in $(( $(date +%s) - t0 )) s; $(build/bin/ffmpeg -hide_banner -version | head -n 1)"
} | tee "$WORK/device.log"

CHECK_OUT=$WORK timeout 360 bash tools/check_gpu.sh > "$WORK/check_gpu.log" 2>&1
crc=$?
echo "check_gpu.sh exit $crc after $(( $(date +%s) - t0 )) s" | tee -a "$WORK/device.log"
BENCH_TORCH=0 timeout 200 bash tools/bench.sh > "$WORK/bench.log" 2>&1
brc=$?
echo "bench.sh exit $brc after $(( $(date +%s) - t0 )) s" | tee -a "$WORK/device.log"
cp "$WORK/device.log" "$WORK/check_gpu.log" "$WORK/bench.log" "$OUTDIR/"
ls "$WORK"/tile_crop_*.png 2>/dev/null | head -n 2 | xargs -r cp -t "$OUTDIR/"
tar czf "$OUTDIR/logs.tar.gz" -C "$WORK" . 2>/dev/null
OUTDIR_LOGS=$WORK

echo
echo "===== check_gpu (failures, then the summary; full log: check_gpu.log)"
grep -E '^(FAIL|SKIP)' "$OUTDIR_LOGS/check_gpu.log" | head -n 40
grep -E '^PASS (tiles|memory|device nearly|api .*CUDA memory|check_cuda_frames|memcheck|two engines|stream)' \
    "$OUTDIR_LOGS/check_gpu.log" | cut -c1-220 | head -n 30
tail -n 1 "$OUTDIR_LOGS/check_gpu.log"
echo
echo "===== bench (full log: bench.log)"
sed -n '/^=== bench summary/,$p' "$OUTDIR_LOGS/bench.log"
[ $crc -eq 0 ] && [ $brc -eq 0 ]
