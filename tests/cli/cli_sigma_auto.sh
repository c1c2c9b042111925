#!/bin/sh
# tests/cli/cli_sigma_auto.sh: the filter's sigma=auto from the command line (CPU engine).
#
#   - car-roundabout + R'G'B' AWGN sigma 15 (denoise-noise gbrp: rounded, clipped, seed 0) through
#     -vf denoise=sigma=auto: every output frame carries lavfi.denoise.sigma, each within
#     5 % + 0.5 of 15; exactly one output frame per input
#   - the same clip + white noise of 6 code values on every Y', Cb, Cr sample (yuv420p, BT.601
#     limited): the network's sigma s sqrt(sum_j gain_j) = 11.75 (docs/sigma-auto.md), within 6 %
#   - sigma=-1 and no sigma option (the default) are auto (the same values); a fixed sigma=9 is
#     reported as 9.00 on every frame
#   - sendcmd switches a fixed sigma to auto mid-stream ("denoise sigma auto")
#   - DENOISE_SIGMA_AUTO_DEFER=1 (the CUDA engine's order: each estimate read at the next push,
#     one frame more latency, which the filter queries again after a sigma command) on the CPU
#     engine: the same frames (framemd5) and sigmas as its own order, sigma switched 9 -> auto -> 12
#   - -v verbose prints the estimate ("sigma=auto: ..."); sigma=-0.5 is refused with a message,
#     as an option and as a command (which keeps the value in force)
#   - 64x48 yuv420p (chroma planes too small to estimate): the estimate from the luma plane
#   - ffmpeg -h filter=denoise documents auto
set -u
. "$(dirname "$0")/../common/lib.sh"

need_build
need_noise
make_tmp
pick_model
M=$(filter_model "$model")
IN=$SAMPLE_8BIT
N=$(count_frames "$IN")

# sigmas FILE: the lavfi.denoise.sigma values of FILE's frames (metadata=print), one per line
sigmas() {
    sed -n 's/.*lavfi\.denoise\.sigma=\([0-9.]*\).*/\1/p' "$1"
}
# run_auto IN OPTS OUT.txt [extra ffmpeg args]: denoise IN with OPTS, metadata printed to OUT.txt
run_auto() {
    _in=$1 _opts=$2 _txt=$3
    shift 3
    rm -f "$_txt"
    run "$_txt.log" "$FFMPEG" -nostdin -y -v error "$@" -i "$_in" \
        -vf "denoise=$M:backend=cpu:$_opts,metadata=print:file='$_txt'" -f null -
}
# within LIST WANT TOL: every value of LIST within TOL of WANT
within() {
    printf '%s\n' "$1" | awk -v w="$2" -v t="$3" 'NF { d = $1 - w; if (d < 0) d = -d; if (d > t) bad++; n++ }
        END { exit !(n > 0 && !bad) }'
}

add_noise "$IN" "$TMP/rgb15.mkv" 15 0 gbrp || die "adding R'G'B' noise failed"
if run_auto "$TMP/rgb15.mkv" "sigma=auto" "$TMP/a.txt"; then
    v=$(sigmas "$TMP/a.txt")
    n=$(printf '%s\n' "$v" | grep -c .)
    if [ "$n" = "$N" ] && within "$v" 15 1.25; then
        pass "R'G'B' AWGN 15: lavfi.denoise.sigma on all $n frames, $(printf '%s ' $v)"
    else
        fail "R'G'B' AWGN 15: $n of $N frames with metadata, values $(printf '%s ' $v)(want 15 +- 1.25)"
    fi
else
    fail "sigma=auto run failed: $(tail -n 5 "$TMP/a.txt.log")"
fi

if run_auto "$TMP/rgb15.mkv" "sigma=-1" "$TMP/m1.txt" && [ "$(sigmas "$TMP/m1.txt")" = "$(sigmas "$TMP/a.txt")" ]; then
    pass "sigma=-1 is sigma=auto"
else
    fail "sigma=-1 differs from sigma=auto: $(sigmas "$TMP/m1.txt" | tr '\n' ' ')"
fi

