#!/bin/sh
# tests/cli/cli_formats.sh: the ffmpeg CLI with the denoise filter keeps each clip's format.
#
# For each case: build/bin/ffmpeg -i IN -vf denoise=sigma=25:backend=cpu:model=W OUT must succeed
# and OUT must have the same frame count, pix_fmt and size as IN (the filter negotiates the
# input's own format; FFmpeg would otherwise insert a conversion and OUT's pix_fmt would differ).
#   - the samples: 8-bit yuv420p, 10-bit yuv420p10le, and an odd size (198x118, not a multiple of
#     64: the engine pads and crops) -> FFV1 .mkv
#   - other formats the filter lists (docs/filter.md: RGB planar/packed, 4:2:2/4:4:4, semi-planar, gray,
#     float, alpha): the small sample converted in the graph, 3 frames each, output format read
#     from showinfo after the filter (-f null: no container stores every pix_fmt)
# Weights: weights/denoise-v2.safetensors when present, else the random v1-architecture weights
# tests/data/golden_weights.safetensors (formats and frame counts do not depend on quality).
# Options: --quick (the three samples only).
set -u
. "$(dirname "$0")/../common/lib.sh"

quick=0
[ "${1:-}" = --quick ] && quick=1
need_build
make_tmp
pick_model

# check_case NAME IN OUT: denoise IN to OUT and compare the two
check_case() {
    _name=$1 _in=$2 _out=$3
    if ! run "$TMP/$_name.log" "$FFMPEG" -nostdin -y -hide_banner -i "$_in" \
            -vf "denoise=sigma=25:backend=cpu:$(filter_model "$model")" -fps_mode passthrough \
            $FFV1 "$_out"; then
        fail "$_name: ffmpeg failed"
        return
    fi
    [ -s "$_out" ] || { fail "$_name: no output file"; return; }
    _fi=$(count_frames "$_in") _fo=$(count_frames "$_out")
    _pi=$(probe "$_in" pix_fmt) _po=$(probe "$_out" pix_fmt)
    _si=$(frame_size "$_in") _so=$(frame_size "$_out")
    if [ "$_fi" = "$_fo" ] && [ "$_pi" = "$_po" ] && [ "$_si" = "$_so" ] && [ -n "$_fi" ] && [ "$_fi" -gt 0 ]; then
        pass "$_name: $_fo frames, $_po, $_so"
    else
        fail "$_name: in $_fi frames $_pi $_si -> out $_fo frames $_po $_so"
    fi
}

for s in "$SAMPLE_8BIT" "$SAMPLE_10BIT" "$SAMPLE_ODD"; do
    [ -f "$s" ] || { fail "$(basename "$s"): sample missing"; continue; }
    check_case "$(basename "$s" .mkv)" "$s" "$TMP/$(basename "$s")"
done

# check_fmt FMT: the small sample converted to FMT (3 frames) through the filter; showinfo after
# the filter shows what it outputs (if the filter did not accept FMT, FFmpeg inserts a
# conversion in front of it and the output format differs). No file: not every pix_fmt has a
# container that stores it.
check_fmt() {
    _f=$1
    if ! run "$TMP/fmt_$_f.log" "$FFMPEG" -nostdin -hide_banner -i "$SAMPLE_ODD" -frames:v 3 \
            -sws_flags "$SWS_FLAGS" \
            -vf "format=$_f,denoise=sigma=25:backend=cpu:$(filter_model "$model"),showinfo" \
            -f null -; then
        fail "$_f: ffmpeg failed"
        return
    fi
    _info=$(grep 'Parsed_showinfo_2.* n: *[0-9]' "$TMP/fmt_$_f.log")
    _n=$(printf '%s\n' "$_info" | grep -c 'n: *[0-9]')
    _fo=$(printf '%s\n' "$_info" | sed -n 's/.* fmt:\([^ ]*\) .*/\1/p' | sort -u | tr '\n' ' ' | sed 's/ $//')
    _so=$(printf '%s\n' "$_info" | sed -n 's/.* s:\([0-9]*x[0-9]*\) .*/\1/p' | sort -u | tr '\n' ' ' | sed 's/ $//')
    if [ "$_n" = 3 ] && [ "$_fo" = "$_f" ] && [ "$_so" = 198x118 ]; then
        pass "$_f: 3 frames, $_fo, $_so (showinfo after the filter)"
    else
        fail "$_f: in 3 frames $_f 198x118 -> out $_n frames ${_fo:-?} ${_so:-?}"
    fi
}

if [ $quick = 0 ]; then
    for f in gbrp rgb24 yuv444p yuv422p10le nv12 p010le gray gray10le gbrpf32le yuva420p; do
        check_fmt "$f"
    done
fi
finish
