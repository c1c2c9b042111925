#!/bin/sh
# tests/cli/cli_controls.sh: the controls FFmpeg users expect, through build/bin/ffmpeg.
#
#   - `ffmpeg -h filter=denoise` lists every option with its help, and the run-time flag (T) on
#     sigma, amount, luma, chroma and scene; no private `threads` option shadows libavfilter's.
#   - amount=0 gives the input back bit-exact (showinfo's plane checksums); luma=0 keeps Y',
#     chroma=0 keeps Cb and Cr, and the other planes change.
#   - sendcmd: `denoise amount 0` at 0.1 s leaves every frame from pts 0.12 s on bit-exact and
#     denoises the ones before; `denoise sigma 25` at 0.1 s (from sigma 10) gives the sigma-10
#     run's frames 0 and 1 and the sigma-25 run's frames from 4 on (F_s uses frame s's sigma, so
#     outputs 2 and 3 mix both): PSNR >= 50 dB against the matching run, and the other run at
#     least 3 dB further away.
#   - sigma outside the model's training range: a warning naming the range, from the weight
#     file's metadata (tests/data/tiny_weights.safetensors: sigma_range [5, 30]) or the built-in
#     0..55 (tests/data/golden_weights.safetensors has none), at the start and after sendcmd;
#     none inside the range.
#   - threads: the CPU engine takes ffmpeg's -filter_threads and the generic threads option
#     (denoise=threads=1), and cpu_threads overrides them (the count is logged at verbose level).
#   - a weight file with a NaN weight is refused at configuration, naming the file and tensor.
#   - queued frames at the end: -frames:v 3 (the consumer stops asking) and -t 0.1 (a trim
#     closes the output) lose nothing asked for and warn of nothing (verbose says why frames
#     stayed queued); an input whose size changes mid-stream (two H.264 streams back to back)
#     makes the ffmpeg CLI rebuild the graph, and the warning names that cause; with
#     -reinit_filter 0 every frame comes out, also across a pixel-format change (yuv420p to
#     yuv422p and yuv444p) with timeline-disabled frames at the change (enable=).
# Frames: samples/car-roundabout_320x192_8bit.mkv (8 frames, 25 fps, yuv420p) with the tiny
# random model (tests/data/make_tiny_weights.py): the checks are about plumbing, not quality.
set -u
. "$(dirname "$0")/../common/lib.sh"

need_build
make_tmp
tiny_filter
IN=$SAMPLE_8BIT

# plane_sums LOG: "A B C" per frame, from showinfo's plane_checksum
plane_sums() { sed -n 's/.*plane_checksum:\[\([0-9A-Fa-f ]*\)\].*/\1/p' "$1"; }
# show VF OUT: run VF,showinfo on the sample; OUT.sums gets the checksums, OUT.log the log
show() {
    run "$2.log" "$FFMPEG" -nostdin -hide_banner -i "$IN" -vf "$1,showinfo" -f null - || return 1
    plane_sums "$2.log" >"$2.sums"
}
# planes_equal A B PLANE...: every frame's checksum of each PLANE (1-based field) is the same
planes_equal() {
    _a=$1 _b=$2; shift 2
    for _p in "$@"; do
        [ "$(cut -d' ' -f"$_p" "$_a")" = "$(cut -d' ' -f"$_p" "$_b")" ] || return 1
    done
    return 0
}
# frames_equal A B: per frame, 1 if all three plane checksums agree, else 0 (one line per frame)
frames_equal() { paste -d'|' "$1" "$2" | awk -F'|' '{ print ($1 == $2) ? 1 : 0 }' | tr -d '\n'; }

