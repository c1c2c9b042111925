#!/usr/bin/env bash
# CPU smoke test of tools/device_train.py: every subcommand, two sessions on fresh folders, tiny
# settings.
#
#   bash tests/weights/smoke_device_train.sh [SRC]     SRC: the data folder (default: $DT_SRC, else
#                                                      $DENOISE_DATA)
#
# Builds a tiny extract of SRC (22 photos; 14 frames of bmx-trees, cows, sam2-cups, sam2-coffee,
# so both splits have videos), then runs, with DT_DEVICE=cpu and folders under a temporary
# directory: pack (small packs) -> unpack 1..N -> bench -> study + poll -> main + pause/resume +
# poll -> finish; then a second session on fresh folders: the returned main_last.pt,
# main_train.log, study_winner.pt and bench.json packed from .data/resume -> unpack -> main
# (resumes) -> poll -> status. Fails (exit 1, naming the step) when a step exits non-zero or an
# expected result is missing. About 20 minutes on 2 busy cores. Leaves .data/ as it found it
# (moved aside and restored).
set -u
cd "$(dirname "$0")/../.."
SRC=${1:-${DT_SRC:-${DENOISE_DATA:-}}}
[ -n "$SRC" ] || { echo "usage: $0 SRC (the data folder; or set DT_SRC or DENOISE_DATA)" >&2; exit 2; }
SRC=$(cd "$SRC" && pwd) || exit 2
W=$(mktemp -d "${TMPDIR:-/tmp}/smoke-device-train.XXXXXX")
[ -d .data ] && mv .data "$W/data-aside"
restore() { rm -rf .data; [ -d "$W/data-aside" ] && mv "$W/data-aside" .data; }
trap restore EXIT
fail() { echo "SMOKE FAIL: $*" >&2; exit 1; }
step() { echo "=== $*"; "$@" || fail "$* (exit $?)"; }
want() { [ -s "$1" ] || fail "missing $1"; }

python3 - "$SRC" "$W/src" <<'EOF' || fail "tiny extract"
import glob, os, shutil, sys
import cv2
src, dst = sys.argv[1], sys.argv[2]
for d in ("train-photos", "train-video", "train-video2"):
    os.makedirs(os.path.join(dst, d))
for p in sorted(glob.glob(os.path.join(src, "train-photos", "*.jpg")))[:22]:
    shutil.copy(p, os.path.join(dst, "train-photos"))
for name, d in (("bmx-trees", "train-video"), ("cows", "train-video"), ("sam2-cups", "train-video2"),
                ("sam2-coffee", "train-video2")):
    c = cv2.VideoCapture(os.path.join(src, d, name + ".mp4"))
    w = None
    for _ in range(14):
        ok, f = c.read()
        if not ok:
            sys.exit(f"{name}: too few frames")
        if w is None:
            w = cv2.VideoWriter(os.path.join(dst, d, name + ".mp4"), cv2.VideoWriter_fourcc(*"mp4v"), 25,
                                (f.shape[1], f.shape[0]))
        w.write(f)
    w.release()
EOF

export DT_SRC=$W/src DT_DEVICE=cpu DT_PLAN_MINUTES=2
export DT_BENCH_ARGS="--device cpu --patch 32 --batch-div 32 --seconds 1 --skip-check --variants v1,graph-math,graph,compile,compile-overlap --compile-backend aot_eager --budget 900"
export DT_STUDY_ARGS="--candidates v1,wide64 --clips 8 --batch 4 --seconds 1500 --deadline 1800 -- --patch 64 --val-clips 8 --val-patch 64 --data-limit 12 --log-steps 1"
export DT_TRAIN_ARGS="--batch 4 --patch 64 --val-clips 8 --val-patch 64 --data-limit 12 --log-steps 2 --engine sdpa --val-minutes 0.3"
D="python3 tools/device_train.py"

packs() { ls -d .data/pack* | sed 's/.*pack//' | sort -n; }
DT_PACK_MB=2 step $D pack
[ "$(packs | wc -l)" -ge 2 ] || fail "expected several packs"
export DT_DATA=$W/A/data DT_RUN=$W/A/run
for n in $(packs); do OUT=$W/A/out_unpack$n step $D unpack "$n"; done
[ -z "$(ls -d .data/pack* 2>/dev/null)" ] || fail "unpack left packs in the checkout"
export OUT=$W/A/out_bench
step $D bench
want "$OUT/bench.json"
export OUT=$W/A/out_study
step $D study
step $D poll 1500
want "$OUT/study_winner.pt"; want "$OUT/logs.tgz"; want "$DT_RUN/study/results.md"
grep -q '"final": true' "$DT_RUN/study/results.json" || fail "study results not final"
[ "$(grep -c '"event": "candidate_start"' "$DT_RUN/study/study.log")" = 2 ] || fail "the study did not run both candidates"
export OUT=$W/A/out_main
step $D main 0.4
sleep 20; step $D pause; sleep 20; step $D resume
step $D poll 1500
want "$OUT/main_last.pt"; want "$OUT/main_train.log"
grep -q '"event": "done"' "$DT_RUN/main/train.log" || fail "main run did not finish"
export OUT=$W/A/out_finish
step $D finish
want "$OUT/denoise-v2.safetensors"; want "$OUT/finish.tgz"
for d in "$W"/A/out_*; do [ "$(ls "$d" | wc -l)" -le 8 ] || fail "$d: more than 8 files would come back"; done

mkdir -p .data/resume
cp "$W/A/out_main/main_last.pt" "$W/A/out_main/main_train.log" "$W/A/out_study/study_winner.pt" .data/resume/
tar -xzf "$W/A/out_main/logs.tgz" -C .data/resume bench.json || fail "bench.json not in logs.tgz"
DT_PACK_MB=10 step $D pack
export DT_DATA=$W/B/data DT_RUN=$W/B/run
for n in $(packs); do OUT=$W/B/out_unpack$n step $D unpack "$n"; done
export OUT=$W/B/out_main
step $D main 0.3
step $D poll 1500
step $D status
[ "$(grep -c '"event": "start"' "$DT_RUN/main/train.log")" = 2 ] || fail "session B did not resume the carried run"
grep -q '"resumed": true' "$DT_RUN/main/train.log" || fail "no resumed start"
echo "SMOKE PASS (work folder $W)"
