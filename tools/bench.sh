#!/bin/bash
# tools/bench.sh (make bench): the CUDA engine's speed and GPU memory, kernel-only and end to end,
# in one run.
#   1. build/bin/denoise-cuda-bench: this run's bf16 GEMM and copy ceilings, kernel-only ms/frame
#      (CUDA events, median of $BENCH_ITERS; with TFLOP/s as a share of the GEMM ceiling, a
#      per-op-kind table and the fused path's roofline: GFLOP, least DRAM bytes, TFLOP/s and GB/s
#      per op kind), the frame as a CUDA graph beside stream launches, and the
#      public API with device frames and with host frames (wall clock, engine memory peak) at
#      960x540, 1920x1080, 3840x2160, and 7680x4320 under a 2 GiB cap (tiles);
#   2. build/bin/ffmpeg end to end at 1920x1080 and 3840x2160 on testsrc2 content (generated once
#      before the timed runs: 8 raw frames per size and format, h264 as long as the NVDEC run):
#        cuda         CUDA frames resident on the GPU: the 8 raw frames uploaded once
#                     (hwupload_cuda), then tpad=stop=-1:stop_mode=clone repeats the last one as
#                     new frames that reference the same device buffer: what is timed is FFmpeg's
#                     graph and denoise on CUDA frames, no host copy; the bar's figure;
#        cuda+upload  -stream_loop of the raw frames, hwupload_cuda of every frame from host
#                     memory, then denoise (FFmpeg's upload is a pageable copy on the device
#                     context's stream, so the CPU thread waits for the GPU at each frame);
#        nvdec        -hwaccel cuda -hwaccel_output_format cuda of the h264 file (not looped: a
#                     loop restarts the decoder and the CLI rebuilds the graph with a scale
#                     filter that takes no CUDA frames), then denoise: a user's hardware-decoding
#                     path; left out without NVDEC;
#        sw_yuv420p, sw_p010le  software frames (-stream_loop of the raw frames), denoise with
#                     host memory (pinned staging, upload/compute/download overlapped);
#        sw_yuv420p_stream  (1920x1080 only) sw_yuv420p with DENOISE_CUDA_GRAPH=0: the engine's
#                     launches go to the stream one by one instead of as the frame's CUDA graph,
#                     side by side with sw_yuv420p;
#      and 7680x4320 sw yuv420p under a 2 GiB cap when the filter has a GPU memory option.
#      frames/s: ffmpeg reports its output frame count every 0.1 s (-progress); each report is
#      stamped with the wall clock as it arrives and frames/s is the least-squares slope of the
#      count over the reports from frame WARM to the last frame (start-up, model load, the first
#      frames and the teardown are outside it). GPU memory = nvidia-smi's largest memory.used
#      during the run minus the idle value (the whole process: CUDA context, FFmpeg's frames, the
#      engine) and the engine's own peak from the filter's log ("GPU memory peak", -v verbose);
#   3. tools/bench_torch.py (PyTorch eager, v1 code and SDPA/NHWC kernels, at the three sizes;
#      static-shape torch.compile in the modes of BENCH_TORCH_MODES at 1920x1080 and 3840x2160)
#      when BENCH_TORCH=1 and python3 with CUDA torch is present.
# Prints each part's duration and a summary table last, with the bars: CUDA frames >= 90% of the
# kernel-only frames/s (kernel-only: the kernels line plus, for an aligned model, the alignment
# ops per output frame), software yuv420p at 3840x2160 >= 70% of it, a 3840x2160 stream within
# 3 GiB of GPU memory, kernel-only <= 8.3 ms at 3840x2160 and <= 2.5 ms at 1920x1080, and ours
# >= 2x faster than the fastest torch.compile at 1920x1080 and 3840x2160.
# Environment: BENCH_ITERS (30), BENCH_FRAMES (API frames, 30), BENCH_TORCH (1), BENCH_TORCH_MODES
# (torch.compile modes, comma-separated; default "default,reduce-overhead": the mode that also
# captures a CUDA graph was the fastest on the H200, 5.5 ms at 1080p against 9.9 for "default",
# whose launches the host could not keep up with), BENCH_E2E (1),
# BENCH_RUN_TIMEOUT (s per ffmpeg run, 30), BENCH_LOGS (folder for the ffmpeg logs, default a
# temporary one), DENOISE_SOURCE_DIR, DENOISE_BUILD_DIR, DENOISE_WEIGHTS.
set -u
ROOT=${DENOISE_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${DENOISE_BUILD_DIR:-$ROOT/build}
WEIGHTS=${DENOISE_WEIGHTS:-$ROOT/weights/denoise-v2.safetensors}
ITERS=${BENCH_ITERS:-30}
FRAMES=${BENCH_FRAMES:-30}
cd "$ROOT" || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; [ -n "${smi_pid:-}" ] && kill "$smi_pid" 2>/dev/null' EXIT
rc=0
FF=$BUILD/bin/ffmpeg
RUN_TIMEOUT=${BENCH_RUN_TIMEOUT:-30}
LOGS=${BENCH_LOGS:-$tmp}
mkdir -p "$LOGS" || exit 1

echo "=== kernel-only and API (build/bin/denoise-cuda-bench)"
if [ -x "$BUILD/bin/denoise-cuda-bench" ]; then
    t_part=$(date +%s)
    timeout "${BENCH_CB_TIMEOUT:-90}" "$BUILD/bin/denoise-cuda-bench" --weights "$WEIGHTS" --iters "$ITERS" --frames "$FRAMES" \
        --sizes 960x540,1920x1080,3840x2160,7680x4320 --cap 7680x4320=2048 | tee "$tmp/cb.log"
    cst=${PIPESTATUS[0]}
    [ $cst -eq 124 ] && echo "bench: cuda_bench stopped after ${BENCH_CB_TIMEOUT:-90} s"
    [ $cst -eq 0 ] || rc=1
    echo "bench: cuda_bench took $(( $(date +%s) - t_part )) s"
else
    echo "bench: $BUILD/bin/denoise-cuda-bench missing: the CUDA engine is built whenever nvcc is found"
    rc=1
fi
# kernel-only frames/s of a size: 1000 / (the kernels line's ms + the alignment ops' ms per output
# frame, for a model with align): all the GPU work of an output frame, so that CUDA frames against
# it measures the frame path's own cost whatever the model
kfps() {
    _k=$(sed -n "s/^cuda-bench *$1 *kernels *\([0-9.]*\) ms\/frame (min.*/\1/p" "$tmp/cb.log" | head -n 1)
    _a=$(sed -n "s/^cuda-bench *$1 *align per output frame: *\([0-9.]*\) ms.*/\1/p" "$tmp/cb.log" | head -n 1)
    [ -n "$_k" ] && awk -v k="$_k" -v a="${_a:-0}" 'BEGIN { printf "%.2f", 1000 / (k + a) }'
}

# GPU memory of the device in MiB (all processes), or empty without nvidia-smi
smi_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 2>/dev/null | head -n 1 | tr -d ' '; }

