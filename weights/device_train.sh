#!/usr/bin/env bash
# Model v2 training on the lent GPU machine, in calls that each end by themselves (docs/model.md,
# "Reproduce", gives the call sequence). Everything long runs in its own session (setsid) and
# survives the end of a call while the machine is held; every call copies its results to $OUT.
#
#   pack                (here, in the checkout the calls are made from) split ../shared/data's
#                       train-photos, train-video, train-video2 and .data/resume/* into
#                       .data/pack1..N, each small enough to travel with the working tree (a
#                       checkpoint over the cap goes in as its parts, main_last.pt.part0..9, as
#                       collect returns it; main joins them)
#   unpack N            (device) move .data/packN to /root/data (resume files to /root/run) and
#                       decode its photos/videos into /root/data/cache (parallel, .npy)
#   wait-unpack N       (device) wait until packs 1..N are unpacked (unpacks started in the
#                       background by earlier calls), at most DT_UNPACK_WAIT (300) s
#   bench [ARGS]        (device, foreground, <= 3 min) weights/bench_train.py -> /root/run/bench.json
#                       (attention and batch-feed checks first; e.g. --variants
#                       v1,compile-overlap,compile: model v1's recipe, the compiled step with and
#                       without its batches built ahead on a side stream; needs no data pack)
#                       Bench and main start from the portable compile caches (weights/compile_cache.py:
#                       weights/compile-cache/*.bin.xz, and .data/resume/*-torch*.bin.xz carried in a
#                       pack, seed $RUN/compile-cache); collect returns the main run's train-*.bin.xz
#   study [ARGS]        (device) start weights/study.py in the background, return at once
#                       (candidates one after another; results.md is rewritten as they end)
#   main MINUTES [CAND] (device) start or resume the main run in the background: resume
#                       /root/run/main, else start a new run (a plan of DT_PLAN_MINUTES) from the
#                       checkpoint DT_INIT names (a branch with its own plan, e.g. a fine-tune),
#                       else continue the study's winner (or CAND) from its study checkpoint, else
#                       start CAND from scratch; adds MINUTES of training
#   poll SECONDS        (device) print progress every 15 s and copy results to $OUT; returns when
#                       nothing runs any more or SECONDS are (nearly) up
#   status              (device) processes, last log lines, GPU
#   pause | resume      (device) SIGSTOP / SIGCONT the study and main process groups (for a GPU
#                       benchmark; stopped time does not count as training time); pause waits 2 s
#                       for the queued GPU work and prints the GPU's utilisation
#   collect             (device) copy results to $OUT now
#   finish              (device) export the main run to $RUN/denoise-v2.safetensors (bf16), run the
#                       faithfulness probe on it and, when eval-davis4 was packed (DT_PACK_EVAL=1
#                       at pack time), weights/eval.py; results in the weight file and in $OUT
#
# Environment (for CPU tests here): DT_DATA (/root/data), DT_RUN (/root/run), DT_SRC
# (../shared/data), DT_DEVICE (cuda), DT_PLAN_MINUTES (100: the main run's planned total),
# DT_INIT (main: the checkpoint a new run starts from), DT_DEEPEN (main, with DT_INIT: its network
# deepened first by weights/deepen.py --depths DT_DEEPEN, e.g. mid=12),
# DT_TRAIN_ARGS / DT_STUDY_ARGS / DT_BENCH_ARGS (extra arguments), DT_PACK_MB (pack size cap),
# DT_UNPACK_WAIT (wait-unpack's limit, s).
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)
DATA=${DT_DATA:-/root/data}
RUN=${DT_RUN:-/root/run}
OUT=${OUT:-/tmp/out}
SRC=${DT_SRC:-$ROOT/../shared/data}
DEVICE=${DT_DEVICE:-cuda}
PLAN=${DT_PLAN_MINUTES:-100}
export PYTHONUNBUFFERED=1
PY=python3
VIDEOS="$DATA/videos $DATA/videos2 $DATA/videos3"

die() { echo "device_train.sh: $*" >&2; exit 1; }
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# ---- here: pack ---------------------------------------------------------------------------------
tree_bytes() {   # what travels with every call: tracked + untracked files that git does not ignore
    git ls-files -z -co --exclude-standard | xargs -0 -r stat -c %s 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'
}

