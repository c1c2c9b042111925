#!/bin/sh
# tools/check_cuda_frames.sh: the denoise filter on AV_PIX_FMT_CUDA frames, on a GPU machine, with
# a build that has the CUDA engine (nothing is built here; tools/check_gpu.sh runs this).
#
# Source: testsrc2 320x192 at 25 frames/s, N=12 frames (a finite source: every run ends at its
# EOF, which also drains denoise's queue through the flush path); the trained weights (else the
# random test weights). For each sw_format F (nv12, p010le, p016le, yuv420p, yuv444p,
# yuv444p16le, bgr0):
#   ctrl: format=F,hwupload_cuda,showinfo=checksum=0,hwdownload,format=F   (no denoise)
#   cuda: format=F,hwupload_cuda,denoise=backend=cuda,showinfo=checksum=0,hwdownload,format=F
#   host: format=F,denoise=backend=cuda           (the same backend on software frames)
#   cpu:  format=F,denoise=backend=cpu:threads=8  (the fp32 reference; nv12 and p010le only:
#         tests/gpu/api_check.cpp compares the two backends through the API for every one of these formats)
# Every output file is rawvideo in NUT, in a format that NUT keeps: p010le and p016le have no raw
# pixel-format tag (libavcodec/raw.c), so NUT writes them as 16 bpp and reads them back as
# rgb555le (2/3 of the luma plane, seen as RGB: the 10-bit value's low 4 bits become G), which
# makes any comparison of them meaningless; they are stored as yuv420p10le (p010: the 10 bits
# exactly, shifted down) and yuv420p16le (p016: the same words), and every file's pix_fmt is
# checked after writing.
# and checks: N frames out with the input's pts (those of the host run); the frames leaving
# denoise are CUDA frames (showinfo's fmt:cuda); cuda == host (identical, or PSNR >= 60 dB); cuda
# vs cpu PSNR >= 40 dB (bf16 storage vs fp32). showinfo runs with checksum=0 on CUDA frames: FFmpeg 7.1's showinfo
# computes its checksums with av_image_get_linesize(), which returns AVERROR(EINVAL) for a
# hardware format, and showinfo returns that without a message ("Error while filtering: Invalid
# argument" from the CLI). The control chain tells a failure of FFmpeg's own CUDA chain from one
# of denoise; for a failed run the lines that name the cause are printed.
# Then: hardware decoding (h264 through NVDEC: -hwaccel cuda -hwaccel_output_format cuda, SKIP
# where the machine has no NVDEC) against software decoding; two denoise instances on one GPU
# (split, one -frames:v per output) give identical frames; a sw_format with alpha (yuva420p) is
# refused with its message; the log names the CUDA device. Before those: the timeline (enable=)
# on CUDA frames (disabled frames are the source, enabled ones the fully enabled run's).
# Every ffmpeg run is limited to CF_RUN_TIMEOUT seconds (default 60). Logs of every run go to
# $OUT/cuda_frames/ (else to a temporary folder); the summary table is last.
set -u
TEST_NAME=check_cuda_frames
. "$(dirname "$0")/../tests/common/lib.sh"

need_build
pick_model
make_tmp
L=${OUT:+$OUT/cuda_frames}
L=${L:-$TMP}
mkdir -p "$L" || die "cannot create $L"
N=12
SIZE=320x192
DN="$(filter_model "$model")"
SRC="testsrc2=s=$SIZE:r=25:d=$(awk -v n=$N 'BEGIN { print n / 25 }')"
RUN_TIMEOUT=${CF_RUN_TIMEOUT:-60}
table=$L/summary.txt
: >"$table"

ff() { # ff LOG ARGS...: run build/bin/ffmpeg (at most RUN_TIMEOUT s), log everything
    _l=$1; shift
    timeout --foreground -k 5 "$RUN_TIMEOUT" "$FFMPEG" -nostdin -hide_banner -v verbose "$@" >"$_l" 2>&1
    _st=$?
    [ $_st -eq 124 ] && echo "check_cuda_frames: stopped after $RUN_TIMEOUT s (timeout)" >>"$_l"
    return $_st
}
row() { printf '%-12s %-6s %s\n' "$1" "$2" "$3" >>"$table"; }
# why LOG: the lines of a failed run that name its cause: errors from any filter or from the
# CLI, and denoise's own messages; when denoise logged no error, say so.
why() {
    grep -E 'rror|failed|[Ii]nvalid|[Cc]annot|not (supported|taken)|timeout|Conversion failed' "$1" |
        grep -v 'Statistics:' | head -n 8 | sed 's/^/    /'
    if grep -q 'Parsed_denoise' "$1" && ! grep -q 'Parsed_denoise.*\(failed\|cannot\|error\|refused\|not taken\)' "$1"; then
        echo "    (denoise logged no error; full log: $1)"
    fi
}