# --- help ---------------------------------------------------------------------------------
"$FFMPEG" -hide_banner -h filter=denoise >"$TMP/help.txt" 2>&1
missing="" notrt=""
for o in sigma model backend device cpu_threads gpu_mem tile scene amount luma chroma; do
    line=$(grep -E "^ +$o +<" "$TMP/help.txt" | head -n 1)
    help=$(printf '%s' "$line" | sed -E 's/^ +[a-z_]+ +<[a-z0-9]+> +[A-Z.]+ +//')
    [ -n "$line" ] && [ ${#help} -ge 20 ] || missing="$missing $o"
    case $o in
        sigma|scene|amount|luma|chroma)
            printf '%s' "$line" | grep -Eq ' [A-Z.]*T[A-Z.]* ' || notrt="$notrt $o" ;;
    esac
done
if [ -n "$missing$notrt" ]; then
    fail "help: no line or short help for [$missing], not run-time [$notrt]"
elif grep -Eq '^ +threads +<' "$TMP/help.txt"; then
    fail "help: a private 'threads' option still shadows libavfilter's generic one"
else
    pass "help: 11 options with help text, sigma/scene/amount/luma/chroma run-time, no private threads"
fi

# --- amounts ------------------------------------------------------------------------------
show "null" "$TMP/in" || die "showinfo on the input failed"
show "$D" "$TMP/full" && show "$D:amount=0" "$TMP/a0" && show "$D:luma=0" "$TMP/l0" &&
    show "$D:chroma=0" "$TMP/c0" || die "a denoise run failed"
[ "$(wc -l <"$TMP/in.sums")" -eq 8 ] || die "expected 8 frames in $IN"
if ! cmp -s "$TMP/a0.sums" "$TMP/in.sums"; then
    fail "amount=0: output differs from the input"
elif cmp -s "$TMP/full.sums" "$TMP/in.sums"; then
    fail "amount=1 gives the input back (is the test sensitive?)"
else
    pass "amount=0: all 8 frames bit-exact; amount=1 changes them"
fi
if planes_equal "$TMP/l0.sums" "$TMP/in.sums" 1 && ! planes_equal "$TMP/l0.sums" "$TMP/in.sums" 2 3 &&
   planes_equal "$TMP/c0.sums" "$TMP/in.sums" 2 3 && ! planes_equal "$TMP/c0.sums" "$TMP/in.sums" 1; then
    pass "luma=0 keeps Y' bit-exact and changes Cb/Cr; chroma=0 keeps Cb/Cr and changes Y'"
else
    fail "luma=0 / chroma=0: planes kept or changed wrongly (Y' Cb Cr checksums: in [$(head -n 1 "$TMP/in.sums")] luma=0 [$(head -n 1 "$TMP/l0.sums")] chroma=0 [$(head -n 1 "$TMP/c0.sums")])"
fi

# --- sendcmd: amount --------------------------------------------------------------------------
show "sendcmd=c='0.1 denoise amount 0',$D" "$TMP/cmd" || die "sendcmd run failed"
eq=$(frames_equal "$TMP/cmd.sums" "$TMP/in.sums")
if [ "$eq" = 00011111 ]; then
    pass "sendcmd amount 0 at 0.1 s: frames 0-2 denoised, 3-7 (pts >= 0.12 s) bit-exact"
else
    fail "sendcmd amount 0 at 0.1 s: frame equal to the input (1) or not (0): $eq, wanted 00011111"
fi

# --- sendcmd: sigma -------------------------------------------------------------------------
enc() { run "$2.log" "$FFMPEG" -nostdin -y -hide_banner -i "$IN" -vf "$1" -fps_mode passthrough $FFV1 "$2"; }
enc "$D:sigma=10" "$TMP/s10.mkv" && enc "$D:sigma=25" "$TMP/s25.mkv" &&
    enc "sendcmd=c='0.1 denoise sigma 25',$D:sigma=10" "$TMP/s1025.mkv" || die "sigma runs failed"
psnr "$TMP/s1025.mkv" "$TMP/s10.mkv" "$TMP/p10.txt" >/dev/null && psnr "$TMP/s1025.mkv" "$TMP/s25.mkv" "$TMP/p25.txt" >/dev/null ||
    die "psnr failed"
per_frame_psnr "$TMP/p10.txt" >"$TMP/f10"
per_frame_psnr "$TMP/p25.txt" >"$TMP/f25"
verdict=$(paste "$TMP/f10" "$TMP/f25" | awk '
    function v(x) { return x == "inf" ? 1000 : x + 0 }
    { n = $1; a = v($2); b = v($4)
      if (n <= 1 && !(a >= 50 && b <= a - 3)) bad = bad " " n "(vs10 " $2 ", vs25 " $4 ")"
      if (n >= 4 && !(b >= 50 && a <= b - 3)) bad = bad " " n "(vs10 " $2 ", vs25 " $4 ")"
      all = all " " n ":" $2 "/" $4 }
    END { print (bad == "" ? "ok" : "bad" bad) "|" all }')
case $verdict in
    ok*) pass "sendcmd sigma 25 at 0.1 s: PSNR vs the sigma-10 / sigma-25 runs per frame:${verdict#*|}" ;;
    *) fail "sendcmd sigma 25 at 0.1 s: ${verdict%%|*}; all:${verdict#*|}" ;;
esac

# --- sigma range warning ------------------------------------------------------------------------
show "$D:sigma=40" "$TMP/w40" && show "$D:sigma=20" "$TMP/w20" &&
    show "sendcmd=c='0.1 denoise sigma 35',$D:sigma=20" "$TMP/w35" || die "sigma range runs failed"