if run_auto "$TMP/rgb15.mkv" "scene=10" "$TMP/d.txt" && [ "$(sigmas "$TMP/d.txt")" = "$(sigmas "$TMP/a.txt")" ]; then
    pass "the default sigma is auto"
else
    fail "the default sigma differs from sigma=auto: $(sigmas "$TMP/d.txt" | tr '\n' ' ')"
fi

if run_auto "$TMP/rgb15.mkv" "sigma=9" "$TMP/f.txt" && within "$(sigmas "$TMP/f.txt")" 9 0 &&
   [ "$(sigmas "$TMP/f.txt" | grep -c .)" = "$N" ]; then
    pass "fixed sigma=9 reported on every frame"
else
    fail "fixed sigma=9: $(sigmas "$TMP/f.txt" | tr '\n' ' ')"
fi

rm -f "$TMP/sc.txt"
if run "$TMP/sc.log" "$FFMPEG" -nostdin -v error -i "$TMP/rgb15.mkv" \
       -vf "sendcmd=c='0.1 denoise sigma auto',denoise=$M:backend=cpu:sigma=9,metadata=print:file='$TMP/sc.txt'" -f null -; then
    v=$(sigmas "$TMP/sc.txt" | tr '\n' ' ')
    first=$(sigmas "$TMP/sc.txt" | head -n 3) last=$(sigmas "$TMP/sc.txt" | tail -n 3)
    if within "$first" 9 0 && within "$last" 15 1.25; then pass "sendcmd 'denoise sigma auto' at 0.1 s: $v"
    else fail "sendcmd 'denoise sigma auto': $v (want 9 for the first frames, ~15 after)"; fi
else
    fail "sendcmd run failed: $(tail -n 3 "$TMP/sc.log")"
fi

ok=1
for d in 0 1; do
    rm -f "$TMP/defer$d.txt"
    run "$TMP/defer$d.log" env DENOISE_SIGMA_AUTO_DEFER=$d "$FFMPEG" -nostdin -v error -i "$TMP/rgb15.mkv" \
        -vf "sendcmd=c='0.1 denoise sigma auto;0.2 denoise sigma 12',denoise=$M:backend=cpu:sigma=9,metadata=print:file='$TMP/defer$d.txt'" \
        -f framemd5 "$TMP/defer$d.md5" || ok=0
done
if [ $ok = 1 ]; then
    v=$(sigmas "$TMP/defer1.txt" | tr '\n' ' ')
    mid=$(sigmas "$TMP/defer1.txt" | sed -n '4,5p') last=$(sigmas "$TMP/defer1.txt" | tail -n 3)
    if grep -v '^#' "$TMP/defer0.md5" >"$TMP/defer0.f" && grep -v '^#' "$TMP/defer1.md5" >"$TMP/defer1.f" &&
       cmp -s "$TMP/defer0.f" "$TMP/defer1.f" && [ "$(wc -l <"$TMP/defer1.f")" = "$N" ] &&
       [ "$(sigmas "$TMP/defer0.txt")" = "$(sigmas "$TMP/defer1.txt")" ] && within "$mid" 15 1.25 && within "$last" 12 0; then
        pass "DENOISE_SIGMA_AUTO_DEFER=1 (estimates read one push later): the same $N frames and sigmas, $v"
    else
        fail "DENOISE_SIGMA_AUTO_DEFER=1: frames or sigmas differ from the default order: $v / $(sigmas "$TMP/defer0.txt" | tr '\n' ' ')"
    fi
else
    fail "DENOISE_SIGMA_AUTO_DEFER runs failed: $(tail -n 3 "$TMP/defer1.log")"
fi

add_noise "$IN" "$TMP/yuv6.mkv" 6 0 yuv420p || die "adding Y'CbCr noise failed"
want=$(awk 'BEGIN { ky = (255 / 219) ^ 2; kc = (255 / 224) ^ 2 * (1.402 ^ 2 + 0.714136 ^ 2 + 0.344136 ^ 2 + 1.772 ^ 2) / 3;
                    printf "%.2f", 6 * sqrt(ky + kc) }')
