#!/bin/sh
# tests/cli/cli_denoise_batch.sh: build/bin/denoise-batch (tools/denoise_batch/, docs/scale-out.md)
# on a local Ray instance with two CPU workers, chain denoise=sigma=25:backend=cpu:threads=1.
#   - exact: a 24-frame long-GOP clip, 128x128 (H.264 with B-frames and a keyframe every 6 frames,
#     or FFV1 with a 6-frame GOP where the build has no libx264; frames alternating between two
#     samples, so that the scene-cut detector's state at each cut matters) with an audio track,
#     in >= 4 segments: the joined file's decoded frames equal a single `ffmpeg -vf denoise`
#     run's (framemd5), with the source's frame count and pts, and the audio stream kept,
#     and the source's frame rate and time base (ffprobe)
#   - checks: an output folder that is a file (before Ray: no Ray session is created), and a chain
#     that changes the frame count (fps=50; checked while Ray starts: no segment runs, no Ray
#     process is left), each fail once with one FAILED line that names the path once (exit 1);
#     --dry-run prints one JSON line per segment (frames covering the clip once, the ffmpeg argv
#     with the chain, the task's CPUs from the chain's cpu_threads=, the GPU share of a task with
#     backend cuda: 1/--tasks-per-gpu, default 1/2) and one for the join, writes nothing, starts no
#     Ray and exits 0
#   - --tasks-per-gpu 2 on a Ray cluster started by the test that declares one GPU (ray start
#     --num-gpus 1; the chain null runs on no GPU): two segments run at once on the one GPU
#     (their ffmpeg runs overlap in --timings' lines) and the joined frames equal the source's
#   - a Ray worker killed (SIGKILL) while it runs a segment: the segment is retried, nothing is
#     lost, the result is the same; the killed worker's ffmpeg does not outlive it
#   - the driver killed (SIGKILL) mid-job, then the resumed run stopped by SIGTERM: one line
#     saying so (no Python or Ray stack), exit 143, no unfinished attempt file left, and the
#     attempt files left before it (one planted: a node lost mid-write) removed by that resume;
#     the third run completes from the manifest (segments done are kept) with the same result
#   - --head-start 2 (backend cpu): the driver runs the first two segments itself while Ray starts
#     (--timings says so), the joined frames equal the single run's; stopped by SIGTERM while those
#     run: exit 143, their ffmpeg and attempt files gone, no Ray process left
#   - a corrupt file and a missing one among three inputs: each fails with one message naming it
#     once, the other completes; its segments of one frame (the chain null) join with the
#     source's frame rate and time base
# Skipped (77) only when python3 cannot import ray (.ci/run installs it from PyPI).
set -u
. "$(dirname "$0")/../common/lib.sh"