cmd_pack() {
    [ -d "$SRC/train-photos" ] || die "no $SRC/train-photos (set DT_SRC)"
    gd=$(git rev-parse --git-common-dir)
    grep -qx '/.data/' "$gd/info/exclude" 2>/dev/null || { mkdir -p "$gd/info"; echo '/.data/' >>"$gd/info/exclude"; }
    tree=$(tree_bytes)
    limit=$((64 * 1024 * 1024))
    cap=${DT_PACK_MB:+$((DT_PACK_MB * 1024 * 1024))}
    cap=${cap:-$((limit - tree - 3 * 1024 * 1024))}
    [ -n "${DT_PACK_MB:-}" ] || [ "$cap" -gt $((8 * 1024 * 1024)) ] ||
        die "the working tree is $((tree / 1048576)) MiB: too little room for data packs"
    for f in .data/resume/*; do
        [ -f "$f" ] && [ "$(stat -L -c %s "$f")" -gt "$cap" ] &&
            die "$f is over the pack cap of $((cap / 1048576)) MiB: carry it in parts (split -b 15M -d -a 1 $f $f.part; rm $f)"
    done
    rm -rf .data/pack[0-9]*
    # first-fit decreasing over the files, resume files (.data/resume/*) among them
    {
        for f in .data/resume/*; do [ -f "$f" ] && echo "$(stat -L -c %s "$f") resume $f"; done
        dirs="train-photos:photos train-video:videos train-video2:videos2 train-video3:videos3"
        [ "${DT_PACK_EVAL:-0}" = 1 ] && dirs="$dirs eval-davis4:eval"
        for d in $dirs; do
            for f in "$SRC/${d%%:*}"/*; do [ -f "$f" ] && echo "$(stat -L -c %s "$f") ${d#*:} $f"; done
        done
    } | sort -k1,1nr | awk -v cap="$cap" '
        { size = $1
          placed = 0
          for (i = 1; i <= n; i++) if (used[i] + size <= cap) { used[i] += size; placed = i; break }
          if (!placed) { n++; used[n] = size; placed = n }
          print placed, $2, $3 }' | while read -r p sub f; do
        mkdir -p ".data/pack$p/$sub"
        cp "$f" ".data/pack$p/$sub/"
    done
    n=$(ls -d .data/pack[0-9]* | wc -l)
    echo "working tree $((tree / 1048576)) MiB, pack cap $((cap / 1048576)) MiB, $n packs:"
    for p in $(seq 1 "$n"); do
        echo "  .data/pack$p: $(du -sm ".data/pack$p" | cut -f1) MiB ($(find ".data/pack$p" -type f | wc -l) files)"
    done
    echo "calls: for N in 1..$n: run(carry=['.data/packN'], 'bash weights/device_train.sh unpack N')"
}

# ---- device -------------------------------------------------------------------------------------
cmd_unpack() {
    n=${1:?unpack N}
    [[ $n =~ ^[0-9]+$ ]] || die "unpack: pack number expected, got '$n'"
    p=.data/pack$n
    [ -d "$p" ] || die "$p not found (was it carried?)"
    mkdir -p "$DATA/photos" "$DATA/videos" "$DATA/videos2" "$DATA/videos3" "$RUN/resume"
    rm -f "$DATA/.unpacked-$n" "$DATA/.unpack-failed-$n"
    # one unpack at a time (calls start them in the background): data.py scans the folders
    # that another unpack would still be copying into
    exec 9>"$DATA/.unpack.lock"
    flock 9
    trap 'touch "$DATA/.unpack-failed-$n"' EXIT
    for sub in photos videos videos2 videos3 eval; do
        [ -d "$p/$sub" ] && cp -r "$p/$sub/." "$DATA/$sub/"
    done
    [ -d "$p/resume" ] && cp -r "$p/resume/." "$RUN/resume/"
    rm -rf "$p"
    $PY weights/data.py --cache "$DATA/cache" --photos "$DATA/photos" --videos $VIDEOS || die "decoding failed"
    echo "data: $(ls "$DATA/photos" | wc -l) photos, $(ls "$DATA/videos" | wc -l) + $(ls "$DATA/videos2" | wc -l) + $(ls "$DATA/videos3" | wc -l) videos; resume: $(ls "$RUN/resume" | tr '\n' ' ')"
    [ -f "$RUN/resume/bench.json" ] && [ ! -f "$RUN/bench.json" ] && cp "$RUN/resume/bench.json" "$RUN/bench.json"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
    trap - EXIT
    touch "$DATA/.unpacked-$n"
    return 0
}

# Wait until packs 1..N are unpacked (unpack N leaves $DATA/.unpacked-N, or .unpack-failed-N when
# it fails; the unpacks of earlier calls may still run in the background), at most
# DT_UNPACK_WAIT (300) seconds.
cmd_wait_unpack() {
    n=${1:?wait-unpack N}
    [[ $n =~ ^[0-9]+$ ]] || die "wait-unpack: number of packs expected, got '$n'"
    end=$(( $(date +%s) + ${DT_UNPACK_WAIT:-300} ))
    for k in $(seq 1 "$n"); do
        while [ ! -f "$DATA/.unpacked-$k" ]; do
            [ -f "$DATA/.unpack-failed-$k" ] && die "the unpack of pack $k failed (see its log)"
            [ "$(date +%s)" -lt "$end" ] || die "pack $k is not unpacked after ${DT_UNPACK_WAIT:-300} s (still running, or never started)"
            sleep 1
        done
    done
    echo "packs 1..$n unpacked"
}

# the portable compile caches (weights/compile_cache.py) a run starts from, unless this machine
# already has one of that name: those carried in a pack (.data/resume/*-torch*.bin.xz, as collect
# returned them: newer), else the committed ones (weights/compile-cache/)
seed_compile_cache() {
    mkdir -p "$RUN/compile-cache"
    for f in "$RUN"/resume/*-torch*.bin.xz weights/compile-cache/*-torch*.bin.xz; do
        [ -f "$f" ] && [ ! -f "$RUN/compile-cache/$(basename "$f")" ] && cp "$f" "$RUN/compile-cache/"
    done
    return 0
}

cmd_bench() {
    mkdir -p "$RUN" "$OUT"
    seed_compile_cache
    set -o pipefail
    $PY weights/bench_train.py --json "$RUN/bench.json" --compile-cache "$RUN/compile-cache" ${DT_BENCH_ARGS:-} "$@" 2>&1 |
        tee "$RUN/bench.txt"
    rc=$?
    cp "$RUN/bench.json" "$RUN/bench.txt" "$OUT/" 2>/dev/null
    cp "$RUN"/compile-cache/bench-*.bin.xz "$OUT/" 2>/dev/null
    return $rc
}

cmd_study() {
    alive "$RUN/study.pid" && { echo "study already running (pid $(cat "$RUN/study.pid"))"; return 0; }
    [ -f "$RUN/study/winner" ] && { echo "study already done: $(cat "$RUN/study/winner")"; return 0; }
    ls "$DATA/videos2"/*.mp4 >/dev/null 2>&1 || die "no videos in $DATA/videos2: unpack every pack first"
    mkdir -p "$RUN/study"
    setsid nohup $PY weights/study.py --photos "$DATA/photos" --videos $VIDEOS --cache "$DATA/cache" \
        --out "$RUN/study" --bench-json "$RUN/bench.json" --device "$DEVICE" ${DT_STUDY_ARGS:-} "$@" \
        >"$RUN/study/stdout" 2>&1 </dev/null &
    echo $! >"$RUN/study.pid"
    echo "study started (pid $!), log $RUN/study/study.log"
}

cmd_main() {
    minutes=${1:?main MINUTES [CANDIDATE]}
    cand=${2:-}
    alive "$RUN/main.pid" && { echo "main run already running (pid $(cat "$RUN/main.pid"))"; return 0; }
    alive "$RUN/study.pid" && die "the study is still running: poll until it ends first"
    mkdir -p "$RUN/main"
    # a checkpoint carried in parts (as collect returns one over 15 MiB; each part in its own pack)
    if [ ! -f "$RUN/main/last.pt" ] && [ ! -f "$RUN/resume/main_last.pt" ] && [ -f "$RUN/resume/main_last.pt.part0" ]; then
        cat "$RUN/resume"/main_last.pt.part[0-9] >"$RUN/resume/main_last.pt" || die "joining $RUN/resume/main_last.pt.part* failed"
    fi
    # a resumed main run: from this machine, else from a checkpoint carried in a pack
    if [ ! -f "$RUN/main/last.pt" ] && [ -f "$RUN/resume/main_last.pt" ]; then
        cp "$RUN/resume/main_last.pt" "$RUN/main/last.pt"
        [ -f "$RUN/resume/main_train.log" ] && [ ! -f "$RUN/main/train.log" ] && cp "$RUN/resume/main_train.log" "$RUN/main/train.log"
    fi
    seed_compile_cache
    args=(--photos "$DATA/photos" --videos $VIDEOS --cache "$DATA/cache" --out "$RUN/main" --minutes "$minutes"
          --device "$DEVICE" --bench-json "$RUN/bench.json" --compile-cache "$RUN/compile-cache")
    if [ -f "$RUN/main/last.pt" ]; then
        how="resume $RUN/main/last.pt"
    else
        args+=(--plan-minutes "$PLAN")
        [ -z "$cand" ] && [ -f "$RUN/study/winner" ] && cand=$(cat "$RUN/study/winner")
        init=${DT_INIT:-}
        [ -n "$init" ] && { [ -f "$init" ] || die "DT_INIT: no $init"; }
        [ -z "$init" ] && [ -n "$cand" ] && [ -f "$RUN/study/$cand/last.pt" ] && init=$RUN/study/$cand/last.pt
        [ -z "$init" ] && [ -f "$RUN/resume/study_winner.pt" ] && init=$RUN/resume/study_winner.pt
        [ -n "${DT_DEEPEN:-}" ] && [ -z "$init" ] && die "DT_DEEPEN=$DT_DEEPEN: no checkpoint to deepen (DT_INIT)"
        if [ -n "$init" ] && [ -n "${DT_DEEPEN:-}" ]; then
            mkdir -p "$RUN/main"
            $PY weights/deepen.py "$init" "$RUN/main/deepened.pt" --depths "$DT_DEEPEN" >>"$RUN/main/stdout" 2>&1 ||
                die "weights/deepen.py $init --depths $DT_DEEPEN failed: $(tail -n 1 "$RUN/main/stdout")"
            init=$RUN/main/deepened.pt
        fi
        if [ -n "$init" ]; then how="init from $init${DT_DEEPEN:+ (deepened: $DT_DEEPEN)}"; args+=(--init "$init")
        else how="from scratch"; fi
        [ -n "$cand" ] && args+=(--candidate "$cand")
    fi
    setsid nohup $PY weights/train.py "${args[@]}" ${DT_TRAIN_ARGS:-} >>"$RUN/main/stdout" 2>&1 </dev/null &
    echo $! >"$RUN/main.pid"
    echo "main run started (pid $!, $how, +$minutes min, plan $PLAN min at first start)"
}

collect() {
    mkdir -p "$OUT"
    {
        date -u +"%F %T UTC"
        for j in study main; do
            if alive "$RUN/$j.pid"; then echo "$j: running (pid $(cat "$RUN/$j.pid"))"
            elif [ -f "$RUN/$j.pid" ]; then echo "$j: ended"; fi
        done
        [ -f "$RUN/study/winner" ] && echo "study winner: $(cat "$RUN/study/winner")"
        [ -f "$RUN/main/train.log" ] && { echo "main, last events:"; grep -E '"event": "(val|train|done|error|stopped|diverged)"' "$RUN/main/train.log" | tail -n 3 | cut -c1-400; }
        command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
    } >"$OUT/status.txt" 2>&1
    # at most 9 files come back: status.txt, logs.tgz (bench, study without checkpoints, main
    # logs), study_winner.pt, main_last.pt (or its 2 parts), main_train.log, the main run's
    # compile cache (+ finish: the weight file, finish.tgz)
    logs=$(cd "$RUN" && ls -d bench.json bench.txt study main 2>/dev/null)
    [ -n "$logs" ] && (cd "$RUN" && tar -czf "$OUT/logs.tgz.tmp" --exclude='*.pt' --exclude='*.tmp' \
        --exclude='*.safetensors' $logs) && mv "$OUT/logs.tgz.tmp" "$OUT/logs.tgz"
    # a file over 16 MiB does not come back: the main run's checkpoint (8 bytes per parameter, 10
    # with train.py --ema: 17.7 MB for 1.77 M parameters) then comes in parts of 15 MiB (join:
    # cat main_last.pt.part* > main_last.pt); the study winner's copy is only a record and is
    # left out when too big
    w=$(cat "$RUN/study/winner" 2>/dev/null)
    if [ -n "$w" ] && [ -f "$RUN/study/$w/last.pt" ]; then
        if [ "$(stat -c %s "$RUN/study/$w/last.pt")" -le $((16 * 1048576)) ]; then cp "$RUN/study/$w/last.pt" "$OUT/study_winner.pt"
        else echo "study winner's checkpoint over 16 MiB: not copied to \$OUT" >>"$OUT/status.txt"; fi
    fi
    if [ -f "$RUN/main/last.pt" ]; then
        rm -f "$OUT/main_last.pt" "$OUT"/main_last.pt.part*
        if [ "$(stat -c %s "$RUN/main/last.pt")" -le $((16 * 1048576)) ]; then cp "$RUN/main/last.pt" "$OUT/main_last.pt"
        else split -b 15M -d -a 1 "$RUN/main/last.pt" "$OUT/main_last.pt.part"; fi
    fi
    [ -f "$RUN/main/train.log" ] && cp "$RUN/main/train.log" "$OUT/main_train.log"
    # the main run's compile cache, for weights/compile-cache/ (or .data/resume/) here, when the run
    # saved one (not the seed it started from)
    for f in "$RUN"/compile-cache/train-*.bin.xz; do
        [ -f "$f" ] || continue
        b=$(basename "$f")
        cmp -s "$f" "weights/compile-cache/$b" || cmp -s "$f" "$RUN/resume/$b" && continue
        [ "$(stat -c %s "$f")" -le $((16 * 1048576)) ] && cp "$f" "$OUT/"
    done
    return 0
}

cmd_poll() {
    secs=${1:?poll SECONDS}
    end=$(( $(date +%s) + secs - 15 ))
    declare -A seen
    while :; do
        for f in "$RUN/study/study.log" "$RUN/main/train.log" "$RUN"/study/*/train.log; do
            [ -f "$f" ] || continue
            n=$(wc -l <"$f")
            s=${seen[$f]:-$((n > 3 ? n - 3 : 0))}   # first look: the last 3 events only
            if [ "$n" -gt "$s" ]; then   # new events; of the train events only the last
                sed -n "$((s + 1)),${n}p" "$f" | awk '/"event": "train"/ { t = $0; next } { print } END { if (t != "") print t }' |
                    cut -c1-300 | sed "s|^|${f#"$RUN"/}: |"
                seen[$f]=$n
            fi
        done
        collect
        running=0
        alive "$RUN/study.pid" && running=1
        alive "$RUN/main.pid" && running=1
        [ $running = 0 ] && { echo "== nothing running"; break; }
        [ "$(date +%s)" -ge "$end" ] && { echo "== poll time up, still running"; break; }
        sleep 15
    done
    cat "$OUT/status.txt"
}

