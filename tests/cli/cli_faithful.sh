#!/bin/sh
# tests/cli/cli_faithful.sh: does the filter keep what it should not change? (through the CLI, the CPU
# backend and the shipped weights; alone: `make check-faithful`)
#
# The targets are the model's faithfulness targets (docs/model.md "Faithfulness"); a case that
# misses its target fails, whatever the weights.
#
# Cases (8 frames each, the ramp 32; "sigma" is the filter option, "noise" the AWGN added by
# tools/noise, seed 0, rounded and clipped to 8 bit; all numbers in 8-bit code values; planar RGB
# is gbrp):
#   identity   samples/car-roundabout_320x192_8bit.mkv (yuv420p), sigma 0: every sample of the
#              output against the input: max |change| <= 1 (the filter dithers a change below one
#              code value) and mean |change| <= 0.25
#   flat_yuv   flat 0x336699 as yuv420p (Y'CbCr 95/158/102), no noise, sigma 15 (the default):
#              |mean change| of Y, U and V <= 0.5 each
#   flat_2x    flat 0x336699 gbrp, noise 15, sigma 30: |mean change| of R, G, B <= 0.5
#   grey_2x    flat grey 128 gbrp, noise 25, sigma 50: |mean change| <= 0.5, and the range of the
#              mean change of G over the 64 positions (x mod 8, y mod 8) <= 1.0 (no 8 px grid)
#   ramp_15, ramp_30  weights/denoise_train/faithful.py's slow colour ramp (each channel a plane in x and
#              y, e.g. R' 60 -> 124 across the frame) gbrp, noise 15, sigma 15 and 30: per 16x16
#              block and channel the mean change over all 32 frames, worst |.| <= 1.0 (one
#              frame's block means carry about 0.5 of residual noise, the 32 frames' mean about
#              0.15)
#   neutral    1-px checkerboard of greys 96/160 gbrp, no noise, sigma 15: mean per-pixel chroma
#              max(R,G,B) - min(R,G,B) of the output <= 1.0 (the input has 0)
#   borders    grey 128 gbrp with 1- and 2-px lines of pure R, G, B, C, M, Y and a 1-px red frame
#              edge, no noise, sigma 15: mean |change| on the line pixels <= 2.0 for each channel
# Environment: as tests/common/lib.sh (DENOISE_WEIGHTS: the weights under test).
set -u
. "$(dirname "$0")/../common/lib.sh"

need_build
need_noise
[ -f "$WEIGHTS" ] || { skip "no trained weights ($WEIGHTS)"; finish; }
echo "$TEST_NAME: weights $WEIGHTS"
make_tmp
W=128 H=64 N=8 RAMP_N=32
MODEL=$(filter_model "$WEIGHTS")
export LC_ALL=C

# gen KIND OUT.raw: N frames of gbrp (planes G, B, R) W x H
#   flat:R:G:B  checker:A:B  ramp  borders
gen() {
    awk -v kind="$1" -v W=$W -v H=$H -v N=$N 'BEGIN {
        split(kind, a, ":")
        split("60 110 170", base, " "); split("1 -0.5 0.3", dx, " "); split("-0.4 1 0.6", dy, " ")
        for (f = 0; f < N; f++) for (p = 0; p < 3; p++) { c = (p == 0) ? 2 : (p == 1) ? 3 : 1
            for (y = 0; y < H; y++) for (x = 0; x < W; x++) {
                if (a[1] == "flat") v = a[c + 1]
                else if (a[1] == "checker") v = ((x + y) % 2) ? a[3] : a[2]
                else if (a[1] == "ramp") v = ramp(c, x, y)
                else { v = 128; l = line(x, y); if (l) v = substr(l, c, 1) == "1" ? 255 : 0 }
                printf "%c", v
            } } }
    # ramp: weights/denoise_train/faithful.py ramp() (base, dx, dy: its colour and gradients), channel c (1 R,
    # 2 G, 3 B), rounded to 8 bit
    function ramp(c, x, y,   v) {
        v = base[c] + 255 * (0.25 * x / (W - 1) * dx[c] + 0.15 * y / (H - 1) * dy[c])
        v = int(v + 0.5); return v < 0 ? 0 : v > 255 ? 255 : v
    }
    # borders: "RGB" flags of the line colour at (x, y), "" when not on a line
    function line(x, y,   i, cols, w) {
        if (x == 0 || y == 0 || x == W - 1 || y == H - 1) return "100"
        split("100 010 001 011 101 110", cols, " ")
        for (i = 0; i < 6; i++) {
            if (x == 8 + i * 19 && y >= 6 && y < 28) return cols[i + 1]
            if ((x == 8 + i * 19 || x == 9 + i * 19) && y >= 36 && y < 58) return cols[i + 1]
        }
        return ""
    }' >"$2"
}

