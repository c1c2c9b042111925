#!/bin/sh
# tests/cli/cli_frames.sh: exactly one output frame per input frame, timestamps kept.
#
# For N = 1, 2, 3, 7 and 20 frames of a small lavfi testsrc2 clip (64x64, yuv420p, 25 fps, FFV1
# .mkv), build/bin/ffmpeg -i in.mkv -vf denoise=sigma=25:backend=cpu out.mkv must give N frames
# whose pts (ffprobe -show_entries frame=pts) equal the input's. The model's temporal window
# (t-3..t+3, mirrored at the ends) is longer than the short clips: nothing may be dropped or
# duplicated at EOF. One more case has irregular timestamps (variable frame rate:
# pts = n^2 / 25 s) which the filter must pass through, not regenerate.
# Weights: weights/denoise-v2.safetensors when present, else tests/data/golden_weights.safetensors.
set -u
. "$(dirname "$0")/../common/lib.sh"

need_build
make_tmp
pick_model

# check_case NAME N [SETPTS]
check_case() {
    _name=$1 _n=$2 _setpts=${3:-}
    _in=$TMP/in_$_name.mkv _out=$TMP/out_$_name.mkv
    if ! run "$TMP/in_$_name.log" "$FFMPEG" -nostdin -y -v error \
            -f lavfi -i "testsrc2=size=64x64:rate=25,format=yuv420p${_setpts:+,setpts=$_setpts}" \
            -frames:v "$_n" -fps_mode passthrough $FFV1 "$_in"; then
        fail "$_name: could not make the input"
        return
    fi
    if ! run "$TMP/out_$_name.log" "$FFMPEG" -nostdin -y -hide_banner -i "$_in" \
            -vf "denoise=sigma=25:backend=cpu:$(filter_model "$model")" -fps_mode passthrough \
            $FFV1 "$_out"; then
        fail "$_name: ffmpeg failed"
        return
    fi
    _fi=$(count_frames "$_in") _fo=$(count_frames "$_out")
    frame_pts "$_in" >"$TMP/pts_in_$_name"
    frame_pts "$_out" >"$TMP/pts_out_$_name"
    if [ "$_fi" != "$_n" ]; then
        fail "$_name: the input has $_fi frames, wanted $_n (test setup)"
    elif [ "$_fo" != "$_fi" ]; then
        fail "$_name: $_fi frames in, $_fo out"
    elif ! cmp -s "$TMP/pts_in_$_name" "$TMP/pts_out_$_name"; then
        fail "$_name: pts differ: in [$(tr '\n' ' ' <"$TMP/pts_in_$_name")] out [$(tr '\n' ' ' <"$TMP/pts_out_$_name")]"
    else
        pass "$_name: $_fo frames in = out, pts [$(tr '\n' ' ' <"$TMP/pts_out_$_name" | sed 's/ $//')]"
    fi
}

for n in 1 2 3 7 20; do
    check_case "n$n" "$n"
done
check_case "vfr7" 7 "N*N/25/TB"
finish
