#!/bin/bash
# tools/device_wheels.sh: Ray for a GPU machine that has no network and no Ray (denoise-batch's
# scheduler, docs/scale-out.md), carried as wheels in parts small enough for one device call each.
#
#   here (a machine with pip and network):   tools/device_wheels.sh pack
#       downloads the Ray wheel (RAY_VERSION, default: the version python3 here imports, else
#       2.60.0) and those of its requirements the GPU machine's image lacks (jsonschema and what
#       it needs: jsonschema-specifications, referencing, rpds-py; the image has click, filelock,
#       msgpack, packaging, protobuf, pyyaml, requests and attrs) for CPython 3.12 on x86-64
#       Linux into .whl/wheels/, packs them into one tar and splits that into
#       .whl/ray-wheels.part-NN of at most PART_MIB MiB (default 30: a device call carries 64 MiB
#       in all, the working tree included), with .whl/ray-wheels.sha256 (the tar's digest and the
#       part count). .whl/ is git-ignored. Prints the total size and how to carry the parts.
#   there (repository root, every part carried by this call or an earlier one on the same
#   warm machine):   bash tools/device_wheels.sh install
#       joins the parts, checks the digest, and installs the wheels (pip --no-index --no-deps)
#       into .whl/site; once installed, later calls find it there. Prints the PYTHONPATH to
#       export (tools/batch_overhead.sh does this itself).
#   bash tools/device_wheels.sh status      which parts are present, and whether .whl/site holds ray
#
# A call carries ignored paths only when its `carry` names them, and keeps the ones an earlier
# call left while the machine stays warm: carry .whl/ray-wheels.sha256 with the first part, one
# part per call (beside the working tree), then run `install` in the call that needs Ray.
# Exit status: 0 done, 1 a failure (the message says which step), 2 a usage error.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
WHL=.whl
SITE=$WHL/site
NAME=ray-wheels
PART_MIB=${PART_MIB:-30}
# what the GPU machine's image lacks of Ray's requirements (KINDS.md's package list), and what
# jsonschema needs in turn; one version each (pip refuses two of one name)
EXTRA="jsonschema jsonschema-specifications referencing rpds-py"
ON_IMAGE="click filelock msgpack packaging protobuf pyyaml requests attrs"

die() { echo "device_wheels: $*" >&2; exit 1; }

