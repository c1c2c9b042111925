#!/bin/sh
# tests/cli/cli_pixfmts.sh: every pixel format the filter lists, odd and tiny sizes, formats it
# does not list, and a size change mid-stream, through build/bin/ffmpeg (issue 6).
#
#   - formats: testsrc2 at 32x24, 3 frames, converted to FMT in the graph, then
#     denoise=...:threads=1, showinfo: the output (read from showinfo after the filter) must be
#     3 frames of FMT at 32x24 (if the filter did not take FMT, FFmpeg would insert a conversion
#     and the format after the filter would differ). Planar formats with alpha: the alpha
#     plane's checksum (showinfo plane_checksum[3]) must equal the one without the filter.
#   - formats the filter does not list (yuv420p9be, a Bayer rawvideo file): FFmpeg converts
#     them (an auto_scale filter appears in front of denoise) and the run succeeds, 3 frames.
#   - sizes: 1x1, 2x2, 17x9, 33x17 (odd, 4:2:0), 1x33 nv12, 31x3 yuv422p, 3x5 yuv444p (crop
#     exact=1 from testsrc2, which rounds its own size), 3 frames each, and 1921x1081 (1 frame).
#     7680x4320 only with DENOISE_SLOW_TESTS=1: one 8K frame is 850+ s of CPU time and the
#     CPU engine's peak RSS is ~22 GiB (docs/robustness.md), too much for the 2-core CI machine.
#   - size change mid-stream inside the graph (scale with eval=frame: 5 frames 32x24 then 5
#     frames 48x40): 10 frames out, each at its own size.
# Weights: tests/data/golden_weights.safetensors (random weights of the v1 architecture): this
# checks formats, sizes and counts, not quality. threads=1: at these sizes the engine's thread
# start-up costs more than it saves on a loaded 2-core machine.
set -u
. "$(dirname "$0")/../common/lib.sh"

need_build
make_tmp
model=$TEST_WEIGHTS
[ -f "$model" ] || die "no weights: $TEST_WEIGHTS missing"
DN="denoise=sigma=25:backend=cpu:threads=1:$(filter_model "$model")"

# showinfo lines of the filter named $2 in log $1
info_lines() { grep "$2.* n: *[0-9]" "$1"; }
uniq_field() { # uniq_field LINES FIELD: the distinct values of fmt / s
    printf '%s\n' "$1" | sed -n "s/.* $2:\\([^ ]*\\) .*/\\1/p" | sort -u | tr '\n' ' ' | sed 's/ $//'
}
alpha_sums() { # the 4th plane checksum of each showinfo line
    printf '%s\n' "$1" | sed -n 's/.*plane_checksum:\[[^ ]* [^ ]* [^ ]* \([^]]*\)\].*/\1/p' | tr '\n' ' '
}

# check_fmt FMT: 3 frames of FMT at 32x24 through the filter
check_fmt() {
    _f=$1 _log=$TMP/fmt_$1.log
    if ! run "$_log" "$FFMPEG" -nostdin -hide_banner -f lavfi -i "testsrc2=size=32x24:rate=25" \
            -frames:v 3 -sws_flags "$SWS_FLAGS" -vf "format=$_f,$DN,showinfo" -f null -; then
        fail "$_f: ffmpeg failed"; return
    fi
    _info=$(info_lines "$_log" Parsed_showinfo_2)
    _n=$(printf '%s\n' "$_info" | grep -c 'n: *[0-9]')
    _fo=$(uniq_field "$_info" fmt) _so=$(uniq_field "$_info" s)
    if [ "$_n" != 3 ] || [ "$_fo" != "$_f" ] || [ "$_so" != 32x24 ]; then
        fail "$_f: in 3 frames $_f 32x24 -> out $_n frames ${_fo:-?} ${_so:-?}"; return
    fi
    case $_f in
        yuva*|gbrap*)
            run "$TMP/ref_$_f.log" "$FFMPEG" -nostdin -hide_banner -f lavfi \
                -i "testsrc2=size=32x24:rate=25" -frames:v 3 -sws_flags "$SWS_FLAGS" \
                -vf "format=$_f,showinfo" -f null - || { fail "$_f: reference run failed"; return; }
            _a_ref=$(alpha_sums "$(info_lines "$TMP/ref_$_f.log" Parsed_showinfo_1)")
            _a_out=$(alpha_sums "$_info")
            if [ -z "$_a_ref" ] || [ "$_a_ref" != "$_a_out" ]; then
                fail "$_f: alpha plane changed: [$_a_ref] -> [$_a_out]"; return
            fi
            pass "$_f: 3 frames, $_fo, $_so, alpha plane bit-exact [$_a_out]" ;;
        *)  pass "$_f: 3 frames, $_fo, $_so" ;;
    esac
}

for f in yuv420p yuv422p yuv444p \
         yuv420p10le yuv422p10le yuv444p10le yuv420p12le yuv422p12le yuv444p12le \
         yuv420p16le yuv422p16le yuv444p16le \
         nv12 p010le p016le yuvj420p yuvj422p yuvj444p \
         gray gray10le gray16le \
         gbrp gbrp10le gbrp12le gbrp16le gbrpf32le \
         rgb24 bgr24 rgba bgra rgb48le \
         yuva420p yuva422p yuva444p yuva420p10le yuva444p16le gbrap gbrap16le; do
    check_fmt "$f"
done

