"""A portable torch.compile cache: what a process compiled, saved to one file and hot-loaded by
the next process on another machine of the same kind, so that a training run's set-up is a warm
compile (seconds) instead of a cold one (50 to 100 s on an H100 or H200).

The file holds torch.compiler.save_cache_artifacts(): Inductor's FX graph cache entries, the
Triton kernels they compiled and their autotuning results (PyTorch's "mega-cache"), xz-compressed
(preset 3: the main run's 43 MB -> 2.2 MB in 2.3 s; the kernels' source and PTX are text).
Its name carries the job, PyTorch's version and the GPU's name,
<job>-torch<version>-<GPU name>.bin.xz (+ and spaces as _), because Inductor's cache key holds the Triton and CUDA
versions and the device name (torch/_inductor/codecache.py, CacheBase.get_system): an entry from
another version or card would never be hit. A stale entry (changed model code or shapes) costs
nothing: Dynamo traces the code again, the FX graph's key no longer matches and Inductor compiles
that graph cold.

  load(folder, job, log) before the first compile; save(folder, job, log) once compiled.
Both return a dict for the log and never raise: a cache that cannot be read or written only
means a cold compile.
"""
from __future__ import annotations

import lzma
import os
import re
import time

import torch


def cache_path(folder: str, job: str) -> str | None:
    """folder/<job>-torch<version>-<GPU name>.bin.xz (characters outside [A-Za-z0-9._-] as _),
    or None without CUDA."""
    if not torch.cuda.is_available():
        return None
    name = re.sub(r"[^A-Za-z0-9._-]", "_", f"{job}-torch{torch.__version__}-{torch.cuda.get_device_name()}")
    return os.path.join(folder, name + ".bin.xz")


def load(folder: str | None, job: str, log=None) -> dict:
    """Hot-load folder's cache file for job into this process's compile caches."""
    r = {"event": "compile_cache", "action": "load", "job": job}
    t = time.time()
    try:
        path = r["path"] = cache_path(folder, job) if folder else None
        if path is None or not os.path.exists(path):
            r["result"] = "none" if path else "no folder or no CUDA"
        else:
            with open(path, "rb") as f:
                packed = f.read()
            data = lzma.decompress(packed)
            info = torch.compiler.load_cache_artifacts(data)
            r.update(result="loaded" if info is not None else "failed", bytes=len(data), file_bytes=len(packed),
                     seconds=round(time.time() - t, 2), entries=_count(info))
            if info is None:
                r["error"] = "load_cache_artifacts returned nothing (not a cache of this PyTorch)"
    except Exception as e:  # noqa: BLE001 (an unreadable cache: compile cold)
        r.update(result="failed", error=f"{type(e).__name__}: {str(e)[:300]}")
    if log:
        log(r)
    return r


def save(folder: str | None, job: str, log=None) -> dict:
    """Write everything this process compiled to folder's cache file for job (atomically); left
    as it is when every graph came from a cache (Inductor's FX graph cache missed none), as after
    a load that served the whole run."""
    from torch._dynamo.utils import counters
    r = {"event": "compile_cache", "action": "save", "job": job}
    tmp = None
    try:
        path = r["path"] = cache_path(folder, job) if folder else None
        fresh = counters["inductor"]["fxgraph_cache_miss"]
        got = torch.compiler.save_cache_artifacts() if path and fresh else None
        if path is None:
            r["result"] = "no folder or no CUDA"
        elif not fresh and os.path.exists(path):
            r["result"] = "unchanged (every graph came from a cache)"
        elif got is None:
            r["result"] = "nothing compiled"
        else:
            data, info = got
            t = time.time()
            packed = lzma.compress(data, preset=3)
            os.makedirs(folder, exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "wb") as f:
                f.write(packed)
            os.replace(tmp, path)
            tmp = None
            r.update(result="saved", bytes=len(data), file_bytes=len(packed), seconds=round(time.time() - t, 2),
                     entries=_count(info))
    except Exception as e:  # noqa: BLE001 (a cache that cannot be written: the next run compiles cold)
        r.update(result="failed", error=f"{type(e).__name__}: {str(e)[:300]}")
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)
    if log:
        log(r)
    return r


def _count(info) -> dict | None:
    """CacheInfo -> {kind: number of artifacts}."""
    arts = getattr(info, "artifacts", None)
    if not isinstance(arts, dict):
        return None
    return {str(k): len(v) for k, v in arts.items() if v}
