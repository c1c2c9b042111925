#!/bin/sh
# tests/cli/cli_files.sh: the built ffmpeg reads and writes ordinary files, audio included (the full
# FFmpeg component set: ./configure --ffmpeg-components=full, the default).
#
#   - phone-like MP4 (H.264 yuv420p + AAC stereo 48 kHz, +faststart), made here from testsrc2
#     and sine with libx264 and FFmpeg's aac encoder:
#       ffmpeg -i phone.mp4 -vf denoise out.mp4           (the README's command: default encoders,
#                                                         default weights when they are shipped)
#     out.mp4 has H.264 video with every frame and AAC audio of the same length (AAC in, AAC out)
#   - VP9 (libvpx-vp9) + Opus in WebM, ProRes 422 HQ (prores_ks, yuv422p10le) + PCM in MOV, AV1
#     (libaom, usage good: bookworm's libaom 3.6 corrupts its heap with -usage realtime) in MP4,
#     HEVC (libx265) in MKV, MP3 (libmp3lame): each made with the built ffmpeg,
#     decoded by it (frame count and pix_fmt), and denoised (VP9, ProRes) with the frame count and
#     format kept
#   - the build says what it contains: libx264/libx265 make it GPL ("--enable-gpl" in -buildconf)
# Tiny frames (96x64) and the CPU backend so it runs in seconds. Weights: the trained ones when
# present, else tests/data/golden_weights.safetensors (containers and codecs do not depend on
# quality). Exits 77 (skipped) with the minimal component set, which lacks these codecs.
set -u
. "$(dirname "$0")/../common/lib.sh"

need_build
make_tmp
pick_model
DN="denoise=backend=cpu:$(filter_model "$model")"

for e in libx264 aac libvpx-vp9 prores_ks libaom-av1 libx265 libmp3lame libopus; do
    if ! "$FFMPEG" -hide_banner -encoders 2>/dev/null | grep -q " $e "; then
        skip "encoder $e missing: build/bin/ffmpeg has the minimal component set (./configure --ffmpeg-components=full)"
        finish
    fi
done

SRC="-f lavfi -i testsrc2=s=96x64:r=15:d=1 -f lavfi -i sine=f=440:sample_rate=48000:d=1"

# stream FILE TYPE ENTRY: an entry of the first stream of TYPE (v or a), e.g. codec_name
stream() {
    "$FFPROBE" -v error -select_streams "$2:0" -show_entries "stream=$3" -of csv=p=0 "$1" | head -n 1
}
# duration FILE TYPE: that stream's duration in ms (from its packets), for length comparisons
duration_ms() {
    "$FFPROBE" -v error -select_streams "$2:0" -show_entries packet=pts_time,duration_time -of csv=p=0 "$1" |
        awk -F, 'NF >= 2 && $1 != "N/A" { e = $1 + $2; if (e > m) m = e } END { printf "%d", m * 1000 }'
}

# 1. phone-like MP4 in, MP4 out, audio kept
if run "$TMP/mk_phone.log" "$FFMPEG" -nostdin -y -hide_banner $SRC -ac 2 -c:v libx264 -preset veryfast \
        -pix_fmt yuv420p -c:a aac -b:a 96k -movflags +faststart "$TMP/phone.mp4"; then
    if [ "$(stream "$TMP/phone.mp4" v codec_name)" = h264 ] && [ "$(stream "$TMP/phone.mp4" a codec_name)" = aac ]; then
        pass "phone.mp4: h264 + aac made"
    else
        fail "phone.mp4: expected h264 + aac, got $(stream "$TMP/phone.mp4" v codec_name) + $(stream "$TMP/phone.mp4" a codec_name)"
    fi
    # exactly the README's form: no codec options (the mp4 muxer's default encoders) and, with the
    # shipped weights, no filter options either (default model, backend auto)
    vf=$DN
    [ "$model" = "$WEIGHTS" ] && vf=denoise
    if run "$TMP/phone_dn.log" "$FFMPEG" -nostdin -y -hide_banner -i "$TMP/phone.mp4" -vf "$vf" "$TMP/out.mp4"; then
        vc=$(stream "$TMP/out.mp4" v codec_name) ac=$(stream "$TMP/out.mp4" a codec_name)
        fi_=$(count_frames "$TMP/phone.mp4") fo=$(count_frames "$TMP/out.mp4")
        da=$(duration_ms "$TMP/phone.mp4" a) db=$(duration_ms "$TMP/out.mp4" a)
        chl=$(stream "$TMP/out.mp4" a channels)
        if [ "$vc" = h264 ] && [ "$ac" = aac ] && [ "$fi_" = "$fo" ] && [ "$chl" = 2 ] &&
           [ -n "$da" ] && [ -n "$db" ] && [ "$da" -gt 900 ] && awk -v a="$da" -v b="$db" 'BEGIN { d = a - b; exit !(d < 50 && d > -50) }'; then
            pass "ffmpeg -i phone.mp4 -vf $vf out.mp4: $vc $fo/$fi_ frames + $ac ${chl}ch ${db} ms (in ${da} ms)"
        else
            fail "phone -> out.mp4: video $vc $fo/$fi_ frames, audio $ac ${chl}ch $db ms (in $da ms)"
        fi
    else
        fail "ffmpeg -i phone.mp4 -vf denoise out.mp4 failed"
    fi