# Formats the filter does not list: FFmpeg must convert them in front of it (never a run-time
# refusal). -v verbose shows the auto-inserted scaler.
check_unlisted() {
    _name=$1 _log=$TMP/unlisted_$1.log; shift
    if ! run "$_log" "$FFMPEG" -nostdin -hide_banner -v verbose "$@" -f null -; then
        fail "$_name: ffmpeg failed (an unlisted format must be converted, not refused)"; return
    fi
    _info=$(info_lines "$_log" Parsed_showinfo)
    _n=$(printf '%s\n' "$_info" | grep -c 'n: *[0-9]')
    _fo=$(uniq_field "$_info" fmt)
    if [ "$_n" = 3 ] && grep -q "auto_scale" "$_log"; then
        pass "$_name: converted by FFmpeg (auto_scale) to $_fo, 3 frames"
    else
        fail "$_name: $_n frames, fmt ${_fo:-?}, auto_scale $(grep -c auto_scale "$_log") times"
    fi
}
check_unlisted yuv420p9be -f lavfi -i "testsrc2=size=32x24:rate=25" -frames:v 3 \
    -vf "format=yuv420p9be,$DN,showinfo"
head -c $((32 * 24 * 3)) /dev/urandom >"$TMP/bayer.raw"
check_unlisted bayer_rggb8 -f rawvideo -pix_fmt bayer_rggb8 -video_size 32x24 -framerate 25 \
    -i "$TMP/bayer.raw" -vf "$DN,showinfo"

# check_size W H FMT NFRAMES
check_size() {
    _w=$1 _h=$2 _f=$3 _nf=$4 _log=$TMP/size_${1}x${2}_$3.log
    _sw=$(( (_w + 15) / 16 * 16 )) _sh=$(( (_h + 15) / 16 * 16 ))
    _t0=$(date +%s)
    if ! run "$_log" "$FFMPEG" -nostdin -hide_banner -f lavfi -i "testsrc2=size=${_sw}x${_sh}:rate=25" \
            -frames:v "$_nf" -vf "format=$_f,crop=$_w:$_h:0:0:exact=1,${5:-$DN},showinfo" -f null -; then
        fail "${_w}x${_h} $_f: ffmpeg failed"; return
    fi
    _info=$(info_lines "$_log" Parsed_showinfo_3)
    _n=$(printf '%s\n' "$_info" | grep -c 'n: *[0-9]')
    _fo=$(uniq_field "$_info" fmt) _so=$(uniq_field "$_info" s)
    if [ "$_n" = "$_nf" ] && [ "$_fo" = "$_f" ] && [ "$_so" = "${_w}x${_h}" ]; then
        pass "${_w}x${_h} $_f: $_n frames, $_fo, $_so ($(( $(date +%s) - _t0 )) s)"
    else
        fail "${_w}x${_h} $_f: in $_nf frames -> out $_n frames ${_fo:-?} ${_so:-?}"
    fi
}
check_size 1 1 yuv420p 3
check_size 2 2 yuv420p 3
check_size 17 9 yuv420p 3
check_size 33 17 yuv420p 3
check_size 1 33 nv12 3
check_size 31 3 yuv422p 3
check_size 3 5 yuv444p 3
check_size 1 1 gbrpf32le 3
# large frames: all cores (the engine's threads pay off here)
DN_MT="denoise=sigma=25:backend=cpu:$(filter_model "$model")"
check_size 1921 1081 yuv420p 1 "$DN_MT"
if [ "${DENOISE_SLOW_TESTS:-0}" = 1 ]; then
    check_size 7680 4320 yuv420p 1 "$DN_MT"
else
    skip "7680x4320: 850+ s CPU and ~22 GiB per frame on the CPU engine; run with DENOISE_SLOW_TESTS=1"
fi

# A size change mid-stream inside one graph (scale re-evaluates its size per frame): the filter
# ends the segment, reopens the engine, and loses no frame; sizes as without the filter.
SCALE="scale=w='if(lt(n,5),32,48)':h='if(lt(n,5),24,40)':eval=frame,format=yuv420p"
if run "$TMP/sizechange.log" "$FFMPEG" -nostdin -hide_banner -f lavfi -i "testsrc2=size=64x48:rate=25" \
        -frames:v 10 -vf "$SCALE,$DN,showinfo" -f null - &&
   run "$TMP/sizechange_ref.log" "$FFMPEG" -nostdin -hide_banner -f lavfi -i "testsrc2=size=64x48:rate=25" \
        -frames:v 10 -vf "$SCALE,showinfo" -f null -; then
    _sizes=$(info_lines "$TMP/sizechange.log" Parsed_showinfo_3 | sed -n 's/.* s:\([0-9x]*\) .*/\1/p' | tr '\n' ' ')
    _want=$(info_lines "$TMP/sizechange_ref.log" Parsed_showinfo_2 | sed -n 's/.* s:\([0-9x]*\) .*/\1/p' | tr '\n' ' ')
    _n=$(printf '%s\n' $_sizes | grep -c x)
    if [ "$_n" = 10 ] && [ "$_sizes" = "$_want" ] && [ "$(printf '%s\n' $_sizes | sort -u | wc -l)" = 2 ]; then
        pass "size change mid-stream: 10 frames, sizes [$_sizes]"
    else
        fail "size change mid-stream: $_n frames, sizes [$_sizes], wanted [$_want]"
    fi
else
    fail "size change mid-stream: ffmpeg failed"
fi
finish
