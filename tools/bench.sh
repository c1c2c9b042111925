#!/bin/bash
# tools/bench.sh (make bench): the CUDA engine's speed and GPU memory, kernel-only and end to end,
# in one run.
#   1. build/bin/denoise-cuda-bench: kernel-only ms/frame (CUDA events, median of $BENCH_ITERS) and the
#      public API with device frames and with host frames (wall clock, engine memory peak) at
#      960x540, 1920x1080, 3840x2160, and 7680x4320 under a 2 GiB cap (tiles);
#   2. build/bin/ffmpeg end to end at 1920x1080 and 3840x2160 on testsrc2 content (generated once
#      into raw files, read with -stream_loop so that generating it costs nothing in the timed
#      runs): CUDA frames (hwupload_cuda,denoise), software yuv420p and p010le frames (denoise,
#      host memory), and 7680x4320 yuv420p under a 2 GiB cap when the filter has a GPU memory
#      option. frames/s = the difference of two runs' frame counts over the difference of their
#      wall times (start-up and model load cancel); GPU memory = nvidia-smi's largest memory.used
#      during the run minus the idle value (the whole process: CUDA context, FFmpeg's frames, the
#      engine) and the engine's own peak from the filter's log when it prints one;
#   3. weights/bench_torch.py (PyTorch eager / torch.compile of the same network) when
#      BENCH_TORCH=1 and python3 with CUDA torch is present.
# Prints a summary table last, with the bars: CUDA frames >= 90% of the kernel-only frames/s,
# software yuv420p at 3840x2160 >= 70% of it, a 3840x2160 stream within 3 GiB of GPU memory.
# Environment: BENCH_ITERS (30), BENCH_FRAMES (API frames, 30), BENCH_TORCH (1), BENCH_E2E (1),
# DENOISE_SOURCE_DIR, DENOISE_BUILD_DIR, DENOISE_WEIGHTS.
set -u
ROOT=${DENOISE_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${DENOISE_BUILD_DIR:-$ROOT/build}
WEIGHTS=${DENOISE_WEIGHTS:-$ROOT/weights/denoise-v1.safetensors}
ITERS=${BENCH_ITERS:-30}
FRAMES=${BENCH_FRAMES:-30}
cd "$ROOT" || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; [ -n "${smi_pid:-}" ] && kill "$smi_pid" 2>/dev/null' EXIT
rc=0
FF=$BUILD/bin/ffmpeg

echo "=== kernel-only and API (build/bin/denoise-cuda-bench)"
if [ -x "$BUILD/bin/denoise-cuda-bench" ]; then
    "$BUILD/bin/denoise-cuda-bench" --weights "$WEIGHTS" --iters "$ITERS" --frames "$FRAMES" \
        --sizes 960x540,1920x1080,3840x2160,7680x4320 --cap 7680x4320=2048 | tee "$tmp/cb.log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
else
    echo "bench: $BUILD/bin/denoise-cuda-bench missing: the CUDA engine is built whenever nvcc is found"
    rc=1
fi
kfps() { sed -n "s/^cuda-bench *$1 *kernels *[0-9.]* ms\/frame (min [0-9.]*) *\([0-9.]*\) frames\/s.*/\1/p" "$tmp/cb.log" | head -n 1; }

# GPU memory of the device in MiB (all processes), or empty without nvidia-smi
smi_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 2>/dev/null | head -n 1 | tr -d ' '; }