else
    fail "could not make phone.mp4 (libx264 + aac)"
fi

# 2. other codecs: make, decode, (denoise)
# codec_case NAME FILE EXPECT_CODEC EXPECT_PIX_FMT DENOISE(0/1) ENCODER_ARGS...
codec_case() {
    _n=$1 _f=$2 _c=$3 _p=$4 _d=$5; shift 5
    if ! run "$TMP/mk_$_n.log" "$FFMPEG" -nostdin -y -hide_banner $SRC "$@" "$_f"; then
        fail "$_n: encoding $_f failed"; return
    fi
    _vc=$(stream "$_f" v codec_name) _vp=$(stream "$_f" v pix_fmt)
    _fr=$(count_frames "$_f")
    if [ "$_vc" != "$_c" ] || [ "$_vp" != "$_p" ] || [ "$_fr" != 15 ]; then
        fail "$_n: decoded $_vc $_vp $_fr frames, expected $_c $_p 15 frames"; return
    fi
    if ! run "$TMP/dec_$_n.log" "$FFMPEG" -nostdin -hide_banner -i "$_f" -f null -; then
        fail "$_n: decoding failed"; return
    fi
    if [ "$_d" = 1 ]; then
        if ! run "$TMP/dn_$_n.log" "$FFMPEG" -nostdin -y -hide_banner -i "$_f" -vf "$DN" -c:v ffv1 -c:a copy \
                "$TMP/dn_$_n.mkv"; then
            fail "$_n: denoising failed"; return
        fi
        _o=$(count_frames "$TMP/dn_$_n.mkv") _op=$(stream "$TMP/dn_$_n.mkv" v pix_fmt)
        if [ "$_o" != "$_fr" ] || [ "$_op" != "$_p" ]; then
            fail "$_n: denoised $_o frames $_op (in $_fr frames $_p)"; return
        fi
        pass "$_n: $_c $_p, $_fr frames made, decoded and denoised (format kept)"
    else
        pass "$_n: $_c $_p, $_fr frames made and decoded"
    fi
}
codec_case vp9 "$TMP/clip.webm" vp9 yuv420p 1 -c:v libvpx-vp9 -deadline realtime -cpu-used 8 -b:v 200k -c:a libopus
codec_case prores "$TMP/clip.mov" prores yuv422p10le 1 -c:v prores_ks -profile:v 3 -c:a pcm_s16le
codec_case av1 "$TMP/clip_av1.mp4" av1 yuv420p 0 -c:v libaom-av1 -cpu-used 8 -b:v 100k -c:a aac
codec_case hevc "$TMP/clip_hevc.mkv" hevc yuv420p 0 -c:v libx265 -preset ultrafast -x265-params log-level=error -c:a libmp3lame

# the audio of the VP9 and HEVC files: Opus and MP3
for fa in "$TMP/clip.webm:opus" "$TMP/clip_hevc.mkv:mp3"; do
    f=${fa%:*} want=${fa##*:}
    got=$(stream "$f" a codec_name 2>/dev/null)
    if [ "$got" = "$want" ]; then pass "$(basename "$f"): $want audio"; else fail "$(basename "$f"): audio '$got', expected $want"; fi
done

# 3. licence: x264/x265 in -> GPL build
if "$FFMPEG" -hide_banner -buildconf 2>&1 | grep -q -- '--enable-gpl' &&
   "$FFMPEG" -hide_banner -L 2>&1 | grep -q 'GNU General Public License'; then
    pass "licence: --enable-gpl, ffmpeg -L says GPL"
else
    fail "licence: x264/x265 are in but the build does not say GPL"
fi

finish
