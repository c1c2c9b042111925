#!/bin/sh
# tests/cli/cli_estimate_sigma.sh: build/bin/denoise-estimate-sigma, the noise estimator behind
# sigma=auto (kernels/sigma_auto.h, kernels/common/noise_estimate.h), from the command line.
#
#   - car-roundabout + AWGN (denoise-noise, gbrp: rounded and clipped 8-bit, seed 0) at sigma 5,
#     20 and 40: the final segment estimate within 5 % + 0.3 of the truth; the clean clip < 1.5
#   - gbrpf32le and gbrp input of the same frames give the same estimate (within 0.05)
#   - yuv420p with white noise of 6 code values on every Y', Cb, Cr sample (denoise-noise
#     yuv420p): the network's sigma 6 sqrt(sum_j gain_j) = 11.75 (BT.601 limited), within 6 %
#   - the two real clips (samples/bedroom, samples/dog-tunnel: compression noise, no added noise):
#     an estimate in [0, 5] for every frame (printed; there is no true sigma to compare with)
#   - a truncated frame exits 1, a bad option exits 2
set -u
. "$(dirname "$0")/../common/lib.sh"

need_build
need_noise
make_tmp
EST=$BIN/denoise-estimate-sigma
[ -x "$EST" ] || die "$EST not found (built from tools/estimate_sigma.cpp)"
IN=$SAMPLE_8BIT
SIZE=$(frame_size "$IN")

# raw IN FMT OUT: the clip's frames as raw planar R'G'B'
raw() {
    run "$3.log" "$FFMPEG" -nostdin -y -v error -i "$1" -sws_flags "$SWS_FLAGS" -vf "format=$2" \
        -fps_mode passthrough -f rawvideo -pix_fmt "$2" "$3"
}
# final FILE FMT [SIZE]: the estimator's last line's value
final() {
    "$EST" --size "${3:-$SIZE}" --pix-fmt "$2" < "$1" 2>"$TMP/est.err" | sed -n 's/^sigma //p'
}

raw "$IN" gbrp "$TMP/clean.raw" || die "decoding $IN failed"
s=$(final "$TMP/clean.raw" gbrp)
if [ -n "$s" ] && fcmp "$s" '>=' 0 && fcmp "$s" '<' 1.5; then pass "clean clip: sigma $s"; else fail "clean clip: sigma '$s' (want < 1.5)"; fi

for sigma in 5 20 40; do
    "$NOISE" --sigma "$sigma" --seed 0 --size "$SIZE" --pix-fmt gbrp < "$TMP/clean.raw" > "$TMP/n$sigma.raw" ||
        { fail "denoise-noise sigma $sigma failed"; continue; }
    s=$(final "$TMP/n$sigma.raw" gbrp)
    tol=$(awk -v s="$sigma" 'BEGIN { printf "%.2f", 0.05 * s + 0.3 }')
    if [ -n "$s" ] && fcmp "$(awk -v a="$s" -v b="$sigma" 'BEGIN { d = a - b; print d < 0 ? -d : d }')" '<=' "$tol"; then
        pass "AWGN sigma $sigma (8-bit, clipped): estimate $s (tolerance $tol)"
    else
        fail "AWGN sigma $sigma: estimate '$s', tolerance $tol"
    fi
done

# the same frames as floats v = code / 255 (numpy: FFmpeg's gbrp -> gbrpf32le scales by ~254/255)
if python3 -c "import numpy as np; (np.fromfile('$TMP/n20.raw', np.uint8).astype('<f4') / np.float32(255)).tofile('$TMP/n20f.raw')" 2>/dev/null; then
    a=$(final "$TMP/n20.raw" gbrp) b=$(final "$TMP/n20f.raw" gbrpf32le)
    if [ -n "$a" ] && [ -n "$b" ] && fcmp "$(awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; print d < 0 ? -d : d }')" '<' 0.05; then
        pass "gbrp and gbrpf32le input agree: $a / $b"
    else
        fail "gbrp $a vs gbrpf32le $b"
    fi
else
    skip "python3 with numpy not available: gbrpf32le comparison not run"
fi

raw "$IN" yuv420p "$TMP/clean420.raw" || die "decoding $IN to yuv420p failed"
if "$NOISE" --sigma 6 --seed 0 --size "$SIZE" --pix-fmt yuv420p < "$TMP/clean420.raw" > "$TMP/n420.raw"; then
    s=$("$EST" --size "$SIZE" --pix-fmt yuv420p --matrix bt601 < "$TMP/n420.raw" 2>"$TMP/est.err" | sed -n 's/^sigma //p')
    want=$(awk 'BEGIN { ky = (255 / 219) ^ 2; kc = (255 / 224) ^ 2 * (1.402 ^ 2 + 0.714136 ^ 2 + 0.344136 ^ 2 + 1.772 ^ 2) / 3;
                        printf "%.2f", 6 * sqrt(ky + kc) }')
    if [ -n "$s" ] && fcmp "$(awk -v a="$s" -v b="$want" 'BEGIN { d = a - b; print d < 0 ? -d : d }')" '<=' "$(awk -v w="$want" 'BEGIN { print 0.06 * w }')"; then
        pass "yuv420p, Y'CbCr noise 6: network sigma $s (want $want)"
    else
        fail "yuv420p, Y'CbCr noise 6: estimate '$s', want $want +- 6 %"
    fi
else
    fail "denoise-noise yuv420p failed"
fi

for clip in "$SAMPLES/bedroom_320x192_8bit.mkv" "$SAMPLES/dog-tunnel_320x192_8bit.mkv"; do
    name=$(basename "$clip" .mkv)
    raw "$clip" gbrp "$TMP/$name.raw" || { fail "$name: decoding failed"; continue; }
    sz=$(frame_size "$clip")
    "$EST" --size "$sz" --pix-fmt gbrp < "$TMP/$name.raw" > "$TMP/$name.txt" 2>"$TMP/est.err" || { fail "$name: estimator failed"; continue; }
    bad=$(awk '$1 == "frame" && ($4 < 0 || $4 > 5) { n++ } END { print n + 0 }' "$TMP/$name.txt")
    last=$(sed -n 's/^sigma //p' "$TMP/$name.txt")
    frames=$(grep -c '^frame' "$TMP/$name.txt")
    if [ "$bad" = 0 ] && [ "$frames" = "$(count_frames "$clip")" ]; then
        pass "$name (real footage): $frames frames, segment sigma $last"
    else
        fail "$name: $bad of $frames frames outside [0, 5] (last $last)"
    fi
done

head -c 1000 "$TMP/clean.raw" > "$TMP/short.raw"
"$EST" --size "$SIZE" --pix-fmt gbrp < "$TMP/short.raw" > /dev/null 2>"$TMP/e1"
rc=$?
if [ $rc = 1 ] && grep -q "truncated frame" "$TMP/e1"; then pass "truncated input: exit 1"; else fail "truncated input: exit $rc ($(cat "$TMP/e1"))"; fi
"$EST" --size "$SIZE" --pix-fmt nv12 < /dev/null > /dev/null 2>"$TMP/e2"
rc=$?
if [ $rc = 2 ]; then pass "unsupported --pix-fmt: exit 2"; else fail "unsupported --pix-fmt: exit $rc"; fi
finish