python3 -c 'import ray' 2>/dev/null || { skip "python3 cannot import ray (python3 -m pip install ray)"; finish; }
need_build
BATCH=$BIN/denoise-batch
[ -x "$BATCH" ] || die "$BATCH not found (make builds it from tools/denoise-batch)"
make_tmp
# Ray's sockets and logs inside this test's folder (a short path: unix socket names are limited)
export RAY_TMPDIR=$TMP/ray
mkdir -p "$RAY_TMPDIR"
# ray_procs: Ray's programs and workers with this RAY_TMPDIR in their environment (the ids)
ray_procs() {
    for d in /proc/[0-9]*; do
        case $( { tr '\0' ' ' <"$d/cmdline"; } 2>/dev/null) in
            ray::*|*site-packages/ray/*) ;;
            *) continue ;;
        esac
        { tr '\0' '\n' <"$d/environ"; } 2>/dev/null | grep -qx "RAY_TMPDIR=$RAY_TMPDIR" && echo "${d#/proc/}"
    done
}
no_ray_left() { [ -z "$(ray_procs)" ]; }
# wait_for SECONDS COMMAND...: poll COMMAND every 0.1 s until it succeeds
wait_for() {
    _end=$(($(date +%s) + $1)); shift
    until "$@"; do [ "$(date +%s)" -lt $_end ] || return 1; sleep 0.1; done
}
# Ray processes this test started and a killed driver left behind (Ray's agents outlive it),
# ended by id
cleanup_ray() {
    for p in $(ray_procs); do kill -9 "$p" 2>/dev/null; done
}
trap 'cleanup_ray; [ "${KEEP_TMP:-0}" = 1 ] || rm -rf "$TMP"' EXIT

CHAIN="denoise=sigma=25:backend=cpu:threads=1"
FRAMES=24

# frame hashes only (the other framemd5 columns carry the container's durations)
hashes() { "$FFMPEG" -nostdin -v error -i "$1" -map 0:v:0 -f framemd5 pipe:1 | awk -F', *' '!/^#/ { print $NF }'; }

# the source: 24 frames alternating between two samples' frames (a steady large frame
# difference, which the whole run does not call a scene cut but a segment's first frames would
# without the detector's 2 frames of history: the cut placement is checked with it), cropped,
# long-GOP, with an audio track
VENC=$(long_gop_encoder)
alternating_frames "$TMP/png" "$TMP/png.log" $FRAMES || die "cannot decode the samples to PNG"
# (a 128x128 crop: the engine's time per frame is what makes this test's run time)
run "$TMP/src.log" "$FFMPEG" -nostdin -y -framerate 25 -start_number 100 -i "$TMP/png/f%d.png" \
    -f lavfi -i "anullsrc=r=48000:cl=mono,aformat=sample_fmts=s16" -map 0:v -map 1:a -shortest \
    -vf crop=128:128,format=yuv420p $VENC -c:a pcm_s16le "$TMP/src.mkv" || die "cannot make the source clip"
n=$(count_frames "$TMP/src.mkv")
[ "$n" = $FRAMES ] || die "source clip has $n frames, expected $FRAMES"
keys=$("$FFPROBE" -v error -select_streams v:0 -show_entries packet=flags -of csv=p=0 "$TMP/src.mkv" | grep -c K)
log "$TEST_NAME: source $FRAMES frames, $keys keyframes ($VENC)"

# the single run
run "$TMP/single.log" "$FFMPEG" -nostdin -y -i "$TMP/src.mkv" -vf "$CHAIN" -fps_mode passthrough \
    -c:v ffv1 -an "$TMP/single.mkv" || die "single ffmpeg run failed"
hashes "$TMP/single.mkv" >"$TMP/single.md5"
[ "$(wc -l <"$TMP/single.md5")" = $FRAMES ] || die "single run: not $FRAMES frames"

# rate_of FILE: the video stream's frame rates and time base, as ffprobe states them
rate_of() {
    "$FFPROBE" -v error -select_streams v:0 -show_entries stream=r_frame_rate,avg_frame_rate,time_base \
        -of default=nw=1 "$1" | sort | tr '\n' ' '
}
# same_rate NAME FILE SOURCE: FILE states SOURCE's frame rates and time base
same_rate() {
    _r=$(rate_of "$2") _s=$(rate_of "$3")
    if [ -n "$_s" ] && [ "$_r" = "$_s" ]; then
        pass "$1: frame rate and time base as the source's ($_r)"
    else
        fail "$1: '$_r', the source '$_s'"
    fi
}
# no_ray NAME DIR: no Ray session was created under the RAY_TMPDIR DIR
no_ray() {
    if [ -z "$(ls -A "$2" 2>/dev/null)" ]; then pass "$1: Ray was not started"
    else fail "$1: Ray was started ($(ls "$2" | head -n 3 | tr '\n' ' '))"; fi
}
# once NAME LOG PATH: LOG has exactly one FAILED line, which names PATH once
once() {
    _n=$(grep -c 'FAILED: ' "$2") _line=$(grep -m1 'FAILED: ' "$2")
    _k=$(printf '%s\n' "$_line" | awk -v p="$3" '{ print gsub(p, "") }')
    if [ "$_n" = 1 ] && [ "$_k" = 1 ]; then
        pass "$1: $(printf '%s' "$_line" | sed "s|$TMP/||g" | cut -c1-220)"
    else
        fail "$1: $_n FAILED line(s), the first naming $3 $_k time(s)"; cat "$2" >&2
    fi
}

# same_as_single NAME FILE: FILE's frames equal the single run's, with the source's pts and audio
same_as_single() {
    _h=$(hashes "$2" | diff - "$TMP/single.md5" | grep -c '^[<>]')
    _pts_ok=0
    # (ffprobe's csv adds a field to a frame with side data: keep the first)
    frame_pts "$2" | cut -d, -f1 >"$TMP/pts.out" && frame_pts "$TMP/src.mkv" | cut -d, -f1 >"$TMP/pts.src" &&
        cmp -s "$TMP/pts.out" "$TMP/pts.src" && _pts_ok=1
    _audio=$("$FFPROBE" -v error -select_streams a -show_entries stream=codec_name -of csv=p=0 "$2")
    if [ "$_h" = 0 ] && [ "$_pts_ok" = 1 ] && [ "$_audio" = pcm_s16le ]; then
        pass "$1: $FRAMES frames equal the single run's (framemd5), pts as the source's, audio kept"
    else
        fail "$1: $_h differing framemd5 lines, pts equal: $_pts_ok, audio: '$_audio'"
    fi
}

# (options without spaces, split where used: a run in the background must be "$BATCH" itself, so
# that $! is its pid, not that of a subshell running a function)
BOPTS="--workers 2 --segment-frames 5 --vf $CHAIN --progress-interval 2 -c:v ffv1"
batch() { "$BATCH" $BOPTS "$@"; }

# 1. exact
t0=$(date +%s)
if batch -o "$TMP/out1.mkv" "$TMP/src.mkv" >"$TMP/b1.log" 2>&1; then
    segs=$(sed -n 's/.*done: .*(\([0-9]*\) frames, \([0-9]*\) segments).*/\2/p' "$TMP/b1.log")
    if [ "${segs:-0}" -ge 4 ]; then
        pass "exact: $segs segments in $(($(date +%s) - t0)) s"
        same_as_single exact "$TMP/out1.mkv"
        same_rate exact "$TMP/out1.mkv" "$TMP/src.mkv"
    else
        fail "exact: ${segs:-?} segments, expected >= 4"; cat "$TMP/b1.log" >&2
    fi
    [ ! -e "$TMP/out1.mkv.denoise-batch" ] || fail "exact: work folder left after success"
else
    fail "exact: denoise-batch failed"; tail -n 20 "$TMP/b1.log" >&2
fi

# checks: an output folder that is a file (before Ray); a chain that changes the frame count
# (while Ray starts)
mkdir -p "$TMP/ray-none"
touch "$TMP/file"
RAY_TMPDIR=$TMP/ray-none batch -o "$TMP/file/out.mkv" "$TMP/src.mkv" >"$TMP/bc1.log" 2>&1
rc=$?
[ $rc = 1 ] && grep -q "FAILED: $TMP/src.mkv: output folder: $TMP/file is a file" "$TMP/bc1.log" &&
    once "unwritable output folder" "$TMP/bc1.log" "$TMP/file" ||
    { fail "unwritable output folder: exit $rc"; cat "$TMP/bc1.log" >&2; }
"$BATCH" --vf "fps=50,$CHAIN" -c:v ffv1 -o "$TMP/fps.mkv" "$TMP/src.mkv" >"$TMP/bc2.log" 2>&1
rc=$?
[ $rc = 1 ] && grep -q "gives 48 frames for its first $FRAMES frames" "$TMP/bc2.log" && ! grep -q retrying "$TMP/bc2.log" &&
    [ ! -e "$TMP/fps.mkv.denoise-batch" ] && once "chain fps=50" "$TMP/bc2.log" "$TMP/src.mkv" ||
    { fail "chain fps=50: exit $rc"; cat "$TMP/bc2.log" >&2; }
if wait_for 10 no_ray_left; then pass "chain fps=50: no Ray process left"
else fail "chain fps=50: Ray processes left: $(ray_procs | tr '\n' ' ')"; fi
# --dry-run: the plan and the commands, nothing written; the chain's cpu_threads= sets a task's CPUs
RAY_TMPDIR=$TMP/ray-none "$BATCH" --dry-run --segment-frames 5 --vf "${CHAIN%:threads=1}:cpu_threads=2" -c:v ffv1 \
    -o "$TMP/dry.mkv" "$TMP/src.mkv" >"$TMP/dry.jsonl" 2>"$TMP/dry.log"
rc=$?
why=$(python3 - "$TMP/dry.jsonl" "$FRAMES" "$FFMPEG" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
segs, joins = [l for l in lines if not l.get("join")], [l for l in lines if l.get("join")]
covered = sorted(f for s in segs for f in range(s["first"], s["last"] + 1))
bad = []
if len(segs) < 4 or len(joins) != 1:
    bad.append(f"{len(segs)} segment lines, {len(joins)} join lines")
if covered != list(range(int(sys.argv[2]))):
    bad.append("the segments do not cover the frames once")
for s in segs:
    vf = s["argv"][s["argv"].index("-vf") + 1]
    if s["argv"][0] != sys.argv[3] or s["argv"][-1] != s["file"] or s["chain"] not in vf \
            or "cpu_threads=2" not in s["chain"] or s["task_cpus"] != 2:
        bad.append(f"segment {s['segment']}: argv {s['argv'][0]} ... -vf {vf} ... {s['argv'][-1]}, "
                   f"task_cpus {s['task_cpus']}")
if joins and "concat" not in joins[0]["argv"]:
    bad.append("the join's argv has no concat demuxer")
print("; ".join(bad) if bad else f"ok: {len(segs)} segments")
PY
)
if [ $rc = 0 ] && [ ! -e "$TMP/dry.mkv.denoise-batch" ] && [ ! -e "$TMP/dry.mkv" ] && case $why in ok:*) true ;; *) false ;; esac; then
    pass "--dry-run: ${why#ok: }, each with its ffmpeg argv and 2 CPUs for cpu_threads=2, and the join; nothing written"
