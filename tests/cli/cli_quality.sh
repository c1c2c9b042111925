#!/bin/sh
# tests/cli/cli_quality.sh: the CPU backend's denoising quality on the sample clips, through the CLI.
#
# For each sample (samples/README.md) and sigma in 10, 30:
#   clean = the sample as planar RGB (gbrp, or gbrp10le for the 10-bit clip), FFV1
#   noisy = clean + AWGN (tools/noise, seed 0, rounded and clipped to the integer format: what
#           the filter sees from a real file)
#   out   = build/bin/ffmpeg -i noisy -vf denoise=sigma=S:backend=cpu:model=weights/denoise-v2...
# two checks:
#   floor:  PSNR(out, clean) - PSNR(noisy, clean) >= the floor for the case in
#           tests/data/cli_quality_floors.txt (measured gain minus a 1 dB margin, fixed when the
#           weights were first delivered; new weights must still clear it)
#   golden: per-frame PSNR(out, clean) within 0.05 dB of tests/data/cli_golden_<sample>_s<S>.txt
#           (robust to the last-bit float differences between BLAS builds and CPUs that an md5
#           of the output would not survive; tight enough to catch any real change)
# PSNR: FFmpeg's psnr filter (per frame psnr_avg over the three planes; clip average = PSNR of
# the mean MSE).
#
# Without the trained weights (weights/denoise-v2.safetensors) every case reports SKIP with the
# reason and the script exits 77 (nothing was run; random weights say nothing about quality).
#
# Usage:
#   tests/cli/cli_quality.sh                 run the checks
#   tests/cli/cli_quality.sh --regenerate    rewrite the goldens from the current weights and CPU
#                                        engine (after a deliberate change of weights or engine;
#                                        review and commit tests/data/cli_golden_*.txt)
#   tests/cli/cli_quality.sh --set-floors    also rewrite tests/data/cli_quality_floors.txt as the
#                                        measured gains minus MARGIN_DB (default 1.0)
set -u
. "$(dirname "$0")/../common/lib.sh"

TOL_DB=0.05
MARGIN_DB=${MARGIN_DB:-1.0}
SIGMAS="10 30"
SEED=0
DATA=$ROOT/tests/data
FLOORS=$DATA/cli_quality_floors.txt
mode=check
case ${1:-} in
    "") ;;
    --regenerate) mode=regen ;;
    --set-floors) mode=floors ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (try --help)" ;;
esac

SAMPLE_LIST="$SAMPLE_8BIT $SAMPLE_10BIT $SAMPLE_ODD"

if [ ! -f "$WEIGHTS" ]; then
    [ $mode = check ] || die "cannot regenerate: $WEIGHTS does not exist"
    for s in $SAMPLE_LIST; do
        for sigma in $SIGMAS; do
            skip "$(basename "$s" .mkv) sigma $sigma: $WEIGHTS missing (trained weights not delivered yet); not run"
        done
    done
    finish
fi

need_build
need_noise
make_tmp
wsum=$(sha256sum "$WEIGHTS" | cut -c1-16)
echo "$TEST_NAME: weights $WEIGHTS (sha256 $wsum...), backend cpu, noise seed $SEED, tolerance $TOL_DB dB"

floor_of() { # floor_of SAMPLE SIGMA -> floor in dB, empty if none
    [ -f "$FLOORS" ] && awk -v s="$1" -v g="$2" '$1 == s && $2 == g { print $3 }' "$FLOORS" | tail -n 1
}

