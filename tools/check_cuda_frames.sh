#!/bin/sh
# tools/check_cuda_frames.sh: the denoise filter on AV_PIX_FMT_CUDA frames, on a GPU machine, with
# a build that has the CUDA engine (nothing is built here; tools/check_gpu.sh runs this).
#
# For each sw_format (nv12, p010le, p016le, yuv420p, yuv444p, yuv444p16le, bgr0), testsrc2
# 320x192, 12 frames, the trained weights (else the random test weights):
#   cuda: format=F,hwupload_cuda,denoise=backend=cuda,showinfo,hwdownload,format=F
#   host: format=F,denoise=backend=cuda           (the same backend on software frames)
#   cpu:  format=F,denoise=backend=cpu            (the fp32 reference)
# and checks: 12 frames out with the input's pts; the frames leaving denoise are CUDA frames
# (showinfo's fmt:cuda); cuda == host (identical, or PSNR >= 60 dB); cuda vs cpu PSNR >= 40 dB
# (bf16 storage vs fp32). Then: two denoise instances on one GPU (split) give the same frames;
# a sw_format with alpha (yuva420p) is refused with its message; the log names the CUDA device.
# Logs of every run go to $OUT/cuda_frames/ (else next to the outputs in a temporary folder);
# the summary table is last.
set -u
TEST_NAME=check_cuda_frames
. "$(dirname "$0")/../tests/lib.sh"

need_build
pick_model
make_tmp
L=${OUT:+$OUT/cuda_frames}
L=${L:-$TMP}
mkdir -p "$L" || die "cannot create $L"
N=12
SIZE=320x192
DN="$(filter_model "$model")"
SRC="testsrc2=s=$SIZE:r=25"
table=$L/summary.txt
: >"$table"

ff() { # ff LOG ARGS...: run build/bin/ffmpeg, log everything
    _l=$1; shift
    "$FFMPEG" -nostdin -hide_banner -v verbose "$@" >"$_l" 2>&1
}
row() { printf '%-12s %-6s %s\n' "$1" "$2" "$3" >>"$table"; }

for F in nv12 p010le p016le yuv420p yuv444p yuv444p16le bgr0; do
    c=$TMP/$F.cuda.nut h=$TMP/$F.host.nut p=$TMP/$F.cpu.nut
    if ! ff "$L/$F.cuda.log" -f lavfi -i "$SRC" -frames:v $N \
            -vf "format=$F,hwupload_cuda,denoise=backend=cuda:$DN,showinfo,hwdownload,format=$F" \
            -c:v rawvideo -f nut "$c"; then
        fail "$F: CUDA frames run failed (log $L/$F.cuda.log):"; tail -n 5 "$L/$F.cuda.log"
        row "$F" FAIL "cuda run failed"; continue
    fi
    ff "$L/$F.host.log" -f lavfi -i "$SRC" -frames:v $N -vf "format=$F,denoise=backend=cuda:$DN" \
        -c:v rawvideo -f nut "$h" || { fail "$F: host-frames run failed"; row "$F" FAIL "host run failed"; continue; }
    ff "$L/$F.cpu.log" -f lavfi -i "$SRC" -frames:v $N -vf "format=$F,denoise=backend=cpu:$DN" \
        -c:v rawvideo -f nut "$p" || { fail "$F: cpu run failed"; row "$F" FAIL "cpu run failed"; continue; }
    n=$(count_frames "$c")
    ncuda=$(grep -c 'Parsed_showinfo.*fmt:cuda' "$L/$F.cuda.log")
    pts_c=$(frame_pts "$c" | tr '\n' ' ') pts_p=$(frame_pts "$p" | tr '\n' ' ')
    same=$(psnr "$c" "$h") vs_cpu=$(psnr "$c" "$p")
    ok=1
    [ "$n" = $N ] || { fail "$F: $n frames out of $N"; ok=0; }
    [ "$ncuda" = $N ] || { fail "$F: $ncuda of $N frames left denoise as CUDA frames"; ok=0; }
    [ "$pts_c" = "$pts_p" ] || { fail "$F: pts differ from the software path: $pts_c / $pts_p"; ok=0; }
    if [ "$same" != inf ] && ! fcmp "${same:-0}" '>=' 60; then fail "$F: CUDA frames vs host frames PSNR $same dB < 60"; ok=0; fi
    fcmp "${vs_cpu:-0}" '>=' 40 || { fail "$F: CUDA frames vs CPU backend PSNR $vs_cpu dB < 40"; ok=0; }
    [ $ok = 1 ] && pass "$F: $n CUDA frames, vs host frames $same dB, vs CPU $vs_cpu dB"
    row "$F" "$([ $ok = 1 ] && echo PASS || echo FAIL)" "frames $n, cuda out $ncuda, vs host $same dB, vs cpu $vs_cpu dB"
done

# two instances sharing the GPU
if ff "$L/two.log" -f lavfi -i "$SRC" -frames:v $N -filter_complex \
        "format=nv12,hwupload_cuda,split[a][b];[a]denoise=backend=cuda:$DN,hwdownload,format=nv12[x];[b]denoise=backend=cuda:$DN,hwdownload,format=nv12[y]" \
        -map '[x]' -c:v rawvideo -f nut "$TMP/two_x.nut" -map '[y]' -c:v rawvideo -f nut "$TMP/two_y.nut"; then
    s2=$(psnr "$TMP/two_x.nut" "$TMP/two_y.nut")
    if [ "$s2" = inf ] && [ "$(count_frames "$TMP/two_x.nut")" = $N ]; then
        pass "two instances on one GPU: identical outputs"; row two-inst PASS "identical, $N frames each"
    else
        fail "two instances on one GPU: PSNR between them $s2 dB"; row two-inst FAIL "PSNR $s2 dB"
    fi
else
    fail "two instances on one GPU: run failed (log $L/two.log)"; tail -n 5 "$L/two.log"; row two-inst FAIL "run failed"
fi

# alpha sw_format refused with a message
if ff "$L/alpha.log" -f lavfi -i "$SRC" -frames:v 2 -vf "format=yuva420p,hwupload_cuda,denoise=backend=cuda:$DN" -f null -; then
    fail "yuva420p CUDA frames were accepted"; row yuva420p FAIL "accepted"
elif grep -q "formats with alpha are not taken" "$L/alpha.log"; then
    pass "yuva420p CUDA frames refused with a message"; row yuva420p PASS "refused with a message"
else
    fail "yuva420p CUDA frames refused without the message:"; tail -n 5 "$L/alpha.log"; row yuva420p FAIL "no message"
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
