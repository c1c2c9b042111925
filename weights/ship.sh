#!/bin/sh
# weights/ship.sh: make a model v2 training checkpoint the shipped weights, and remake what is
# generated from the shipped weights (docs/model.md "Reproduce (v2): ship").
#
#   sh weights/ship.sh CKPT.pt EVAL.json
#
#   CKPT.pt    a checkpoint of weights/train.py (model v2's architecture: the engines' goldens and
#              tests do not change with it)
#   EVAL.json  its eval-davis4 table (python3 weights/eval.py CKPT.pt --data <eval-davis4> --json ...)
#
# Steps (each one stops the script when it fails):
#   1. python3 -m denoise_train.faithful CKPT --device cpu --json FAITHFUL (from weights/), FAITHFUL being
#      faithful_<training minutes>min.json beside CKPT (the probe, fp32, on the CPU)
#   2. python3 weights/export.py CKPT weights/denoise-v2.safetensors --dtype bf16 --eval EVAL.json
#      --faithful FAITHFUL
#   3. make all (the build tree's link to the weights; the build must exist: ./configure && make)
#   4. tests/cli/cli_quality.sh --regenerate: tests/data/cli_golden_*.txt. The floors
#      (tests/data/cli_quality_floors.txt) are not touched: they were fixed for the first trained
#      weights and new weights must clear them; tests/cli/cli_quality.sh checks that
#   5. tools/demo.sh, its compare.png copied to docs/demo/compare.png (README shows it; the
#      script prints the PSNR line README quotes)
# What is left to do by hand is listed at the end: the figures in the docs, and make check.
# Environment: PYTHON (default python3), MAKE (default make).
set -eu
[ $# -eq 2 ] || { sed -n '2,/^set -eu/p' "$0" | sed 's/^# \{0,1\}//;$d'; exit 2; }
ckpt=$1 eval_json=$2
root=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
MAKE=${MAKE:-make}
[ -f "$ckpt" ] || { echo "ship.sh: $ckpt not found" >&2; exit 1; }
[ -f "$eval_json" ] || { echo "ship.sh: $eval_json not found" >&2; exit 1; }
[ -x "$root/build/bin/ffmpeg" ] || { echo "ship.sh: no build (run ./configure && make first)" >&2; exit 1; }

minutes=$("$PYTHON" -c 'import sys, torch
d = torch.load(sys.argv[1], map_location="cpu")
print("%.2f" % (d.get("state", {}).get("train_seconds", 0) / 60))' "$ckpt")
faithful=$(dirname "$ckpt")/faithful_${minutes}min.json
weights=$root/weights/denoise-v2.safetensors

echo "ship.sh: 1. faithfulness probe of $ckpt ($minutes training minutes) -> $faithful"
PYTHONPATH="$root/weights${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m denoise_train.faithful "$ckpt" --device cpu --json "$faithful"
echo "ship.sh: 2. export -> $weights"
"$PYTHON" "$root/weights/export.py" "$ckpt" "$weights" --dtype bf16 --eval "$eval_json" --faithful "$faithful"
chmod 644 "$weights"
echo "ship.sh: 3. make all"
"$MAKE" -C "$root" --no-print-directory all >/dev/null
echo "ship.sh: 4. tests/cli/cli_quality.sh --regenerate"
sh "$root/tests/cli/cli_quality.sh" --regenerate
echo "ship.sh: 5. tools/demo.sh -> docs/demo/compare.png"
sh "$root/tools/demo.sh"
cp "$root/build/demo/compare.png" "$root/docs/demo/compare.png"
cat <<EOF
ship.sh: done. By hand:
  - make check (tests/cli/cli_faithful.sh reports the probe's targets through the filter; the
    floors of tests/cli/cli_quality.sh must still hold)
  - docs/model.md: the shipped model's header figures (faithfulness from $faithful, eval from
    $eval_json); README.md: the demo's PSNR line above
  - docs/quality.md "Model v2 (shipped) against v1": the tables (the eval JSON and the new
    goldens' headers), the parkour check and its crops by the commands it names; or a full
    make eval, which rewrites the whole page for the new weights
EOF