new_floors=$TMP/floors
: >"$new_floors"
for s in $SAMPLE_LIST; do
    name=$(basename "$s" .mkv)
    [ -f "$s" ] || { fail "$name: sample missing"; continue; }
    fmt=$(rgb_fmt "$s")
    to_rgb "$s" "$TMP/clean_$name.mkv" "$fmt" || { fail "$name: making the clean copy failed"; continue; }
    for sigma in $SIGMAS; do
        case_name="$name sigma $sigma"
        noisy=$TMP/noisy_${name}_s$sigma.mkv
        out=$TMP/out_${name}_s$sigma.mkv
        golden=$DATA/cli_golden_${name}_s$sigma.txt
        add_noise "$s" "$noisy" "$sigma" "$SEED" "$fmt" || { fail "$case_name: adding noise failed"; continue; }
        t0=$(date +%s)
        if ! run "$TMP/den_${name}_$sigma.log" "$FFMPEG" -nostdin -y -hide_banner -i "$noisy" \
                -vf "denoise=sigma=$sigma:backend=cpu:$(filter_model "$WEIGHTS")" \
                -fps_mode passthrough $FFV1 "$out"; then
            fail "$case_name: ffmpeg failed"
            continue
        fi
        t1=$(date +%s)
        p_noisy=$(psnr "$noisy" "$TMP/clean_$name.mkv") || { fail "$case_name: psnr failed"; continue; }
        p_out=$(psnr "$out" "$TMP/clean_$name.mkv" "$TMP/stats_${name}_$sigma") || { fail "$case_name: psnr failed"; continue; }
        gain=$(fsub "$p_out" "$p_noisy")
        per_frame_psnr "$TMP/stats_${name}_$sigma" >"$TMP/pf_${name}_$sigma"
        nf=$(wc -l <"$TMP/pf_${name}_$sigma")
        echo "$TEST_NAME: $case_name ($fmt, $nf frames, $((t1 - t0)) s): PSNR noisy $p_noisy -> denoised $p_out dB (gain $gain dB)"
        echo "$name $sigma $(awk -v g="$gain" -v m="$MARGIN_DB" 'BEGIN { printf "%.2f", g - m }') measured_gain=$gain" >>"$new_floors"

        if [ $mode != check ]; then
            {
                echo "# cli_quality golden: regenerate with tests/cli/cli_quality.sh --regenerate"
                echo "# sample samples/$name.mkv as $fmt; AWGN sigma $sigma seed $SEED (tools/noise, rounded+clipped); denoise backend=cpu"
                echo "# weights $(basename "$WEIGHTS") sha256 $(sha256sum "$WEIGHTS" | cut -d' ' -f1)"
                echo "# made $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -m), $(nproc) cores"
                echo "# noisy_psnr $p_noisy"
                echo "# denoised_psnr $p_out"
                echo "# gain $gain"
                echo "# frame psnr_avg_db (denoised vs clean, FFmpeg psnr filter, 0-based frame)"
                cat "$TMP/pf_${name}_$sigma"
            } >"$golden"
            pass "$case_name: wrote $(basename "$golden") (denoised $p_out dB, gain $gain dB)"
            continue
        fi

        # floor
        floor=$(floor_of "$name" "$sigma")
        if [ -z "$floor" ]; then
            fail "$case_name: no floor in $(basename "$FLOORS") (gain was $gain dB; run tests/cli/cli_quality.sh --set-floors)"
        elif fcmp "$gain" '>=' "$floor"; then
            pass "$case_name: gain $gain dB >= floor $floor dB"
        else
            fail "$case_name: gain $gain dB < floor $floor dB (noisy $p_noisy, denoised $p_out)"
        fi

        # golden
        if [ ! -f "$golden" ]; then
            fail "$case_name: golden $(basename "$golden") missing (run tests/cli/cli_quality.sh --regenerate)"
            continue
        fi
        gsum=$(sed -n 's/^# weights .* sha256 \([0-9a-f]*\).*/\1/p' "$golden")
        note=
        [ "$gsum" = "$(sha256sum "$WEIGHTS" | cut -d' ' -f1)" ] ||
            note=" (the goldens were made with other weights: if the change is deliberate, tests/cli/cli_quality.sh --regenerate)"
        verdict=$(grep -v '^#' "$golden" | awk -v tol="$TOL_DB" -v nf="$nf" '
            NR == FNR { want[$1] = $2; n++; next }
            { got[$1] = $2 }
            END {
                if (n != nf) { printf "golden has %d frames, output %d", n, nf; exit 1 }
                worst = -1
                for (f in want) {
                    if (!(f in got)) { printf "frame %s missing", f; exit 1 }
                    if (want[f] == got[f]) d = 0;             # also inf == inf
                    else d = want[f] - got[f];
                    if (d < 0) d = -d
                    if (d > worst) { worst = d; wf = f }
                }
                printf "max |diff| %.3f dB at frame %s (golden %s, now %s)", worst, wf, want[wf], got[wf]
                exit !(worst <= tol)
            }' - "$TMP/pf_${name}_$sigma")
        if [ $? = 0 ]; then
            pass "$case_name: per-frame PSNR matches the golden: $verdict"
        else
            fail "$case_name: per-frame PSNR differs from the golden by more than $TOL_DB dB: $verdict$note"
        fi
    done
done

if [ $mode = floors ]; then
    {
        echo "# cli_quality floors: sample sigma min_gain_db (measured gain minus $MARGIN_DB dB margin)"
        echo "# set $(date -u +%Y-%m-%d) by tests/cli/cli_quality.sh --set-floors with weights sha256 $wsum..."
        cat "$new_floors"
    } >"$FLOORS"
    echo "$TEST_NAME: wrote $FLOORS"
fi
finish