# stamp: "wall_clock_s frames" for each frame= line of ffmpeg's -progress output
stamp() {
    local l
    while IFS= read -r l; do
        case $l in frame=*) echo "${EPOCHREALTIME:-$(date +%s.%N)} ${l#frame=}" ;; esac
    done
}

# run_ff LABEL NFRAMES WARM ARGS...: one ffmpeg run of NFRAMES frames to the null muxer (at most
# BENCH_RUN_TIMEOUT s, with the environment assignments of the array RUN_ENV); prints "frames/s
# max_used_MiB engine_peak_MiB", or FAIL. frames/s is the least-squares slope of the reported
# frame count over wall time for WARM <= count < NFRAMES.
run_ff() {
    local label=$1 n=$2 warm=$3
    shift 3
    local mem=$tmp/mem.$label log=$LOGS/ff.$label.log prog=$tmp/prog.$label
    : > "$mem"
    if command -v nvidia-smi >/dev/null 2>&1; then
        ( while :; do smi_used >> "$mem"; sleep 0.1; done ) &
        smi_pid=$!
    fi
    timeout --foreground -k 5 "$RUN_TIMEOUT" env "${RUN_ENV[@]}" "$FF" -nostdin -hide_banner -v verbose -stats_period 0.1 -progress pipe:1 "$@" \
        -frames:v "$n" -f null - 2> "$log" | stamp > "$prog"
    local st=${PIPESTATUS[0]}
    [ -n "${smi_pid:-}" ] && { kill "$smi_pid" 2>/dev/null; wait "$smi_pid" 2>/dev/null; smi_pid=; }
    local peak fps
    peak=$(sed -n 's/.*GPU memory peak: \([0-9.]*\) MiB.*/\1/p' "$log" | tail -n 1)
    fps=$(awk -v lo="$warm" -v hi="$n" '$2 >= lo && $2 < hi {
              if (!k) t0 = $1
              t = $1 - t0; k++; st += t; sf += $2; stt += t * t; stf += t * $2
          } END {
              d = k * stt - st * st
              if (k < 4 || d <= 0) exit 1
              printf "%.2f", (k * stf - st * sf) / d
          }' "$prog")
    if [ $st -ne 0 ] || [ -z "$fps" ]; then
        echo "bench: ffmpeg $label failed (exit $st$([ $st -eq 124 ] && echo ", stopped after $RUN_TIMEOUT s"); $(wc -l < "$prog") progress reports; log $log):" >&2
        grep -E 'rror|failed|[Ii]nvalid|[Cc]annot' "$log" | head -n 8 >&2
        tail -n 4 "$log" >&2
        echo "FAIL"
        return
    fi
    echo "$fps $(sort -n "$mem" | tail -n 1) ${peak:-}"
}

