#!/bin/sh
# The one list of Debian packages the build needs, and the check/installer for it. The -dev
# packages from libbz2-dev to libgnutls28-dev are the external libraries of FFmpeg's full
# component set (FF_EXTLIBS_full in the Makefile); fontconfig and fonts-dejavu-core give
# drawtext the font of tools/demo.sh's labels.
#
#   mk/deps.sh           list missing packages; install them with apt-get when run as root
#   mk/deps.sh --check   only list missing packages (exit 1 if any are missing)
#   mk/deps.sh --list    print the full package list
#
# Used by ./configure (unless --disable-deps-install) and by .ci/run.
set -eu

PACKAGES="
build-essential
pkg-config
nasm
make
xz-utils
ca-certificates
dpkg-dev
debian-archive-keyring
zlib1g-dev
libpng-dev
libbz2-dev
liblzma-dev
libx264-dev
libx265-dev
libvpx-dev
libdav1d-dev
libaom-dev
libsvtav1enc-dev
libwebp-dev
libmp3lame-dev
libopus-dev
libvorbis-dev
libsoxr-dev
libfreetype-dev
libfontconfig-dev
libfribidi-dev
libharfbuzz-dev
libass-dev
libzimg-dev
libxml2-dev
libgnutls28-dev
fontconfig
fonts-dejavu-core
libplacebo-dev
libopenblas-dev
libgtest-dev
googletest
clang
libclang-rt-14-dev
nlohmann-json3-dev
"

mode=${1:-install}

case $mode in
    --list) for p in $PACKAGES; do echo "$p"; done; exit 0 ;;
    --check|install|--install) ;;
    *) echo "usage: $0 [--check|--install|--list]" >&2; exit 2 ;;
esac

missing=""
for p in $PACKAGES; do
    st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case $st in
        *" installed") ;;
        *) missing="$missing $p" ;;
    esac
done

if [ -z "$missing" ]; then
    [ "$mode" = --check ] || echo "deps: all Debian packages present"
    exit 0
fi

echo "deps: missing Debian packages:$missing"
if [ "$mode" = --check ]; then
    exit 1
fi
if [ "$(id -u)" != 0 ]; then
    echo "deps: not root; install them with:" >&2
    echo "  sudo apt-get install -y --no-install-recommends$missing" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
# apt-get update once if the package lists look stale/empty or an install fails for lack of them
if ! ls /var/lib/apt/lists/*_Packages* >/dev/null 2>&1 ||
   ! apt-get install -y --no-install-recommends $missing; then
    apt-get update
    apt-get install -y --no-install-recommends $missing
fi
echo "deps: installed:$missing"
