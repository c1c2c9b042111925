#!/bin/sh
# tests/cli/cli_denoise_batch.sh: build/bin/denoise-batch (tools/denoise_batch/, docs/scale-out.md)
# on a local Ray instance with two CPU workers, chain denoise=sigma=25:backend=cpu:threads=1.
#   - exact: a 24-frame long-GOP clip, 128x128 (H.264 with B-frames and a keyframe every 6 frames,
#     or FFV1 with a 6-frame GOP where the build has no libx264; frames alternating between two
#     samples, so that the scene-cut detector's state at each cut matters) with an audio track,
#     in >= 4 segments: the joined file's decoded frames equal a single `ffmpeg -vf denoise`
#     run's (framemd5), with the source's frame count and pts, and the audio stream kept
#   - a Ray worker killed (SIGKILL) while it runs a segment: the segment is retried, nothing is
#     lost, the result is the same; the killed worker's ffmpeg does not outlive it
#   - the driver killed (SIGKILL) mid-job: the same command again resumes from the manifest
#     (segments done are kept) and gives the same result
#   - a corrupt file among two inputs: it fails with a message naming it, the other completes
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
# Ray processes this test started and a killed driver left behind (Ray's agents outlive it):
# Ray's programs and workers with this RAY_TMPDIR in their environment, ended by id
cleanup_ray() {
    for d in /proc/[0-9]*; do
        case $( { tr '\0' ' ' <"$d/cmdline"; } 2>/dev/null) in
            ray::*|*site-packages/ray/*) ;;
            *) continue ;;
        esac
        { tr '\0' '\n' <"$d/environ"; } 2>/dev/null | grep -qx "RAY_TMPDIR=$RAY_TMPDIR" &&
            kill -9 "${d#/proc/}" 2>/dev/null
    done
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
if "$FFMPEG" -hide_banner -encoders 2>/dev/null | grep -q ' libx264 '; then
    VENC="-c:v libx264 -g 6 -keyint_min 6 -sc_threshold 0 -bf 2 -crf 18"
else
    VENC="-c:v ffv1 -level 1 -g 6"
fi
mkdir -p "$TMP/png"
run "$TMP/png.log" "$FFMPEG" -nostdin -v error -i "$SAMPLE_8BIT" "$TMP/png/a%d.png" &&
    run "$TMP/png.log" "$FFMPEG" -nostdin -v error -i "$SAMPLES/dog-tunnel_320x192_8bit.mkv" "$TMP/png/b%d.png" ||
    die "cannot decode the samples to PNG"
i=0
while [ $i -lt $FRAMES ]; do
    if [ $((i % 2)) = 0 ]; then c=a; else c=b; fi
    cp "$TMP/png/$c$((i / 2 % 8 + 1)).png" "$TMP/png/f$((100 + i)).png" || die "cp failed"
    i=$((i + 1))
done
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

batch() { "$BATCH" --workers 2 --segment-frames 5 --vf "$CHAIN" --progress-interval 2 -c:v ffv1 "$@"; }

# 1. exact
t0=$(date +%s)
if batch -o "$TMP/out1.mkv" "$TMP/src.mkv" >"$TMP/b1.log" 2>&1; then
    segs=$(sed -n 's/.*done: .*(\([0-9]*\) frames, \([0-9]*\) segments).*/\2/p' "$TMP/b1.log")
    if [ "${segs:-0}" -ge 4 ]; then
        pass "exact: $segs segments in $(($(date +%s) - t0)) s"
        same_as_single exact "$TMP/out1.mkv"
    else
        fail "exact: ${segs:-?} segments, expected >= 4"; cat "$TMP/b1.log" >&2
    fi
    [ ! -e "$TMP/out1.mkv.denoise-batch" ] || fail "exact: work folder left after success"
else
    fail "exact: denoise-batch failed"; tail -n 20 "$TMP/b1.log" >&2
fi

# wait_for SECONDS COMMAND...: poll COMMAND every 0.1 s until it succeeds
wait_for() {
    _end=$(($(date +%s) + $1)); shift
    until "$@"; do [ "$(date +%s)" -lt $_end ] || return 1; sleep 0.1; done
}

# 2. a worker killed mid-segment
work2=$TMP/out2.mkv.denoise-batch
batch -o "$TMP/out2.mkv" "$TMP/src.mkv" >"$TMP/b2.log" 2>&1 &
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

# 3. the driver killed mid-job, then resumed
work3=$TMP/out3.mkv.denoise-batch
batch -o "$TMP/out3.mkv" "$TMP/src.mkv" >"$TMP/b3.log" 2>&1 &
bpid=$!
some_done() { grep -q '"done": true' "$work3/manifest.json" 2>/dev/null; }
if wait_for 120 some_done; then
    kill -9 $bpid
    wait $bpid 2>/dev/null
    cleanup_ray
    ndone=$(grep -c '"done": true' "$work3/manifest.json")
    [ ! -e "$TMP/out3.mkv" ] || fail "resume: an output exists after the killed run"
    if batch -o "$TMP/out3.mkv" "$TMP/src.mkv" >"$TMP/b3b.log" 2>&1 &&
        grep -q "resuming, $ndone of" "$TMP/b3b.log"; then
        pass "resume: the second run kept the $ndone segment(s) the killed run had done"
        same_as_single resume "$TMP/out3.mkv"
    else
        fail "resume: second run failed or did not resume ($ndone done)"; tail -n 20 "$TMP/b3b.log" >&2
    fi
else
    wait $bpid
    fail "resume: no segment was done before the run ended"; tail -n 20 "$TMP/b3.log" >&2
fi

# 4. a corrupt input among two
mkdir -p "$TMP/in4"
cp "$SAMPLE_8BIT" "$TMP/in4/good.mkv"
{ head -c 3000 "$SAMPLE_8BIT"; head -c 60000 /dev/urandom; } >"$TMP/in4/corrupt.mkv"
batch --segment-frames 8 --retries 0 --output-dir "$TMP/out4" "$TMP/in4/good.mkv" "$TMP/in4/corrupt.mkv" \
    >"$TMP/b4.log" 2>&1
rc=$?
if [ $rc = 1 ] && grep -q "FAILED: $TMP/in4/corrupt.mkv: " "$TMP/b4.log" &&
    [ "$(count_frames "$TMP/out4/good.mkv" 2>/dev/null)" = 8 ]; then
    pass "corrupt input: the other file completed; $(grep -m1 "FAILED: " "$TMP/b4.log" | sed "s|$TMP/||g" | cut -c1-200)"
else
    fail "corrupt input: exit $rc"; tail -n 20 "$TMP/b4.log" >&2
fi

finish