# store_fmt F: the pixel format the NUT files of sw_format F are written in (see the top note)
store_fmt() {
    case $1 in p010le) echo yuv420p10le ;; p016le) echo yuv420p16le ;; *) echo "$1" ;; esac
}
# stored_ok FILE FMT: the file reads back in FMT, else say what it reads back as
stored_ok() {
    _pf=$(probe "$1" pix_fmt)
    [ "$_pf" = "$2" ] && return 0
    fail "$(basename "$1") reads back as ${_pf:-nothing}, written as $2: its comparisons would be meaningless"
    return 1
}

for F in nv12 p010le p016le yuv420p yuv444p yuv444p16le bgr0; do
    c=$TMP/$F.cuda.nut h=$TMP/$F.host.nut p=$TMP/$F.cpu.nut
    S=$(store_fmt "$F")
    ST=$([ "$S" = "$F" ] || echo ",format=$S")
    if ! ff "$L/$F.ctrl.log" -f lavfi -i "$SRC" \
            -vf "format=$F,hwupload_cuda,showinfo=checksum=0,hwdownload,format=$F" -f null -; then
        fail "$F: FFmpeg's CUDA chain fails without denoise (hwupload_cuda,hwdownload; log $L/$F.ctrl.log):"
        why "$L/$F.ctrl.log"
        row "$F" FAIL "control chain without denoise failed"; continue
    fi
    if ! ff "$L/$F.cuda.log" -f lavfi -i "$SRC" \
            -vf "format=$F,hwupload_cuda,denoise=backend=cuda:$DN,showinfo=checksum=0,hwdownload,format=$F$ST" \
            -c:v rawvideo -f nut "$c"; then
        fail "$F: CUDA frames run failed (the same chain without denoise passed; log $L/$F.cuda.log):"
        why "$L/$F.cuda.log"
        row "$F" FAIL "cuda run failed"; continue
    fi
    ff "$L/$F.host.log" -f lavfi -i "$SRC" -vf "format=$F,denoise=backend=cuda:$DN$ST" \
        -c:v rawvideo -f nut "$h" || { fail "$F: host-frames run failed:"; why "$L/$F.host.log"; row "$F" FAIL "host run failed"; continue; }
    vs_cpu=-
    case $F in nv12|p010le)
        ff "$L/$F.cpu.log" -f lavfi -i "$SRC" -vf "format=$F,denoise=backend=cpu:threads=8:$DN$ST" \
            -c:v rawvideo -f nut "$p" || { fail "$F: cpu run failed:"; why "$L/$F.cpu.log"; row "$F" FAIL "cpu run failed"; continue; }
        stored_ok "$p" "$S" || { row "$F" FAIL "stored as $(probe "$p" pix_fmt)"; continue; }
        vs_cpu=$(psnr "$c" "$p") ;;
    esac
    { stored_ok "$c" "$S" && stored_ok "$h" "$S"; } || { row "$F" FAIL "stored as $(probe "$c" pix_fmt)"; continue; }
    n=$(count_frames "$c")
    ncuda=$(grep -c 'Parsed_showinfo.*fmt:cuda' "$L/$F.cuda.log")
    pts_c=$(frame_pts "$c" | tr '\n' ' ') pts_h=$(frame_pts "$h" | tr '\n' ' ')
    same=$(psnr "$c" "$h")
    ok=1
    [ "$n" = $N ] || { fail "$F: $n frames out of $N"; ok=0; }
    [ "$ncuda" = $N ] || { fail "$F: $ncuda of $N frames left denoise as CUDA frames"; ok=0; }
    [ "$pts_c" = "$pts_h" ] || { fail "$F: pts differ from the software path: $pts_c / $pts_h"; ok=0; }
    if [ "$same" != inf ] && ! fcmp "${same:-0}" '>=' 60; then fail "$F: CUDA frames vs host frames PSNR $same dB < 60"; ok=0; fi
    if [ "$vs_cpu" != - ] && ! fcmp "${vs_cpu:-0}" '>=' 40; then fail "$F: CUDA frames vs CPU backend PSNR $vs_cpu dB < 40"; ok=0; fi
    [ $ok = 1 ] && pass "$F: $n CUDA frames, vs host frames $same dB, vs CPU $vs_cpu dB"
    row "$F" "$([ $ok = 1 ] && echo PASS || echo FAIL)" "frames $n, cuda out $ncuda, vs host $same dB, vs cpu $vs_cpu dB"