if grep -q "sigma 40 is outside 5\.\.30.*its metadata 'sigma_range'" "$TMP/w40.log" &&
   ! grep -q "is outside" "$TMP/w20.log" &&
   [ "$(grep -c "sigma 35 is outside 5\.\.30" "$TMP/w35.log")" -eq 1 ]; then
    pass "sigma 40 and (sendcmd) 35 warned outside 5..30 from the file's metadata, once each; sigma 20 not"
else
    fail "sigma range warning: sigma=40: [$(grep -h 'is outside' "$TMP/w40.log")] sigma=20: [$(grep -h 'is outside' "$TMP/w20.log")] sendcmd 35: [$(grep -h 'is outside' "$TMP/w35.log")]"
fi
run "$TMP/w70.log" "$FFMPEG" -nostdin -hide_banner -f lavfi -i testsrc2=s=64x64:d=0.04 \
    -vf "denoise=backend=cpu:sigma=70:$(filter_model "$TEST_WEIGHTS")" -f null - || die "sigma=70 run failed"
if grep -q "sigma 70 is outside 0\.\.55.*no 'sigma_range' metadata" "$TMP/w70.log"; then
    pass "sigma 70 with a file without sigma_range: warned outside the built-in 0..55"
else
    fail "sigma 70 without metadata: no warning naming 0..55: [$(grep -h 'sigma' "$TMP/w70.log")]"
fi

# --- threads ------------------------------------------------------------------------------
threads_of() { sed -n 's/.*CPU engine: \([0-9]*\) worker thread.*/\1/p' "$1" | head -n 1; }
tr_run() { _n=$1; shift; run "$TMP/t$_n.log" "$FFMPEG" -nostdin -hide_banner -v verbose "$@" -f null -; }
tr_run a -f lavfi -i testsrc2=s=64x64:d=0.04 -filter_threads 1 -vf "$D" &&
tr_run b -f lavfi -i testsrc2=s=64x64:d=0.04 -filter_threads 3 -vf "$D:threads=1" &&
tr_run c -f lavfi -i testsrc2=s=64x64:d=0.04 -filter_threads 1 -vf "$D:cpu_threads=3" &&
tr_run d -f lavfi -i testsrc2=s=64x64:d=0.04 -filter_threads 2 -vf "$D" || die "thread runs failed"
ta=$(threads_of "$TMP/ta.log") tb=$(threads_of "$TMP/tb.log") tc=$(threads_of "$TMP/tc.log") td=$(threads_of "$TMP/td.log")
if [ "$ta" = 1 ] && [ "$tb" = 1 ] && [ "$tc" = 3 ] && [ "$td" = 2 ]; then
    pass "threads: -filter_threads 1 -> 1, threads=1 (generic) -> 1, cpu_threads=3 -> 3, -filter_threads 2 -> 2"
else
    fail "threads: -filter_threads 1 -> '$ta' (1), threads=1 -> '$tb' (1), cpu_threads=3 -> '$tc' (3), -filter_threads 2 -> '$td' (2)"
fi

# --- NaN weight ---------------------------------------------------------------------------
# head.bias of a copy of the tiny model (F32) set to a NaN: 8-byte header length, JSON header,
# then the data area; data_offsets are relative to it.
cp "$TINY_WEIGHTS" "$TMP/nan.safetensors"
hlen=$(od -An -tu8 -N8 "$TINY_WEIGHTS" | tr -d ' ')
off=$(head -c $((8 + hlen)) "$TINY_WEIGHTS" | tail -c "$hlen" |
      sed -n 's/.*"head\.bias":{[^}]*"data_offsets":\[\([0-9]*\),.*/\1/p')
[ -n "$hlen" ] && [ -n "$off" ] || die "cannot find head.bias in $TINY_WEIGHTS"
printf '\000\000\300\177' | dd of="$TMP/nan.safetensors" bs=1 seek=$((8 + hlen + off)) conv=notrunc 2>/dev/null
if "$FFMPEG" -nostdin -hide_banner -i "$IN" -vf "denoise=backend=cpu:$(filter_model "$TMP/nan.safetensors")" \
        -f null - >"$TMP/nan.log" 2>&1; then
    fail "a weight file with a NaN was accepted"
elif grep -q "nan.safetensors: tensor 'head.bias' holds NaN at element 0" "$TMP/nan.log"; then
    pass "NaN weight refused: $(grep -h -o "nan.safetensors: tensor 'head.bias' holds NaN[^)]*)" "$TMP/nan.log" | head -n 1)"
else
    fail "NaN weight: refused without naming the file and tensor: $(tail -n 3 "$TMP/nan.log")"
fi

# --- queued frames at the end ---------------------------------------------------------------
run "$TMP/f3.log" "$FFMPEG" -nostdin -hide_banner -v verbose -i "$IN" -vf "$D" -frames:v 3 -f null - ||
    die "-frames:v 3 run failed"
