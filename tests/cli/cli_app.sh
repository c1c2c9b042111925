#!/bin/sh
# tests/cli/cli_app.sh: examples/app.c and `make install` as a user meets them (README "In an app").
#
#   1. app.c builds with README's cc line against the build tree (build/lib/pkgconfig, rpath) and
#      runs: a sample clip in, one output frame per input frame, pts and pix_fmt kept, samples
#      changed; a missing input and an unknown encoder fail with exit 1 and a message
#   2. make install PREFIX=<tmp>: app.c builds against the install's pkg-config files and runs with
#      no model= (the installed weights); the installed ffmpeg loads PREFIX/share/denoise's
#      weights and its libraries from PREFIX/lib; the tools are installed as denoise-*
#   3. the build tree's ffmpeg still loads the build tree's own weights afterwards (an install
#      does not redirect it), and before as well (not a /usr/local copy)
# Weights: the trained ones (make install ships them); without weights/denoise-v2.safetensors
# parts 2 and 3 are skipped.
set -u
. "$(dirname "$0")/../common/lib.sh"

need_build
make_tmp
TMP=$(readlink -f "$TMP")  # canonical, to compare with the libraries' resolved paths
pick_model
CC=${CC:-cc}
PC_LIBS="libavfilter libavformat libavcodec libavutil"
IN=$SAMPLE_ODD

# check_output NAME OUT: OUT has IN's frame count, pts and pix_fmt, and differs from IN
check_output() {
    _fi=$(count_frames "$IN") _fo=$(count_frames "$2")
    frame_pts "$IN" > "$TMP/pts_in" && frame_pts "$2" > "$TMP/pts_out"
    _pi=$(probe "$IN" pix_fmt) _po=$(probe "$2" pix_fmt)
    _p=$(psnr "$2" "$IN")
    if [ "$_fi" = "$_fo" ] && [ "$_fi" -gt 0 ] && cmp -s "$TMP/pts_in" "$TMP/pts_out" && [ "$_pi" = "$_po" ] &&
       [ -n "$_p" ] && [ "$_p" != inf ]; then
        pass "$1: $_fo/$_fi frames, pts kept, $_po, PSNR vs input $_p dB (changed)"
    else
        fail "$1: frames $_fo/$_fi, pix_fmt $_po/$_pi, PSNR vs input '$_p', pts $(cmp -s "$TMP/pts_in" "$TMP/pts_out" && echo kept || echo changed)"
    fi
}

# 1. against the build tree (README: cc app.c $(PKG_CONFIG_PATH=build/lib/pkgconfig pkg-config ...) -Wl,-rpath,...)
if run "$TMP/cc_build.log" sh -c "$CC '$ROOT/examples/app.c' -o '$TMP/app' \
        \$(PKG_CONFIG_PATH='$BUILD/lib/pkgconfig' pkg-config --cflags --libs $PC_LIBS) -Wl,-rpath,'$BUILD/lib'"; then
    pass "examples/app.c builds against the build tree"
    if run "$TMP/app_build.log" "$TMP/app" "$IN" "$TMP/out_build.mkv" "sigma=20:backend=cpu:$(filter_model "$model")"; then
        check_output "app (build tree)" "$TMP/out_build.mkv"
    else
        fail "app (build tree) failed"
    fi
    if "$TMP/app" "$TMP/missing.mkv" "$TMP/x.mkv" > "$TMP/e1.log" 2>&1; then
        fail "app with a missing input succeeded"
    elif grep -q "missing.mkv: No such file or directory" "$TMP/e1.log"; then
        pass "app: missing input -> exit 1, '$(head -n 1 "$TMP/e1.log")'"
    else
        fail "app: missing input, unclear message: $(cat "$TMP/e1.log")"
    fi
    if "$TMP/app" "$IN" "$TMP/x.mkv" sigma=20 no_such_encoder > "$TMP/e2.log" 2>&1; then
        fail "app with an unknown encoder succeeded"
    elif grep -q "no encoder 'no_such_encoder'" "$TMP/e2.log"; then
        pass "app: unknown encoder -> exit 1 with its name"
    else
        fail "app: unknown encoder, unclear message: $(cat "$TMP/e2.log")"
    fi
