#!/bin/sh
# tools/demo.sh (make demo): add AWGN to a sample clip, denoise it with the built FFmpeg's
# denoise filter, and report the PSNR gain.
#
#   tools/demo.sh [--sigma S] [--seed N] [--backend auto|cpu|cuda] [--input CLIP] [--model FILE]
#
# Steps (all through build/bin/ffmpeg and build/bin/denoise-noise):
#   1. clean.mkv    = the sample (samples/car-roundabout_320x192_8bit.mkv) as 8-bit planar RGB
#   2. noisy.mkv    = clean + AWGN sigma 25, seed 0 (tools/noise.c, rounded and clipped to 8 bit)
#   3. denoised.mkv = ffmpeg -i noisy.mkv -vf denoise=sigma=25 (backend auto: CUDA if usable, else CPU)
#   4. PSNR of noisy and denoised against clean (FFmpeg's psnr filter, average over the clip)
#   5. compare.png  = noisy | denoised | clean, a crop of the middle frame side by side, each
#                     labelled with its name, sigma and PSNR (drawtext: the full FFmpeg build)
# Outputs land in build/demo/. Exit status 0 only if the denoised PSNR beats the noisy one.
set -u
TEST_NAME=demo
. "$(dirname "$0")/../tests/common/lib.sh"

sigma=25 seed=0 backend=auto input=$SAMPLE_8BIT model=
while [ $# -gt 0 ]; do
    case $1 in
        --sigma) sigma=$2; shift 2 ;;
        --seed) seed=$2; shift 2 ;;
        --backend) backend=$2; shift 2 ;;
        --input) input=$2; shift 2 ;;
        --model) model=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown argument '$1' (try --help)" ;;
    esac
done

need_build
need_noise
[ -f "$input" ] || die "input clip $input not found"
if [ -z "$model" ]; then
    model=$WEIGHTS
    [ -f "$model" ] || die "trained weights $model not found (they arrive with weights/; or pass --model FILE)"
fi
OUTDIR=$BUILD/demo
mkdir -p "$OUTDIR" || die "cannot create $OUTDIR"
fmt=$(rgb_fmt "$input")
size=$(frame_size "$input")
nframes=$(count_frames "$input")
echo "demo: $(basename "$input") ($size, $nframes frames) as $fmt; AWGN sigma $sigma seed $seed; backend $backend"
echo "demo: model $model"

to_rgb "$input" "$OUTDIR/clean.mkv" "$fmt" || die "making clean.mkv failed"
add_noise "$input" "$OUTDIR/noisy.mkv" "$sigma" "$seed" "$fmt" || die "making noisy.mkv failed"

t0=$(date +%s.%N)
run "$OUTDIR/denoise.log.txt" "$FFMPEG" -nostdin -y -hide_banner -i "$OUTDIR/noisy.mkv" \
    -vf "denoise=sigma=$sigma:backend=$backend:$(filter_model "$model")" \
    -fps_mode passthrough $FFV1 "$OUTDIR/denoised.mkv" || die "denoising failed (log: $OUTDIR/denoise.log.txt)"
t1=$(date +%s.%N)
secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
echo "demo: denoised $nframes frames in $secs s ($(awk -v s="$secs" -v n="$nframes" 'BEGIN { printf "%.2f", s / n }') s/frame, including model load)"
n_out=$(count_frames "$OUTDIR/denoised.mkv")
[ "$n_out" = "$nframes" ] || die "denoised.mkv has $n_out frames, the input $nframes"

p_noisy=$(psnr "$OUTDIR/noisy.mkv" "$OUTDIR/clean.mkv") || die "psnr (noisy) failed"
p_den=$(psnr "$OUTDIR/denoised.mkv" "$OUTDIR/clean.mkv") || die "psnr (denoised) failed"
[ -n "$p_noisy" ] && [ -n "$p_den" ] || die "could not parse the psnr filter's output"

# compare.png: middle frame, a crop of up to 256x192 from the centre, noisy | denoised | clean,
# each under a label (drawtext with DejaVu Sans: full FFmpeg build; unlabelled otherwise)
mid=$((nframes / 2))
w=${size%x*} h=${size#*x}
cw=$((w < 256 ? w : 256)) ch=$((h < 192 ? h : 192))
cx=$(((w - cw) / 2)) cy=$(((h - ch) / 2))
crop="select=eq(n\\,$mid),crop=$cw:$ch:$cx:$cy"
gain=$(awk -v a="$p_den" -v b="$p_noisy" 'BEGIN { printf "%+.2f", a - b }')
font=$(fc-match -f '%{file}' 'DejaVu Sans' 2>/dev/null || true)
if "$FFMPEG" -hide_banner -filters 2>/dev/null | grep -q ' drawtext ' && [ -f "$font" ]; then
    # label L: a 22-pixel strip above the crop; the text is escaped for the filtergraph
    label() {
        printf "pad=iw:ih+22:0:22:black,drawtext=fontfile='%s':fontsize=13:fontcolor=white:x=6:y=5:text='%s'" \
            "$font" "$1"
    }
    la=$(label "noisy  sigma $sigma  PSNR $(printf %.2f "$p_noisy") dB")
    lb=$(label "denoised  PSNR $(printf %.2f "$p_den") dB ($gain)")
    lc=$(label "clean")
    labelled="labelled"
else
    la=null lb=null lc=null labelled="unlabelled: this FFmpeg has no drawtext or no DejaVu Sans font"
fi
run "$OUTDIR/compare.log.txt" "$FFMPEG" -nostdin -y -v error \
    -i "$OUTDIR/noisy.mkv" -i "$OUTDIR/denoised.mkv" -i "$OUTDIR/clean.mkv" \
    -filter_complex "[0:v]$crop,format=rgb24,$la[a];[1:v]$crop,format=rgb24,$lb[b];[2:v]$crop,format=rgb24,$lc[c];[a][b][c]hstack=inputs=3,format=rgb24[o]" \
    -map "[o]" -frames:v 1 -update 1 -c:v png "$OUTDIR/compare.png" || die "making compare.png failed"
rm -f "$OUTDIR/compare.log.txt"

echo "demo: wrote $OUTDIR/noisy.mkv, $OUTDIR/denoised.mkv, $OUTDIR/clean.mkv"
echo "demo: wrote $OUTDIR/compare.png (frame $mid, ${cw}x${ch} crop at $cx,$cy: noisy | denoised | clean, $labelled)"
printf 'PSNR noisy %.2f dB -> denoised %.2f dB (%s dB)\n' "$p_noisy" "$p_den" "$gain"
if fcmp "$p_den" '>' "$p_noisy"; then
    exit 0
fi
echo "demo: FAILED: the denoised clip is not closer to the clean one than the noisy clip" >&2
exit 1
