#!/bin/sh
# tools/check_batch_exact.sh: denoise-batch's segments, joined, equal one `ffmpeg -vf denoise` run
# on the CUDA engine (tools/check_gpu.sh runs it; docs/scale-out.md), without Ray.
#
#   tools/check_batch_exact.sh [--backend cuda|cpu]     (default cuda; cpu: the same logic on the
#                                                        CPU engine, for a machine with no GPU)
#
# Source: 24 frames alternating between two samples' frames (as tests/cli/cli_denoise_batch.sh
# makes it: a steady large frame difference, so that the scene-cut detector's history at each
# cut matters), with noise of sigma 20 from build/bin/denoise-noise, encoded long-GOP (H.264 with
# B-frames and a keyframe every 6 frames where the build has libx264, else FFV1 with 6-frame
# GOPs); 320x192 on CUDA, cropped to 128x128 on the CPU (its run time). The chain:
# denoise=sigma=25 with the trained weights (else the random test weights).
# Steps: `denoise-batch --dry-run --backend B --segment-frames 5 -c:v ffv1` prints the plan (5
# segments) and per segment the ffmpeg argv a Ray task would run, and the join's argv; each
# segment's argv is run here in turn (its frame count read from its -progress file, as a task
# does), then the join (the concat demuxer, stream copy) exactly as printed; the joined file's
# decoded frames (framemd5) and pts are compared with a single ffmpeg run of the same chain
# (the plan's, with backend=, device= or cpu_threads= as the tasks get them).
# Prints a PASS/FAIL line per check; SKIP and exit 77 with --backend cuda where the CUDA engine
# cannot start and nvidia-smi lists no GPU. Each ffmpeg run is limited to BE_RUN_TIMEOUT seconds
# (default 60). Logs go to $OUT/batch_exact/ when OUT is set (else a temporary folder).
set -u
TEST_NAME=check_batch_exact
. "$(dirname "$0")/../tests/common/lib.sh"

BACKEND=cuda
while [ $# -gt 0 ]; do
    case $1 in
        --backend) BACKEND=${2:-}; shift 2 ;;
        --backend=*) BACKEND=${1#--backend=}; shift ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown argument $1 (--backend cuda|cpu)" ;;
    esac
done
case $BACKEND in cuda|cpu) ;; *) die "--backend cuda or cpu, not '$BACKEND'" ;; esac
need_build
need_noise
pick_model
make_tmp
L=${OUT:+$OUT/batch_exact}
L=${L:-$TMP}
mkdir -p "$L" || die "cannot create $L"
RUN_TIMEOUT=${BE_RUN_TIMEOUT:-60}
FRAMES=24
DN="$(filter_model "$model")"
CHAIN="denoise=sigma=25:$DN"
BATCH=$ROOT/tools/denoise-batch

if [ $BACKEND = cuda ]; then
    CROP=null
    if ! timeout -k 5 "$RUN_TIMEOUT" "$FFMPEG" -nostdin -hide_banner -v error -f lavfi -i testsrc2=s=64x64:d=0.04 \
            -vf "denoise=backend=cuda:$DN" -f null - >"$L/probe.log" 2>&1; then
        if nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
            fail "cuda: the CUDA engine does not start though nvidia-smi lists a GPU: $(grep -m1 'backend cuda' "$L/probe.log")"
            finish
        fi
        skip "cuda: no usable GPU here ($(grep -m1 -o 'backend cuda: [^(]*' "$L/probe.log" || echo 'the CUDA engine did not start'))"
        finish
    fi
else
    CROP=crop=128:128
fi

# the source
VENC=$(long_gop_encoder)
alternating_frames "$TMP/png" "$L/png.log" $FRAMES || die "cannot decode the samples to PNG"
run "$L/clean.log" "$FFMPEG" -nostdin -y -framerate 25 -start_number 100 -i "$TMP/png/f%d.png" \
    -vf "$CROP" $FFV1 "$TMP/clean.mkv" || die "cannot make the clean clip"
add_noise "$TMP/clean.mkv" "$TMP/noisy.mkv" 20 1 || die "cannot add noise"
run "$L/src.log" "$FFMPEG" -nostdin -y -i "$TMP/noisy.mkv" -vf format=yuv420p $VENC "$TMP/src.mkv" ||
    die "cannot encode the source clip"
n=$(count_frames "$TMP/src.mkv")
[ "$n" = $FRAMES ] || die "source clip has $n frames, expected $FRAMES"
echo "$TEST_NAME: $BACKEND, source $FRAMES frames of $(frame_size "$TMP/src.mkv") ($VENC), weights $model"