done

# timeline on CUDA frames: the queue keeps only the properties of an enabled CUDA frame (the
# engine has its samples) but a disabled frame whole, its samples copied into a frame of the
# output pool (hwdownload refuses frames of another hw_frames_ctx): with
# enable=between(n,3,6) frames 3..6 equal the fully enabled nv12 run's, the others the source's
tl_src=$TMP/timeline.src.nut tl=$TMP/timeline.nut
if [ ! -f "$TMP/nv12.cuda.nut" ]; then
    fail "timeline: no nv12 CUDA frames run to compare with"; row timeline FAIL "no nv12 run"
elif ff "$L/timeline.log" -f lavfi -i "$SRC" \
        -vf "format=nv12,hwupload_cuda,denoise=backend=cuda:$DN:enable=between(n\,3\,6),hwdownload,format=nv12" \
        -c:v rawvideo -f nut "$tl" &&
    ff "$L/timeline.src.log" -f lavfi -i "$SRC" -vf format=nv12 -c:v rawvideo -f nut "$tl_src"; then
    psnr "$tl" "$tl_src" "$TMP/timeline.src.stats" >/dev/null
    psnr "$tl" "$TMP/nv12.cuda.nut" "$TMP/timeline.cuda.stats" >/dev/null
    nt=$(count_frames "$tl")
    off=$(per_frame_psnr "$TMP/timeline.src.stats" | awk '($1 < 3 || $1 > 6) && $2 != "inf" { printf "%d (%s dB) ", $1, $2 }')
    on=$(per_frame_psnr "$TMP/timeline.cuda.stats" | awk '$1 >= 3 && $1 <= 6 && $2 != "inf" { printf "%d (%s dB) ", $1, $2 }')
    non=$(per_frame_psnr "$TMP/timeline.cuda.stats" | awk '$1 >= 3 && $1 <= 6' | wc -l)
    if [ "$nt" = $N ] && [ "$non" = 4 ] && [ -z "$off$on" ]; then
        pass "timeline: enable=between(n,3,6) on CUDA frames: frames 3..6 denoised, the others the source, bit-exact"
        row timeline PASS "frames $nt, 3..6 = denoised run, others = source"
    else
        fail "timeline: $nt frames of $N; disabled frames that differ from the source: ${off:-none}; enabled frames that differ from the enabled run: ${on:-none} ($non compared)"
        row timeline FAIL "frames $nt, off ${off:-ok}, on ${on:-ok}"
    fi
else
    fail "timeline: run failed (log $L/timeline.log):"; why "$L/timeline.log"; row timeline FAIL "run failed"
fi

