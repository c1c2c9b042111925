#!/bin/sh
# tools/batch_overhead.sh: what splitting and joining cost on one GPU: denoise-batch (Ray started
# on this machine, one task per segment, by default two at a time on its one GPU, the first two
# run by the driver itself while Ray starts: --head-start) against one `ffmpeg -vf denoise` run of
# the same clip, chain and encoder options, in frames/s (issue 38's bar: denoise-batch within 10 %
# of the single run on a 1080p clip; docs/scale-out.md, "Throughput model").
#
#   tools/batch_overhead.sh          (on the GPU machine: bash tools/device_gpu.sh batch runs it)
#
# The clip: BO_FRAMES frames (default 1200) of the 8-bit sample looped (a cut every 8 frames, as
# the scene detector sees them in both runs), scaled to BO_SIZE (1920x1080) with FFmpeg's noise
# filter (alls=12, temporal), H.264 with a keyframe every 50 frames (ffv1 where the build has no
# libx264). The chain: denoise=backend=BO_BACKEND (cuda) with the trained weights (else the random
# test weights); BO_CHAIN replaces it. The encoder options BO_ENC (default -c:v libx264 -preset
# veryfast -crf 18, else -c:v ffv1 -slices 16) serve both runs; denoise-batch runs with
# --segment-frames BO_SEGMENT_FRAMES (400), its default --tasks-per-gpu, --timings and
# BO_BATCH_ARGS (more options).
# Order: a 10-frame warm-up run, the single run, denoise-batch, the single run again; each timed
# from start to exit (date +%s.%N), with its CPU time (user and sys seconds of the run and what it
# waited for: the shell's `times`, POSIX, since Ubuntu's images have no /usr/bin/time; for
# denoise-batch's segments the `# times:` line each writes in its log) and the cores that is.
# denoise-batch's row is followed by its --timings line (where the whole command's time went:
# Python's start, checks, probe, chain check, Ray's import and start, the segments, join, verify,
# Ray's stop; phases that ran beside others are marked so).
# Then diagnostic rows that no bar reads: denoise-batch again with each option set of
# BO_BATCH_ROWS (';' between sets; default "--tasks-per-gpu 1 --head-start 0;--head-start 0;
# --tasks-per-gpu 3": a GPU per task as before 2026-12-08, the default without the head start, 3
# segments per GPU), each with its timings line; then, to put a gap between the single run and
# the segments on Ray's process context (docs/scale-out.md, "Measuring on the GPU machine"): the
# first segment run in a Ray task (not by the driver's head start) (its log: wall and CPU time,
# and its worker's context line: its environment variables, affinity, nice, cgroup, stdin), then
# that segment's own ffmpeg command (its log's first line) run again outside
# Ray as it is, with the worker's variables exported (threads, libraries, allocator: its context
# line's env part), with OMP_NUM_THREADS=1 and OPENBLAS_NUM_THREADS=1, with stdin </dev/null, and
# with OPENBLAS_NUM_THREADS=$(nproc) (OpenBLAS's threads as the CUDA engine had them before it set
# one, kernels/common/parallel.h), each about 400 frames; last the single run with sigma=auto's
# estimate read in the push that made it (DENOISE_SIGMA_AUTO_DEFER=0, the engine's order before
# 2026-12-07). Prints per run its wall time, frames/s and CPU, then
#   single: F frames/s (the mean of the two runs)
#   denoise-batch: F frames/s, the whole command (Ray's start, probing, the joins included)
#   denoise-batch job: F frames/s (its own progress line: from the first segment's start to the
#   last join)
#   ratio: R (whole command / single) and R (job / single); PASS/FAIL against 0.90 (whole command)
# Ray must import (python3 -c 'import ray'); where it does not and the wheel parts of
# tools/device_wheels.sh are here, they are installed first (.whl/site). Logs in $OUT/batch
# (else a temporary folder). Exit 0 when the bar is met, 1 when not or a run failed, 77 when Ray
# or the backend is missing.
set -u
TEST_NAME=batch_overhead
. "$(dirname "$0")/../tests/common/lib.sh"
[ "${1:-}" = -h ] || [ "${1:-}" = --help ] && { usage; exit 0; }

