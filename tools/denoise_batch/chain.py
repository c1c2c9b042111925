"""The user's filter chain (--vf): finding the denoise filter, reading and adding its options.

A chain is FFmpeg filtergraph text: filters separated by commas, each NAME[@ID][=OPTIONS], where
quotes ('...') and backslashes protect commas. Only a linear chain is supported (one input, one
output: no ';' or [labels]), because the segment graph puts trims in front of and behind it;
that each filter also passes one frame out per frame in, with its pts, is checked on the
input's first frames (preflight.py), not here.
"""
from __future__ import annotations


class ChainError(ValueError):
    pass


def split_top(text: str, sep: str) -> list[str]:
    """Split at `sep` outside quotes and escapes, keeping quotes and escapes in the parts."""
    parts, cur, quoted, i = [], [], False, 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            cur.append(text[i:i + 2])
            i += 2
            continue
        if c == "'":
            quoted = not quoted
        if c == sep and not quoted:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    if quoted:
        raise ChainError(f"unbalanced quote in filter chain: {text}")
    parts.append("".join(cur))
    return parts


def parse(chain: str) -> list[tuple[str, str | None]]:
    """[(name as written, options or None)] of a linear chain."""
    if not chain.strip():
        raise ChainError("empty filter chain")
    out = []
    for f in split_top(chain, ","):
        f = f.strip()
        if not f or f.startswith("[") or f.endswith("]") or len(split_top(f, ";")) > 1:
            raise ChainError(f"not a linear filter chain (empty filter, [labels] or ';'): {chain}")
        name, eq, opts = f.partition("=")
        out.append((name.strip(), opts if eq else None))
    return out


def unparse(filters: list[tuple[str, str | None]]) -> str:
    return ",".join(n if o is None else f"{n}={o}" for n, o in filters)


def _denoise_index(filters) -> int:
    idx = [i for i, (n, _) in enumerate(filters) if n.split("@")[0] == "denoise"]
    if len(idx) > 1:
        raise ChainError("more than one denoise filter in the chain")
    return idx[0] if idx else -1


def denoise_options(chain: str) -> dict[str, str]:
    """The denoise filter's named options (key=value pairs; positional ones are not named)."""
    filters = parse(chain)
    i = _denoise_index(filters)
    if i < 0 or filters[i][1] is None:
        return {}
    opts = {}
    for kv in split_top(filters[i][1], ":"):
        k, eq, v = kv.partition("=")
        if eq:
            opts[k.strip()] = v.strip()
    return opts


def with_denoise_options(chain: str, extra: dict[str, str]) -> str:
    """The chain with the options of `extra` added to its denoise filter where not already set."""
    filters = parse(chain)
    i = _denoise_index(filters)
    if i < 0 or not extra:
        return chain
    have = denoise_options(chain)
    add = [f"{k}={v}" for k, v in extra.items() if k not in have]
    if not add:
        return chain
    name, opts = filters[i]
    filters[i] = (name, ":".join(([opts] if opts else []) + add))
    return unparse(filters)


def cpu_threads(chain: str) -> int | None:
    """The CPU engine's worker threads the chain sets: denoise's cpu_threads= when above 0, else
    its generic threads= when above 0, else None (then the filter takes the graph's thread count,
    by default the CPU count + 1: filter/vf_denoise.c, option cpu_threads). ChainError for a value
    that is not an integer."""
    opts = denoise_options(chain)
    for key in ("cpu_threads", "threads"):
        if key in opts:
            try:
                n = int(opts[key])
            except ValueError:
                raise ChainError(f"denoise's {key}={opts[key]} is not an integer") from None
            if n > 0:
                return n
    return None


def without_denoise(chain: str) -> str:
    """The chain with its denoise filter replaced by null: the frame structure of the rest,
    cheap to run (no model, no GPU)."""
    filters = parse(chain)
    i = _denoise_index(filters)
    if i >= 0:
        filters[i] = ("null", None)
    return unparse(filters)