# the plan, without Ray
if ! python3 "$BATCH" --dry-run --backend $BACKEND --segment-frames 5 --vf "$CHAIN" -c:v ffv1 \
        --ffmpeg "$FFMPEG" --ffprobe "$FFPROBE" -o "$TMP/joined.mkv" "$TMP/src.mkv" >"$TMP/plan.jsonl" 2>"$L/plan.log"; then
    fail "$BACKEND: denoise-batch --dry-run failed: $(tail -n 3 "$L/plan.log" | tr '\n' ' ')"
    finish
fi

# each segment's command, then the join, as printed; prints the segments' count, the chain and
# the joined file, or the failure
python3 - "$TMP/plan.jsonl" "$L" "$RUN_TIMEOUT" >"$TMP/runs.out" 2>"$L/runs.log" <<'PY'
import json, os, subprocess, sys
plan, logs, limit = sys.argv[1], sys.argv[2], float(sys.argv[3])
lines = [json.loads(l) for l in open(plan)]
segs = [l for l in lines if not l.get("join")]
join = [l for l in lines if l.get("join")]
if len(segs) < 4 or len(join) != 1:
    sys.exit(f"the plan has {len(segs)} segments and {len(join)} joins, expected >= 4 and 1")

def run(argv, log):
    with open(log, "w") as f:
        f.write(" ".join(argv) + "\n")
        f.flush()
        try:
            return subprocess.run(argv, stdout=f, stderr=f, stdin=subprocess.DEVNULL, timeout=limit).returncode
        except subprocess.TimeoutExpired:
            return 124

for s in segs:
    os.makedirs(s["work"], exist_ok=True)
    log = os.path.join(logs, "seg-%05d.log" % s["segment"])
    rc = run(s["argv"], log)
    if rc != 0:
        sys.exit(f"segment {s['segment']}: ffmpeg exit {rc} (log {log})")
    progress = s["argv"][s["argv"].index("-progress") + 1]
    got = [l for l in open(progress).read().splitlines() if l.startswith("frame=")]
    if not got or int(got[-1][6:]) != s["frames"]:
        sys.exit(f"segment {s['segment']}: {got[-1] if got else 'no frame count'}, expected {s['frames']}")
j = join[0]
with open(j["concat_file"], "w") as f:
    f.write(j["concat"])
log = os.path.join(logs, "join.log")
rc = run(j["argv"], log)
if rc != 0:
    sys.exit(f"join: ffmpeg exit {rc} (log {log})")
print(len(segs))
print(segs[0]["chain"])
print(j["argv"][-1])
PY
if [ $? != 0 ]; then
    fail "$BACKEND: $(tail -n 1 "$L/runs.log")"
    finish
fi
nseg=$(sed -n 1p "$TMP/runs.out") chain=$(sed -n 2p "$TMP/runs.out") joined=$(sed -n 3p "$TMP/runs.out")

# the single run, with the chain the tasks ran
if ! timeout -k 5 "$RUN_TIMEOUT" "$FFMPEG" -nostdin -y -v error -i "$TMP/src.mkv" -vf "$chain" -fps_mode passthrough \
        -c:v ffv1 -an "$TMP/single.mkv" >"$L/single.log" 2>&1; then
    fail "$BACKEND: the single run failed: $(tail -n 2 "$L/single.log" | tr '\n' ' ')"
    finish
fi
# frame hashes only (the other framemd5 columns carry the container's durations)
hashes() { "$FFMPEG" -nostdin -v error -i "$1" -map 0:v:0 -f framemd5 pipe:1 | awk -F', *' '!/^#/ { print $NF }'; }
hashes "$TMP/single.mkv" >"$L/single.md5"
hashes "$joined" >"$L/joined.md5"
nf=$(wc -l <"$L/single.md5")
ndiff=$(diff "$L/joined.md5" "$L/single.md5" | grep -c '^[<>]')
frame_pts "$joined" | cut -d, -f1 >"$L/joined.pts"
frame_pts "$TMP/src.mkv" | cut -d, -f1 >"$L/src.pts"
if [ "$nf" = $FRAMES ] && [ "$ndiff" = 0 ]; then
    pass "$BACKEND: the $nseg segments joined equal the single run, $FRAMES of $FRAMES frames (framemd5; chain $(echo "$chain" | sed "s|model='[^']*'|model=...|"))"
else
    fail "$BACKEND: $ndiff differing framemd5 lines between the join and the single run ($nf frames in the single run)"
fi
if cmp -s "$L/joined.pts" "$L/src.pts"; then
    pass "$BACKEND: the join's pts are the source's"
else
    fail "$BACKEND: the join's pts differ from the source's ($L/joined.pts, $L/src.pts)"
fi
finish