# nvdec_split: where a difference between the NVDEC and the software-decoded denoised outputs
# comes from, one run per hypothesis (12 frames each), printed as one line per question:
#   decode   NVDEC frames vs software-decoded frames, no denoise (bit-exact decoding: inf)
#   upload   the software-decoded frames uploaded (hwupload_cuda: CUDA memory, no NVDEC) vs the
#            host run: the CUDA-memory path on this content, apart from NVDEC
#   sigma15  NVDEC vs software decoding both with sigma=15: with it equal, sigma=auto differs
#   scene0   the host run with the built-in scene detector off (scene=0; it is off for CUDA
#            frames) vs the host run
#   props    the frames' colour properties and chroma location (showinfo) as denoise gets them
#   sigmas   lavfi.denoise.sigma per output frame, NVDEC / host
#   frames   per-frame PSNR of the NVDEC run against the host run (which frames differ: all, or
#            the window's ends)
#   roundtrip NVDEC frames downloaded and uploaded again (hwdownload,hwupload_cuda: a synchronised
#            copy into a fresh pool frame) before denoise, vs the host run: equal when the
#            difference comes from reading the decoder's own frames (their memory or ordering)
#   entering the roundtrip's frames as denoise gets them (showinfo after the download) against
#            the host run's: frames whose checksums differ, and the showinfo fields that differ
#   hwhost   NVDEC decoding into system memory (-hwaccel cuda alone), then the host path, vs the
#            host run: the hardware decoder's frames without CUDA frames
#   device   software decoding uploaded with the CLI's own CUDA device (-init_hw_device,
#            -filter_hw_device, as -hwaccel cuda makes one) vs the host run: the device context
# as INFO lines (tools/device_gpu.sh shows them with the failures).
nvdec_split() {
    _v=$TMP/nvdec.split
    mkdir -p "$_v"
    ff "$L/nvdec.dec.log" -hwaccel cuda -hwaccel_output_format cuda -i "$enc" -vf hwdownload,format=nv12 \
        -c:v rawvideo -f nut "$_v/dec_hw.nut" &&
        ff "$L/nvdec.dec_sw.log" -i "$enc" -vf format=nv12 -c:v rawvideo -f nut "$_v/dec_sw.nut" &&
        echo "INFO $TEST_NAME: nvdec split: decode: NVDEC vs software decoding, no denoise: $(psnr "$_v/dec_hw.nut" "$_v/dec_sw.nut") dB"
    ff "$L/nvdec.upload.log" -i "$enc" -vf "format=nv12,hwupload_cuda,denoise=backend=cuda:$DN,hwdownload,format=nv12" \
        -c:v rawvideo -f nut "$_v/upload.nut" &&
        echo "INFO $TEST_NAME: nvdec split: upload: software-decoded frames through hwupload_cuda (CUDA memory) vs the host run: $(psnr "$_v/upload.nut" "$TMP/nvdec.host.nut") dB;" \
             "vs the NVDEC run: $(psnr "$_v/upload.nut" "$TMP/nvdec.nut") dB"
    ff "$L/nvdec.s15_hw.log" -hwaccel cuda -hwaccel_output_format cuda -i "$enc" \
        -vf "denoise=backend=cuda:sigma=15:$DN,hwdownload,format=nv12" -c:v rawvideo -f nut "$_v/s15_hw.nut" &&
        ff "$L/nvdec.s15_sw.log" -i "$enc" -vf "format=nv12,denoise=backend=cuda:sigma=15:$DN" -c:v rawvideo -f nut "$_v/s15_sw.nut" &&
        echo "INFO $TEST_NAME: nvdec split: sigma15: NVDEC vs software decoding, both sigma=15: $(psnr "$_v/s15_hw.nut" "$_v/s15_sw.nut") dB"
    ff "$L/nvdec.scene0.log" -i "$enc" -vf "format=nv12,denoise=backend=cuda:scene=0:$DN" -c:v rawvideo -f nut "$_v/scene0.nut" &&
        echo "INFO $TEST_NAME: nvdec split: scene0: host run with scene=0 vs the host run: $(psnr "$_v/scene0.nut" "$TMP/nvdec.host.nut") dB;" \
             "vs the NVDEC run: $(psnr "$_v/scene0.nut" "$TMP/nvdec.nut") dB"
    _props() { grep -m1 -o 'color_range:.*' "$1"; grep -m1 -o 'fmt:[^ ]* cl:[^ ]*' "$1"; }
    echo "INFO $TEST_NAME: nvdec split: props: NVDEC [$(_props "$L/nvdec.cuda.log" | tr '\n' ' ')] host [$(_props "$L/nvdec.host.log" | tr '\n' ' ')]"
    _sig() { sed -n 's/.*lavfi\.denoise\.sigma=\([0-9.]*\).*/\1/p' "$1" | tr '\n' ' '; }
    echo "INFO $TEST_NAME: nvdec split: sigmas: NVDEC [$(_sig "$L/nvdec.cuda.log")] host [$(_sig "$L/nvdec.host.log")]"
    psnr "$TMP/nvdec.nut" "$TMP/nvdec.host.nut" "$_v/frames.stats" >/dev/null &&
        echo "INFO $TEST_NAME: nvdec split: frames: NVDEC vs host per frame (n dB): $(per_frame_psnr "$_v/frames.stats" | tr '\n' ' ')"
    ff "$L/nvdec.roundtrip.log" -hwaccel cuda -hwaccel_output_format cuda -i "$enc" \
        -vf "hwdownload,format=nv12,showinfo,hwupload_cuda,denoise=backend=cuda:$DN,hwdownload,format=nv12" -c:v rawvideo -f nut "$_v/roundtrip.nut" &&
        echo "INFO $TEST_NAME: nvdec split: roundtrip: NVDEC frames through hwdownload,hwupload_cuda vs the host run: $(psnr "$_v/roundtrip.nut" "$TMP/nvdec.host.nut") dB;" \
             "vs the NVDEC run: $(psnr "$_v/roundtrip.nut" "$TMP/nvdec.nut") dB"
    # showinfo's per-frame lines without the filter's address: "n: ... pts ... checksum ..." and
    # the property lines after each
    _si() { grep 'Parsed_showinfo' "$1" | sed 's/^\[Parsed_showinfo_[0-9]* @ 0x[0-9a-f]*\] *//' | grep -v -E '^(config|  ?duration|\[)'; }
    _si "$L/nvdec.roundtrip.log" >"$_v/si_round.txt"
    _si "$L/nvdec.host.log" >"$_v/si_host.txt"
    _ck() { grep -o 'checksum:[0-9A-F]*' "$1" | tr '\n' ' '; }
    if [ "$(_ck "$_v/si_round.txt")" = "$(_ck "$_v/si_host.txt")" ]; then ck=same; else ck=differ; fi
    echo "INFO $TEST_NAME: nvdec split: entering: roundtrip vs host frame checksums $ck ($(grep -c checksum "$_v/si_round.txt") / $(grep -c checksum "$_v/si_host.txt") frames);" \
         "showinfo lines only in the roundtrip: $(diff "$_v/si_host.txt" "$_v/si_round.txt" | sed -n 's/^> //p' | sed 's/pts_time.*checksum/... checksum/' | sort -u | head -n 4 | tr '\n' '|')"
    ff "$L/nvdec.hwhost.log" -hwaccel cuda -i "$enc" -vf "format=nv12,denoise=backend=cuda:$DN" -c:v rawvideo -f nut "$_v/hwhost.nut" &&
        echo "INFO $TEST_NAME: nvdec split: hwhost: NVDEC decoding into system memory, host path, vs the host run: $(psnr "$_v/hwhost.nut" "$TMP/nvdec.host.nut") dB"
    ff "$L/nvdec.device.log" -init_hw_device cuda=cu -filter_hw_device cu -i "$enc" \
        -vf "format=nv12,hwupload,denoise=backend=cuda:$DN,hwdownload,format=nv12" -c:v rawvideo -f nut "$_v/device.nut" &&
        echo "INFO $TEST_NAME: nvdec split: device: software decoding uploaded with the CLI's CUDA device vs the host run: $(psnr "$_v/device.nut" "$TMP/nvdec.host.nut") dB"
}

