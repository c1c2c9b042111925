#!/usr/bin/env python3
"""Model v2 training on a lent GPU machine, in calls that each end by themselves (the model card's
"Reproduce" gives the call sequence). Everything long runs in its own session and survives the
end of a call while the machine is held; every call copies its results to the output folder.

  python3 tools/device_train.py [--data DIR] [--run DIR] [--src DIR] [--out DIR] [--gpus N] COMMAND [ARGS]

  pack                (here, in the checkout the calls are made from) split the source data
                      folder's train-photos, train-video, train-video2, train-video3 and
                      .data/resume/* into .data/pack1..N, each small enough to travel with the
                      working tree (a checkpoint over the cap goes in as its parts,
                      main_last.pt.part0..9, as collect returns it; main joins them)
  unpack N            (device) move .data/packN to the data folder (resume files to RUN/resume)
                      and decode its photos/videos into DATA/cache (parallel, .npy)
  wait-unpack N       (device) wait until packs 1..N are unpacked (unpacks started in the
                      background by earlier calls), at most DT_UNPACK_WAIT (300) s
  bench [ARGS]        (device, foreground, <= 3 min) weights/bench_train.py -> RUN/bench.json
                      (attention and batch-feed checks first; e.g. --variants
                      v1,compile-overlap,compile: model v1's recipe, the compiled step with and
                      without its batches built ahead on a side stream; needs no data pack).
                      Bench and main start from the portable compile caches
                      (denoise_train/compile_cache.py: weights/compile-cache/*.bin.xz, and
                      .data/resume/*-torch*.bin.xz carried in a pack, seed RUN/compile-cache);
                      collect returns the main run's train-*.bin.xz
  study [ARGS]        (device) start weights/study.py in the background, return at once
                      (candidates one after another; results.md is rewritten as they end)
  main MINUTES [CAND] (device) start or resume the main run in the background: resume
                      RUN/main, else start a new run (a plan of DT_PLAN_MINUTES) from the
                      checkpoint DT_INIT names (a branch with its own plan, e.g. a fine-tune),
                      else continue the study's winner (or CAND) from its study checkpoint, else
                      start CAND from scratch; adds MINUTES of training. On every visible GPU
                      (--gpus N, DT_GPUS: N processes, data parallel, started by torchrun; 1:
                      one plain process; more processes than GPUs share them, for tests;
                      denoise_train/data_parallel.py), the global batch split among them
  poll SECONDS        (device) print progress every 15 s and copy results to the output folder;
                      returns when nothing runs any more or SECONDS are (nearly) up
  status              (device) processes, last log lines, GPU
  pause | resume      (device) SIGSTOP / SIGCONT the study and main process groups, and those of
                      torchrun's workers (each in a session of its own) (for a GPU benchmark;
                      stopped time does not count as training time); pause waits 2 s for the
                      queued GPU work and prints the GPU's utilisation
  collect             (device) copy results to the output folder now
  finish              (device) export the main run to RUN/denoise-v2.safetensors (bf16), run the
                      faithfulness probe on it and, when eval-davis4 was packed (DT_PACK_EVAL=1
                      at pack time), weights/eval.py; results in the weight file and in OUT

Folders (an option wins over its environment variable):
  --data DIR, DT_DATA   the unpacked, decoded data (default: ~/denoise-train/data)
  --run DIR, DT_RUN     the runs: bench, study, main, their checkpoints (default: ~/denoise-train/run)
  --src DIR, DT_SRC     pack's source data folder (train-photos, train-video*, eval-davis4);
                        else DENOISE_DATA; no default: pack needs one of them
  --out DIR, OUT        what comes back from the machine (default: TMPDIR/device-train-out)
  --gpus N, DT_GPUS     main's processes (default: every visible GPU, CUDA_VISIBLE_DEVICES's
                        or nvidia-smi's; 1 with DT_DEVICE=cpu)
The data and run folders live outside the repository so that refreshing the working tree between
calls never touches them.
Environment: DT_DEVICE (cuda), DT_PLAN_MINUTES (100: the main run's planned total), DT_INIT
(main: the checkpoint a new run starts from), DT_DEEPEN (main, with DT_INIT: its network
deepened first by denoise_train.deepen --depths DT_DEEPEN, e.g. mid=12), DT_TRAIN_ARGS /
DT_STUDY_ARGS / DT_BENCH_ARGS (extra arguments, split at white space), DT_PACK_MB (pack size cap),
DT_PACK_EVAL (1: pack eval-davis4 too), DT_PACK_EXTRA (more folders to pack, as FOLDER:NAME
separated by spaces: FOLDER's files unpack into DATA/NAME, e.g. the data control's old encoding of
train-video, weights/experiments/old_video_encoding.py), DT_VIDEOS (the DATA sub-folders of video
that unpack decodes and study and main train on; default "videos videos2 videos3"),
DT_UNPACK_WAIT (wait-unpack's limit, s).
Every program started here gets NCCL_NVLS_ENABLE=0 and TORCH_SYMM_MEM_DISABLE_MULTICAST=1 (the
lent machines need NVLink multicast off) and, for torchrun, TORCH_ELASTIC_SHUTDOWN_TIMEOUT=300
unless set (a SIGTERM leaves the workers that long for the checkpoint and the last validation
before torchrun kills them).
"""
from __future__ import annotations

