#!/bin/sh
# Fetch a Debian source package's upstream tarball from Debian trixie and unpack it,
# without touching /etc/apt: a private apt configuration lives under $BUILD/apt.
#
#   mk/fetch-debsrc.sh BUILD_DIR PACKAGE VERSION_PREFIX DEST_DIR [MIRROR]
#
# e.g. mk/fetch-debsrc.sh build ffmpeg 7.1. build/src/ffmpeg
#
# Trust chain: trixie's InRelease is checked by apt against Debian's archive key
# (Signed-By=/usr/share/keyrings/debian-archive-keyring.gpg; bookworm's keyring package
# 2023.3+deb12u2 already carries the trixie keys), the Sources index by its hash in InRelease,
# the .dsc and tarballs by their hashes in Sources (apt does this on download). We re-check the
# tarball's SHA-256 against the .dsc before unpacking. Only the upstream (orig) tarball is
# unpacked; Debian's packaging patches are not applied (we build our own configuration).
set -eu

BUILD=$1; PKG=$2; VPFX=$3; DEST=$4; MIRROR=${5:-http://deb.debian.org/debian}
SUITE=${DENOISE_DEB_SUITE:-trixie}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

mkdir -p "$BUILD"
BUILD=$(cd "$BUILD" && pwd)
A=$BUILD/apt
DL=$BUILD/dl
mkdir -p "$A/sources.list.d" "$A/preferences.d" "$A/lists/partial" "$A/cache/archives/partial" "$DL"

if [ ! -r "$KEYRING" ]; then
    echo "fetch: $KEYRING missing (apt-get install debian-archive-keyring)" >&2
    exit 1
fi
# Make sure the keyring knows trixie's archive key; if it did not, we would have to fall back to
# trusted=yes, which we refuse to do silently.
if [ -d /usr/share/keyrings ] && ! ls /usr/share/keyrings/debian-archive-$SUITE-*.gpg >/dev/null 2>&1; then
    echo "fetch: warning: no debian-archive-$SUITE-*.gpg in /usr/share/keyrings; apt may reject $SUITE's InRelease" >&2
fi

cat > "$A/sources.list.d/denoise-$SUITE-src.sources" <<EOS
Types: deb-src
URIs: $MIRROR
Suites: $SUITE
Components: main
Signed-By: $KEYRING
EOS

set -- -o Dir::Etc::SourceList=/dev/null \
       -o Dir::Etc::SourceParts="$A/sources.list.d" \
       -o Dir::Etc::Preferences=/dev/null \
       -o Dir::Etc::PreferencesParts="$A/preferences.d" \
       -o Dir::State::Lists="$A/lists" \
       -o Dir::Cache="$A/cache" \
       -o Debug::NoLocking=1 \
       -o Acquire::Retries=3
if [ "$(id -u)" = 0 ]; then
    # apt's download sandbox user (_apt) cannot write into an arbitrary build tree
    set -- "$@" -o APT::Sandbox::User=root
fi

if ! ls "$A"/lists/*_Sources* >/dev/null 2>&1; then
    echo "fetch: apt-get update ($SUITE deb-src, private lists in $A)"
    apt-get "$@" update
fi

cd "$DL"
if ! ls "${PKG}"_*.dsc >/dev/null 2>&1; then
    echo "fetch: apt-get source --download-only $PKG ($SUITE)"
    # Debian's packaging tarball (.debian.tar.xz) is not needed; tolerate a failure to fetch it
    # as long as the .dsc and the orig tarball arrived (checked below).
    apt-get "$@" source --download-only --only-source "$PKG" || \
        echo "fetch: apt-get source reported an error; checking what arrived"
fi

DSC=$(ls -t "${PKG}"_*.dsc 2>/dev/null | head -n 1 || true)
[ -n "$DSC" ] || { echo "fetch: no $PKG .dsc downloaded" >&2; exit 1; }
VER=$(sed -n 's/^Version: *//p' "$DSC" | head -n 1)
UPVER=${VER#*:}; UPVER=${UPVER%-*}
case $UPVER in
    "$VPFX"*) ;;
    *) echo "fetch: $PKG $VER from $SUITE is not the wanted $VPFX* series" >&2; exit 1 ;;
esac
# orig tarball name and sha256 from the .dsc's Checksums-Sha256 block
LINE=$(awk '/^Checksums-Sha256:/{f=1;next} /^[^ ]/{f=0} f && $3 ~ /\.orig\.tar\.[a-z0-9]+$/ {print $1, $3; exit}' "$DSC")
SUM=${LINE%% *}; TAR=${LINE#* }
[ -n "$LINE" ] && [ -f "$TAR" ] || { echo "fetch: $PKG orig tarball ${TAR:-?} missing" >&2; exit 1; }
echo "$SUM  $TAR" | sha256sum -c --quiet - || { echo "fetch: $TAR checksum mismatch" >&2; rm -f "$TAR"; exit 1; }

rm -rf "$DEST.tmp"
mkdir -p "$DEST.tmp"
tar -xf "$TAR" -C "$DEST.tmp"
n=$(ls "$DEST.tmp" | wc -l)
rm -rf "$DEST"
if [ "$n" = 1 ] && [ -d "$DEST.tmp/$(ls "$DEST.tmp")" ]; then
    mv "$DEST.tmp/$(ls "$DEST.tmp")" "$DEST"
    rmdir "$DEST.tmp"
else
    mv "$DEST.tmp" "$DEST"
fi
echo "$PKG $VER $MIRROR $SUITE $TAR sha256:$SUM" > "$DEST/.denoise-origin"
echo "fetch: $PKG $VER unpacked in $DEST"