# hardware decoding: h264 (libx264, CPU) decoded by NVDEC into CUDA frames, denoised, against the
# same stream decoded in software (H.264 decoding is bit-exact, so the frames are the same)
enc=$TMP/src.mkv
if ! ff "$L/nvdec.enc.log" -f lavfi -i "$SRC" -vf format=yuv420p -c:v libx264 -preset ultrafast -qp 20 "$enc"; then
    fail "nvdec: could not encode the h264 source:"; why "$L/nvdec.enc.log"; row nvdec FAIL "no h264 source"
elif ! ff "$L/nvdec.ctrl.log" -hwaccel cuda -hwaccel_output_format cuda -i "$enc" -vf hwdownload,format=nv12 -f null -; then
    # without NVDEC the decoder falls back to software frames, which hwdownload refuses
    skip "nvdec: no NVDEC decoding of h264 into CUDA frames here: $(grep -iE 'nvcuvid|Failed setup|hardware frame|rror' "$L/nvdec.ctrl.log" | head -n 2 | tr '\n' ' ')"
    row nvdec SKIP "no NVDEC here"
elif ! ff "$L/nvdec.cuda.log" -hwaccel cuda -hwaccel_output_format cuda -i "$enc" \
        -vf "showinfo=checksum=0,denoise=backend=cuda:$DN,hwdownload,format=nv12,metadata=print:key=lavfi.denoise.sigma" \
        -c:v rawvideo -f nut "$TMP/nvdec.nut"; then
    fail "nvdec: -hwaccel cuda -hwaccel_output_format cuda ... -vf denoise failed:"; why "$L/nvdec.cuda.log"
    row nvdec FAIL "run failed"
