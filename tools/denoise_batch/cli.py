"""denoise-batch's command line and the flow of each input.

usage: denoise-batch [OPTIONS] [ENCODER OPTIONS] -o OUTPUT INPUT
       denoise-batch [OPTIONS] [ENCODER OPTIONS] --output-dir DIR INPUT... [--input-list FILE]

Denoises each INPUT in segments of about --segment-frames frames, one Ray task per segment,
and joins them into OUTPUT (or DIR/<input's name>) without re-encoding. The joined video
equals a single `ffmpeg -i INPUT -vf CHAIN ENCODER OPTIONS OUTPUT` run frame for frame where
the chain keeps no state across the cut beyond the context frames (docs/scale-out.md).

options:
  -o OUTPUT               output file (one INPUT)
  --output-dir DIR        output folder (any number of INPUTs; the output keeps each input's name)
  --input-list FILE       inputs, one path per line ('#' starts a comment; '-' reads stdin)
  --segment-frames N      frames per segment, about (default 1000)
  --vf CHAIN              the filter chain (default denoise); a linear chain with one denoise
  --context N             frames the chain reads on each side of a frame (default 3: the network
                          reads t-3..t+3)
  --context-before N      frames fed in front of a segment (default: context + 2, the built-in
                          scene-cut detector's score of frame t reads t-2 and t-1)
  --context-after N       frames fed behind a segment (default: context)
  --backend auto|cpu|cuda what the tasks ask Ray for (auto: the chain's backend= if set, else cuda
                          when the cluster has GPUs, else cpu); added to the chain unless set there
  --cpus-per-task N       CPUs a task asks for (default 1); with backend cpu the CPU engine's
                          threads (the chain's cpu_threads= or threads=, else N, then added to
                          the chain as cpu_threads=) and a task asks for max(N, threads) CPUs
  --tasks-per-gpu N       with backend cuda, segments running at once on one GPU (default 2: a task
                          asks Ray for 1/N of a GPU; each is an ffmpeg process with the CUDA
                          engine's memory, about 1.2 GiB at 1080p, 2.9 GiB at 4K; 1: a GPU per
                          task); the outputs are the same whatever N
  --head-start N|auto     segments the driver runs itself while the Ray started here starts (not
                          with --address), their ffmpeg its own children; Ray runs the rest, and
                          fewer at once while those run (default auto: with backend cuda, the
                          GPUs this machine shows x --tasks-per-gpu; with backend cpu none; 0: none)
  --workers N             segments running at once, at most (default: what the cluster's
                          resources allow); with backend cpu and no --address also the CPUs of
                          the Ray instance started here (--workers x a task's CPUs; else Ray
                          takes this machine's CPU count)
  --address ADDR          a running Ray cluster (ray start --head ...); default: start Ray here
                          (RAY_ADDRESS in the environment also names a cluster)
  --retries N             attempts after the first for a failed segment (default 2)
  --work-dir DIR          where the work folders go (default: OUTPUT.denoise-batch beside OUTPUT;
                          with DIR, DIR/<output's name>.denoise-batch, removed after success; DIR
                          itself is never removed); must be on storage every node sees at the
                          same path
  --keep-work             keep the work folder after success
  -y                      overwrite existing outputs (default: an existing output is skipped)
  -an, -sn                leave out the source's audio / subtitles
  --ffmpeg PATH, --ffprobe PATH   (default: the ones beside this command, else on PATH)
  -q, --quiet             no progress line
  --progress-interval S   seconds between progress lines when stderr is not a terminal (10)
  --timings               after the run, print on stderr where its wall time went: one line per
                          segment (submitted, its ffmpeg's start, end and CPU time, done) and one
                          for the command (Python's start, the checks, the probes, Ray's import
                          and start, the segments, the joins and their checks, Ray's stop)
  --dry-run, --print-plan check and plan each input, print on stdout one JSON line per segment
                          (its frames and the ffmpeg argv its task would run) and one per input
                          for the join (the concat list and its argv), and exit; starts no Ray
                          and writes nothing
  -h, --help

Every input is checked (before Ray starts: it exists and can be read, its output and work
folders can be written; then, while Ray starts: ffprobe reads it, and the chain passes its first
frames one for one with their pts); an input that fails a check fails once, by name, and the
others go on.
SIGINT, SIGTERM or SIGHUP stop the run with one line: the segments done stay in the work folder
and the same command continues with the rest (exit 128 + the signal's number).

ENCODER OPTIONS: every other option starting with '-' is an ffmpeg output option with one
value, e.g. -c:v ffv1, -c:v libx264 -crf 18 -preset slow, -pix_fmt yuv420p10le. Options for
audio, subtitles or the container (-c:a, -b:a, -ar, -ac, -c:s, -metadata, -movflags, ...) apply
when the segments are joined (audio and subtitles are stream copies of the source otherwise);
the rest apply to every segment's encode. Each segment is a separate encode starting with a
keyframe: use an encoder setting that does not depend on the whole stream (CRF/QP, not
two-pass or a bitrate averaged over the file).

exit status: 0 when every input is done (or skipped as existing; with --dry-run: planned), 1
when any failed (or the --output-dir or --work-dir given cannot be written), 2 for a usage error
or a Ray that cannot run the tasks, 128 + N after signal N.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

from denoise_batch import assemble, children, interrupt, manifest, plan, preflight, schedule, segment
from denoise_batch import chain as chainmod
from denoise_batch.timings import Timings

SEGMENT_EXTS = {".mkv", ".webm", ".nut", ".mov", ".mp4", ".m4v"}
MUX_OPTIONS = {"acodec", "scodec", "dcodec", "ab", "ac", "ar", "af", "aq", "sample_fmt",
               "ch_layout", "channel_layout", "metadata", "movflags", "disposition", "shortest",
               "brand", "write_tmcd"}
OWN_VALUE = {"-o", "--output-dir", "--input-list", "--segment-frames", "--vf", "--context",
             "--context-before", "--context-after", "--backend", "--cpus-per-task", "--tasks-per-gpu",
             "--head-start", "--workers",
             "--address", "--retries", "--work-dir", "--ffmpeg", "--ffprobe", "--progress-interval"}
OWN_FLAG = {"--keep-work", "-y", "-an", "-sn", "-q", "--quiet", "-h", "--help", "--dry-run", "--print-plan",
            "--timings"}
# segments in flight on one GPU at once (--tasks-per-gpu; docs/scale-out.md, "Scheduling with Ray")
TASKS_PER_GPU = 2
# ffmpeg options that change which frames or timestamps a segment holds: the segment arithmetic
# (trim by pts, frame counts checked against the source) would no longer hold
FRAME_OPTIONS = {"-r", "-t", "-to", "-ss", "-sseof", "-frames", "-frames:v", "-vframes", "-fps_mode", "-vsync",
                 "-filter_complex", "-lavfi", "-itsoffset"}


class UsageError(Exception):
    pass


def parse(argv: list[str]) -> dict:
    o = {"inputs": [], "enc": [], "mux": [], "vf": "denoise", "segment_frames": 1000, "context": 3,
         "context_before": None, "context_after": None, "backend": "auto", "cpus_per_task": 1.0,
         "tasks_per_gpu": TASKS_PER_GPU, "head_start": "auto",
         "workers": None, "address": None, "retries": 2, "work_dir": None, "keep_work": False,
         "overwrite": False, "audio": True, "subtitles": True, "ffmpeg": None, "ffprobe": None,
         "quiet": False, "progress_interval": 10.0, "output": None, "output_dir": None,
         "input_list": None, "help": False, "dry_run": False, "timings": False}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in OWN_VALUE or (a.startswith("--") and a.split("=", 1)[0] in OWN_VALUE):
            if "=" in a and a.startswith("--"):
                a, v = a.split("=", 1)
            else:
                if i + 1 >= len(argv):
                    raise UsageError(f"{a} needs a value")
                v = argv[i + 1]
                i += 1
            key = {"-o": "output"}.get(a, a.lstrip("-").replace("-", "_"))
            o[key] = v
        elif a in OWN_FLAG:
            if a == "--keep-work":
                o["keep_work"] = True
            elif a == "-y":
                o["overwrite"] = True
            elif a == "-an":
                o["audio"] = False
            elif a == "-sn":
                o["subtitles"] = False
            elif a in ("-q", "--quiet"):
                o["quiet"] = True
            elif a in ("--dry-run", "--print-plan"):
                o["dry_run"] = True
            elif a == "--timings":
                o["timings"] = True
            else:
                o["help"] = True
        elif a == "--":
            o["inputs"] += argv[i + 1:]
            break
        elif a in ("-vf", "-filter:v", "-filter:v:0"):
            if i + 1 >= len(argv):
                raise UsageError(f"{a} needs a filter chain")
            o["vf"] = argv[i + 1]
            i += 1
        elif a.startswith("--"):
            raise UsageError(f"unknown option {a} (see --help)")
        elif a.split(":")[0] in FRAME_OPTIONS:
            raise UsageError(f"{a} changes which frames a segment holds: denoise-batch cuts and times the "
                             "segments itself (trim the input first, or use --vf for filters)")
        elif a.startswith("-") and len(a) > 1:
            if i + 1 >= len(argv):
                raise UsageError(f"encoder option {a} needs a value")
            name, _, spec = a[1:].partition(":")
            mux = name in MUX_OPTIONS or spec[:1] in ("a", "s", "d", "t")
            o["mux" if mux else "enc"] += [a, argv[i + 1]]
            i += 1
        else:
            o["inputs"].append(a)
        i += 1
    for k in ("segment_frames", "context", "context_before", "context_after", "retries", "workers",
              "tasks_per_gpu"):
        if o[k] is not None:
            try:
                o[k] = int(o[k])
            except ValueError:
                raise UsageError(f"--{k.replace('_', '-')}: not an integer: {o[k]}") from None
            if o[k] < (1 if k in ("segment_frames", "workers", "tasks_per_gpu") else 0):
                raise UsageError(f"--{k.replace('_', '-')}: out of range: {o[k]}")
    for k in ("cpus_per_task", "progress_interval"):
        try:
            o[k] = float(o[k])
        except ValueError:
            raise UsageError(f"--{k.replace('_', '-')}: not a number: {o[k]}") from None
    if o["head_start"] == "auto":
        o["head_start"] = None
    else:
        try:
            o["head_start"] = int(o["head_start"])
        except ValueError:
            raise UsageError(f"--head-start: auto or a number of segments, not {o['head_start']}") from None
        if o["head_start"] < 0:
            raise UsageError(f"--head-start: out of range: {o['head_start']}")
    if o["backend"] not in ("auto", "cpu", "cuda"):
        raise UsageError(f"--backend: auto, cpu or cuda, not {o['backend']}")
    if o["context_before"] is None:
        o["context_before"] = o["context"] + 2
    if o["context_after"] is None:
        o["context_after"] = o["context"]
    if o["input_list"]:
        f = sys.stdin if o["input_list"] == "-" else open(o["input_list"])
        with f:
            o["inputs"] += [l.strip() for l in f if l.strip() and not l.lstrip().startswith("#")]
    return o


def _tool(name: str, given: str | None, bindir: str | None) -> str:
    if given:
        return os.path.abspath(given) if os.sep in given else (shutil.which(given) or given)
    if bindir and os.access(os.path.join(bindir, name), os.X_OK):
        return os.path.join(bindir, name)
    return shutil.which(name) or name


def outputs(o: dict) -> list[tuple[str, str]]:
    if not o["inputs"]:
        raise UsageError("no INPUT")
    if o["output"] and o["output_dir"]:
        raise UsageError("-o and --output-dir together")
    if o["output"]:
        if len(o["inputs"]) != 1:
            raise UsageError("-o takes one INPUT; use --output-dir DIR for several")
        return [(o["inputs"][0], o["output"])]
    if not o["output_dir"]:
        raise UsageError("no output: -o OUTPUT or --output-dir DIR")
    pairs, seen = [], {}
    for i in o["inputs"]:
        out = os.path.join(o["output_dir"], os.path.basename(i))
        if out in seen:
            raise UsageError(f"{i} and {seen[out]} would both be written to {out}")
        seen[out] = i
        pairs.append((i, out))
    return pairs


def main(argv: list[str], bindir: str | None = None) -> int:
    err = sys.stderr
    timings = Timings()
    try:
        o = parse(argv)
    except (UsageError, OSError) as e:
        print(f"denoise-batch: {e}\n(denoise-batch --help for the usage)", file=err)
        return 2
    if o["help"]:
        try:
            print(__doc__[__doc__.index("usage:"):].strip())
        except BrokenPipeError:
            pass
        return 0
    try:
        pairs = outputs(o)
        chainmod.parse(o["vf"])
        chainmod.cpu_threads(o["vf"])
    except (UsageError, chainmod.ChainError, OSError) as e:
        print(f"denoise-batch: {e}\n(denoise-batch --help for the usage)", file=err)
        return 2
    batch = Batch(o, _tool("ffmpeg", o["ffmpeg"], bindir), _tool("ffprobe", o["ffprobe"], bindir), timings)
    interrupt.install()
    try:
        return batch.run(pairs)
    except (interrupt.Interrupted, KeyboardInterrupt) as e:
        stop = e if isinstance(e, interrupt.Interrupted) else interrupt.Interrupted(signal.SIGINT)
        # a second Ctrl-C must not cut the clean-up short
        interrupt.ignore()
        batch.interrupted(stop.name)
        return stop.exit_status
    finally:
        batch.shutdown()
        if o["timings"]:
            timings.print()


def work_folder(o: dict, out: str) -> str:
    if o["work_dir"]:
        # always a folder of the job's own inside it: the user's folder is never removed
        return os.path.abspath(os.path.join(o["work_dir"], os.path.basename(out) + ".denoise-batch"))
    return os.path.abspath(out) + ".denoise-batch"


def local_gpus() -> int:
    """NVIDIA GPUs this machine shows (CUDA_VISIBLE_DEVICES, else nvidia-smi -L), as Ray counts
    them when it starts here: for --dry-run, which starts no Ray, and the head start, which
    runs beside Ray's start."""
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if vis is not None:
        return len([v for v in vis.split(",") if v.strip() and not v.strip().startswith("-")])
    smi = shutil.which("nvidia-smi")
    if not smi:
        return 0
    try:
        r = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for l in r.stdout.splitlines() if l.startswith("GPU ")) if r.returncode == 0 else 0