# run_ff LABEL NFRAMES ARGS...: runs ffmpeg, prints "seconds max_used_MiB engine_peak_MiB"
run_ff() {
    local label=$1 n=$2
    shift 2
    local mem=$tmp/mem.$label.$n log=$tmp/ff.$label.$n
    : > "$mem"
    if command -v nvidia-smi >/dev/null 2>&1; then
        ( while :; do smi_used >> "$mem"; sleep 0.1; done ) &
        smi_pid=$!
    fi
    local t0 t1
    t0=$(date +%s.%N)
    "$FF" -nostdin -hide_banner -v verbose "$@" -frames:v "$n" -f null - > "$log" 2>&1
    local st=$?
    t1=$(date +%s.%N)
    [ -n "${smi_pid:-}" ] && { kill "$smi_pid" 2>/dev/null; wait "$smi_pid" 2>/dev/null; smi_pid=; }
    local peak
    peak=$(grep -io 'gpu memory peak[^0-9]*[0-9.]* *[MG]i\?B' "$log" | tail -n 1 | sed 's/.*[^0-9.]\([0-9.]*\) *\([MG]\).*/\1 \2/' |
        awk '{ print ($2 == "G" ? $1 * 1024 : $1) }')
    if [ $st -ne 0 ]; then
        echo "bench: ffmpeg $label failed ($st):" >&2
        tail -n 15 "$log" >&2
        echo "FAIL"
        return
    fi
    echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }') $(sort -n "$mem" | tail -n 1) ${peak:-}"
}

declare -A E2E MEM PEAK
if [ "${BENCH_E2E:-1}" = 1 ] && [ -x "$FF" ]; then
    echo "=== end to end (build/bin/ffmpeg)"
    idle=$(smi_used)
    # the filter's GPU memory cap option, if it has one: its name, and 2 GiB in its unit
    capline=$("$FF" -hide_banner -h filter=denoise 2>/dev/null | grep -i '^ *gpu_mem' | head -n 1)
    has_cap=$(echo "$capline" | awk '{ print $1 }')
    capval=2048Mi
    echo "$capline" | grep -qi 'MiB' && capval=2048
    for size in 1920x1080 3840x2160 7680x4320; do
        nsrc=8
        [ $size = 7680x4320 ] && nsrc=3
        for pf in yuv420p p010le; do
            [ $size = 7680x4320 ] && [ $pf = p010le ] && continue
            "$FF" -nostdin -v error -f lavfi -i "testsrc2=s=$size:r=30" -frames:v $nsrc -vf format=$pf \
                -f rawvideo "$tmp/src.$size.$pf" || { echo "bench: could not make $size $pf" >&2; rc=1; }
        done
        for cfg in cuda sw_yuv420p sw_p010le; do
            case $size:$cfg in 7680x4320:cuda|7680x4320:sw_p010le) continue ;; esac
            case $cfg in
                cuda) pf=yuv420p; pre=(-init_hw_device cuda=cu:0 -filter_hw_device cu); vf="hwupload_cuda,denoise=model=$WEIGHTS" ;;
                sw_yuv420p) pf=yuv420p; pre=(); vf="denoise=model=$WEIGHTS" ;;
                sw_p010le) pf=p010le; pre=(); vf="denoise=model=$WEIGHTS" ;;
            esac
            if [ $size = 7680x4320 ]; then
                [ -n "$has_cap" ] || { echo "bench: the filter has no GPU memory option: 7680x4320 via ffmpeg left out (denoise-cuda-bench has it)"; continue; }
                vf="denoise=model=$WEIGHTS:$has_cap=$capval"
                n1=2 n2=6
            elif [ $size = 3840x2160 ]; then n1=10 n2=50
            else n1=10 n2=100
            fi
            in=(-stream_loop -1 -f rawvideo -pix_fmt $pf -s $size -i "$tmp/src.$size.$pf")
            r1=$(run_ff "$size.$cfg" $n1 "${pre[@]}" "${in[@]}" -vf "$vf")
            r2=$(run_ff "$size.$cfg" $n2 "${pre[@]}" "${in[@]}" -vf "$vf")
            if [ "$r1" = FAIL ] || [ "$r2" = FAIL ]; then rc=1; continue; fi
            set -- $r1; t1=$1
            set -- $r2; t2=$1; m2=${2:-}; pk=${3:-}
            fps=$(awk -v a="$t1" -v b="$t2" -v n=$((n2 - n1)) 'BEGIN { printf "%.2f", n / (b - a) }')
            E2E[$size.$cfg]=$fps
            [ -n "$m2" ] && [ -n "$idle" ] && MEM[$size.$cfg]=$((m2 - idle))
            PEAK[$size.$cfg]=$pk
            echo "e2e $size $cfg: $fps frames/s (runs of $n1 and $n2 frames: ${t1} s, ${t2} s), GPU memory" \
                 "${MEM[$size.$cfg]:-?} MiB (nvidia-smi, whole process), engine peak ${pk:-not logged} MiB"
        done
    done
