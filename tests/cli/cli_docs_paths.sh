#!/bin/sh
# tests/cli/cli_docs_paths.sh: every repository path the docs name exists.
#
# Reads README.md, docs/*.md and docs/journal/*.md. Checked:
#   - everywhere in the text (prose, inline `...` code and fenced blocks): every word that starts
#     with a top-level entry of the repository (configure, Makefile, filter/, kernels/, weights/,
#     tests/, tools/, samples/, docs/, examples/, mk/, .ci/), relative to the root;
#   - every markdown link or image target that is not a URL or an anchor, relative to the doc.
# Exempt: build outputs (build/... is not a top-level entry; git-ignored paths such as
# filter/denoise_config.h), globs and placeholders (a path
# followed by *, <, { or ..., or holding a placeholder such as N, CKPT or MINUTES), and paths at
# a commit (REV:path, as in `git show REV:path`). A path that has left the tree may be named in the
# journal when docs/journal/README.md lists it under "Paths that left the tree" with a commit
# that has it (checked with git where the checkout has that commit).
# Each missing path is reported as FILE:LINE: missing path: PATH. Needs no build.
set -u
. "$(dirname "$0")/../common/lib.sh"

cd "$ROOT" || die "no repository root at $ROOT"
make_tmp

docs=$(ls README.md docs/*.md docs/journal/*.md 2>/dev/null)
[ -n "$docs" ] || { skip "no docs found under $ROOT"; finish; }

# FILE TAB LINE TAB KIND TAB PATH for every candidate (KIND: code = root-relative, link =
# relative to the doc's folder)
awk '
function emit(kind, p) { printf "%s\t%d\t%s\t%s\n", FILENAME, FNR, kind, p }
function paths(s,    pre, m, p, rest, nxt) {
    # words starting with a top-level entry, not preceded by a path character
    while (match(s, /(configure|Makefile|(filter|kernels|weights|tests|tools|samples|docs|examples|mk|\.ci)\/[A-Za-z0-9_.+\/-]*)/)) {
        pre = substr(s, 1, RSTART - 1)
        p = substr(s, RSTART, RLENGTH)
        rest = substr(s, RSTART + RLENGTH)
        s = rest
        if (pre ~ /[A-Za-z0-9_.\/~$-]$/) continue          # inside a longer path or word
        if (pre ~ /[^ \t(`"=*]:$/) continue               # REV:path
        if ((p == "configure" || p == "Makefile") && rest ~ /^[A-Za-z0-9_]/) continue
        nxt = substr(rest, 1, 1)
        if (nxt == "*" || nxt == "<" || nxt == "{" || rest ~ /^\.\.\./) continue   # glob, placeholder
        sub(/[.,:;]+$/, "", p)
        if (p ~ /\.\.\.$/) continue
        emit("code", p)
    }
}
FNR == 1 { fence = 0 }
/^[ \t]*```/ { fence = !fence; next }
fence { paths($0); next }
{
    # markdown links and images: [text](target)
    s = $0
    while (match(s, /\]\([^) \t]+\)/)) {
        t = substr(s, RSTART + 2, RLENGTH - 3)
        s = substr(s, RSTART + RLENGTH)
        if (t ~ /^[a-z]+:/ || t ~ /^#/) continue
        sub(/#.*/, "", t)
        if (t != "") emit("link", t)
    }
    # the text, inline code included (a backtick ends a word, as a space does)
    paths($0)
}' $docs > "$TMP/candidates"

# paths that have left the tree, with a commit that has them (docs/journal/README.md)
left=$TMP/left
sed -n 's/^| `\([^`]*\)` | `\([^`]*\)` |.*/\1\t\2/p' docs/journal/README.md 2>/dev/null > "$left"
in_git=0
git rev-parse --git-dir >/dev/null 2>&1 && in_git=1

placeholder() {   # a placeholder word: N, KIND, CKPT.pt, faithful_MINUTESmin.json, packN ...
    printf '%s\n' "$1" | grep -Eq '(^|[^A-Za-z])N([^A-Za-z]|$)|[a-z0-9]N([^A-Za-z]|$)|(^|[^A-Za-z])[A-Z]{3,}([^A-Za-z]|$)|[A-Z]{3,}[a-z]' &&
        ! printf '%s\n' "$1" | grep -Eq '(README|LICENSE|KINDS)\.'
}

checked=0 missing=0
while IFS='	' read -r file line kind p; do
    case $kind in
        link) case $p in /*) target=${p#/} ;; *) target=$(dirname "$file")/$p ;; esac ;;
        *) target=$p ;;
    esac
    checked=$((checked + 1))
    [ -e "$target" ] && continue
    if rev=$(awk -F'\t' -v p="$p" '$1 == p { print $2; exit }' "$left") && [ -n "$rev" ]; then
        if [ $in_git = 1 ] && git rev-parse -q --verify "$rev^{commit}" >/dev/null 2>&1 &&
           ! git cat-file -e "$rev:$p" 2>/dev/null; then
            fail "docs/journal/README.md: $p is listed as left the tree, but $rev has no such path"
            missing=$((missing + 1))
        fi
        continue
    fi
    placeholder "$p" && continue
    [ $in_git = 1 ] && git check-ignore -q "$target" 2>/dev/null && continue   # a build output
    if [ "$kind" = link ]; then
        printf '%s:%s: missing path: %s (link target %s)\n' "$file" "$line" "$target" "$p"
    else
        printf '%s:%s: missing path: %s\n' "$file" "$line" "$p"
    fi
    missing=$((missing + 1))
done < "$TMP/candidates"

if [ $missing -eq 0 ]; then
    pass "$checked paths named in $(printf '%s\n' $docs | wc -l) docs exist"
else
    fail "$missing of $checked paths named in the docs are missing (listed above)"
fi
finish
