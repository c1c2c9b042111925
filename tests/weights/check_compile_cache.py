#!/usr/bin/env python3
"""The portable compile cache (denoise_train/compile_cache.py) on the CPU, with Inductor's C++ backend
standing in for the GPU's Triton one (the same cache artifacts API).

  python3 tests/weights/check_compile_cache.py

Four checks, each printing what it saw:
  name     cache_path under a stand-in CUDA device: <job>-torch<version>-<GPU name>.bin.xz with
           + and spaces as _; None without CUDA.
  saved    a process compiles a small function and saves: an xz file with Inductor entries.
  served   a second process with empty Inductor and Triton cache folders loads the file and compiles
           the same function: Inductor's FX graph cache is hit (counters fxgraph_cache_hit >= 1,
           fxgraph_cache_miss 0), the result is the first process's, and its save leaves the file
           as it was (nothing new to add).
  errors   a file that is not xz, an xz file that is not a cache and a folder that cannot be
           written give result "failed" with the reason, never an exception, and leave no
           temporary file.
Exit status 1 when anything fails.
"""
from __future__ import annotations

import json
import lzma
import os
import subprocess
import sys
import tempfile

from needs import WEIGHTS, need

need("torch")

CHILD = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
import torch
from denoise_train import compile_cache
from torch._dynamo.utils import counters
compile_cache.cache_path = lambda folder, job: os.path.join(folder, job + ".bin.xz")
mode, folder = sys.argv[2], sys.argv[3]
load = compile_cache.load(folder, "check") if mode == "load" else None
f = torch.compile(lambda x: (torch.sin(x) * 2 + x.square()).sum(), dynamic=False)
y = f(torch.arange(64, dtype=torch.float32) / 64).item()
save = compile_cache.save(folder, "check")
print(json.dumps({"load": load, "save": save, "y": y, "hit": counters["inductor"]["fxgraph_cache_hit"],
                  "miss": counters["inductor"]["fxgraph_cache_miss"]}))
"""


def child(mode: str, folder: str, tmp: str) -> dict:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, f"inductor-{mode}"),
               TRITON_CACHE_DIR=os.path.join(tmp, f"triton-{mode}"))
    r = subprocess.run([sys.executable, "-c", CHILD, WEIGHTS, mode, folder], env=env, capture_output=True, text=True,
                       timeout=600)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode or not lines:
        raise RuntimeError(f"{mode} process failed: {r.stderr[-800:]}")
    return json.loads(lines[-1])


def check_name() -> list[str]:
    import torch
    from denoise_train import compile_cache
    saved = torch.cuda.is_available, torch.cuda.get_device_name
    try:
        torch.cuda.is_available, torch.cuda.get_device_name = (lambda: True), (lambda *a: "NVIDIA H100 80GB HBM3")
        got = os.path.basename(compile_cache.cache_path("/x", "train"))
    finally:
        torch.cuda.is_available, torch.cuda.get_device_name = saved
    want = f"train-torch{torch.__version__.replace('+', '_')}-NVIDIA_H100_80GB_HBM3.bin.xz"
    none = compile_cache.cache_path("/x", "train") if not torch.cuda.is_available() else None
    ok = got == want and none is None
    print(f"name      {got}{'  ok' if ok else f'  FAIL (want {want})'}")
    return [] if ok else [f"name: {got}, want {want}"]


def check_round_trip(tmp: str) -> list[str]:
    folder = os.path.join(tmp, "cache")
    first = child("save", folder, tmp)
    s = first["save"]
    path = os.path.join(folder, "check.bin.xz")
    with open(path, "rb") as fh:
        is_xz = fh.read(6) == b"\xfd7zXZ\x00"
    ok = s["result"] == "saved" and is_xz and bool(s.get("entries", {}).get("inductor"))
    print(f"saved     {s['result']}, {s.get('bytes', 0)} bytes -> {s.get('file_bytes', 0)} xz, entries "
          f"{s.get('entries')}{'  ok' if ok else '  FAIL'}")
    fails = [] if ok else [f"saved: {s}"]
    second = child("load", folder, tmp)
    ld, sv = second["load"], second["save"]
    ok = (ld["result"] == "loaded" and second["hit"] >= 1 and second["miss"] == 0 and second["y"] == first["y"]
          and sv["result"].startswith("unchanged"))
    print(f"served    load {ld['result']}; fresh Inductor cache: FX graph hits {second['hit']}, misses "
          f"{second['miss']}; same result {second['y'] == first['y']}; save {sv['result']}"
          f"{'  ok' if ok else '  FAIL'}")
    return fails + ([] if ok else [f"served: load {ld}, hits {second['hit']}, misses {second['miss']}"])


def check_errors(tmp: str) -> list[str]:
    from denoise_train import compile_cache
    saved = compile_cache.cache_path
    compile_cache.cache_path = lambda folder, job: os.path.join(folder, job + ".bin.xz")
    fails, seen = [], []
    try:
        d = os.path.join(tmp, "errors")
        os.makedirs(d)
        with open(os.path.join(d, "notxz.bin.xz"), "wb") as fh:
            fh.write(b"garbage")
        with open(os.path.join(d, "notcache.bin.xz"), "wb") as fh:
            fh.write(lzma.compress(b"not a cache"))
        ro = os.path.join(d, "readonly")
        os.makedirs(ro)
        os.chmod(ro, 0o500)
        import torch
        k = float(torch.rand(()))   # a constant of this run: a graph no on-disk cache holds, so there is something to save
        torch.compile(lambda x: x.cos().sum() + k, dynamic=False)(torch.ones(8))
        cases = [compile_cache.load(d, "notxz"), compile_cache.load(d, "notcache")]
        if os.access(ro, os.W_OK):   # root writes anyway: a path below a file cannot be written by anyone
            ro = os.path.join(d, "notxz.bin.xz", "below")
        cases.append(compile_cache.save(ro, "ro"))
        for r in cases:
            seen.append(f"{r['action']} {r['result']}")
            if r["result"] != "failed" or not r.get("error"):
                fails.append(f"errors: {r}")
        left = [f for root, _, fs in os.walk(d) for f in fs if f.endswith(".tmp")]
        if left:
            fails.append(f"errors: temporary files left: {left}")
    except Exception as e:  # noqa: BLE001 (what this check is about)
        fails.append(f"errors: raised {type(e).__name__}: {e}")
    finally:
        compile_cache.cache_path = saved
    print(f"errors    {', '.join(seen)}{'  ok' if not fails else '  FAIL'}")
    return fails


def main():
    with tempfile.TemporaryDirectory() as tmp:
        fails = check_name() + check_round_trip(tmp) + check_errors(tmp)
        for root, dirs, _ in os.walk(tmp):
            for x in dirs:
                os.chmod(os.path.join(root, x), 0o700)
    print("compile cache check:", "PASS" if not fails else "FAIL: " + "; ".join(fails))
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