if grep -q "discarded" "$TMP/f3.log"; then
    fail "-frames:v 3: $(grep -h discarded "$TMP/f3.log")"
elif grep -q "not sent: the consumer stopped asking" "$TMP/f3.log"; then
    pass "-frames:v 3: no warning; verbose: $(grep -h -o '[0-9]* queued frame(s) not sent: the consumer stopped asking for frames' "$TMP/f3.log")"
else
    pass "-frames:v 3: no warning (no frame left queued)"
fi
run "$TMP/t01.log" "$FFMPEG" -nostdin -hide_banner -v verbose -i "$IN" -vf "$D" -t 0.1 -f null - ||
    die "-t 0.1 run failed"
if grep -q "discarded" "$TMP/t01.log"; then
    fail "-t 0.1: $(grep -h discarded "$TMP/t01.log")"
else
    pass "-t 0.1: no warning; verbose: $(grep -h -o '[0-9]* queued frame(s) not sent: the consumer [a-z ]*' "$TMP/t01.log" || echo 'no frame left queued')"
fi
for sz in 64x48 96x64; do
    run "$TMP/h$sz.log" "$FFMPEG" -nostdin -y -v error -f lavfi -i "testsrc2=s=$sz:r=25" -frames:v 6 \
        -c:v libx264 -preset ultrafast -f h264 "$TMP/$sz.h264" || die "libx264 failed"
done
cat "$TMP/64x48.h264" "$TMP/96x64.h264" >"$TMP/change.h264"
"$FFMPEG" -nostdin -hide_banner -i "$TMP/change.h264" -vf "$D" -f null - >"$TMP/re.log" 2>&1
if grep -q "Reconfiguring filter graph" "$TMP/re.log" &&
   grep -q "queued frame(s) discarded: the filter graph was freed while its output still waited.*Reconfiguring filter graph" "$TMP/re.log"; then
    pass "size change mid-stream (CLI rebuild): $(grep -h -o '[0-9]* queued frame(s) discarded: the filter graph was freed while its output still waited for frames' "$TMP/re.log")"
else
    fail "size change mid-stream: no warning naming the graph rebuild: $(grep -h -e Reconfiguring -e discarded "$TMP/re.log")"
fi
run "$TMP/re0.log" "$FFMPEG" -nostdin -hide_banner -reinit_filter 0 -i "$TMP/change.h264" -vf "$D,showinfo" -f null - ||
    die "-reinit_filter 0 run failed"
n0=$(grep -c "plane_checksum" "$TMP/re0.log")
if [ "$n0" = 12 ] && ! grep -q "discarded" "$TMP/re0.log"; then
    pass "size change mid-stream with -reinit_filter 0: 12 frames in, 12 out, nothing discarded"
else
    fail "-reinit_filter 0: $n0 frames out of 12; $(grep -h discarded "$TMP/re0.log")"
fi
# a pixel-format change mid-stream with -reinit_filter 0 and timeline-disabled frames around it:
# a disabled frame's scratch output is in the engine's new format, not the output link's old one
for pf in yuv422p yuv444p; do
    run "$TMP/h$pf.log" "$FFMPEG" -nostdin -y -v error -f lavfi -i "testsrc2=s=64x48:r=25" -frames:v 6 \
        -pix_fmt "$pf" -c:v libx264 -preset ultrafast -f h264 "$TMP/$pf.h264" || die "libx264 ($pf) failed"
    cat "$TMP/64x48.h264" "$TMP/$pf.h264" >"$TMP/fmt_$pf.h264"
    if run "$TMP/fmt_$pf.log" "$FFMPEG" -nostdin -hide_banner -v verbose -reinit_filter 0 -i "$TMP/fmt_$pf.h264" \
            -vf "$D:enable='between(n,4,7)',showinfo" -f null -; then
        nf=$(grep -c "plane_checksum" "$TMP/fmt_$pf.log")
        if [ "$nf" = 12 ] && grep -q "pixel format changed from yuv420p to $pf" "$TMP/fmt_$pf.log"; then
            pass "yuv420p -> $pf mid-stream, -reinit_filter 0, enable on frames 4-7: 12 frames out"
        else
            fail "yuv420p -> $pf mid-stream with enable: $nf frames out of 12; $(grep -h -o 'pixel format changed[a-z0-9 ]*' "$TMP/fmt_$pf.log")"
        fi
    else
        fail "yuv420p -> $pf mid-stream with enable: the run failed: $(grep -h -i -e error -e failed "$TMP/fmt_$pf.log" | head -n 2)"
    fi
done
finish