else
    fail "examples/app.c does not build against the build tree"
fi

# loaded_model FFMPEG: the weight file the filter loads by default (its -v verbose line)
loaded_model() {
    "$1" -nostdin -hide_banner -v verbose -i "$IN" -frames:v 1 -vf denoise=backend=cpu -f null - 2>&1 |
        sed -n "s/.*loading '\([^']*\)' for .*/\1/p" | head -n 1
}

if [ ! -f "$WEIGHTS" ]; then
    skip "no $WEIGHTS: install and default-weights checks need the shipped weights"
    finish
fi

BUILD_DEFAULT=$BUILD/share/denoise/denoise-v2.safetensors
m=$(loaded_model "$FFMPEG")
if [ "$m" = "$BUILD_DEFAULT" ] && cmp -s "$m" "$WEIGHTS"; then
    pass "build tree, before install: default weights $m (-> weights/)"
else
    fail "build tree, before install: default weights '$m', expected $BUILD_DEFAULT (a link to $WEIGHTS)"
fi

# 2. make install into a temporary prefix
P=$TMP/prefix
if run "$TMP/install.log" make -C "$ROOT" --no-print-directory install PREFIX="$P"; then
    pass "make install PREFIX=$P"
else
    fail "make install PREFIX=$P failed"
    finish
fi
m=$(loaded_model "$P/bin/ffmpeg")
if [ "$m" = "$P/share/denoise/denoise-v2.safetensors" ]; then
    pass "installed ffmpeg: default weights $m"
else
    fail "installed ffmpeg: default weights '$m', expected $P/share/denoise/denoise-v2.safetensors"
fi
lib=$(ldd "$P/bin/ffmpeg" | sed -n 's/.*libavfilter\.so[^ ]* => \([^ ]*\).*/\1/p')
lib=$(readlink -f "$lib")  # RUNPATH $ORIGIN/../lib: PREFIX/bin/../lib/...
case $lib in
    "$P"/lib/*) pass "installed ffmpeg links $lib" ;;
    *) fail "installed ffmpeg links libavfilter from '$lib', not $P/lib" ;;
esac
bad=""
for t in noise cpu_bench estimate_sigma; do [ -e "$P/bin/$t" ] && bad="$bad $t"; done
if [ -z "$bad" ] && [ -x "$P/bin/denoise-noise" ] && [ -x "$P/bin/denoise-estimate-sigma" ]; then
    pass "tools installed as denoise-*: $(cd "$P/bin" && ls -d denoise-* | tr '\n' ' ')"
else
    fail "tools: generic names installed:$bad (or denoise-noise / denoise-estimate-sigma missing)"
fi
if run "$TMP/cc_inst.log" sh -c "$CC '$ROOT/examples/app.c' -o '$TMP/app_inst' \
        \$(PKG_CONFIG_PATH='$P/lib/pkgconfig' pkg-config --cflags --libs $PC_LIBS) -Wl,-rpath,'$P/lib'"; then
    lib=$(readlink -f "$(ldd "$TMP/app_inst" | sed -n 's/.*libavfilter\.so[^ ]* => \([^ ]*\).*/\1/p')")
    case $lib in
        "$P"/lib/*)
            if run "$TMP/app_inst.log" "$TMP/app_inst" "$IN" "$TMP/out_inst.mkv" "sigma=20:backend=cpu"; then
                check_output "app (installed, default weights)" "$TMP/out_inst.mkv"
            else
                fail "app built against the install failed"
            fi ;;
        *) fail "app built against the install links libavfilter from '$lib'" ;;
    esac
else
    fail "examples/app.c does not build against the install"
fi

# 3. the build tree is not redirected to the install
m=$(loaded_model "$FFMPEG")
if [ "$m" = "$BUILD_DEFAULT" ]; then
    pass "build tree, after install: default weights still $m"
else
    fail "build tree, after install: default weights '$m' (redirected; expected $BUILD_DEFAULT)"
fi
finish
