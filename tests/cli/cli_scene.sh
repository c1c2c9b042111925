#!/bin/sh
# tests/cli/cli_scene.sh: the built-in scene-cut detector at 1920x1080 on real footage.
#
# The real sample clip goat (one shot, 8 frames, camera motion) scaled to 1920x1080 with FFmpeg's
# scale filter (bicubic) must give no cut (the filter logs each cut at verbose level: "scene cut
# at pts ... (T s, score ...)"): with the detector's old fixed 8x8 blocks it scored 11.46 >= 10
# on its first pair at this size and was cut apart. car-roundabout's last 4 frames then goat's
# first 4 (concat) must give exactly one cut, at goat's first frame (0.16 s). The same checks at
# the samples' own 320x192 keep the small-frame behaviour. Weights: the tiny random model
# (tests/data/tiny_weights.safetensors): the detector does not depend on the network, and model
# v1 would take tens of seconds per 1080p frame on the CPU.
set -u
. "$(dirname "$0")/../common/lib.sh"

need_build
make_tmp
tiny_filter
CAR=$SAMPLE_8BIT
GOAT=$SAMPLE_10BIT

# cuts LOG: "seconds:score" of every cut the filter logged
cuts() { sed -n 's/.*scene cut at pts [0-9-]* (\([0-9.-]*\) s, score \([0-9.]*\).*/\1:\2/p' "$1" | tr '\n' ' ' | sed 's/ $//'; }

for size in 1920x1080 320x192; do
    w=${size%x*} h=${size#*x}
    S="scale=$w:$h,format=yuv420p,setsar=1"
    if ! run "$TMP/goat-$size.log" "$FFMPEG" -nostdin -hide_banner -nostats -v verbose -i "$GOAT" \
            -vf "$S,$D" -f null -; then
        fail "goat at $size: ffmpeg failed"
    else
        c=$(cuts "$TMP/goat-$size.log")
        if [ -z "$c" ]; then
            pass "goat at $size (one shot, 8 frames): no cut"
        else
            fail "goat at $size (one shot): cut(s) inside the shot at seconds:score $c"
        fi
    fi
    if ! run "$TMP/concat-$size.log" "$FFMPEG" -nostdin -hide_banner -nostats -v verbose -i "$CAR" -i "$GOAT" \
            -filter_complex "[0:v]trim=start_frame=4,setpts=PTS-STARTPTS,$S[a];[1:v]trim=end_frame=4,$S[b];[a][b]concat=n=2:v=1:a=0,$D" \
            -f null -; then
        fail "car + goat at $size: ffmpeg failed"
        continue
    fi
    c=$(cuts "$TMP/concat-$size.log")
    case $c in
        0.16:*) if [ "${c#* }" = "$c" ]; then
                    pass "car-roundabout (4 frames) + goat (4 frames) at $size: one cut, at goat's first frame (seconds:score $c)"
                else
                    fail "car-roundabout + goat at $size: cuts at seconds:score $c, wanted one at 0.16"
                fi ;;
        *) fail "car-roundabout + goat at $size: cuts at seconds:score '$c', wanted one at 0.16" ;;
    esac
done
finish