declare -A E2E MEM PEAK
if [ "${BENCH_E2E:-1}" = 1 ] && [ -x "$FF" ]; then
    echo "=== end to end (build/bin/ffmpeg)"
    t_part=$(date +%s)
    idle=$(smi_used)
    # the filter's GPU memory cap option, if it has one: its name, and 2 GiB in its unit
    capline=$("$FF" -hide_banner -h filter=denoise 2>/dev/null | grep -i '^ *gpu_mem' | head -n 1)
    has_cap=$(echo "$capline" | awk '{ print $1 }')
    capval=2048Mi
    echo "$capline" | grep -qi 'MiB' && capval=2048
    cuda_dev=(-init_hw_device cuda=cu:0 -filter_hw_device cu)
    for size in 1920x1080 3840x2160 7680x4320; do
        nsrc=8
        [ $size = 7680x4320 ] && nsrc=3
        for pf in yuv420p p010le; do
            [ $size = 7680x4320 ] && [ $pf = p010le ] && continue
            "$FF" -nostdin -v error -f lavfi -i "testsrc2=s=$size:r=30" -frames:v $nsrc -vf format=$pf \
                -f rawvideo "$tmp/src.$size.$pf" || { echo "bench: could not make $size $pf" >&2; rc=1; }
        done
        # frames per run and the warm-up left out of the slope: about a second of steady state at
        # the expected rate, so that -stats_period 0.1 gives the fit ten points or more
        case $size in 7680x4320) n=6 warm=2 ;; 3840x2160) n=120 warm=12 ;; *) n=400 warm=40 ;; esac
        if [ $size != 7680x4320 ]; then
            # as long as a run: NVDEC then needs no -stream_loop (a loop restarts the decoder, and
            # the CLI rebuilds the graph for the new hw_frames_ctx with a scale filter that takes
            # no CUDA frames)
            "$FF" -nostdin -v error -f lavfi -i "testsrc2=s=$size:r=30" -frames:v $n -vf format=yuv420p \
                -c:v libx264 -preset ultrafast -qp 20 -g 16 -bf 0 "$tmp/src.$size.mkv" ||
                echo "bench: could not encode the $size h264 file (nvdec left out)" >&2
        fi
        for cfg in cuda cuda_upload nvdec sw_yuv420p sw_yuv420p_stream sw_p010le; do
            case $size:$cfg in 7680x4320:sw_yuv420p) ;; 7680x4320:*) continue ;; 3840x2160:sw_yuv420p_stream) continue ;; esac
            RUN_ENV=()
            raw=(-f rawvideo -pix_fmt yuv420p -s $size -i "$tmp/src.$size.yuv420p")
            loop=(-stream_loop -1 "${raw[@]}")
            case $cfg in
                cuda)        args=("${cuda_dev[@]}" "${raw[@]}" -vf "hwupload_cuda,tpad=stop=-1:stop_mode=clone,denoise=model=$WEIGHTS") ;;
                cuda_upload) args=("${cuda_dev[@]}" "${loop[@]}" -vf "hwupload_cuda,denoise=model=$WEIGHTS") ;;
                nvdec)       [ -f "$tmp/src.$size.mkv" ] || continue
                             args=(-hwaccel cuda -hwaccel_output_format cuda -i "$tmp/src.$size.mkv" -vf "denoise=model=$WEIGHTS") ;;
                sw_yuv420p)  args=("${loop[@]}" -vf "denoise=model=$WEIGHTS") ;;
                sw_yuv420p_stream) RUN_ENV=(DENOISE_CUDA_GRAPH=0)
                             args=("${loop[@]}" -vf "denoise=model=$WEIGHTS") ;;
                sw_p010le)   args=(-stream_loop -1 -f rawvideo -pix_fmt p010le -s $size -i "$tmp/src.$size.p010le" -vf "denoise=model=$WEIGHTS") ;;
            esac
            if [ $size = 7680x4320 ]; then
                [ -n "$has_cap" ] || { echo "bench: the filter has no GPU memory option: 7680x4320 via ffmpeg left out (denoise-cuda-bench has it)"; continue; }
                args=("${loop[@]}" -vf "denoise=model=$WEIGHTS:$has_cap=$capval")
            fi
            r=$(run_ff "$size.$cfg" $n $warm "${args[@]}")
            if [ "$r" = FAIL ]; then
                # NVDEC is optional (the machine may have none); every other run must work
                [ $cfg = nvdec ] && echo "bench: $size nvdec left out (no NVDEC decoding here?)" || rc=1
                continue
            fi
            if [ $cfg = nvdec ] || [ ${cfg%_upload} = cuda ]; then
                # the frames must have reached denoise as CUDA frames (NVDEC falls back to software)
                if ! grep -q "for $size cuda/" "$LOGS/ff.$size.$cfg.log"; then
                    echo "bench: $size $cfg: denoise did not get CUDA frames (log $LOGS/ff.$size.$cfg.log)"
                    [ $cfg = nvdec ] || rc=1
                    continue
                fi
            fi
            set -- $r
            E2E[$size.$cfg]=$1
            [ -n "${2:-}" ] && [ -n "$idle" ] && MEM[$size.$cfg]=$(($2 - idle))
            PEAK[$size.$cfg]=${3:-}
            echo "e2e $size $cfg: $1 frames/s (steady state over frames $warm..$n of one run), GPU memory" \
                 "${MEM[$size.$cfg]:-?} MiB (nvidia-smi, whole process), engine peak ${3:-not logged} MiB"
        done
    done
    echo "bench: end to end took $(( $(date +%s) - t_part )) s"
