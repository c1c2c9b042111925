# tests/common/lib.sh: shared helpers for the shell tests (tests/cli/, tests/weights_*.sh, ...) and
# tools/demo.sh (POSIX sh; source it).
#
#   . "$(dirname "$0")/../common/lib.sh"          from tests/KIND/
#   . "$(dirname "$0")/common/lib.sh"             from tests/
#   . "$(dirname "$0")/../tests/common/lib.sh"    from tools/
#
# Finds the build (build/bin/ffmpeg, ffprobe, denoise-noise), makes noisy copies with tools/noise.c,
# computes PSNR with FFmpeg's psnr filter, counts frames with ffprobe -count_frames, and keeps
# PASS/FAIL/SKIP tallies. Environment:
#   DENOISE_SOURCE_DIR  repository root   (default: the folder above tests/)
#   DENOISE_BUILD_DIR   build folder      (default: $DENOISE_SOURCE_DIR/build)
#   DENOISE_WEIGHTS     trained weights   (default: weights/denoise-v2.safetensors)
#   KEEP_TMP=1          keep the temporary folder (its path is printed)
#   VERBOSE=1           show ffmpeg's errors as they happen (they are always shown on failure)

_lib_dir=$(cd "$(dirname "$0")" && pwd)
case $_lib_dir in
    */tests/*) _lib_root=${_lib_dir%/tests/*} ;;
    */tests|*/tools) _lib_root=$(cd "$_lib_dir/.." && pwd) ;;
    *) _lib_root=$_lib_dir ;;
esac
ROOT=${DENOISE_SOURCE_DIR:-$_lib_root}
BUILD=${DENOISE_BUILD_DIR:-$ROOT/build}
BIN=$BUILD/bin
FFMPEG=$BIN/ffmpeg
NOISE=$BIN/denoise-noise
if [ -x "$BIN/ffprobe" ]; then FFPROBE=$BIN/ffprobe; else FFPROBE=$(command -v ffprobe || echo "$BIN/ffprobe"); fi
SAMPLES=$ROOT/samples
WEIGHTS=${DENOISE_WEIGHTS:-$ROOT/weights/denoise-v2.safetensors}
# Random weights of the v1 architecture (weights/make_goldens.py): enough for tests that check
# frames, timestamps and formats, not quality.
TEST_WEIGHTS=$ROOT/tests/data/golden_weights.safetensors
# A tiny random model (tests/data/make_tiny_weights.py): for checks of plumbing (options, frame
# flow, scene cuts) that must run quickly even on 1080p frames.
TINY_WEIGHTS=$ROOT/tests/data/tiny_weights.safetensors
# the 8-bit, 10-bit and odd-size sample clips (samples/README.md)
SAMPLE_8BIT=$SAMPLES/car-roundabout_320x192_8bit.mkv
SAMPLE_10BIT=$SAMPLES/goat_320x192_10bit.mkv
SAMPLE_ODD=$SAMPLES/camel_198x118_8bit.mkv
# swscale: C paths and exact rounding, so noisy/clean copies are the same on every CPU
SWS_FLAGS=bicubic+accurate_rnd+full_chroma_int+bitexact
# lossless intermediates
FFV1="-c:v ffv1 -level 3 -g 1 -slicecrc 1"

TEST_NAME=${TEST_NAME:-$(basename "$0" .sh)}
N_PASS=0
N_FAIL=0
N_SKIP=0

log()  { printf '%s\n' "$*" >&2; }
die()  { printf '%s: error: %s\n' "$TEST_NAME" "$*" >&2; exit 1; }
pass() { N_PASS=$((N_PASS + 1)); printf 'PASS %s: %s\n' "$TEST_NAME" "$*"; }
fail() { N_FAIL=$((N_FAIL + 1)); printf 'FAIL %s: %s\n' "$TEST_NAME" "$*"; }
skip() { N_SKIP=$((N_SKIP + 1)); printf 'SKIP %s: %s\n' "$TEST_NAME" "$*"; }

# Print the tally and exit: 1 if anything failed, 77 (automake's "skipped") if nothing ran
# and something was skipped, else 0. The tally line is deliberately not "N passed, N failed"
# so that it cannot be mistaken for run_tests.sh's summary.
finish() {
    printf '%s: %d PASS, %d FAIL, %d SKIP\n' "$TEST_NAME" "$N_PASS" "$N_FAIL" "$N_SKIP"
    [ "$N_FAIL" -eq 0 ] || exit 1
    if [ "$N_PASS" -eq 0 ] && [ "$N_SKIP" -gt 0 ]; then exit 77; fi
    exit 0
}

# usage: print the script's header comment (from line 2 to the first line that is not a
# comment), without the leading "# ": its --help text.
usage() { awk 'NR == 1 { next } !/^#/ { exit } { sub(/^# ?/, ""); print }' "$0"; }