raw_to_mkv() { # IN.raw FMT OUT.mkv
    run "$3.log" "$FFMPEG" -nostdin -y -v error -f rawvideo -pix_fmt "$2" -s ${W}x$H -r 25 -i "$1" $FFV1 "$3"
}

denoise_raw() { # IN SIGMA FMT OUT.raw: the filter's output as raw FMT
    run "$4.log" "$FFMPEG" -nostdin -y -v error -i "$1" -vf "denoise=sigma=$2:backend=cpu:$MODEL" \
        -fps_mode passthrough -f rawvideo -pix_fmt "$3" "$4"
}

to_raw() { # IN FMT OUT.raw
    run "$3.log" "$FFMPEG" -nostdin -y -v error -i "$1" -fps_mode passthrough -f rawvideo -pix_fmt "$2" "$3"
}

# pairs A.raw B.raw: "a b" per byte
pairs() {
    od -An -v -tu1 -w1 "$1" | tr -d ' ' >"$TMP/a.txt"
    od -An -v -tu1 -w1 "$2" | tr -d ' ' >"$TMP/b.txt"
    paste -d ' ' "$TMP/a.txt" "$TMP/b.txt"
}

check() { # NAME VALUE OP LIMIT WHAT
    if fcmp "$2" "$3" "$4"; then pass "$1: $5 $2 (want $3 $4)"; else fail "$1: $5 $2 (want $3 $4)"; fi
}