need_build
pick_model
make_tmp
L=${OUT:+$OUT/batch}
L=${L:-$TMP}
mkdir -p "$L" || die "cannot create $L"
N=${BO_FRAMES:-1200}
SIZE=${BO_SIZE:-1920x1080}
SEG=${BO_SEGMENT_FRAMES:-400}
BACKEND=${BO_BACKEND:-cuda}
CHAIN=${BO_CHAIN:-denoise=backend=$BACKEND:$(filter_model "$model")}
if "$FFMPEG" -hide_banner -encoders 2>/dev/null | grep -q ' libx264 '; then
    SRCENC="-c:v libx264 -preset veryfast -crf 20 -g 50 -bf 2"
    ENC=${BO_ENC:--c:v libx264 -preset veryfast -crf 18}
else
    SRCENC="-c:v ffv1 -g 50 -slices 16"
    ENC=${BO_ENC:--c:v ffv1 -slices 16}
fi
BATCH=$ROOT/tools/denoise-batch

if ! python3 -c 'import ray' 2>/dev/null; then
    if [ -f "$ROOT/.whl/ray-wheels.sha256" ]; then
        bash "$ROOT/tools/device_wheels.sh" install >"$L/wheels.log" 2>&1 || {
            cat "$L/wheels.log"; skip "Ray: the wheels of tools/device_wheels.sh did not install"; finish; }
        export PYTHONPATH=$ROOT/.whl/site${PYTHONPATH:+:$PYTHONPATH}
    fi
    python3 -c 'import ray' 2>/dev/null || { skip "python3 cannot import ray (tools/device_wheels.sh)"; finish; }
fi
echo "$TEST_NAME: ray $(python3 -c 'import ray; print(ray.__version__)'), $(nproc) CPUs, $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)"

# now: seconds since the epoch with fractions; rate FRAMES SECONDS
now() { date +%s.%N; }
rate() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.2f", n / s }'; }
# timed NAME CMD...: runs CMD in this shell (not in $(...): `times` there would count only the
# command substitution's children), stdout and stderr to $L/NAME.log; sets T_WALL (start to exit)
# and T_USER, T_SYS (CPU seconds of CMD and of what it waited for); returns CMD's status
timed() {
    _n=$1
    shift
    times >"$TMP/times0"
    _t0=$(now)
    "$@" >"$L/$_n.log" 2>&1
    _rc=$?
    _t1=$(now)
    times >"$TMP/times1"
    T_WALL=$(awk -v a="$_t0" -v b="$_t1" 'BEGIN { printf "%.3f", b - a }')
    # `times`' second line: the children's user and sys time, as 1m2.5s (dash) or 1m2.500s (bash)
    _c=$(cat "$TMP/times0" "$TMP/times1" | awk 'NR % 2 == 0 { split($1, u, "m"); split($2, s, "m"); printf "%s %s ", u[1] * 60 + u[2], s[1] * 60 + s[2] }')
    T_USER=$(echo "$_c" | awk '{ printf "%.1f", $3 - $1 }')
    T_SYS=$(echo "$_c" | awk '{ printf "%.1f", $4 - $2 }')
    return $_rc
}
# cpu WALL USER SYS: "CPU U s user + S s sys (C cores)"
cpu() { awk -v w="$1" -v u="$2" -v s="$3" 'BEGIN { printf "CPU %.1f s user + %.1f s sys (%.2f cores)", u, s, (u + s) / w }'; }

run "$L/src.log" "$FFMPEG" -nostdin -y -stream_loop -1 -i "$SAMPLE_8BIT" -frames:v "$N" \
    -vf "scale=$(echo "$SIZE" | tr x :):flags=bicubic,noise=alls=12:allf=t,format=yuv420p" $SRCENC -an "$TMP/src.mkv" ||
    die "cannot make the $SIZE source clip"
n=$(count_frames "$TMP/src.mkv")
[ "$n" = "$N" ] || die "the source has $n frames, not $N"
echo "$TEST_NAME: source $N frames of $SIZE ($SRCENC); chain $(echo "$CHAIN" | sed "s|model='[^']*'|model=...|"); encoder $ENC; segments of $SEG frames"

# warm-up: the page cache, the driver's first context
if ! "$FFMPEG" -nostdin -y -v error -i "$TMP/src.mkv" -frames:v 10 -vf "$CHAIN" -f null - >"$L/warmup.log" 2>&1; then
    cat "$L/warmup.log"
    skip "the chain does not run here (backend $BACKEND): $(tail -n 1 "$L/warmup.log")"
    finish
