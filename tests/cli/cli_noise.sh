#!/bin/sh
# tests/cli/cli_noise.sh: tools/noise.c (build/bin/denoise-noise), the reproducible AWGN pipe filter.
#
#   - the output for a fixed input, sigma 25, seed 42, 64x48, 2 frames matches stored md5s for
#     gbrpf32le (unclipped) and gbrp (rounded, clipped). The md5s were checked bit-exact against
#     weights/denoise_train/awgn.py (add_noise, clip8=True for gbrp) when they were recorded, so a pass here
#     means the C tool still makes the same noise as the PyTorch evaluation.
#   - noise statistics: mean ~ 0, std ~ sigma/255 (float)
#   - chunking: frame 1 alone with --first-frame 1 equals frame 1 of a 2-frame run
#   - a different seed gives different noise; a truncated frame is an error (exit 1);
#     --help exits 0; a bad option exits 2
# Needs only build/bin/denoise-noise (and od, awk, md5sum).
set -u
. "$(dirname "$0")/../common/lib.sh"

need_noise
make_tmp
W=64 H=48
fsz=$((W * H * 3 * 4))   # one gbrpf32le frame
bsz=$((W * H * 3))       # one gbrp frame
head -c $((2 * fsz)) /dev/zero >"$TMP/zero_f32"
head -c $((2 * bsz)) /dev/zero | tr '\0' '\200' >"$TMP/grey_8"

# golden md5s (recorded with tools/noise.c == weights/denoise_train/awgn.py, see above)
MD5_F32=4f0feebb0b6db92493ace72386a08ec0
MD5_GBRP=54c62bb05fd829aa9134d1e5c3ba566c

if "$NOISE" --sigma 25 --seed 42 --size ${W}x$H --pix-fmt gbrpf32le <"$TMP/zero_f32" >"$TMP/f32" 2>"$TMP/err"; then
    m=$(md5sum <"$TMP/f32" | cut -d' ' -f1)
    if [ "$m" = $MD5_F32 ]; then pass "gbrpf32le output matches the awgn.py golden (md5 $m)"
    else fail "gbrpf32le output md5 $m, golden $MD5_F32"; fi
    # statistics of the 2 x 9216 samples (input is 0: output = sigma/255 * n)
    stats=$(od -An -v -t f4 "$TMP/f32" | awk '{ for (i = 1; i <= NF; i++) { s += $i; q += $i * $i; n++ } }
        END { m = s / n; printf "%d %.4f %.4f", n, m * 255, sqrt(q / n - m * m) * 255 }')
    set -- $stats
    if awk -v m="$2" -v sd="$3" 'BEGIN { exit !(m > -0.5 && m < 0.5 && sd > 24.5 && sd < 25.5) }'; then
        pass "statistics over $1 samples: mean $2, std $3 (8-bit units; want 0, 25)"
    else
        fail "statistics over $1 samples: mean $2, std $3 (8-bit units; want 0, 25)"
    fi
else
    fail "gbrpf32le run failed: $(cat "$TMP/err")"
fi

if "$NOISE" --sigma 25 --seed 42 --size ${W}x$H --pix-fmt gbrp <"$TMP/grey_8" >"$TMP/b8" 2>"$TMP/err"; then
    m=$(md5sum <"$TMP/b8" | cut -d' ' -f1)
    if [ "$m" = $MD5_GBRP ]; then pass "gbrp output matches the awgn.py golden (md5 $m)"
    else fail "gbrp output md5 $m, golden $MD5_GBRP"; fi
else
    fail "gbrp run failed: $(cat "$TMP/err")"
fi

# chunking: the second frame on its own
tail -c $fsz "$TMP/zero_f32" | "$NOISE" --sigma 25 --seed 42 --size ${W}x$H --pix-fmt gbrpf32le \
    --first-frame 1 >"$TMP/f32_1"
if tail -c $fsz "$TMP/f32" | cmp -s - "$TMP/f32_1"; then pass "--first-frame 1 reproduces frame 1"
else fail "--first-frame 1 does not reproduce frame 1"; fi

"$NOISE" --sigma 25 --seed 43 --size ${W}x$H --pix-fmt gbrpf32le <"$TMP/zero_f32" >"$TMP/f32_43"
if cmp -s "$TMP/f32" "$TMP/f32_43"; then fail "seed 43 gives the same noise as seed 42"
else pass "seed 43 differs from seed 42"; fi

head -c $((fsz + 100)) /dev/zero | "$NOISE" --sigma 25 --size ${W}x$H --pix-fmt gbrpf32le >/dev/null 2>"$TMP/err"
rc=$?
if [ $rc = 1 ]; then pass "truncated frame: exit 1 ($(cat "$TMP/err"))"
else fail "truncated frame: exit $rc, want 1"; fi

if "$NOISE" --help >"$TMP/help" && grep -q -- '--sigma' "$TMP/help"; then pass "--help"
else fail "--help"; fi
"$NOISE" --sigma 5 --size 8x8 --pix-fmt rgb48 </dev/null >/dev/null 2>&1
rc=$?
if [ $rc = 2 ]; then pass "unsupported pix-fmt: exit 2"; else fail "unsupported pix-fmt: exit $rc, want 2"; fi
finish
