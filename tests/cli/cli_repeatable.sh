#!/bin/sh
# tests/cli/cli_repeatable.sh: the same command gives the same output, bit for bit, whatever else the
# process does. The dither tile once came from libplacebo's pl_generate_blue_noise at run time,
# which breaks ties with rand(): any library that drew from rand() before it (NVDEC's did) changed
# every output sample's rounding (kernels/common/blue_noise.h). Here a preloaded library seeds and draws
# from rand() before ffmpeg's main; the output must equal a plain run's, for 8-bit 4:2:0 and
# 10-bit R'G'B' (both dithered), with the CPU engine and the tiny model. About 5 s.
# Needs a C compiler (cc) for the preloaded library; skipped (77) without one.
set -u
. "$(dirname "$0")/../common/lib.sh"

[ "${1:-}" = --help ] && { usage; exit 0; }
need_build
tiny_filter
make_tmp
CC=${CC:-cc}
command -v "$CC" >/dev/null 2>&1 || { skip "no C compiler ($CC) for the preloaded rand() user"; finish; }
cat >"$TMP/rand_user.c" <<'CEOF'
#include <stdlib.h>
__attribute__((constructor)) static void draw(void)
{
    srand(12345);
    for (int i = 0; i < 1000; i++)
        rand();
}
CEOF
run "$TMP/cc.log" "$CC" -shared -fPIC -o "$TMP/rand_user.so" "$TMP/rand_user.c" ||
    { fail "could not build the preloaded library"; finish; }

for pf in yuv420p gbrp10le; do
    src="$TMP/src_$pf.nut"
    run "$TMP/src_$pf.log" "$FFMPEG" -nostdin -v error -f lavfi -i "testsrc2=s=96x64:r=25:d=0.24" \
        -vf "noise=alls=20:allf=t,format=$pf" -c:v rawvideo -f nut -y "$src" ||
        { fail "$pf: could not make the source"; continue; }
    run "$TMP/plain_$pf.log" "$FFMPEG" -nostdin -v error -i "$src" -vf "$D:sigma=20" \
        -c:v rawvideo -f nut -y "$TMP/plain_$pf.nut" || { fail "$pf: plain run failed"; continue; }
    run "$TMP/rand_$pf.log" env LD_PRELOAD="$TMP/rand_user.so" "$FFMPEG" -nostdin -v error -i "$src" \
        -vf "$D:sigma=20" -c:v rawvideo -f nut -y "$TMP/rand_$pf.nut" || { fail "$pf: run with rand() drawn first failed"; continue; }
    p=$(psnr "$TMP/rand_$pf.nut" "$TMP/plain_$pf.nut")
    d=$(psnr "$TMP/plain_$pf.nut" "$src")
    if [ "$p" = inf ] && [ "$d" != inf ]; then
        pass "$pf: rand() seeded and drawn 1000 times before ffmpeg starts: output identical to a plain run (inf dB; the filter changed the frames: $d dB from the input)"
    else
        fail "$pf: with rand() drawn first the output differs from a plain run: $p dB (input vs output $d dB)"
    fi
done
finish