fi

single() { # single NAME [VAR=VALUE...]: one ffmpeg run of the clip, with those variables set
    _s=$1
    shift
    timed "$_s" env "$@" "$FFMPEG" -nostdin -y -v error -i "$TMP/src.mkv" -vf "$CHAIN" -fps_mode passthrough $ENC \
        -an "$TMP/$_s.mkv" || { cat "$L/$_s.log" >&2; return 1; }
}
single single1 || die "the single run failed (log $L/single1.log)"
s1=$T_WALL
echo "single run 1: $s1 s, $(rate "$N" "$s1") frames/s; $(cpu "$T_WALL" "$T_USER" "$T_SYS")"

# batch NAME [OPTIONS...]: denoise-batch over the clip into $TMP/NAME.mkv, log $L/NAME.log; sets
# T_WALL (start to exit) and returns its status
batch() {
    _b=$1
    shift
    _t0=$(now)
    python3 "$BATCH" --backend "$BACKEND" --segment-frames "$SEG" --vf "$CHAIN" --progress-interval 5 --timings \
        --ffmpeg "$FFMPEG" --ffprobe "$FFPROBE" ${BO_BATCH_ARGS:-} "$@" $ENC -o "$TMP/$_b.mkv" "$TMP/src.mkv" >"$L/$_b.log" 2>&1
    _rc=$?
    T_WALL=$(awk -v a="$_t0" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }')
    return $_rc
}
# phases LOG: denoise-batch's --timings summary line in LOG, without its prefix
phases() { sed -n 's/^denoise-batch: timings: total/total/p' "$1"; }
batch batch --keep-work
brc=$?
sb=$T_WALL
cat "$L/batch.log"
[ $brc = 0 ] || { fail "denoise-batch exited $brc (log $L/batch.log)"; finish; }
nb=$(count_frames "$TMP/batch.mkv")
[ "$nb" = "$N" ] || fail "denoise-batch's output has $nb frames, not $N"
job=$(sed -n 's/.* \([0-9.]*\) frames\/s, .*/\1/p' "$L/batch.log" | tail -n 1)
segs=$(sed -n 's/.*done: .*(\([0-9]*\) frames, \([0-9]*\) segments).*/\2/p' "$L/batch.log")
# the segments' own times (the `# times:` line of each log, tools/denoise_batch/segment.py)
work=$TMP/batch.mkv.denoise-batch
segt=$(cat "$work"/seg-*.log 2>/dev/null | sed -n 's/^# times: wall \([0-9.]*\) s, cpu user \([0-9.]*\) s, sys \([0-9.]*\) s$/\1 \2 \3/p' |
    awk '{ w += $1; u += $2; s += $3 } END { if (NR) printf "%.3f %.1f %.1f", w, u, s }')
echo "denoise-batch: $sb s, $(rate "$N" "$sb") frames/s ($segs segments; its progress line: ${job:-?} frames/s)${segt:+; its ffmpeg runs: $(echo "$segt" | awk '{ printf "%.1f", $1 }') s, $(cpu $segt)}"
echo "denoise-batch phases: $(phases "$L/batch.log")"

single single2 || die "the second single run failed (log $L/single2.log)"
s2=$T_WALL
echo "single run 2: $s2 s, $(rate "$N" "$s2") frames/s; $(cpu "$T_WALL" "$T_USER" "$T_SYS")"

# diagnostics (no bar): denoise-batch with other options; a segment in Ray and its worker's
# context, its command again outside Ray in several contexts, the single run in the old sigma=auto
# order
_i=0
_ifs=$IFS
IFS=';'
for row in ${BO_BATCH_ROWS---tasks-per-gpu 1 --head-start 0;--head-start 0;--tasks-per-gpu 3}; do
    IFS=$_ifs
    _i=$((_i + 1))
    # (the row's options split at spaces, as written)
    if batch "batch_row$_i" $row; then
        echo "diagnostic: denoise-batch $row: $T_WALL s, $(rate "$N" "$T_WALL") frames/s (its progress line: $(sed -n 's/.* \([0-9.]*\) frames\/s, .*/\1/p' "$L/batch_row$_i.log" | tail -n 1) frames/s)"
        echo "diagnostic: denoise-batch $row phases: $(phases "$L/batch_row$_i.log")"
    else
        echo "diagnostic: denoise-batch $row failed (log $L/batch_row$_i.log)"
    fi
    IFS=';'
