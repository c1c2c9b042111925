#!/bin/sh
# tools/sigma_auto_report.sh: the measurements behind docs/sigma-auto.md's "Should sigma=auto be
# the default?" and its before/after crops, through build/bin/ffmpeg's denoise filter.
#
#   tools/sigma_auto_report.sh [--backend cpu|cuda|auto] [--model FILE] [--out DIR] [--only table|crops]
#
# 1. PSNR table: samples/car-roundabout (yuv420p, BT.601 limited, 8 frames) clean and with noise
#    of known level: R'G'B' AWGN (denoise-noise gbrp: rounded, clipped; seed 0) at 10 and 25, and
#    white noise on every Y', Cb, Cr code (denoise-noise yuv420p) at 4 and 8 (network sigma 1.96x
#    that, docs/sigma-auto.md). Each denoised with sigma=auto, the default fixed sigma 15 and the
#    true sigma; PSNR (FFmpeg psnr, average over planes and frames) against the clean clip, and
#    the mean lavfi.denoise.sigma auto used. Printed as a markdown table.
# 2. Crops of the real clips (samples/bedroom, samples/dog-tunnel; no clean reference): frame 4,
#    a 160x96 crop at the clip's centre, 3x nearest-neighbour: input | sigma=auto (its value) |
#    sigma=10, labelled (drawtext) -> OUT/crops_<clip>.png
# Outputs in OUT (default build/sigma-auto).
set -u
TEST_NAME=sigma_auto_report
. "$(dirname "$0")/../tests/common/lib.sh"

backend=cpu model=$WEIGHTS out=$BUILD/sigma-auto only=
while [ $# -gt 0 ]; do
    case $1 in
        --backend) backend=$2; shift 2 ;;
        --model) model=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --only) only=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown argument '$1' (try --help)" ;;
    esac
done
need_build
need_noise
[ -f "$model" ] || die "weights $model not found"
mkdir -p "$out" || die "cannot create $out"
M=$(filter_model "$model")
IN=$SAMPLE_8BIT

# den IN OPTS OUT: denoise IN (sigma OPTS) to FFV1 OUT, the sigma metadata into OUT.txt
den() {
    run "$3.log" "$FFMPEG" -nostdin -y -v error -i "$1" \
        -vf "denoise=$M:backend=$backend:$2,metadata=print:file='$3.txt'" -fps_mode passthrough $FFV1 "$3" ||
        die "denoising $1 ($2) failed: $(tail -n 3 "$3.log")"
}
mean_sigma() { sed -n 's/.*lavfi\.denoise\.sigma=\([0-9.]*\).*/\1/p' "$1" | awk '{ s += $1; n++ } END { printf "%.2f", s / n }'; }

if [ "$only" != crops ]; then
to_rgb "$IN" "$out/clean_rgb.mkv" gbrp || die "clean gbrp copy failed"
cp "$IN" "$out/clean_yuv.mkv"
echo "| input (car-roundabout, 8 frames) | noisy PSNR | auto: sigma used | auto PSNR | sigma=15 PSNR | true sigma | true-sigma PSNR |"
echo "|---|---|---|---|---|---|---|"
for case in "clean 0 yuv" "rgb 10 gbrp" "rgb 25 gbrp" "ycc 4 yuv420p" "ycc 8 yuv420p"; do
    set -- $case
    kind=$1 lvl=$2 fmt=$3
    if [ "$kind" = clean ]; then
        noisy=$out/clean_yuv.mkv ref=$out/clean_yuv.mkv true=0 label="clean (no noise added)"
    elif [ "$kind" = rgb ]; then
        noisy=$out/rgb$lvl.mkv ref=$out/clean_rgb.mkv true=$lvl label="R'G'B' AWGN $lvl"
        add_noise "$IN" "$noisy" "$lvl" 0 gbrp || die "noise failed"
    else
        noisy=$out/ycc$lvl.mkv ref=$out/clean_yuv.mkv label="Y'CbCr 4:2:0 noise $lvl per code"
        true=$(awk -v s="$lvl" 'BEGIN { ky = (255 / 219) ^ 2; kc = (255 / 224) ^ 2 * (1.402 ^ 2 + 0.714136 ^ 2 + 0.344136 ^ 2 + 1.772 ^ 2) / 3; printf "%.1f", s * sqrt(ky + kc) }')
        add_noise "$IN" "$noisy" "$lvl" 0 yuv420p || die "noise failed"
    fi
    pn=$(psnr "$noisy" "$ref")
    den "$noisy" "sigma=auto" "$out/$kind$lvl.auto.mkv"
    den "$noisy" "sigma=15" "$out/$kind$lvl.s15.mkv"
    den "$noisy" "sigma=$true" "$out/$kind$lvl.true.mkv"
    pa=$(psnr "$out/$kind$lvl.auto.mkv" "$ref") p15=$(psnr "$out/$kind$lvl.s15.mkv" "$ref") pt=$(psnr "$out/$kind$lvl.true.mkv" "$ref")
    echo "| $label | $pn | $(mean_sigma "$out/$kind$lvl.auto.mkv.txt") | $pa | $p15 | $true | $pt |"
done
fi
[ "$only" = table ] && exit 0

font=$(fc-match -f '%{file}' 'DejaVu Sans' 2>/dev/null || true)
"$FFMPEG" -hide_banner -filters 2>/dev/null | grep -q ' drawtext ' && [ -f "$font" ] || font=
label() {
    if [ -n "$font" ]; then
        printf "pad=iw:ih+22:0:22:black,drawtext=fontfile='%s':fontsize=13:fontcolor=white:x=6:y=5:text='%s'" "$font" "$1"
    else
        printf null
    fi
}
for clip in bedroom dog-tunnel; do
    src=$SAMPLES/${clip}_320x192_8bit.mkv
    den "$src" "sigma=auto" "$out/$clip.auto.mkv"
    den "$src" "sigma=10" "$out/$clip.s10.mkv"
    sa=$(sed -n 's/.*lavfi\.denoise\.sigma=\([0-9.]*\).*/\1/p' "$out/$clip.auto.mkv.txt" | sed -n 5p)
    crop="select=eq(n\\,4),crop=160:96:80:48,scale=iw*3:ih*3:flags=neighbor,format=rgb24"
    run "$out/$clip.png.log" "$FFMPEG" -nostdin -y -v error -i "$src" -i "$out/$clip.auto.mkv" -i "$out/$clip.s10.mkv" \
        -filter_complex "[0:v]$crop,$(label "$clip, input")[a];[1:v]$crop,$(label "sigma=auto (estimate $sa)")[b];[2:v]$crop,$(label "sigma=10")[c];[a][b][c]hstack=inputs=3[o]" \
        -map "[o]" -frames:v 1 -update 1 -c:v png "$out/crops_$clip.png" || die "crops of $clip failed"
    echo "crops: $out/crops_$clip.png (frame 4, 160x96 at 80,48, x3: input | sigma=auto ($sa) | sigma=10)"
done