else
    fail "--dry-run: exit $rc: $why"; cat "$TMP/dry.log" >&2
fi
# the GPU share a task asks Ray for: none with backend cpu (above), 1/--tasks-per-gpu with backend
# cuda (a plan needs no GPU), 1/2 by default; the segment commands do not change with it
shares=
for tpg in "" 1 3; do
    RAY_TMPDIR=$TMP/ray-none "$BATCH" --dry-run --backend cuda ${tpg:+--tasks-per-gpu $tpg} --segment-frames 5 \
        --vf "$CHAIN" -c:v ffv1 -o "$TMP/dry.mkv" "$TMP/src.mkv" >"$TMP/dry-gpu$tpg.jsonl" 2>"$TMP/dry.log" ||
        { fail "--dry-run --backend cuda ${tpg:+--tasks-per-gpu $tpg}: exit $?"; cat "$TMP/dry.log" >&2; }
    shares="$shares $(python3 -c 'import json, sys
ls = [json.loads(l) for l in open(sys.argv[1]) if "task_gpus" in l]
print(",".join(sorted({"%.4f" % l["task_gpus"] for l in ls})) if ls else "none")' "$TMP/dry-gpu$tpg.jsonl")"
done
# (the plans without the share)
unshared() { sed 's/"task_gpus": [0-9.]*, //' "$1"; }
if [ "$shares" = " 0.5000 1.0000 0.3333" ] && [ "$(unshared "$TMP/dry-gpu1.jsonl")" = "$(unshared "$TMP/dry-gpu3.jsonl")" ]; then
    pass "--tasks-per-gpu: a task's GPU share 0.5 by default, 1 and 1/3 with 1 and 3; the same commands"
