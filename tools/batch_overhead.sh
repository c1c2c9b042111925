#!/bin/sh
# tools/batch_overhead.sh: what splitting and joining cost on one GPU: denoise-batch (Ray started
# on this machine, one task per segment on its one GPU) against one `ffmpeg -vf denoise` run of
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
# --segment-frames BO_SEGMENT_FRAMES (400) and BO_BATCH_ARGS (more options).
# Order: a 10-frame warm-up run, the single run, denoise-batch, the single run again; each timed
# from start to exit (date +%s.%N). Then two diagnostic runs that no bar reads: segment 0's own
# ffmpeg command (the first line of its log in denoise-batch's kept work folder) run again
# outside Ray, and the single run with sigma=auto's estimate read in the push that made it
# (DENOISE_SIGMA_AUTO_DEFER=0, the engine's order before 2026-12-07), so that a gap between the
# single run and the segments can be put on Ray's environment, the segment's command form or
# sigma=auto's host wait. Prints per run its wall time and frames/s, then
#   single: F frames/s (the mean of the two runs)
#   denoise-batch: F frames/s, the whole command (Ray's start, probing, the joins included)
#   denoise-batch job: F frames/s (its own progress line: from the first task to the last join)
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

# now FILE: seconds since the epoch with fractions; rate FRAMES SECONDS
now() { date +%s.%N; }
rate() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.2f", n / s }'; }

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

single() { # single NAME: one ffmpeg run; prints its seconds
    _t0=$(now)
    "$FFMPEG" -nostdin -y -v error -i "$TMP/src.mkv" -vf "$CHAIN" -fps_mode passthrough $ENC -an "$TMP/$1.mkv" \
        >"$L/$1.log" 2>&1 || { cat "$L/$1.log" >&2; return 1; }
    awk -v a="$_t0" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'
}
s1=$(single single1) || die "the single run failed (log $L/single1.log)"
echo "single run 1: $s1 s, $(rate "$N" "$s1") frames/s"

t0=$(now)
python3 "$BATCH" --backend "$BACKEND" --segment-frames "$SEG" --vf "$CHAIN" --progress-interval 5 --keep-work \
    --ffmpeg "$FFMPEG" --ffprobe "$FFPROBE" ${BO_BATCH_ARGS:-} $ENC -o "$TMP/batch.mkv" "$TMP/src.mkv" >"$L/batch.log" 2>&1
brc=$?
sb=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }')
cat "$L/batch.log"
[ $brc = 0 ] || { fail "denoise-batch exited $brc (log $L/batch.log)"; finish; }
nb=$(count_frames "$TMP/batch.mkv")
[ "$nb" = "$N" ] || fail "denoise-batch's output has $nb frames, not $N"
job=$(sed -n 's/.* \([0-9.]*\) frames\/s, .*/\1/p' "$L/batch.log" | tail -n 1)
segs=$(sed -n 's/.*done: .*(\([0-9]*\) frames, \([0-9]*\) segments).*/\2/p' "$L/batch.log")
echo "denoise-batch: $sb s, $(rate "$N" "$sb") frames/s ($segs segments; its progress line: ${job:-?} frames/s)"

s2=$(single single2) || die "the second single run failed (log $L/single2.log)"
echo "single run 2: $s2 s, $(rate "$N" "$s2") frames/s"

# diagnostics (no bar): segment 0's command outside Ray; the single run in the old sigma=auto order
seglog=$(ls "$TMP"/batch.mkv.denoise-batch/seg-00000.log 2>/dev/null | head -n 1)
if [ -n "$seglog" ]; then
    segcmd=$(head -n 1 "$seglog")
    segout=$(echo "$segcmd" | awk '{print $NF}')
    _t0=$(now)
    if (eval "$segcmd") >"$L/segment0_direct.log" 2>&1; then
        st=$(awk -v a="$_t0" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }')
        sn=$(count_frames "$segout")
        echo "diagnostic: segment 0's command outside Ray: $st s, $(rate "$sn" "$st") frames/s ($sn frames written)"
    else
        echo "diagnostic: segment 0's command outside Ray failed (log $L/segment0_direct.log)"
    fi
else
    echo "diagnostic: no segment log in denoise-batch's work folder"
fi
s3=$(export DENOISE_SIGMA_AUTO_DEFER=0; single single_old_order) &&
    echo "diagnostic: single run, sigma=auto's estimate read in its own push (DENOISE_SIGMA_AUTO_DEFER=0): $s3 s, $(rate "$N" "$s3") frames/s"
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