elif [ "${BENCH_E2E:-1}" = 1 ]; then
    echo "bench: no $FF: end-to-end runs left out"
    rc=1
fi

if [ "${BENCH_TORCH:-1}" = 1 ]; then
    if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
        echo "=== PyTorch reference (weights/bench_torch.py)"
        python3 "$ROOT/weights/bench_torch.py" --weights "$WEIGHTS" --sizes 960x540,1920x1080,3840x2160 --iters "$ITERS" || rc=1
    else
        echo "bench: python3 with CUDA-enabled torch not available: PyTorch side-by-side left out"
    fi
fi

echo
echo "=== bench summary ($(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 2>/dev/null | head -n 1))"
[ -f "$tmp/cb.log" ] && sed -n '/^cuda-bench summary/,$p' "$tmp/cb.log"
printf '%-10s %10s %12s %12s %12s %14s %12s\n' size kernel-fps cuda-frames sw-yuv420p sw-p010le "GPU MiB (yuv)" engine-MiB
bars=0
for size in 1920x1080 3840x2160 7680x4320; do
    k=$(kfps "$size")
    pct() { [ -n "${1:-}" ] && [ -n "$k" ] && awk -v a="$1" -v b="$k" 'BEGIN { printf "%.0f%%", 100 * a / b }'; }
    c=${E2E[$size.cuda]:-}; y=${E2E[$size.sw_yuv420p]:-}; q=${E2E[$size.sw_p010le]:-}
    printf '%-10s %10s %12s %12s %12s %14s %12s\n' "$size" "${k:--}" "${c:--} $(pct "$c")" "${y:--} $(pct "$y")" \
        "${q:--} $(pct "$q")" "${MEM[$size.sw_yuv420p]:--}" "${PEAK[$size.sw_yuv420p]:--}"
done
check_bar() {  # NAME VALUE OP LIMIT
    if [ -z "$2" ]; then echo "BAR  --   $1: not measured"; bars=1; return; fi
    if awk -v v="$2" -v l="$4" "BEGIN { exit !(v $3 l) }"; then echo "BAR  PASS $1: $2 $3 $4"; else echo "BAR  FAIL $1: $2 (needs $3 $4)"; bars=1; fi
}
for size in 1920x1080 3840x2160; do
    k=$(kfps "$size")
    c=${E2E[$size.cuda]:-}
    [ -n "$k" ] && [ -n "$c" ] && check_bar "$size CUDA frames / kernel-only frames/s" "$(awk -v a="$c" -v b="$k" 'BEGIN { printf "%.3f", a / b }')" ">=" 0.90 ||
        check_bar "$size CUDA frames / kernel-only frames/s" "" ">=" 0.90
done
k=$(kfps 3840x2160)
y=${E2E[3840x2160.sw_yuv420p]:-}
[ -n "$k" ] && [ -n "$y" ] && check_bar "3840x2160 software yuv420p / kernel-only frames/s" "$(awk -v a="$y" -v b="$k" 'BEGIN { printf "%.3f", a / b }')" ">=" 0.70 ||
    check_bar "3840x2160 software yuv420p / kernel-only frames/s" "" ">=" 0.70
check_bar "3840x2160 yuv420p stream GPU memory (MiB, whole process)" "${MEM[3840x2160.sw_yuv420p]:-}" "<=" 3072
exit $rc