elif ! grep -q 'Parsed_denoise.*for [0-9]*x[0-9]* cuda/' "$L/nvdec.cuda.log"; then
    fail "nvdec: denoise did not get CUDA frames (log $L/nvdec.cuda.log)"; row nvdec FAIL "not CUDA frames"
else
    ff "$L/nvdec.host.log" -i "$enc" -vf "format=nv12,showinfo,denoise=backend=cuda:$DN,metadata=print:key=lavfi.denoise.sigma" \
        -c:v rawvideo -f nut "$TMP/nvdec.host.nut" || fail "nvdec: software-decoded run failed"
    nd=$(count_frames "$TMP/nvdec.nut") sd=$(psnr "$TMP/nvdec.nut" "$TMP/nvdec.host.nut")
    if [ "$nd" = $N ] && { [ "$sd" = inf ] || fcmp "${sd:-0}" '>=' 60; }; then
        pass "nvdec: $nd NVDEC-decoded CUDA frames denoised, vs software decoding $sd dB"; row nvdec PASS "frames $nd, vs sw decode $sd dB"
    else
        fail "nvdec: $nd frames of $N, vs software decoding $sd dB (needs >= 60)"; row nvdec FAIL "frames $nd, vs sw decode $sd dB"
        nvdec_split
    fi
fi

# two instances sharing the GPU: -frames:v is an output option, so each output gets its own
if ff "$L/two.log" -f lavfi -i "$SRC" -filter_complex \
        "format=nv12,hwupload_cuda,split[a][b];[a]denoise=backend=cuda:$DN,hwdownload,format=nv12[x];[b]denoise=backend=cuda:$DN,hwdownload,format=nv12[y]" \
        -map '[x]' -frames:v $N -c:v rawvideo -f nut "$TMP/two_x.nut" -map '[y]' -frames:v $N -c:v rawvideo -f nut "$TMP/two_y.nut"; then
    s2=$(psnr "$TMP/two_x.nut" "$TMP/two_y.nut")
    nx=$(count_frames "$TMP/two_x.nut") ny=$(count_frames "$TMP/two_y.nut")
    s1=$( [ -f "$TMP/nv12.cuda.nut" ] && psnr "$TMP/two_x.nut" "$TMP/nv12.cuda.nut")
    if [ "$s2" = inf ] && [ "$nx" = $N ] && [ "$ny" = $N ]; then
        pass "two instances on one GPU: identical outputs, $N frames each (vs one instance: ${s1:-?} dB)"
        row two-inst PASS "identical, $N frames each, vs one instance ${s1:-?} dB"
    else
        fail "two instances on one GPU: $nx and $ny frames of $N, PSNR between them $s2 dB"; row two-inst FAIL "frames $nx/$ny, PSNR $s2 dB"
    fi
else
    fail "two instances on one GPU: run failed (log $L/two.log):"; why "$L/two.log"; row two-inst FAIL "run failed"
fi

# alpha sw_format refused with a message
if ff "$L/alpha.log" -f lavfi -i "$SRC" -frames:v 2 -vf "format=yuva420p,hwupload_cuda,denoise=backend=cuda:$DN" -f null -; then
    fail "yuva420p CUDA frames were accepted"; row yuva420p FAIL "accepted"
elif grep -q "formats with alpha are not taken" "$L/alpha.log"; then
    pass "yuva420p CUDA frames refused with a message"; row yuva420p PASS "refused with a message"
else
    fail "yuva420p CUDA frames refused without the message:"; why "$L/alpha.log"; row yuva420p FAIL "no message"
fi

# the device is named at info level
if grep -q "running the CUDA engine" "$L/nv12.cuda.log"; then
    pass "backend line: $(grep -m1 -o 'running the CUDA engine.*' "$L/nv12.cuda.log")"; row log PASS "device named"
else
    fail "no 'running the CUDA engine' line in $L/nv12.cuda.log"; row log FAIL "no backend line"
fi

echo "--- summary (logs: $L)"
cat "$table"
finish