done
IFS=$_ifs
# the first segment that ran in a Ray task (not in the head start: its worker's context line names
# RAY_RAYLET_PID among the RAY_* variables)
seglog=$(grep -l '^# context: .*RAY_RAYLET_PID' "$work"/seg-*.log 2>/dev/null | head -n 1)
k=$(echo "$seglog" | sed -n 's/.*seg-0*\([0-9][0-9]*\)\.log$/\1/p')
if [ -f "$seglog" ]; then
    segcmd=$(head -n 1 "$seglog")
    segout=$(echo "$segcmd" | awk '{print $NF}')
    # the attempt's name (seg-NNNNN.attempt-HOST-PID-NS.EXT) -> the segment's file
    sn=$(count_frames "$(echo "$segout" | sed 's/\.attempt-.*\(\.[^.]*\)$/\1/')")
    t=$(sed -n 's/^# times: wall \([0-9.]*\) s, cpu user \([0-9.]*\) s, sys \([0-9.]*\) s$/\1 \2 \3/p' "$seglog")
    [ -n "$t" ] && echo "diagnostic: segment $k in Ray: $(echo "$t" | awk '{ print $1 }') s, $(rate "$sn" "${t%% *}") frames/s ($sn frames); $(cpu $t)"
    ctx=$(sed -n '2s/^# context: //p' "$seglog")
    echo "diagnostic: segment $k's Ray worker: ${ctx:-no context line}"
    # the worker's variables of threads, libraries, allocator (shell quoted by segment.py), '-' if none
    wenv=$(echo "$ctx" | sed -n 's/^env \(.*\); RAY_\* .*/\1/p')
    [ "$wenv" = - ] && wenv=
    replay() { # replay NAME WHAT [VAR=VALUE...]: segment k's command outside Ray; prints its row
        _r=$1 _w=$2
        shift 2
        if timed "$_r" env "$@" sh -c "$segcmd"; then
            _f=$(count_frames "$segout")
            echo "diagnostic: segment $k's command outside Ray$_w: $T_WALL s, $(rate "$_f" "$T_WALL") frames/s ($_f frames written); $(cpu "$T_WALL" "$T_USER" "$T_SYS")"
        else
            echo "diagnostic: segment $k's command outside Ray$_w failed (log $L/$_r.log)"
        fi
    }
    replay segment0_direct ""
    what=", the worker's variables exported (${wenv:--})"
    eval "replay segment0_worker_env \"\$what\" $wenv"
    replay segment0_omp1 ", OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1" OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
    replay segment0_devnull ", stdin </dev/null" </dev/null
    replay segment0_blas_all ", OPENBLAS_NUM_THREADS=$(nproc) (OpenBLAS's threads before the engine's one)" \
        OPENBLAS_NUM_THREADS="$(nproc)"
else
    echo "diagnostic: no log of a segment run in Ray in denoise-batch's work folder"
fi
single single_old_order DENOISE_SIGMA_AUTO_DEFER=0 &&
    echo "diagnostic: single run, sigma=auto's estimate read in its own push (DENOISE_SIGMA_AUTO_DEFER=0): $T_WALL s, $(rate "$N" "$T_WALL") frames/s; $(cpu "$T_WALL" "$T_USER" "$T_SYS")"
fs=$(awk -v n="$N" -v a="$s1" -v b="$s2" 'BEGIN { printf "%.2f", n / ((a + b) / 2) }')
fb=$(rate "$N" "$sb")
r=$(awk -v b="$fb" -v s="$fs" 'BEGIN { printf "%.3f", b / s }')
rj=$(awk -v b="${job:-0}" -v s="$fs" 'BEGIN { printf "%.3f", b / s }')
echo "single: $fs frames/s (the mean of the two runs)"
echo "denoise-batch: $fb frames/s, the whole command"
echo "denoise-batch job: ${job:-?} frames/s (its progress line)"
echo "ratio: $r (whole command / single), $rj (job / single)"
if fcmp "$r" '>=' 0.9; then
    pass "denoise-batch at $r of the single run's frames/s ($fb vs $fs; job $rj) on $N frames of $SIZE, $segs segments"
else
    fail "denoise-batch at $r of the single run's frames/s ($fb vs $fs; job $rj) on $N frames of $SIZE, $segs segments: below 0.9"
fi
finish
