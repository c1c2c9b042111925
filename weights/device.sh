#!/usr/bin/env bash
# Training on the lent GPU machine, in steps that fit its calls (see docs/model.md, "Reproduce").
#   weights/device.sh smoke   copy .data/packA (photos + 2 videos) to /root/data, make goldens,
#                             run 60 compiled training steps as a smoke test
#   weights/device.sh start M copy .data/packB (the other videos), start training for M minutes in
#                             its own session (setsid), resuming from weights/ckpt/last.pt if
#                             present, then poll
#   weights/device.sh poll S  follow the log for S seconds, copy checkpoint + log to $OUT; when
#                             training has ended, export, evaluate and copy the results
set -u
cd "$(dirname "$0")/.."
RUN=/root/run
DATA=/root/data
OUT=${OUT:-/tmp/out}
mkdir -p "$RUN" "$DATA/photos" "$DATA/videos" "$OUT"
export PYTHONUNBUFFERED=1

copy_out() {
    cp "$RUN/train.log" "$OUT/" 2>/dev/null
    cp "$RUN/last.pt" "$OUT/" 2>/dev/null
    cp "$RUN/stdout" "$OUT/train.stdout" 2>/dev/null
}

finish() {
    echo "== export + eval"
    python3 weights/export.py "$RUN/last.pt" "$RUN/denoise-v1.safetensors" || return 1
    python3 weights/eval.py "$RUN/denoise-v1.safetensors" --data /root/eval --json "$RUN/eval.json" 2>&1 | tee "$RUN/eval.txt"
    python3 weights/export.py "$RUN/last.pt" "$RUN/denoise-v1.safetensors" --eval "$RUN/eval.json"
    cp "$RUN/denoise-v1.safetensors" "$RUN/eval.json" "$RUN/eval.txt" "$OUT/"
    copy_out
}

case "${1:-}" in
smoke)
    cp -r .data/packA/photos/. "$DATA/photos/" && cp -r .data/packA/videos/. "$DATA/videos/"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python3 -c 'import torch, cv2, safetensors; print("torch", torch.__version__, "cv2", cv2.__version__)'
    if [ -f weights/make_goldens.py ]; then
        python3 weights/make_goldens.py && mkdir -p "$OUT/goldens" && cp tests/data/golden_*.safetensors "$OUT/goldens/"
    fi
    python3 weights/train.py --photos "$DATA/photos" --videos "$DATA/videos" --out /root/smoke \
        --minutes 1 --max-steps 120 --val-minutes 100 2>&1 | tail -n 8
    ;;
start)
    cp -r .data/packB/videos/. "$DATA/videos/"
    ls "$DATA/videos" | wc -l
    [ -f weights/ckpt/last.pt ] && [ ! -f "$RUN/last.pt" ] && cp weights/ckpt/last.pt "$RUN/last.pt"
    setsid nohup python3 weights/train.py --photos "$DATA/photos" --videos "$DATA/videos" --out "$RUN" \
        --minutes "${2:-16}" > "$RUN/stdout" 2>&1 < /dev/null &
    echo $! > "$RUN/pid"
    exec "$0" poll "${3:-540}"
    ;;
poll)
    [ -d .data/eval ] && mkdir -p /root/eval && cp .data/eval/*.mkv /root/eval/
    end=$(( $(date +%s) + ${2:-540} ))
    seen=0
    while [ "$(date +%s)" -lt "$end" ]; do
        sleep 15
        n=$(wc -l < "$RUN/train.log" 2>/dev/null || echo 0)
        [ "$n" -gt "$seen" ] && sed -n "$((seen + 1)),${n}p" "$RUN/train.log" | cut -c1-220 && seen=$n
        if ! kill -0 "$(cat "$RUN/pid")" 2>/dev/null; then
            echo "== training process ended"
            tail -n 5 "$RUN/stdout"
            copy_out
            grep -q '"event": "done"' "$RUN/train.log" && finish
            exit 0
        fi
        copy_out
    done
    nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
    ;;
finish)
    finish
    ;;
*)
    echo "usage: $0 smoke|start MINUTES [POLL_SECONDS]|poll SECONDS|finish" >&2
    exit 2
    ;;
esac