import argparse
import datetime
import fcntl
import fnmatch
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1 << 20
TREE_LIMIT = 64 * MIB      # what may travel with one call: the working tree and the packs it carries
BACK_LIMIT = 16 * MIB      # the largest file that comes back from the machine
PART = 15 * MIB            # a checkpoint over BACK_LIMIT comes back in parts of this size
PACK_DIRS = (("train-photos", "photos"), ("train-video", "videos"), ("train-video2", "videos2"),
             ("train-video3", "videos3"))
VIDEO_DIRS = ("videos", "videos2", "videos3")
PY = sys.executable


class Failure(Exception):
    """A command failed: its message is printed and the exit status is 1."""


def env_args(name: str) -> list[str]:
    """Extra arguments from an environment variable, split at white space as the shell would."""
    return os.environ.get(name, "").split()


def alive(pidfile: str) -> bool:
    try:
        with open(pidfile) as f:
            pid = int(f.read().strip())
    except (OSError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def read(path: str) -> str:
    with open(path) as f:
        return f.read().strip()


def touch(path: str) -> None:
    with open(path, "a"):
        os.utime(path)


def nvidia_smi(query: str) -> str | None:
    if not shutil.which("nvidia-smi"):
        return None
    r = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"], capture_output=True, text=True)
    return r.stdout.strip()


def package_env() -> dict:
    """The environment for `python3 -m denoise_train.X` and the training processes: weights/ on the
    import path, NVLink multicast off (NCCL's NVLS and PyTorch's symmetric-memory multicast: the
    lent machines need it off), torchrun's shutdown grace (the module's docstring)."""
    env = dict(os.environ)
    w = os.path.join(ROOT, "weights")
    env["PYTHONPATH"] = w + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1")
    env.setdefault("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "300")
    return env


def visible_gpus() -> int:
    """The GPUs a CUDA program here may use: CUDA_VISIBLE_DEVICES's entries when it is set, else
    the lines of nvidia-smi -L (0 without nvidia-smi)."""
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if vis is not None:
        return len([d for d in vis.split(",") if d.strip()])
    if not shutil.which("nvidia-smi"):
        return 0
    r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return len([ln for ln in r.stdout.splitlines() if ln.startswith("GPU ")])


def process_groups(pid: int) -> list[int]:
    """The process groups of pid and of its descendants (from /proc): torchrun starts each worker
    in a session of its own, which a signal to torchrun's group does not reach."""
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    tree, pending = [pid], [pid]
    while pending:
        p = pending.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        tree += kids
        pending += kids
    groups = []
    for p in tree:
        try:
            g = os.getpgid(p)
        except ProcessLookupError:
            continue
        if g not in groups:
            groups.append(g)
    return groups


def start_background(cmd: list[str], log: str, append: bool) -> int:
    """Start cmd in its own session (a process group of its own, no terminal), deaf to SIGHUP, its
    output to log: it outlives this call. -> its pid (= its process group)."""
    with open(log, "a" if append else "w") as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True, env=package_env(),
                             preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    return p.pid


def tee(cmd: list[str], path: str, stderr_too: bool = True) -> int:
    """Run cmd, its output both printed and written to path (`cmd | tee path`). -> its exit status."""
    with open(path, "w") as f:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT if stderr_too else None,
                             env=package_env())
        for line in p.stdout:
            sys.stdout.buffer.write(line)
            sys.stdout.flush()
            f.write(line.decode(errors="replace"))
        return p.wait()


class DeviceTrain:
    def __init__(self, data: str, run: str, src: str | None, out: str, gpus: int | None = None):
        """gpus: main's processes; None: every visible GPU (1 on the CPU)."""
        self.data, self.run, self.src, self.out = data, run, src, out
        self.device = os.environ.get("DT_DEVICE", "cuda")
        self.gpus = gpus
        self.plan = os.environ.get("DT_PLAN_MINUTES", "100")
        self.videos = [os.path.join(data, d) for d in os.environ.get("DT_VIDEOS", " ".join(VIDEO_DIRS)).split()]

    def r(self, *parts: str) -> str:
        return os.path.join(self.run, *parts)

    def d(self, *parts: str) -> str:
        return os.path.join(self.data, *parts)

    # ---- here: pack ---------------------------------------------------------------------------
    @staticmethod
    def tree_bytes() -> int:
        """What travels with every call: tracked and untracked files that git does not ignore."""
        names = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], capture_output=True,
                               check=True).stdout.split(b"\0")
        total = 0
        for n in names:
            if n:
                try:
                    total += os.stat(n, follow_symlinks=False).st_size
                except OSError:
                    pass
        return total

    def pack(self) -> None:
        if not self.src:
            raise Failure("pack: no source data folder (--src, DT_SRC or DENOISE_DATA)")
        if not os.path.isdir(os.path.join(self.src, "train-photos")):
            raise Failure(f"no {self.src}/train-photos (set --src or DT_SRC)")
        gd = subprocess.run(["git", "rev-parse", "--git-common-dir"], capture_output=True, text=True,
                            check=True).stdout.strip()
        exclude = os.path.join(gd, "info", "exclude")
        lines = open(exclude).read().splitlines() if os.path.exists(exclude) else []
        if "/.data/" not in lines:
            os.makedirs(os.path.dirname(exclude), exist_ok=True)
            with open(exclude, "a") as f:
                f.write("/.data/\n")
        tree = self.tree_bytes()
        mb = os.environ.get("DT_PACK_MB")
        cap = int(mb) * MIB if mb else TREE_LIMIT - tree - 3 * MIB
        if not mb and cap <= 8 * MIB:
            raise Failure(f"the working tree is {tree // MIB} MiB: too little room for data packs")
        resume = sorted(f for f in glob.glob(".data/resume/*") if os.path.isfile(f))
        for f in resume:
            if os.stat(f).st_size > cap:
                raise Failure(f"{f} is over the pack cap of {cap // MIB} MiB: carry it in parts "
                              f"(split -b 15M -d -a 1 {f} {f}.part; rm {f})")
        for p in glob.glob(".data/pack[0-9]*"):
            shutil.rmtree(p)
        items = [(os.stat(f).st_size, "resume", f) for f in resume]
        dirs = [(os.path.join(self.src, d), sub) for d, sub in PACK_DIRS]
        if os.environ.get("DT_PACK_EVAL", "0") == "1":
            dirs.append((os.path.join(self.src, "eval-davis4"), "eval"))
        for spec in os.environ.get("DT_PACK_EXTRA", "").split():
            folder, _, sub = spec.rpartition(":")
            if not folder or not re.fullmatch(r"[A-Za-z0-9_-]+", sub) or not os.path.isdir(folder):
                raise Failure(f"DT_PACK_EXTRA: '{spec}' is not FOLDER:NAME (an existing folder, a plain name)")
            dirs.append((folder, sub))
        for d, sub in dirs:
            for f in sorted(glob.glob(os.path.join(d, "*"))):
                if os.path.isfile(f):
                    items.append((os.stat(f).st_size, sub, f))
        # first-fit decreasing over the files, resume files among them
        items.sort(key=lambda it: (-it[0], f"{it[0]} {it[1]} {it[2]}"))
        used: list[int] = []
        for size, sub, f in items:
            p = next((i for i, u in enumerate(used) if u + size <= cap), None)
            if p is None:
                used.append(size)
                p = len(used) - 1
            else:
                used[p] += size
            dst = f".data/pack{p + 1}/{sub}"
            os.makedirs(dst, exist_ok=True)
            shutil.copy(f, dst)
        n = len(used)
        print(f"working tree {tree // MIB} MiB, pack cap {cap // MIB} MiB, {n} packs:")
        for p in range(1, n + 1):
            files = [os.path.join(dp, f) for dp, _, fs in os.walk(f".data/pack{p}") for f in fs]
            size = sum(os.path.getsize(f) for f in files)
            print(f"  .data/pack{p}: {-(-size // MIB)} MiB ({len(files)} files)")
        print(f"calls: for N in 1..{n}: run(carry=['.data/packN'], 'python3 tools/device_train.py unpack N')")

    # ---- device -------------------------------------------------------------------------------
    def unpack(self, n: str) -> None:
        if not re.fullmatch(r"[0-9]+", n):
            raise Failure(f"unpack: pack number expected, got '{n}'")
        p = f".data/pack{n}"
        if not os.path.isdir(p):
            raise Failure(f"{p} not found (was it carried?)")
        for sub in ("photos",) + VIDEO_DIRS:
            os.makedirs(self.d(sub), exist_ok=True)
        os.makedirs(self.r("resume"), exist_ok=True)
        done, failed = self.d(f".unpacked-{n}"), self.d(f".unpack-failed-{n}")
        for f in (done, failed):
            if os.path.exists(f):
                os.remove(f)
        # one unpack at a time (calls start them in the background): data.py scans the folders
        # that another unpack would still be copying into
        with open(self.d(".unpack.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                self._unpack(p)
            except BaseException:
                touch(failed)
                raise
            touch(done)

    def _unpack(self, p: str) -> None:
        for sub in sorted(os.listdir(p)):   # photos, videos*, eval and DT_PACK_EXTRA's folders
            if sub != "resume" and os.path.isdir(f"{p}/{sub}"):
                shutil.copytree(f"{p}/{sub}", self.d(sub), dirs_exist_ok=True)
        if os.path.isdir(f"{p}/resume"):
            shutil.copytree(f"{p}/resume", self.r("resume"), dirs_exist_ok=True)
        shutil.rmtree(p)
        rc = subprocess.run([PY, "-m", "denoise_train.data", "--cache", self.d("cache"), "--photos", self.d("photos"),
                             "--videos", *self.videos], env=package_env()).returncode
        if rc:
            raise Failure("decoding failed")
        counts = " + ".join(str(len(os.listdir(v))) for v in self.videos)
        print(f"data: {len(os.listdir(self.d('photos')))} photos, {counts} videos; "
              f"resume: {' '.join(sorted(os.listdir(self.r('resume'))))}", flush=True)
        if os.path.isfile(self.r("resume", "bench.json")) and not os.path.isfile(self.r("bench.json")):
            shutil.copy(self.r("resume", "bench.json"), self.r("bench.json"))
        gpu = nvidia_smi("name,memory.used,memory.total")
        if gpu is not None:
            print(gpu)

    def wait_unpack(self, n: str) -> None:
        """Wait until packs 1..N are unpacked (unpack N leaves DATA/.unpacked-N, or
        .unpack-failed-N when it fails; the unpacks of earlier calls may still run in the
        background), at most DT_UNPACK_WAIT (300) seconds."""
        if not re.fullmatch(r"[0-9]+", n):
            raise Failure(f"wait-unpack: number of packs expected, got '{n}'")
        limit = int(os.environ.get("DT_UNPACK_WAIT", "300"))
        end = time.time() + limit
        for k in range(1, int(n) + 1):
            while not os.path.exists(self.d(f".unpacked-{k}")):
                if os.path.exists(self.d(f".unpack-failed-{k}")):
                    raise Failure(f"the unpack of pack {k} failed (see its log)")
                if time.time() >= end:
                    raise Failure(f"pack {k} is not unpacked after {limit} s (still running, or never started)")
                time.sleep(1)
        print(f"packs 1..{n} unpacked")

    def seed_compile_cache(self) -> None:
        """The portable compile caches (denoise_train/compile_cache.py) a run starts from, unless
        this machine already has one of that name: those carried in a pack (RUN/resume, as
        collect returned them: newer), else the committed ones (weights/compile-cache/)."""
        dst = self.r("compile-cache")
        os.makedirs(dst, exist_ok=True)
        for f in sorted(glob.glob(self.r("resume", "*-torch*.bin.xz"))) + \
                sorted(glob.glob("weights/compile-cache/*-torch*.bin.xz")):
            if os.path.isfile(f) and not os.path.exists(os.path.join(dst, os.path.basename(f))):
                shutil.copy(f, dst)

    def bench(self, args: list[str]) -> int:
        os.makedirs(self.run, exist_ok=True)
        os.makedirs(self.out, exist_ok=True)
        self.seed_compile_cache()
        rc = tee([PY, "weights/bench_train.py", "--json", self.r("bench.json"), "--compile-cache",
                  self.r("compile-cache"), *env_args("DT_BENCH_ARGS"), *args], self.r("bench.txt"))
        for f in [self.r("bench.json"), self.r("bench.txt")] + glob.glob(self.r("compile-cache", "bench-*.bin.xz")):
            if os.path.isfile(f):
                shutil.copy(f, self.out)
        return rc

    def study(self, args: list[str]) -> None:
        if alive(self.r("study.pid")):
            print(f"study already running (pid {read(self.r('study.pid'))})")
            return
        if os.path.isfile(self.r("study", "winner")):
            print(f"study already done: {read(self.r('study', 'winner'))}")
            return
        if not glob.glob(self.d("videos2", "*.mp4")):
            raise Failure(f"no videos in {self.d('videos2')}: unpack every pack first")
        os.makedirs(self.r("study"), exist_ok=True)
        pid = start_background([PY, "weights/study.py", "--photos", self.d("photos"), "--videos", *self.videos,
                                "--cache", self.d("cache"), "--out", self.r("study"), "--bench-json",
                                self.r("bench.json"), "--device", self.device, *env_args("DT_STUDY_ARGS"), *args],
                               self.r("study", "stdout"), append=False)
        with open(self.r("study.pid"), "w") as f:
            f.write(f"{pid}\n")
        print(f"study started (pid {pid}), log {self.r('study', 'study.log')}")

    def main(self, minutes: str, cand: str = "") -> None:
        if alive(self.r("main.pid")):
            print(f"main run already running (pid {read(self.r('main.pid'))})")
            return
        if alive(self.r("study.pid")):
            raise Failure("the study is still running: poll until it ends first")
        os.makedirs(self.r("main"), exist_ok=True)
        last, resumed = self.r("main", "last.pt"), self.r("resume", "main_last.pt")
        # a checkpoint carried in parts (as collect returns one over 15 MiB; each part in its own pack)
        parts = sorted(glob.glob(self.r("resume", "main_last.pt.part[0-9]")))
        if not os.path.isfile(last) and not os.path.isfile(resumed) and os.path.isfile(resumed + ".part0"):
            try:
                with open(resumed, "wb") as out:
                    for part in parts:
                        with open(part, "rb") as f:
                            shutil.copyfileobj(f, out)
            except OSError as e:
                raise Failure(f"joining {resumed}.part* failed: {e}")
        # a resumed main run: from this machine, else from a checkpoint carried in a pack
        if not os.path.isfile(last) and os.path.isfile(resumed):
            shutil.copy(resumed, last)
            log = self.r("resume", "main_train.log")
            if os.path.isfile(log) and not os.path.isfile(self.r("main", "train.log")):
                shutil.copy(log, self.r("main", "train.log"))
        self.seed_compile_cache()
        args = ["--photos", self.d("photos"), "--videos", *self.videos, "--cache", self.d("cache"),
                "--out", self.r("main"), "--minutes", minutes, "--device", self.device,
                "--bench-json", self.r("bench.json"), "--compile-cache", self.r("compile-cache")]
        if os.path.isfile(last):
            how = f"resume {last}"
        else:
            args += ["--plan-minutes", self.plan]
            if not cand and os.path.isfile(self.r("study", "winner")):
                cand = read(self.r("study", "winner"))
            init = os.environ.get("DT_INIT", "")
            deepen = os.environ.get("DT_DEEPEN", "")
            if init and not os.path.isfile(init):
                raise Failure(f"DT_INIT: no {init}")
            if not init and cand and os.path.isfile(self.r("study", cand, "last.pt")):
                init = self.r("study", cand, "last.pt")
            if not init and os.path.isfile(self.r("resume", "study_winner.pt")):
                init = self.r("resume", "study_winner.pt")
            if deepen and not init:
                raise Failure(f"DT_DEEPEN={deepen}: no checkpoint to deepen (DT_INIT)")
            if init and deepen:
                stdout = self.r("main", "stdout")
                with open(stdout, "a") as log:
                    rc = subprocess.run([PY, "-m", "denoise_train.deepen", init, self.r("main", "deepened.pt"),
                                         "--depths", deepen], stdout=log, stderr=subprocess.STDOUT,
                                        env=package_env()).returncode
                if rc:
                    tail = (open(stdout).read().splitlines() or [""])[-1]
                    raise Failure(f"denoise_train.deepen {init} --depths {deepen} failed: {tail}")
                init = self.r("main", "deepened.pt")
            if init:
                how = f"init from {init}" + (f" (deepened: {deepen})" if deepen else "")
                args += ["--init", init]
            else:
                how = "from scratch"
            if cand:
                args += ["--candidate", cand]
        n = self.gpus if self.gpus is not None else (visible_gpus() if self.device.startswith("cuda") else 1)
        if n < 1:
            raise Failure("main: no visible GPU (set DT_DEVICE=cpu, or --gpus N)")
        # one process per GPU through torchrun (each takes the global --batch / N); one GPU: a plain process
        launch = [PY, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}"] if n > 1 else [PY]
        pid = start_background([*launch, "weights/train.py", *args, *env_args("DT_TRAIN_ARGS")], self.r("main", "stdout"),
                               append=True)
        with open(self.r("main.pid"), "w") as f:
            f.write(f"{pid}\n")
        print(f"main run started (pid {pid}, {how}, +{minutes} min, plan {self.plan} min at first start, "
              f"{n} process{'es (torchrun)' if n > 1 else ''})")

    def collect(self) -> None:
        """Copy the results to OUT. At most 9 files come back: status.txt, logs.tgz (bench, study
        without checkpoints, main logs), study_winner.pt, main_last.pt (or its 2 parts),
        main_train.log, the main run's compile cache (+ finish: the weight file, finish.tgz)."""
        os.makedirs(self.out, exist_ok=True)
        status = [datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")]
        for j in ("study", "main"):
            if alive(self.r(f"{j}.pid")):
                status.append(f"{j}: running (pid {read(self.r(f'{j}.pid'))})")
            elif os.path.isfile(self.r(f"{j}.pid")):
                status.append(f"{j}: ended")
        if os.path.isfile(self.r("study", "winner")):
            status.append(f"study winner: {read(self.r('study', 'winner'))}")
        if os.path.isfile(self.r("main", "train.log")):
            status.append("main, last events:")
            ev = re.compile(r'"event": "(val|train|done|error|stopped|diverged)"')
            with open(self.r("main", "train.log"), errors="replace") as f:
                status += [ln.rstrip("\n")[:400] for ln in f if ev.search(ln)][-3:]
        gpu = nvidia_smi("utilization.gpu,memory.used")
        if gpu is not None:
            status.append(gpu)
        status_txt = os.path.join(self.out, "status.txt")
        with open(status_txt, "w") as f:
            f.write("\n".join(status) + "\n")
        logs = [n for n in ("bench.json", "bench.txt", "study", "main") if os.path.exists(self.r(n))]
        if logs:
            skip = ("*.pt", "*.tmp", "*.safetensors")

            def keep(m: tarfile.TarInfo) -> tarfile.TarInfo | None:
                return None if any(fnmatch.fnmatch(os.path.basename(m.name), p) for p in skip) else m
            tmp = os.path.join(self.out, "logs.tgz.tmp")
            with tarfile.open(tmp, "w:gz") as tar:
                for n in logs:
                    tar.add(self.r(n), arcname=n, filter=keep)
            os.replace(tmp, os.path.join(self.out, "logs.tgz"))
        # a file over 16 MiB does not come back: the main run's checkpoint (8 bytes per parameter,
        # 10 with train.py --ema: 17.7 MB for 1.77 M parameters) then comes in parts of 15 MiB
        # (join: cat main_last.pt.part* > main_last.pt); the study winner's copy is only a record
        # and is left out when too big
        w = read(self.r("study", "winner")) if os.path.isfile(self.r("study", "winner")) else ""
        if w and os.path.isfile(self.r("study", w, "last.pt")):
            if os.path.getsize(self.r("study", w, "last.pt")) <= BACK_LIMIT:
                shutil.copy(self.r("study", w, "last.pt"), os.path.join(self.out, "study_winner.pt"))
            else:
                with open(status_txt, "a") as f:
                    f.write("study winner's checkpoint over 16 MiB: not copied to $OUT\n")
        last = self.r("main", "last.pt")
        if os.path.isfile(last):
            for f in glob.glob(os.path.join(self.out, "main_last.pt*")):
                os.remove(f)
            if os.path.getsize(last) <= BACK_LIMIT:
                shutil.copy(last, os.path.join(self.out, "main_last.pt"))
            else:
                with open(last, "rb") as f:
                    for i, chunk in enumerate(iter(lambda: f.read(PART), b"")):
                        with open(os.path.join(self.out, f"main_last.pt.part{i}"), "wb") as out:
                            out.write(chunk)
        if os.path.isfile(self.r("main", "train.log")):
            shutil.copy(self.r("main", "train.log"), os.path.join(self.out, "main_train.log"))
        # the main run's compile cache, for weights/compile-cache/ (or .data/resume/) here, when the
        # run saved one (not the seed it started from)
        for f in sorted(glob.glob(self.r("compile-cache", "train-*.bin.xz"))):
            b = os.path.basename(f)
            if any(os.path.isfile(s) and same_file(f, s) for s in (os.path.join("weights/compile-cache", b),
                                                                  self.r("resume", b))):
                continue
            if os.path.getsize(f) <= BACK_LIMIT:
                shutil.copy(f, self.out)

    def poll(self, seconds: str) -> None:
        end = time.time() + float(seconds) - 15
        seen: dict[str, int] = {}
        while True:
            for f in [self.r("study", "study.log"), self.r("main", "train.log")] + \
                    sorted(glob.glob(self.r("study", "*", "train.log"))):
                if not os.path.isfile(f):
                    continue
                with open(f, errors="replace") as fh:
                    lines = fh.read().split("\n")[:-1]   # whole lines only, as wc -l counts them
                n = len(lines)
                s = seen.get(f, n - 3 if n > 3 else 0)   # first look: the last 3 events only
                if n > s:   # new events; of the train events only the last
                    new = [ln for ln in lines[s:n] if '"event": "train"' not in ln]
                    trains = [ln for ln in lines[s:n] if '"event": "train"' in ln]
                    name = os.path.relpath(f, self.run)
                    for ln in new + trains[-1:]:
                        print(f"{name}: {ln[:300]}")
                    seen[f] = n
            sys.stdout.flush()
            self.collect()
            if not (alive(self.r("study.pid")) or alive(self.r("main.pid"))):
                print("== nothing running")
                break
            if time.time() >= end:
                print("== poll time up, still running")
                break
            time.sleep(15)
        print(open(os.path.join(self.out, "status.txt")).read(), end="")

    def status(self) -> None:
        self.collect()
        print(open(os.path.join(self.out, "status.txt")).read(), end="")
        for f in (self.r("study", "study.log"), self.r("main", "train.log")):
            if os.path.isfile(f):
                print(f"== {f}")
                with open(f, errors="replace") as fh:
                    for ln in fh.read().splitlines()[-5:]:
                        print(ln[:300])

    def finish(self) -> None:
        ck = self.r("main", "last.pt")
        if not os.path.isfile(ck):
            raise Failure(f"no {ck}")
        if alive(self.r("main.pid")):
            raise Failure("the main run is still running")
        w = self.r("denoise-v2.safetensors")
        if subprocess.run([PY, "weights/export.py", ck, w]).returncode:
            raise Failure("export failed")
        tee([PY, "-m", "denoise_train.faithful", w, "--device", self.device, "--json", self.r("faithful.json")],
            self.r("faithful.txt"), stderr_too=False)
        ev = []
        if glob.glob(self.d("eval", "*.mkv")):
            tee([PY, "weights/eval.py", w, "--data", self.d("eval"), "--json", self.r("eval.json")], self.r("eval.txt"))
            ev = ["--eval", self.r("eval.json")]
        if subprocess.run([PY, "weights/export.py", ck, w, "--faithful", self.r("faithful.json"), *ev]).returncode:
            raise Failure("export failed")
        os.makedirs(self.out, exist_ok=True)
        shutil.copy(w, self.out)
        with tarfile.open(os.path.join(self.out, "finish.tgz"), "w:gz") as tar:
            for n in ("faithful.json", "faithful.txt", "eval.json", "eval.txt"):
                if os.path.exists(self.r(n)):
                    tar.add(self.r(n), arcname=n)

    def signal_all(self, sig: signal.Signals) -> None:
        for j in ("study", "main"):
            if alive(self.r(f"{j}.pid")):
                pid = int(read(self.r(f"{j}.pid")))
                groups = process_groups(pid)
                for g in groups:
                    try:
                        os.killpg(g, sig)
                    except ProcessLookupError:
                        pass
                print(f"{j}: SIG{sig.name[3:]} to process group{'s' if len(groups) > 1 else ''} "
                      f"{' '.join(map(str, groups))}")

    def pause(self) -> None:
        """The GPU finishes what was queued (well under a second), then is idle."""
        self.signal_all(signal.SIGSTOP)
        time.sleep(2)
        gpu = nvidia_smi("utilization.gpu,memory.used")
        if gpu is not None:
            print(f"GPU after pause: {gpu}")


def same_file(a: str, b: str) -> bool:
    if os.path.getsize(a) != os.path.getsize(b):
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def main() -> int:
    ap = argparse.ArgumentParser(prog="tools/device_train.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    home = os.path.join("~", "denoise-train")
    ap.add_argument("--data", default=os.environ.get("DT_DATA", os.path.join(home, "data")))
    ap.add_argument("--run", default=os.environ.get("DT_RUN", os.path.join(home, "run")))
    ap.add_argument("--src", default=os.environ.get("DT_SRC") or os.environ.get("DENOISE_DATA"))
    ap.add_argument("--out", default=os.environ.get("OUT") or os.path.join(tempfile.gettempdir(), "device-train-out"))
    ap.add_argument("--gpus", type=int, default=os.environ.get("DT_GPUS") or None,
                    help="main's processes (default: every visible GPU)")
    ap.add_argument("command", choices=("pack", "unpack", "wait-unpack", "bench", "study", "main", "poll", "status",
                                        "pause", "resume", "collect", "finish"))
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    if a.command not in ("bench", "study"):   # their arguments go to the Python programs as they are
        # the folder options may also follow the command (pack --src DIR)
        if "-h" in a.args or "--help" in a.args:
            ap.print_help()
            return 0
        late = argparse.ArgumentParser(prog=f"tools/device_train.py {a.command}", add_help=False)
        for k in ("data", "run", "src", "out"):
            late.add_argument(f"--{k}", default=getattr(a, k))
        late.add_argument("--gpus", type=int, default=a.gpus)
        b, a.args = late.parse_known_args(a.args)
        for k in ("data", "run", "src", "out", "gpus"):
            setattr(a, k, getattr(b, k))
    full = lambda p: os.path.abspath(os.path.expanduser(p)) if p else p  # noqa: E731
    if a.gpus is not None and a.gpus < 1:
        ap.error(f"--gpus must be at least 1, got {a.gpus}")
    dt = DeviceTrain(full(a.data), full(a.run), full(a.src), full(a.out), a.gpus)
    os.chdir(ROOT)
    os.environ["PYTHONUNBUFFERED"] = "1"
    c, args = a.command, a.args
    want = {"unpack": 1, "wait-unpack": 1, "poll": 1, "main": (1, 2)}.get(c, 0 if c not in ("bench", "study") else None)
    if want is not None and len(args) not in (want if isinstance(want, tuple) else (want,)):
        ap.error(f"{c}: {'no arguments' if want == 0 else 'wrong number of arguments'} (see --help)")
    try:
        if c == "pack":
            dt.pack()
        elif c == "unpack":
            dt.unpack(args[0])
        elif c == "wait-unpack":
            dt.wait_unpack(args[0])
        elif c == "bench":
            return dt.bench(args)
        elif c == "study":
            dt.study(args)
        elif c == "main":
            dt.main(*args)
        elif c == "poll":
            dt.poll(args[0])
        elif c == "status":
            dt.status()
        elif c == "pause":
            dt.pause()
        elif c == "resume":
            dt.signal_all(signal.SIGCONT)
        elif c == "collect":
            dt.collect()
        elif c == "finish":
            dt.finish()
    except Failure as e:
        print(f"device_train: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