case ${1:-} in
pack)
    ver=${RAY_VERSION:-$(python3 -c 'import ray; print(ray.__version__)' 2>/dev/null || echo 2.60.0)}
    rm -rf "$WHL/wheels" "$WHL/$NAME".part-* "$WHL/$NAME.sha256" "$WHL/$NAME.tar"
    mkdir -p "$WHL/wheels" || die "cannot create $WHL/wheels"
    # CPython 3.12 on x86-64 glibc Linux (the device's python3); pip matches each manylinux tag
    # exactly, so the common ones are all named
    plat=()
    for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 \
             manylinux2014_x86_64 manylinux1_x86_64; do
        plat+=(--platform "$p")
    done
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        "${plat[@]}" -d "$WHL/wheels" "ray==$ver" $EXTRA || die "pip download failed"
    # every requirement of ray that is not an extra must be on the image or in the list above
    req=$(unzip -p "$WHL"/wheels/ray-*.whl "ray-$ver.dist-info/METADATA" | grep '^Requires-Dist:' | grep -v 'extra *==' |
          sed 's/^Requires-Dist: *\([A-Za-z0-9_.-]*\).*/\1/' | tr 'A-Z_' 'a-z-' | sort -u)
    echo "device_wheels: ray $ver requires:" $req
    for r in $req; do
        case " $ON_IMAGE $EXTRA " in
            *" $r "*) ;;
            *) die "ray $ver requires $r, which is neither on the image nor in this script's list: add it to EXTRA" ;;
        esac
    done
    (set -o pipefail; cd "$WHL" && tar cf "$NAME.tar" wheels) || die "tar failed"
    sum=$(sha256sum "$WHL/$NAME.tar" | cut -d' ' -f1)
    split -b "${PART_MIB}m" -d -a 2 "$WHL/$NAME.tar" "$WHL/$NAME.part-" || die "split failed"
    rm -f "$WHL/$NAME.tar"
    parts=$(ls "$WHL/$NAME".part-* | wc -l)
    echo "$sum $parts" > "$WHL/$NAME.sha256"
    ls -l "$WHL"/wheels/*.whl | awk '{ printf "  %8.1f MiB  %s\n", $5 / 1048576, $NF }'
    total=$(du -cb "$WHL/$NAME".part-* | tail -n 1 | cut -f1)
    echo "device_wheels: $parts part(s), $(awk -v b="$total" 'BEGIN { printf "%.1f", b / 1048576 }') MiB in all (at most $PART_MIB MiB each):"
    ls -l "$WHL/$NAME".part-* | awk '{ printf "  %8.1f MiB  %s\n", $5 / 1048576, $NF }'
    echo "device_wheels: carry one part per device call on one warm machine (the first with .whl/$NAME.sha256),"
    echo "  e.g. [\".whl/$NAME.sha256\", \".whl/$NAME.part-00\"], then [\".whl/$NAME.part-01\"], ...;"
    echo "  the call that needs Ray runs: bash tools/device_wheels.sh install && export PYTHONPATH=$ROOT/$SITE"
    echo "  (there: the repository root's $SITE)"
    ;;
install)
    [ -f "$WHL/$NAME.sha256" ] || die "$WHL/$NAME.sha256 missing: carry it (tools/device_wheels.sh pack made it)"
    read -r sum parts < "$WHL/$NAME.sha256"
    # installed from these parts already (a warm machine's earlier call)
    if [ "$(cat "$SITE/.installed" 2>/dev/null)" = "$sum" ] && PYTHONPATH=$SITE python3 -c 'import ray' 2>/dev/null; then
        echo "device_wheels: ray already installed in $ROOT/$SITE"
        echo "export PYTHONPATH=$ROOT/$SITE\${PYTHONPATH:+:\$PYTHONPATH}"
        exit 0
    fi
    have=$(ls "$WHL/$NAME".part-* 2>/dev/null | wc -l)
    [ "$have" = "$parts" ] || die "$have of $parts parts present ($(ls "$WHL/$NAME".part-* 2>/dev/null | tr '\n' ' ')): carry the others"
    got=$(cat "$WHL/$NAME".part-* | sha256sum | cut -d' ' -f1)
    [ "$got" = "$sum" ] || die "the joined parts' sha256 is $got, not $sum: a part is stale or damaged (pack again)"
    rm -rf "$WHL/unpacked" "$SITE"
    mkdir -p "$WHL/unpacked" && cat "$WHL/$NAME".part-* | tar xf - -C "$WHL/unpacked" || die "unpacking failed"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
        "$WHL"/unpacked/wheels/*.whl || die "pip install failed"
    rm -rf "$WHL/unpacked"
    PYTHONPATH=$SITE python3 -c 'import ray; print("device_wheels: ray", ray.__version__, "installed in", ray.__path__[0])' ||
        die "ray installed but does not import"
    echo "$sum" > "$SITE/.installed"
    echo "export PYTHONPATH=$ROOT/$SITE\${PYTHONPATH:+:\$PYTHONPATH}"
    ;;
status)
    [ -f "$WHL/$NAME.sha256" ] && echo "device_wheels: expects $(cut -d' ' -f2 "$WHL/$NAME.sha256") part(s)" ||
        echo "device_wheels: no $WHL/$NAME.sha256"
    ls -l "$WHL/$NAME".part-* 2>/dev/null | awk '{ printf "  %8.1f MiB  %s\n", $5 / 1048576, $NF }'
    if [ -f "$SITE/.installed" ]; then echo "device_wheels: $SITE holds ray"; else echo "device_wheels: not installed"; fi
    ;;
*)
    awk 'NR == 1 { next } !/^#/ { exit } { sub(/^# ?/, ""); print }' "$0"
    [ "${1:-}" = -h ] || [ "${1:-}" = --help ] && exit 0
    exit 2
    ;;
esac