# identity: the natural sample at sigma 0, all Y'CbCr samples
to_raw "$SAMPLE_8BIT" yuv420p "$TMP/nat_in.yuv" &&
denoise_raw "$SAMPLE_8BIT" 0 yuv420p "$TMP/nat_out.yuv" || die "sigma 0 run failed"
set -- $(pairs "$TMP/nat_out.yuv" "$TMP/nat_in.yuv" | awk '{ d = $1 - $2; if (d < 0) d = -d; s += d; if (d > m) m = d; n++ }
    END { printf "%d %.4f", m, s / n }')
check identity "$1" "<=" 1 "max |change|"
check identity "$2" "<=" 0.25 "mean |change|"

# flat_yuv: clean 0x336699 as yuv420p at the default sigma
gen flat:51:102:153 "$TMP/flat.raw"
raw_to_mkv "$TMP/flat.raw" gbrp "$TMP/flat_rgb.mkv" &&
run "$TMP/fy.log" "$FFMPEG" -nostdin -y -v error -i "$TMP/flat_rgb.mkv" -sws_flags "$SWS_FLAGS" \
    -vf "scale=out_color_matrix=bt709:out_range=tv,format=yuv420p" $FFV1 "$TMP/flat_yuv.mkv" &&
to_raw "$TMP/flat_yuv.mkv" yuv420p "$TMP/fy_in.yuv" &&
denoise_raw "$TMP/flat_yuv.mkv" 15 yuv420p "$TMP/fy_out.yuv" || die "flat_yuv run failed"
set -- $(pairs "$TMP/fy_out.yuv" "$TMP/fy_in.yuv" | awk -v P=$((W * H)) '{ i = (NR - 1) % (P * 3 / 2)
        c = (i < P) ? 0 : (i < P * 5 / 4) ? 1 : 2; s[c] += $1 - $2; n[c]++; v[c] += $2 }
    END { for (c = 0; c < 3; c++) printf "%.2f %.1f ", s[c] / n[c], v[c] / n[c] }')
echo "$TEST_NAME: flat_yuv input Y/U/V $2/$4/$6, mean change $1/$3/$5"
for v in "$1" "$3" "$5"; do check flat_yuv "${v#-}" "<=" 0.5 "|mean change| of a plane"; done

# gbrp cases: mean change per channel of out against the clean frames
mean_rgb() { # OUT.raw CLEAN.raw -> "dR dG dB"
    pairs "$1" "$2" | awk -v P=$((W * H)) '{ p = int((NR - 1) / P) % 3; s[p] += $1 - $2; n[p]++ }
        END { printf "%.3f %.3f %.3f", s[2] / n[2], s[0] / n[0], s[1] / n[1] }'
}
noisy_case() { # NAME KIND NOISE SIGMA -> sets $TMP/NAME_out.raw, $TMP/NAME_clean.raw
    gen "$2" "$TMP/$1_clean.raw"
    raw_to_mkv "$TMP/$1_clean.raw" gbrp "$TMP/$1_clean.mkv" || return 1
    if [ "$3" = 0 ]; then cp "$TMP/$1_clean.mkv" "$TMP/$1_noisy.mkv"
    else add_noise "$TMP/$1_clean.mkv" "$TMP/$1_noisy.mkv" "$3" 0 gbrp || return 1; fi
    denoise_raw "$TMP/$1_noisy.mkv" "$4" gbrp "$TMP/$1_out.raw"
}

noisy_case flat_2x flat:51:102:153 15 30 || die "flat_2x run failed"
set -- $(mean_rgb "$TMP/flat_2x_out.raw" "$TMP/flat_2x_clean.raw")
echo "$TEST_NAME: flat_2x mean change R/G/B $1/$2/$3"
for v in "$1" "$2" "$3"; do check flat_2x "${v#-}" "<=" 0.5 "|mean change| of a channel"; done

noisy_case grey_2x flat:128:128:128 25 50 || die "grey_2x run failed"
set -- $(mean_rgb "$TMP/grey_2x_out.raw" "$TMP/grey_2x_clean.raw")
echo "$TEST_NAME: grey_2x mean change R/G/B $1/$2/$3"
for v in "$1" "$2" "$3"; do check grey_2x "${v#-}" "<=" 0.5 "|mean change| of a channel"; done
g=$(pairs "$TMP/grey_2x_out.raw" "$TMP/grey_2x_clean.raw" | awk -v W=$W -v P=$((W * H)) '{ i = NR - 1
        if (int(i / P) % 3 != 0) next; j = i % P; k = (int(j / W) % 8) * 8 + (j % W) % 8; s[k] += $1 - $2; n[k]++ }
    END { lo = 1e9; hi = -1e9; for (k in s) { m = s[k] / n[k]; if (m < lo) lo = m; if (m > hi) hi = m }; printf "%.3f", hi - lo }')
check grey_2x "$g" "<=" 1.0 "8x8 phase range of the mean change of G"

# ramp: the mean over the frames of each 16x16 block's change, per channel; the clip is longer
# (RAMP_N frames) so that the mean is the filter's bias and not its residual noise
N8=$N N=$RAMP_N
for sigma in 15 30; do
    noisy_case ramp_$sigma ramp 15 $sigma || die "ramp_$sigma run failed"
    r=$(pairs "$TMP/ramp_${sigma}_out.raw" "$TMP/ramp_${sigma}_clean.raw" | awk -v W=$W -v P=$((W * H)) '{ i = NR - 1
            p = int(i / P) % 3; j = i % P; k = p * 1000 + int(j / W / 16) * 100 + int((j % W) / 16); s[k] += $1 - $2; n[k]++ }
        END { for (k in s) { m = s[k] / n[k]; if (m < 0) m = -m; if (m > w) w = m }; printf "%.3f", w }')
    check ramp_$sigma "$r" "<=" 1.0 "worst |mean change| of a 16x16 block and channel"
done
N=$N8

noisy_case neutral checker:96:160 0 15 || die "neutral run failed"
c=$(od -An -v -tu1 -w1 "$TMP/neutral_out.raw" | tr -d ' ' | awk -v P=$((W * H)) '{ i = NR - 1; f = int(i / (3 * P))
        j = f * P + i % P; if (!(j in lo) || $1 < lo[j]) lo[j] = $1; if (!(j in hi) || $1 > hi[j]) hi[j] = $1 }
    END { for (j in lo) { s += hi[j] - lo[j]; n++ }; printf "%.3f", s / n }')
check neutral "$c" "<=" 1.0 "mean per-pixel chroma max-min"

noisy_case borders borders 0 15 || die "borders run failed"
set -- $(pairs "$TMP/borders_out.raw" "$TMP/borders_clean.raw" | awk -v W=$W -v H=$H -v P=$((W * H)) '
    function online(x, y,   i) { if (x == 0 || y == 0 || x == W - 1 || y == H - 1) return 1
        for (i = 0; i < 6; i++) { if (x == 8 + i * 19 && y >= 6 && y < 28) return 1
            if ((x == 8 + i * 19 || x == 9 + i * 19) && y >= 36 && y < 58) return 1 }
        return 0 }
    { i = NR - 1; p = int(i / P) % 3; j = i % P; if (!online(j % W, int(j / W))) next
      d = $1 - $2; if (d < 0) d = -d; s[p] += d; n[p]++ }
    END { printf "%.3f %.3f %.3f", s[2] / n[2], s[0] / n[0], s[1] / n[1] }')
echo "$TEST_NAME: borders mean |change| on the lines R/G/B $1/$2/$3"
for v in "$1" "$2" "$3"; do check borders "$v" "<=" 2.0 "mean |change| of a channel on the lines"; done

finish