elif [ "${BENCH_E2E:-1}" = 1 ]; then
    echo "bench: no $FF: end-to-end runs left out"
    rc=1
fi

if [ "${BENCH_TORCH:-1}" = 1 ]; then
    if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
        echo "=== PyTorch reference (tools/bench_torch.py)"
        python3 "$ROOT/tools/bench_torch.py" --weights "$WEIGHTS" --sizes 960x540,1920x1080,3840x2160 \
            --compile-sizes 1920x1080,3840x2160 --compile-modes "${BENCH_TORCH_MODES:-default,reduce-overhead}" --iters "$ITERS" |
            tee "$tmp/torch.log"
        [ "${PIPESTATUS[0]}" = 0 ] || rc=1
    else
        echo "bench: python3 with CUDA-enabled torch not available: PyTorch side-by-side left out"
    fi
fi

echo
echo "=== bench summary ($(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 2>/dev/null | head -n 1))"
[ -f "$tmp/cb.log" ] && grep '^cuda-bench ceilings' "$tmp/cb.log"
[ -f "$tmp/cb.log" ] && sed -n '/^cuda-bench summary/,$p' "$tmp/cb.log"
echo "cuda: CUDA frames resident on the GPU (the bar's figure); cuda+upload: hwupload_cuda of every frame"
echo "from host memory; nvdec: h264 decoded by NVDEC; percentages of the kernel-only frames/s (network + alignment)"
printf '%-10s %10s %12s %12s %12s %12s %12s %14s %10s\n' size kernel-fps cuda cuda+upload nvdec sw-yuv420p sw-p010le \
    "GPU MiB (yuv)" engine-MiB