else
    fail "--tasks-per-gpu: the GPU shares (default, 1, 3):$shares"
fi
no_ray "checks and --dry-run" "$TMP/ray-none"

# 2. a worker killed mid-segment
work2=$TMP/out2.mkv.denoise-batch
"$BATCH" $BOPTS -o "$TMP/out2.mkv" "$TMP/src.mkv" >"$TMP/b2.log" 2>&1 &
bpid=$!
seg_ffmpeg() { pgrep -f -- "$work2/seg-.*attempt" | head -n 1; }
seg_running() { [ -n "$(seg_ffmpeg)" ]; }
if wait_for 120 seg_running; then
    fpid=$(seg_ffmpeg)
    wpid=$(ps -o ppid= -p "$fpid" | tr -d ' ')
    wcmd=$(ps -o args= -p "$wpid")
    log "$TEST_NAME: SIGKILL to Ray worker $wpid ($wcmd), running ffmpeg $fpid"
    kill -9 "$wpid"
    wait $bpid
    rc=$?
    sleep 1
    if [ $rc = 0 ] && grep -q 'worker running it died' "$TMP/b2.log"; then
        pass "killed worker: the segment was retried and the job completed"
        same_as_single "killed worker" "$TMP/out2.mkv"
    else
        fail "killed worker: exit $rc"; tail -n 20 "$TMP/b2.log" >&2
    fi
    # (a zombie is dead: where nothing reaps orphans, it stays in the table)
    case $(ps -o stat= -p "$fpid" 2>/dev/null) in
        ''|Z*) pass "killed worker: its ffmpeg ended with it" ;;
        *) fail "killed worker: its ffmpeg $fpid still runs"; kill -9 "$fpid" ;;
    esac
