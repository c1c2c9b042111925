#!/bin/sh
# Inject the denoise filter into an FFmpeg source tree. Idempotent: files are rewritten only
# when their content would change, so FFmpeg's make rebuilds only what an edit touched.
#
#   filter/inject.sh FFMPEG_SRC FILTER_C CONFIG_H EXTRALIBS DENOISE_ARCHIVE
#
#   FFMPEG_SRC       FFmpeg 7.1 source tree (build/src/ffmpeg)
#   FILTER_C         the filter source, copied to libavfilter/vf_denoise.c, with the files of
#                    FILTER_HELPERS from its folder ("-" = none: only the registration is
#                    injected and the filter stays disabled)
#   CONFIG_H         generated filter/denoise_config.h, copied next to it
#   EXTRALIBS        linker flags for configure's denoise_filter_extralibs (reach libavfilter.pc)
#   DENOISE_ARCHIVE  absolute path of libdenoise.a; the filter's objects are made to depend on it
set -eu
SRC=$1; FILTER_C=$2; CONFIG_H=$3; EXTRALIBS=$4; ARCHIVE=$5
MARK="# denoise: injected by filter/inject.sh"
# the filter's context header and its side of libdenoise (vf_denoise.h, vf_denoise_engine.c)
FILTER_HELPERS="vf_denoise.h vf_denoise_engine.c"

[ -f "$SRC/libavfilter/allfilters.c" ] || { echo "inject: $SRC is not an FFmpeg tree" >&2; exit 1; }

# copy $1 to $2 when the content differs or $1 was touched after $2
sync_file() {
    if [ ! -f "$2" ] || ! cmp -s "$1" "$2" || [ "$1" -nt "$2" ]; then
        cp "$1" "$2.denoise-tmp" && mv "$2.denoise-tmp" "$2"
        echo "inject: updated ${2#$SRC/}"
    fi
}

# replace file $1 by $2 when they differ (keeps mtime otherwise)
replace_if_changed() {
    if cmp -s "$1" "$2"; then rm -f "$2"; else mv "$2" "$1"; echo "inject: patched ${1#$SRC/}"; fi
}

# 1. sources
if [ "$FILTER_C" != - ]; then
    sync_file "$FILTER_C" "$SRC/libavfilter/vf_denoise.c"
    for h in $FILTER_HELPERS; do
        sync_file "$(dirname "$FILTER_C")/$h" "$SRC/libavfilter/$h"
    done
fi
sync_file "$CONFIG_H" "$SRC/libavfilter/denoise_config.h"

# 2. allfilters.c: register ff_vf_denoise (configure builds FILTER_LIST from these externs)
f=$SRC/libavfilter/allfilters.c
if ! grep -q '^extern const AVFilter ff_vf_denoise;' "$f"; then
    awk '{ print } /^extern const AVFilter ff_vf_deflicker;/ && !done { print "extern const AVFilter ff_vf_denoise;"; done=1 }
         END { if (!done) exit 3 }' "$f" > "$f.tmp" ||
        { echo "inject: no ff_vf_deflicker anchor in allfilters.c" >&2; rm -f "$f.tmp"; exit 1; }
    mv "$f.tmp" "$f"; echo "inject: patched libavfilter/allfilters.c"
fi

# 3. libavfilter/Makefile: object line and the dependency on the engine archive
f=$SRC/libavfilter/Makefile
{
    grep -v -e "$MARK" "$f" | awk -v mark="$MARK" -v arch="$ARCHIVE" '
        { print }
        /^OBJS-\$\(CONFIG_DEFLICKER_FILTER\)/ && !done {
            print "OBJS-$(CONFIG_DENOISE_FILTER)                += vf_denoise.o vf_denoise_engine.o " mark
            print "$(SUBDIR)vf_denoise.o $(SUBDIR)vf_denoise_engine.o: " arch " " mark
            done = 1
        }
        END { if (!done) exit 3 }'
} > "$f.tmp" || { echo "inject: no CONFIG_DEFLICKER_FILTER anchor in libavfilter/Makefile" >&2; rm -f "$f.tmp"; exit 1; }
replace_if_changed "$f" "$f.tmp"

# 4. configure: the filter's libraries (flattened into libavfilter's extralibs and .pc)
f=$SRC/configure
{
    grep -v -e "$MARK" "$f" | awk -v mark="$MARK" -v libs="$EXTRALIBS" '
        { print }
        /^coreimagesrc_filter_extralibs=/ && !done {
            print "denoise_filter_extralibs=\"" libs "\" " mark
            done = 1
        }
        END { if (!done) exit 3 }'
} > "$f.tmp" || { echo "inject: no coreimagesrc_filter_extralibs anchor in configure" >&2; rm -f "$f.tmp"; exit 1; }
chmod +x "$f.tmp"
replace_if_changed "$f" "$f.tmp"