bars=0
for size in 1920x1080 3840x2160 7680x4320; do
    k=$(kfps "$size")
    cell() { [ -n "${1:-}" ] || { echo -; return; }; [ -n "$k" ] && awk -v a="$1" -v b="$k" 'BEGIN { printf "%s %.0f%%", a, 100 * a / b }' || echo "$1"; }
    printf '%-10s %10s %12s %12s %12s %12s %12s %14s %10s\n' "$size" "${k:--}" "$(cell "${E2E[$size.cuda]:-}")" \
        "$(cell "${E2E[$size.cuda_upload]:-}")" "$(cell "${E2E[$size.nvdec]:-}")" "$(cell "${E2E[$size.sw_yuv420p]:-}")" \
        "$(cell "${E2E[$size.sw_p010le]:-}")" "${MEM[$size.sw_yuv420p]:--}" "${PEAK[$size.sw_yuv420p]:--}"
done
[ -n "${E2E[1920x1080.sw_yuv420p_stream]:-}" ] &&
    echo "1920x1080 sw-yuv420p with stream launches (DENOISE_CUDA_GRAPH=0): ${E2E[1920x1080.sw_yuv420p_stream]} frames/s, with graphs ${E2E[1920x1080.sw_yuv420p]:--}"
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
if [ -f "$tmp/torch.log" ]; then
    echo "PyTorch, same inputs, same run (tools/bench_torch.py; ms per output frame):"
    grep '^pytorch' "$tmp/torch.log" | sed 's/  *[0-9.]* GFLOP\/frame.*//'
    for size in 1920x1080 3840x2160; do
        k=$(kfps "$size")
        # the fastest static-shape torch.compile at this size (ms per frame)
        t=$(awk -v s="$size" '$1 == "pytorch" && $2 == "compile" && $4 == s { print $5 }' "$tmp/torch.log" | sort -g | head -n 1)
        if [ -n "$k" ] && [ -n "$t" ]; then
            check_bar "$size fastest torch.compile ms / ours" "$(awk -v t="$t" -v k="$k" 'BEGIN { printf "%.2f", t * k / 1000 }')" ">=" 2
        else
            check_bar "$size fastest torch.compile ms / ours" "" ">=" 2
        fi
    done
fi
# the engine's speed bars (docs/perf.md, "Bars"): 120 frames/s at 3840x2160, 400 at 1920x1080
for bar in 3840x2160:8.3 1920x1080:2.5; do
    k=$(kfps "${bar%%:*}")
    check_bar "${bar%%:*} kernel-only ms per frame" "$([ -n "$k" ] && awk -v k="$k" 'BEGIN { printf "%.3f", 1000 / k }')" "<=" "${bar#*:}"
done
exit $rc