else
    wait $bpid
    fail "killed worker: no segment ffmpeg seen running"; tail -n 20 "$TMP/b2.log" >&2
fi

# 3. the driver killed (SIGKILL) mid-job, the resumed run stopped (SIGTERM), then resumed again
work3=$TMP/out3.mkv.denoise-batch
ndone() { _c=$(grep -c '"done": true' "$work3/manifest.json" 2>/dev/null); echo "${_c:-0}"; }
more_done() { [ "$(ndone)" -gt "$1" ]; }
attempts() { ls "$work3" | grep -c '\.attempt-'; }
"$BATCH" $BOPTS -o "$TMP/out3.mkv" "$TMP/src.mkv" >"$TMP/b3.log" 2>&1 &
bpid=$!
if wait_for 120 more_done 0; then
    kill -9 $bpid
    wait $bpid 2>/dev/null
    cleanup_ray
    # and the file of an attempt whose node was lost while it wrote (a killed worker removes its
    # own; a lost node cannot)
    : >"$work3/seg-00004.attempt-lost-node.mkv"
    n1=$(ndone) left=$(attempts)
    [ ! -e "$TMP/out3.mkv" ] || fail "resume: an output exists after the killed run"
    "$BATCH" $BOPTS -o "$TMP/out3.mkv" "$TMP/src.mkv" >"$TMP/b3b.log" 2>&1 &
    bpid=$!
    if wait_for 120 more_done "$n1"; then
        kill -TERM $bpid
        wait $bpid
        rc=$?
        n2=$(ndone)
        # (Ray's own processes end with the driver's ray.shutdown(): none is left to clean up)
        if [ $rc = 143 ] && [ "$(grep -c 'interrupted (SIGTERM)' "$TMP/b3b.log")" = 1 ] &&
            ! grep -q -i 'traceback\|error' "$TMP/b3b.log" && [ "$(attempts)" = 0 ]; then
            pass "SIGTERM: exit 143, $(grep 'interrupted' "$TMP/b3b.log" | cut -c1-160), no attempt file left"
        else
            fail "SIGTERM: exit $rc, $(attempts) attempt files left"; cat "$TMP/b3b.log" >&2
        fi
        if grep -q "resuming, $n1 of [0-9]* segments done ($left unfinished attempt file(s) removed)" "$TMP/b3b.log"; then
            pass "resume: the run after the SIGKILL kept its $n1 segment(s) and removed the $left attempt file(s) left"
        else
            fail "resume: $n1 segment(s) done and $left attempt file(s) after the SIGKILL, not reported so"
            cat "$TMP/b3b.log" >&2
        fi
    else
        wait $bpid
        n2=$(ndone)
        fail "resume: the second run did no segment before it ended"; tail -n 20 "$TMP/b3b.log" >&2
    fi
    if batch -o "$TMP/out3.mkv" "$TMP/src.mkv" >"$TMP/b3c.log" 2>&1 &&
        grep -q "resuming, $n2 of" "$TMP/b3c.log"; then
        pass "resume: the third run kept the $n2 segment(s) done before"
        same_as_single resume "$TMP/out3.mkv"
    else
        fail "resume: third run failed or did not resume ($n2 done)"; tail -n 20 "$TMP/b3c.log" >&2
    fi