tol=$(awk -v w="$want" 'BEGIN { printf "%.2f", 0.06 * w }')
if run_auto "$TMP/yuv6.mkv" "sigma=auto" "$TMP/y.txt"; then
    v=$(sigmas "$TMP/y.txt")
    if within "$v" "$want" "$tol"; then
        pass "Y'CbCr 4:2:0 noise 6: network sigma $(printf '%s ' $v)(want $want +- $tol)"
    else
        fail "Y'CbCr 4:2:0 noise 6: $(printf '%s ' $v)(want $want +- $tol)"
    fi
else
    fail "sigma=auto on yuv420p failed: $(tail -n 5 "$TMP/y.txt.log")"
fi

"$FFMPEG" -nostdin -v verbose -i "$TMP/rgb15.mkv" -frames:v 4 -vf "denoise=$M:backend=cpu:sigma=auto" \
    -f null - >"$TMP/verbose.log" 2>&1
if grep -q 'sigma=auto: [0-9.]* at pts' "$TMP/verbose.log"; then
    pass "-v verbose: $(grep -m1 -o 'sigma=auto: [0-9.]* at pts [0-9]*' "$TMP/verbose.log")"
else
    fail "-v verbose printed no 'sigma=auto:' line"
fi

"$FFMPEG" -nostdin -v error -i "$IN" -frames:v 1 -vf "denoise=$M:backend=cpu:sigma=-0.5" -f null - \
    >"$TMP/bad.log" 2>&1
rc=$?
if [ $rc != 0 ] && grep -q 'auto (-1)' "$TMP/bad.log"; then
    pass "sigma=-0.5 refused: $(grep -m1 'auto (-1)' "$TMP/bad.log")"
else
    fail "sigma=-0.5: exit $rc, $(tail -n 2 "$TMP/bad.log")"
fi

# a run-time sigma below 0 (not auto) is refused by the command, the value in force kept
run "$TMP/badcmd.log" "$FFMPEG" -nostdin -v error -i "$IN" -frames:v 4 \
    -vf "sendcmd=c='0.04 denoise sigma -0.5',denoise=$M:backend=cpu:sigma=9,metadata=print:file='$TMP/badcmd.txt'" -f null -
v=$(sigmas "$TMP/badcmd.txt")
if grep -q 'sigma -0.5 refused' "$TMP/badcmd.log" && within "$v" 9 0; then
    pass "sendcmd 'denoise sigma -0.5' refused, sigma 9 kept: $(printf '%s ' $v)"
else
    fail "sendcmd 'denoise sigma -0.5': $(grep -h -o 'sigma -0.5 [a-z]*' "$TMP/badcmd.log") sigmas $(printf '%s ' $v)"
fi

# small 4:2:0 frames: the chroma planes (32x24) are too small for the estimator's patch grid;
# the estimate comes from the luma plane (its variance standing in for the chroma's) instead of 0
if run "$TMP/small.log" "$FFMPEG" -nostdin -y -v error -i "$TMP/yuv6.mkv" \
        -vf "crop=64:48:96:64,denoise=$M:backend=cpu:sigma=auto,metadata=print:file='$TMP/small.txt'" -f null -; then
    v=$(sigmas "$TMP/small.txt")
    lo=$(awk -v w="$want" 'BEGIN { printf "%.2f", 0.75 * w }') hi=$(awk -v w="$want" 'BEGIN { printf "%.2f", 1.25 * w }')
    if printf '%s\n' "$v" | awk -v lo="$lo" -v hi="$hi" 'NF { n++; if ($1 < lo || $1 > hi) bad++ } END { exit !(n > 0 && !bad) }'; then
        pass "yuv420p 64x48, noise 6: sigma $(printf '%s ' $v)(want $lo..$hi)"
    else
        fail "yuv420p 64x48, noise 6: sigma $(printf '%s ' $v)(want $lo..$hi, not 0)"
    fi
else
    fail "yuv420p 64x48 run failed: $(tail -n 3 "$TMP/small.log")"
fi

if "$FFMPEG" -hide_banner -h filter=denoise 2>/dev/null | grep -q 'auto .*estimate sigma'; then
    pass "ffmpeg -h filter=denoise documents sigma=auto"
else
    fail "ffmpeg -h filter=denoise does not list sigma's auto"
fi
finish