# A private temporary folder, removed on exit unless KEEP_TMP=1.
make_tmp() {
    TMP=$(mktemp -d "${TMPDIR:-/tmp}/denoise-$TEST_NAME.XXXXXX") || die "mktemp failed"
    if [ "${KEEP_TMP:-0}" = 1 ]; then
        log "$TEST_NAME: keeping $TMP"
    else
        trap 'rm -rf "$TMP"' EXIT
        trap 'rm -rf "$TMP"; exit 130' INT TERM
    fi
}

# run LOGFILE CMD...: run a command with its stderr (and stdout) going to LOGFILE; on failure
# print the log's tail. VERBOSE=1 also echoes the command.
run() {
    _log=$1; shift
    [ "${VERBOSE:-0}" = 1 ] && log "+ $*"
    "$@" >"$_log" 2>&1
    _rc=$?
    [ $_rc = 0 ] && return 0
    log "--- command failed (exit $_rc): $*"
    tail -n 15 "$_log" >&2
    log "---"
    return $_rc
}

# py_check MODULES SCRIPT [ARGS...]: a weights/ check script (prints one line per check ending in
# "ok", exits non-zero on a failure) run with python3; skipped when python3 cannot import every
# module of MODULES (comma-separated, e.g. "torch, numpy"). Needs make_tmp first.
py_check() {
    _mods=$1; shift
    python3 -c "import $_mods" 2>/dev/null || { skip "python3 with $_mods not available"; return 0; }
    if python3 "$ROOT/weights/$@" >"$TMP/out" 2>&1; then
        pass "$(grep -c ' ok$' "$TMP/out") checks: $(tr '\n' ' ' <"$TMP/out" | sed 's/  */ /g' | cut -c1-300)"
    else
        cat "$TMP/out"
        fail "weights/$*: $(tail -n 1 "$TMP/out")"
    fi
}

# need_build: the built ffmpeg with the denoise filter, ffprobe and noise must exist.
need_build() {
    [ -x "$FFMPEG" ] || die "$FFMPEG not found: build first (./configure && make)"
    [ -x "$FFPROBE" ] || die "ffprobe not found ($BIN/ffprobe or on PATH)"
    "$FFMPEG" -hide_banner -filters 2>/dev/null | grep -q ' denoise ' ||
        die "$FFMPEG has no 'denoise' filter (was filter/vf_denoise.c injected?)"
}
# pick_model: model=the trained weights if present, else the random test weights (the frame
# and format checks do not depend on quality).
pick_model() {
    if [ -f "$WEIGHTS" ]; then model=$WEIGHTS; else model=$TEST_WEIGHTS; fi
    [ -f "$model" ] || die "no weights: neither $WEIGHTS nor $TEST_WEIGHTS exists"
    echo "$TEST_NAME: weights $model"
}
# tiny_filter: D=the denoise filter on the CPU engine with the tiny model ($TINY_WEIGHTS).
tiny_filter() {
    [ -f "$TINY_WEIGHTS" ] || die "missing $TINY_WEIGHTS"
    D="denoise=backend=cpu:$(filter_model "$TINY_WEIGHTS")"
}
need_noise() {
    [ -x "$NOISE" ] || die "$NOISE not found (built from tools/noise.c by make)"
}

# filter_model PATH: the filtergraph-escaped 'model=...' option for PATH.
filter_model() {
    case $1 in
        *\'*) die "model path with a quote is not supported: $1" ;;
    esac
    printf "model='%s'" "$1"
}

# Stream facts of the first video stream.
probe() { # probe FILE ENTRY  (width, height, pix_fmt, r_frame_rate, ...)
    "$FFPROBE" -v error -select_streams v:0 -show_entries "stream=$2" -of csv=p=0 "$1"
}
count_frames() { # decoded frames
    "$FFPROBE" -v error -count_frames -select_streams v:0 -show_entries stream=nb_read_frames \
        -of csv=p=0 "$1"
}
frame_pts() { # one pts per line, in decode-output order
    "$FFPROBE" -v error -select_streams v:0 -show_entries frame=pts -of csv=p=0 "$1"
}
frame_size() { printf '%sx%s' "$(probe "$1" width)" "$(probe "$1" height)"; }

# rgb_fmt FILE: the planar RGB format tools/noise.c and the PSNR comparisons use for FILE
# (gbrp for 8-bit sources, gbrp10le/12le/16le for deeper ones).
rgb_fmt() {
    case $(probe "$1" pix_fmt) in
        *p10le|*p10be|*p10) echo gbrp10le ;;
        *p12le|*p12be|*p12) echo gbrp12le ;;
        *p16le|*p16be|*p16|*48le|*48be|*64le|*64be) echo gbrp16le ;;
        *) echo gbrp ;;
    esac
}

# to_rgb IN OUT [FMT]: lossless FFV1 copy of IN in planar RGB (FMT, default rgb_fmt IN): the
# clean reference the noisy and denoised copies are compared with.
to_rgb() {
    _fmt=${3:-$(rgb_fmt "$1")}
    run "$2.log" "$FFMPEG" -nostdin -y -v error -i "$1" -sws_flags "$SWS_FLAGS" -vf "format=$_fmt" \
        -fps_mode passthrough $FFV1 -an "$2" || return 1
    rm -f "$2.log"
}