else
    wait $bpid
    fail "resume: no segment was done before the run ended"; tail -n 20 "$TMP/b3.log" >&2
fi

# 5. the head start: the driver runs the first 2 segments itself while Ray starts; the same frames.
# Then stopped by SIGTERM while its own runs go on: exit 143, their ffmpeg and attempt files gone,
# no Ray process left
if batch --head-start 2 --timings -o "$TMP/out5.mkv" "$TMP/src.mkv" >"$TMP/b5.log" 2>&1 &&
    grep -q "timings: total .*2 of them run by the driver while Ray started" "$TMP/b5.log"; then
    pass "head start: $(grep -c 'run by the driver from' "$TMP/b5.log") segments run by the driver while Ray started"
    same_as_single "head start" "$TMP/out5.mkv"
else
    fail "head start: exit $? or no segment run by the driver"; tail -n 20 "$TMP/b5.log" >&2
fi
work5=$TMP/out5b.mkv.denoise-batch
"$BATCH" $BOPTS --head-start 2 -o "$TMP/out5b.mkv" "$TMP/src.mkv" >"$TMP/b5b.log" 2>&1 &
bpid=$!
here_running() { pgrep -f -- "$work5/seg-.*attempt" >/dev/null; }
if wait_for 60 here_running; then
    kill -TERM $bpid
    wait $bpid
    rc=$?
    left=$(ls "$work5" | grep -c '\.attempt-')
    if [ $rc = 143 ] && [ "$left" = 0 ] && ! here_running && wait_for 10 no_ray_left &&
        ! grep -q -i 'traceback\|error' "$TMP/b5b.log"; then
        pass "head start, SIGTERM: exit 143, no ffmpeg, attempt file or Ray process left"
    else
        fail "head start, SIGTERM: exit $rc, $left attempt file(s), ffmpeg: $(pgrep -f -- "$work5/seg-" | tr '\n' ' '), Ray: $(ray_procs | tr '\n' ' ')"
        cat "$TMP/b5b.log" >&2
    fi
else
    wait $bpid
    fail "head start, SIGTERM: no segment ffmpeg seen running"; tail -n 20 "$TMP/b5b.log" >&2
fi

# 4. a corrupt input and a missing one among three (the chain null, segments of one frame)
mkdir -p "$TMP/in4"
cp "$SAMPLE_8BIT" "$TMP/in4/good.mkv"
{ head -c 3000 "$SAMPLE_8BIT"; head -c 60000 /dev/urandom; } >"$TMP/in4/corrupt.mkv"
"$BATCH" --workers 2 --segment-frames 1 --vf null -c:v ffv1 --retries 0 --output-dir "$TMP/out4" \
    "$TMP/in4/good.mkv" "$TMP/in4/corrupt.mkv" "$TMP/in4/missing.mkv" >"$TMP/b4.log" 2>&1
rc=$?
ngood=$(count_frames "$TMP/out4/good.mkv" 2>/dev/null)
if [ $rc = 1 ] && [ "$ngood" = 8 ] && grep -q "FAILED: $TMP/in4/missing.mkv: no such file" "$TMP/b4.log"; then
    pass "bad inputs: the other file completed (8 segments of one frame)"
    grep -v missing.mkv "$TMP/b4.log" >"$TMP/b4c.log"
    once "corrupt input" "$TMP/b4c.log" "$TMP/in4/corrupt.mkv"
    same_rate "segments of one frame" "$TMP/out4/good.mkv" "$SAMPLE_8BIT"
else
    fail "bad inputs: exit $rc, $ngood frames"; tail -n 20 "$TMP/b4.log" >&2
fi

finish