cmd_status() {
    collect
    cat "$OUT/status.txt"
    for f in "$RUN/study/study.log" "$RUN/main/train.log"; do
        [ -f "$f" ] && { echo "== $f"; tail -n 5 "$f" | cut -c1-300; }
    done
    return 0
}

cmd_finish() {
    ck=$RUN/main/last.pt
    [ -f "$ck" ] || die "no $ck"
    alive "$RUN/main.pid" && die "the main run is still running"
    w=$RUN/denoise-v2.safetensors
    $PY weights/export.py "$ck" "$w" || die "export failed"
    $PY weights/faithful.py "$w" --device "$DEVICE" --json "$RUN/faithful.json" | tee "$RUN/faithful.txt"
    ev=()
    if ls "$DATA/eval"/*.mkv >/dev/null 2>&1; then
        $PY weights/eval.py "$w" --data "$DATA/eval" --json "$RUN/eval.json" 2>&1 | tee "$RUN/eval.txt"
        ev=(--eval "$RUN/eval.json")
    fi
    $PY weights/export.py "$ck" "$w" --faithful "$RUN/faithful.json" "${ev[@]}" || die "export failed"
    mkdir -p "$OUT"
    cp "$w" "$OUT/"
    (cd "$RUN" && tar -czf "$OUT/finish.tgz" $(ls faithful.json faithful.txt eval.json eval.txt 2>/dev/null))
    return 0
}

signal_all() {
    for j in study main; do
        alive "$RUN/$j.pid" && kill "-$1" -- "-$(cat "$RUN/$j.pid")" && echo "$j: SIG$1 to process group $(cat "$RUN/$j.pid")"
    done
    return 0
}

case "${1:-}" in
pack) shift; cmd_pack "$@" ;;
unpack) shift; cmd_unpack "$@" ;;
wait-unpack) shift; cmd_wait_unpack "$@" ;;
bench) shift; cmd_bench "$@" ;;
study) shift; cmd_study "$@" ;;
main) shift; cmd_main "$@" ;;
poll) shift; cmd_poll "$@" ;;
status) cmd_status ;;
pause)   # the GPU finishes what was queued (well under a second), then is idle
    signal_all STOP
    sleep 2
    command -v nvidia-smi >/dev/null && echo "GPU after pause: $(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader)"
    exit 0 ;;
resume) signal_all CONT ;;
collect) collect ;;
finish) cmd_finish ;;
*)
    sed -n '2,36p' "$0" >&2
    exit 2
    ;;
esac