# add_noise IN OUT SIGMA SEED [FMT]: OUT (FFV1 mkv) = IN decoded to FMT (default: rgb_fmt IN)
# plus AWGN from tools/noise (integer formats: rounded and clipped, as real files are).
# Pipes are named pipe:0/pipe:1: FFmpeg 7.1 maps a bare "-" to the fd: protocol, which a
# minimal build may not have.
add_noise() {
    _in=$1 _out=$2 _sigma=$3 _seed=$4
    _fmt=${5:-$(rgb_fmt "$_in")}
    _size=$(frame_size "$_in")
    _rate=$(probe "$_in" r_frame_rate)
    need_noise
    # a pipeline's status is its last command's: check each stage through a status file
    rm -f "$_out.st1" "$_out.st2"
    { "$FFMPEG" -nostdin -v error -i "$_in" -sws_flags "$SWS_FLAGS" -vf "format=$_fmt" \
          -fps_mode passthrough -f rawvideo -pix_fmt "$_fmt" pipe:1 2>"$_out.log1"; echo $? >"$_out.st1"; } |
    { "$NOISE" --sigma "$_sigma" --seed "$_seed" --size "$_size" --pix-fmt "$_fmt" 2>"$_out.log2"; echo $? >"$_out.st2"; } |
    "$FFMPEG" -nostdin -y -v error -f rawvideo -pix_fmt "$_fmt" -s "$_size" -r "$_rate" -i pipe:0 \
        $FFV1 "$_out" 2>"$_out.log3"
    _rc3=$?
    if [ "$(cat "$_out.st1")" != 0 ] || [ "$(cat "$_out.st2")" != 0 ] || [ $_rc3 != 0 ]; then
        log "--- add_noise $_in -> $_out failed:"; cat "$_out.log1" "$_out.log2" "$_out.log3" >&2
        return 1
    fi
    rm -f "$_out.log1" "$_out.log2" "$_out.log3" "$_out.st1" "$_out.st2"
    return 0
}

# psnr A B [STATS]: average PSNR (dB, FFmpeg's psnr filter "average", i.e. of the mean MSE over
# all frames and planes) of A against reference B; STATS gets the per-frame lines (n:1 ...
# psnr_avg:...). Prints "inf" for identical inputs.
psnr() {
    _stats=${3:-/dev/null}
    _o=$("$FFMPEG" -nostdin -hide_banner -i "$1" -i "$2" \
            -lavfi "[0:v][1:v]psnr=stats_file='$_stats'" -f null - 2>&1) || {
        printf '%s\n' "$_o" | tail -n 15 >&2; return 1; }
    printf '%s\n' "$_o" | sed -n 's/.*PSNR .* average:\([0-9.a-z]*\) .*/\1/p' | tail -n 1
}

# per_frame_psnr STATS: "n psnr" lines (0-based frame numbers) from a psnr stats file
per_frame_psnr() {
    sed -n 's/^n:\([0-9]*\) .* psnr_avg:\([0-9.a-z]*\).*/\1 \2/p' "$1" | awk '{ printf "%d %s\n", $1 - 1, $2 }'
}

# fcmp A OP B: floating point comparison with awk (OP: < <= > >=)
# long_gop_encoder: the encoder options of a long-GOP source for the segment tests: H.264 with
# B-frames and a keyframe every 6 frames where the build has libx264, else FFV1 with 6-frame GOPs
long_gop_encoder() {
    if "$FFMPEG" -hide_banner -encoders 2>/dev/null | grep -q ' libx264 '; then
        echo "-c:v libx264 -g 6 -keyint_min 6 -sc_threshold 0 -bf 2 -crf 18"
    else
        echo "-c:v ffv1 -level 1 -g 6"
    fi
}

# alternating_frames DIR LOG N: DIR/f100.png .. DIR/f(99+N).png alternating between the frames of
# SAMPLE_8BIT and dog-tunnel (a steady large frame difference, which the whole run does not call a
# scene cut); returns 1 when a decode or copy fails (its output in LOG)
alternating_frames() {
    mkdir -p "$1" &&
        run "$2" "$FFMPEG" -nostdin -v error -i "$SAMPLE_8BIT" "$1/a%d.png" &&
        run "$2" "$FFMPEG" -nostdin -v error -i "$SAMPLES/dog-tunnel_320x192_8bit.mkv" "$1/b%d.png" || return 1
    _i=0
    while [ $_i -lt "$3" ]; do
        if [ $((_i % 2)) = 0 ]; then _c=a; else _c=b; fi
        cp "$1/$_c$((_i / 2 % 8 + 1)).png" "$1/f$((100 + _i)).png" || return 1
        _i=$((_i + 1))
    done
}

fcmp() { awk -v a="$1" -v b="$3" "BEGIN { exit !(a $2 b) }"; }
fsub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a - b }'; }