class Batch:
    """The inputs of one command: checks and plans (no Ray), then Ray's run of the segments and
    the joins. fail(input, reason) records a failed input; run() returns the exit status."""

    def __init__(self, o: dict, ffmpeg: str, ffprobe: str, timings: Timings | None = None):
        self.o, self.ffmpeg, self.ffprobe = o, ffmpeg, ffprobe
        self.t = timings or Timings()
        self.failed: list[str] = []
        self.ok: list[str] = []
        self.jobs: list[dict] = []
        self.ray = None
        self.runner: schedule.Runner | None = None
        self.planner: Planner | None = None
        self.head: HeadStart | None = None
        self.owner: schedule.RayOwner | None = None  # Ray's start and stop
        self.interrupting = False

    def fail(self, inp: str, msg: str) -> None:
        if self.interrupting:
            # a probe or check that the interrupt itself ended: not the input's failure
            return
        self.failed.append(f"{inp}: {msg}")
        print(f"denoise-batch: FAILED: {inp}: {msg}", file=sys.stderr, flush=True)

    # --- what a task runs: the backend, the CPU engine's threads, the CPUs a task asks Ray for

    def threads(self) -> int:
        """The CPU engine's threads in each task: the chain's cpu_threads= (or threads=), else
        --cpus-per-task."""
        return chainmod.cpu_threads(self.o["vf"]) or max(1, int(self.o["cpus_per_task"]))

    def task_cpus(self, backend: str) -> float:
        """CPUs a task asks Ray for: --cpus-per-task, and with backend cpu at least the engine's
        threads, so that the tasks Ray runs at once never start more threads than its CPUs."""
        if backend == "cpu":
            return max(self.o["cpus_per_task"], float(self.threads()))
        return self.o["cpus_per_task"]

    def head_start_count(self, backend: str, gpus: int) -> int:
        """Segments the driver runs itself while Ray starts (--head-start; auto: with backend
        cuda, `gpus` x --tasks-per-gpu, with cpu none), at most --workers."""
        o = self.o
        n = o["head_start"]
        if n is None:
            n = gpus * o["tasks_per_gpu"] if backend == "cuda" else 0
        return min(n, o["workers"]) if o["workers"] else n

    def task_gpus(self, backend: str) -> float:
        """The GPU share a task asks Ray for: 1 / --tasks-per-gpu with backend cuda, else 0."""
        return 1.0 / self.o["tasks_per_gpu"] if backend == "cuda" else 0.0

    def chain(self, backend: str) -> str:
        """The chain every segment runs (before a GPU task's device=): backend= and, for the CPU
        engine, its threads, where the chain does not set them."""
        extra = {"backend": backend}
        if backend == "cpu" and chainmod.cpu_threads(self.o["vf"]) is None:
            # cpu_threads=0 in the chain means "the filter's threads": set those instead
            key = "threads" if "cpu_threads" in chainmod.denoise_options(self.o["vf"]) else "cpu_threads"
            extra[key] = str(self.threads())
        return chainmod.with_denoise_options(self.o["vf"], extra)

    def backend(self) -> str:
        """--backend, else the chain's backend=, else auto (decided by the cluster's GPUs)."""
        b = self.o["backend"]
        chain_backend = chainmod.denoise_options(self.o["vf"]).get("backend")
        if b == "auto" and chain_backend in ("cpu", "cuda"):
            return chain_backend
        return b

    # --- the flow

    def run(self, pairs: list[tuple[str, str]]) -> int:
        o, err = self.o, sys.stderr
        todo = []
        for inp, out in pairs:
            if os.path.exists(out) and not o["overwrite"]:
                print(f"denoise-batch: {out} exists, skipped (-y overwrites)", file=err)
            else:
                todo.append((inp, out))
        if not todo:
            return 0
        # the quick checks before Ray: the folders given, each input's file and folders
        for opt, folder in (("--output-dir", o["output_dir"]), ("--work-dir", o["work_dir"])):
            with self.t.phase("checks"):
                why = folder and preflight.folder_problem(folder)
            if why:
                print(f"denoise-batch: FAILED: {opt}: {why}", file=err)
                return 1
        checked = []
        for inp, out in todo:
            with self.t.phase("checks"):
                why, work = self.check(inp, out)
            if why:
                self.fail(inp, why)
            else:
                checked.append((inp, out, work))
        if not checked:
            return self.summary()
        # the probes and chain checks (ffprobe and ffmpeg runs) go on beside Ray's start
        self.planner = Planner(self, checked)
        backend = self.backend()
        if o["dry_run"]:
            planned = self.planner.result()
            if backend == "auto":
                backend = "cuda" if local_gpus() else "cpu"
            try:
                self.print_plan(planned, backend)
            except BrokenPipeError:
                # the reader stopped early (| head): no more lines, and none at exit either
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return self.summary()

        if o["address"] or os.environ.get("RAY_ADDRESS"):
            address, cpus = o["address"] or os.environ["RAY_ADDRESS"], None
        else:
            # CPU tasks: --workers of them fit; GPU tasks: Ray counts the GPUs it finds, and
            # --workers caps the tasks in flight
            w = o["workers"]
            address = None
            cpus = int(w * self.task_cpus("cpu") + 0.999) if w and backend != "cuda" else None
        if importlib.util.find_spec("ray") is None:
            # before the head start: no segment runs for a job that cannot finish
            print("denoise-batch: the Python package 'ray' is not installed (python3 -m pip install ray)",
                  file=err)
            return 2
        # Ray starts in its own thread first; nvidia-smi and the head start's set-up go beside it
        self.owner = schedule.RayOwner(address, cpus, self.t)
        if not address:
            # the first segments start here, beside Ray's start (on this machine: what Ray will
            # find, as for --dry-run)
            gpus = local_gpus() if backend != "cpu" else 0
            head_backend = backend if backend != "auto" else ("cuda" if gpus else "cpu")
            n = self.head_start_count(head_backend, gpus)
            if n:
                self.head = HeadStart(self, head_backend, n, gpus)
        try:
            self.ray = self.owner.result()
        except ImportError:
            print("denoise-batch: the Python package 'ray' is not installed (python3 -m pip install ray)",
                  file=err)
            return 2
        except Exception as e:  # Ray's own errors: no cluster at the address, a failed start
            print(f"denoise-batch: cannot start or reach Ray: {e}", file=err)
            return 2
        # (Ray's core worker may have set a C++ handler for SIGTERM)
        interrupt.install()
        planned = self.planner.result()
        if not planned:
            # every input failed its probe or chain check (Ray started beside them)
            return self.summary()
        res = self.ray.cluster_resources()
        gpus, cpus_there = res.get("GPU", 0), res.get("CPU", 0)
        if self.head:
            # the segments running here decided it
            backend = self.head.backend
        if backend == "auto":
            backend = "cuda" if gpus > 0 else "cpu"
        if backend == "cuda" and gpus == 0:
            # a task asking for a GPU would wait for one forever
            print("denoise-batch: backend cuda, but the Ray cluster has no GPU (--backend cpu runs "
                  "on CPUs)", file=err)
            return 2
        need = self.task_cpus(backend)
        if need > cpus_there:
            print(f"denoise-batch: a task asks Ray for {need:g} CPUs (--cpus-per-task, and with backend "
                  f"cpu the chain's cpu_threads=), but the Ray cluster has {cpus_there:g}", file=err)
            return 2
        local, start = [], None
        if self.head:
            self.jobs, local, start = self.head.result()
        else:
            chain = self.chain(backend)
            with self.t.phase("work folders"):
                for p in planned:
                    job = self.open_work(p, chain)
                    if job:
                        self.jobs.append(job)
        if self.jobs:
            # the tasks Ray can run at once: while the head start's runs go on, Ray gets that
            # many fewer
            capacity = int(gpus * o["tasks_per_gpu"]) if backend == "cuda" else int(cpus_there // need)
            self.runner = schedule.Runner(self.ray, self.task_gpus(backend), need, o["retries"], o["workers"],
                                          o["quiet"], o["progress_interval"], timings=self.t)
            self.runner.run(self.jobs, self.complete, lambda job, msg: self.fail(job["input"], msg),
                            on_idle=self.stop_ray_beside, local=local, capacity=capacity, start=start)
        return self.summary()

    def summary(self) -> int:
        if self.failed:
            print(f"denoise-batch: {len(self.ok)} done, {len(self.failed)} failed:", file=sys.stderr)
            for f in self.failed:
                print(f"  {f}", file=sys.stderr)
            return 1
        return 0

    def check(self, inp: str, out: str) -> tuple[str | None, str]:
        """The quick checks of one input (no process is run): (why it fails or None, its work
        folder)."""
        why = preflight.input_problem(inp)
        work = work_folder(self.o, out)
        out_dir = os.path.dirname(os.path.abspath(out))
        for what, folder in (("output folder", out_dir), ("work folder", os.path.dirname(work))):
            if why or (what == "work folder" and folder == out_dir):
                continue
            why = preflight.folder_problem(folder)
            why = why and f"{what}: {why}"
        return why, work

    def plan(self, inp: str, out: str, work: str) -> dict | None:
        """Probe, check the chain on and split one input that passed check() (nothing is
        written). None when it failed. Runs in the planner's thread."""
        t = self.t
        # the chain check needs no probe (it trims by frame count): both run at once
        ran: dict = {}

        def chain_check():
            with t.phase("chain check"):
                ran["r"] = preflight.chain_run(self.ffmpeg, inp, self.o["vf"])
        beside = threading.Thread(target=chain_check, name="denoise-batch-chain-check", daemon=True)
        beside.start()
        runs = plan.ffprobe_runs
        try:
            with t.phase("probe"):
                src = plan.probe(self.ffprobe, inp)
        except plan.ProbeError as e:
            self.fail(inp, str(e))
            return None
        finally:
            t.count("ffprobe", plan.ffprobe_runs - runs)
            beside.join()
        with t.phase("chain check"):
            why = preflight.chain_problem(self.ffmpeg, src, self.o["vf"], ran.get("r"))
        if why:
            self.fail(inp, why)
            return None
        with t.phase("plan"):
            return self._split(inp, out, work, src)

    def _split(self, inp: str, out: str, work: str, src: plan.Source) -> dict:
        o = self.o
        ext = os.path.splitext(out)[1].lower()
        seg_ext = ext if ext in SEGMENT_EXTS else ".mkv"
        segs = []
        for s in plan.split(src, o["segment_frames"], o["context_before"], o["context_after"]):
            tin, tout = plan.trims(src, s)
            segs.append(s.to_json() | {"frames": s.frames, "seek": plan.seek(src, s), "trim_in": tin,
                                       "trim_out": tout, "file": "seg-%05d%s" % (s.index, seg_ext),
                                       "done": False, "attempts": 0})
        return {"input": inp, "output": out, "work": work, "source": src, "segments": segs,
                "segment_ext": seg_ext}

    def identity(self, p: dict, chain: str) -> dict:
        o = self.o
        params = {"vf": chain, "encoder_options": o["enc"], "segment_frames": o["segment_frames"],
                  "context_before": o["context_before"], "context_after": o["context_after"],
                  "segment_ext": p["segment_ext"]}
        return manifest.identity(p["input"], params)

    def job(self, p: dict, m: dict, done: set, chain: str) -> dict:
        task_job = {"input": os.path.abspath(p["input"]), "work": p["work"], "ffmpeg": self.ffmpeg,
                    "encoder_options": self.o["enc"]}
        for s in m["segments"]:
            s["done"] = s["index"] in done
        return {"input": p["input"], "output": p["output"], "work": p["work"], "source": p["source"],
                "manifest": m, "segments": m["segments"], "done": set(done), "chain": chain,
                "task_job": task_job}

    def open_work(self, p: dict, chain: str) -> dict | None:
        """Create the work folder of a planned input, or resume the one there. None on failure."""
        inp, work = p["input"], p["work"]
        try:
            os.makedirs(os.path.dirname(os.path.abspath(p["output"])) or ".", exist_ok=True)
            os.makedirs(work, exist_ok=True)
            ident = self.identity(p, chain)
            m = manifest.load(work)
            if m and m.get("identity") == ident:
                stale = manifest.remove_attempts(work)
                done = manifest.done(work, m)
                if done or stale:
                    print(f"denoise-batch: {inp}: resuming, {len(done)} of {len(m['segments'])} segments "
                          f"done" + (f" ({stale} unfinished attempt file(s) removed)" if stale else ""),
                          file=sys.stderr)
            else:
                if m:
                    print(f"denoise-batch: {inp}: the work folder {work} was for other input or options: "
                          f"starting afresh", file=sys.stderr)
                manifest.clear(work)
                m = {"version": manifest.VERSION, "identity": ident, "segments": p["segments"]}
                manifest.save(work, m)
                done = set()
        except OSError as e:
            self.fail(inp, f"work folder {work}: {e.strerror or e}")
            return None
        return self.job(p, m, done, chain)

    def print_plan(self, planned: list[dict], backend: str) -> None:
        """--dry-run: one JSON line per segment (what its Ray task would run) and one per input
        for the join, on stdout."""
        chain = self.chain(backend)
        # a GPU task adds the device Ray assigned it: 0 where Ray gives a task one GPU
        task_chain = chainmod.with_denoise_options(chain, {"device": "0"}) if backend == "cuda" else chain
        for p in planned:
            m = manifest.load(p["work"])
            ident = self.identity(p, chain)
            done = manifest.done(p["work"], m) if m and m.get("identity") == ident else set()
            job = self.job(p, {"segments": p["segments"]}, done, task_chain)
            n = len(job["segments"])
            for s in job["segments"]:
                final = os.path.join(p["work"], s["file"])
                progress = os.path.join(p["work"], os.path.splitext(s["file"])[0] + ".progress")
                print(json.dumps({
                    "input": p["input"], "output": p["output"], "work": p["work"], "backend": backend,
                    "task_cpus": self.task_cpus(backend), "task_gpus": self.task_gpus(backend),
                    "segment": s["index"], "segments": n, "first": s["first"], "last": s["last"],
                    "frames": s["frames"], "ctx_first": s["ctx_first"], "ctx_last": s["ctx_last"],
                    "keyframe": s["keyframe"], "done": s["done"], "chain": task_chain, "file": final,
                    "argv": segment.command(job["task_job"], s, task_chain, final, progress)}))
            join = job["task_job"] | {"output": p["output"], "audio": self.o["audio"],
                                      "subtitles": self.o["subtitles"], "mux_options": self.o["mux"]}
            partial = assemble.partial_path(p["output"])
            lst = assemble.concat_path(job)
            print(json.dumps({
                "input": p["input"], "output": p["output"], "work": p["work"], "join": True,
                "frames": p["source"].frames, "concat_file": lst,
                "concat": assemble.concat_text(job["segments"], p["source"]), "partial": partial,
                "argv": assemble.join_command(join, p["source"], lst, partial)}), flush=True)

    def complete(self, job: dict) -> None:
        o = self.o
        try:
            assemble.assemble(job["task_job"] | {"output": job["output"], "segments": job["segments"],
                                                 "audio": o["audio"], "subtitles": o["subtitles"],
                                                 "mux_options": o["mux"]},
                              job["source"], self.ffprobe, self.t)
        except (assemble.AssembleError, OSError) as e:
            self.fail(job["input"], str(e))
            return
        self.ok.append(job["input"])
        print(f"denoise-batch: done: {job['input']} -> {job['output']} ({job['source'].frames} "
              f"frames, {len(job['segments'])} segments)", file=sys.stderr, flush=True)
        if not o["keep_work"]:
            with self.t.phase("cleanup"):
                shutil.rmtree(job["work"], ignore_errors=True)

    def interrupted(self, name: str) -> None:
        """After SIGINT, SIGTERM or SIGHUP: stop Ray (its workers, and with them their ffmpeg
        runs), remove the attempts they leave, and say what is kept, on one line."""
        self.interrupting = True
        if self.runner and self.runner.prog:
            self.runner.prog.close_line()
        self.shutdown()
        if self.head:
            # head-start runs that finished before the Runner took them: recorded as done
            for r in self.head.runs:
                s, job = r.seg, r.job
                if r.result is not None and s["index"] not in job["done"]:
                    s["done"] = True
                    s["attempts"] = s.get("attempts", 0) + 1
                    job["done"].add(s["index"])
                    manifest.save(job["work"], job["manifest"])
        for job in self.jobs:
            manifest.remove_attempts(job["work"])
        done = sum(len(j["done"]) for j in self.jobs)
        total = sum(len(j["segments"]) for j in self.jobs)
        if self.jobs:
            what = (f"{done} of {total} segments done are kept in the work folder"
                    f"{'s' if len(self.jobs) > 1 else ''}; the same command continues with the rest")
        else:
            what = "no segment had started"
        print(f"denoise-batch: interrupted ({name}): {what}", file=sys.stderr, flush=True)

    def stop_ray_beside(self) -> None:
        """Begin Ray's stop (no task runs or waits any more): the last joins and their checks run
        meanwhile. shutdown() waits for it."""
        self.ray = None
        if self.owner:
            self.owner.stop(wait=False)

    def shutdown(self) -> None:
        """Stop the planner's child processes, the head start's runs and the Ray started here
        (disconnect from a cluster), also one whose start a signal interrupted (its start ends
        first); nothing when Ray was never started. The probes it kills are not the inputs'
        failures (fail() says nothing from here on)."""
        self.interrupting = True
        if self.planner:
            self.planner.stop()
        if self.head:
            self.head.stop()
        self.ray = None
        if self.owner:
            self.owner.stop()


class Planner:
    """Batch.plan() of each input that passed the quick checks, one after another in a thread of
    its own, so that the probes and chain checks (ffprobe and ffmpeg runs) go on while Ray starts.
    result() waits for all; failures are reported by Batch.fail() as they come."""

    def __init__(self, batch: Batch, items: list[tuple[str, str, str]]):
        self.batch, self.items = batch, items
        self.planned: list[dict] = []
        self.error: BaseException | None = None
        self.stopped = False
        self.thread = threading.Thread(target=self._run, name="denoise-batch-planner", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for inp, out, work in self.items:
                if self.stopped:
                    return
                p = self.batch.plan(inp, out, work)
                if p:
                    self.planned.append(p)
        except BaseException as e:  # a bug, raised again in the main thread by result()
            self.error = e

    def result(self) -> list[dict]:
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.planned

    def stop(self) -> None:
        """No further input; the probes and checks running are ended (an interrupt, an error)."""
        self.stopped = True
        children.kill_all()


class HeadStart:
    """The first segments, run by the driver itself (schedule.LocalRun: a thread and its ffmpeg)
    while the main thread starts Ray here: Ray's start (seconds) would otherwise keep the GPUs
    idle. In a thread of its own: waits for the planner, opens the work folders (as the main
    thread does without a head start), and starts up to `n` segments not done, in order; with
    backend cuda the k-th on device k mod `gpus` (the GPUs this machine shows, those Ray will
    count). result() hands the jobs, the runs and the first run's start (time.monotonic()) to the
    Runner, which takes their results like its tasks'."""

    def __init__(self, batch: Batch, backend: str, n: int, gpus: int):
        self.batch, self.backend, self.n, self.gpus = batch, backend, n, max(1, gpus)
        self.jobs: list[dict] = []
        self.runs: list[schedule.LocalRun] = []
        self.start: float | None = None
        self.error: BaseException | None = None
        self.lock = threading.Lock()
        self.stopped = False
        self.thread = threading.Thread(target=self._run, name="denoise-batch-head-start", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            b = self.batch
            planned = b.planner.result()
            chain = b.chain(self.backend)
            with b.t.phase("work folders"):
                for p in planned:
                    with self.lock:
                        if self.stopped:  # an interrupt came while the probes ran
                            return
                    job = b.open_work(p, chain)
                    if job:
                        self.jobs.append(job)
            b.jobs = self.jobs
            # ffmpeg's environment as in a Ray worker, which sets OMP_NUM_THREADS to its task's
            # CPUs where unset (thread pools: the segments' process context stays one)
            env = dict(os.environ)
            env.setdefault("OMP_NUM_THREADS", str(max(1, int(b.task_cpus(self.backend)))))
            k = 0
            for job in self.jobs:
                for s in job["segments"]:
                    if k >= self.n:
                        return
                    if s["index"] in job["done"]:
                        continue
                    task_chain = chain
                    if self.backend == "cuda":
                        task_chain = chainmod.with_denoise_options(chain, {"device": str(k % self.gpus)})
                    with self.lock:
                        if self.stopped:
                            return
                        if self.start is None:
                            self.start = time.monotonic()
                        self.runs.append(schedule.LocalRun(job, s, task_chain, env))
                    k += 1
        except BaseException as e:  # a bug, raised again in the main thread by result()
            self.error = e

    def result(self) -> tuple[list[dict], list, float | None]:
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.jobs, list(self.runs), self.start

    def stop(self) -> None:
        """Start no more, end the runs' ffmpeg (an interrupt, an error; a finished run: nothing)."""
        with self.lock:
            self.stopped = True
            runs = list(self.runs)
        for r in runs:
            r.kill()
