"""Ray as the scheduler: one task per segment, retries, the manifest, the progress line.

With backend=cuda a task asks for 1/--tasks-per-gpu of a GPU (num_gpus; 1: a GPU of its own),
the filter's device= being the GPU Ray assigned it, and for the CPUs the caller computed
(cli.task_cpus: with backend=cpu the CPU engine's threads). ray.init() (in RayOwner's thread)
starts Ray on this machine when no --address (or RAY_ADDRESS) names a cluster; meanwhile the
driver may run the first segments itself (LocalRun, cli.HeadStart), taken by the Runner like
its tasks. Tasks are submitted with max_retries=0 and retried here, so that a segment
whose worker died (SIGKILL, a lost node) and one whose ffmpeg failed are counted and reported
alike; after --retries more attempts the segment fails by name. A failure that another attempt
would repeat (segment.SegmentError with retry False: a wrong frame count) fails its input at
once. Segments are files in the work folder, which every node must see at the same path (shared
storage): only small dictionaries travel through Ray.
"""
from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections import deque
from contextlib import nullcontext

from denoise_batch import chain as chainmod
from denoise_batch import interrupt, manifest, segment, timings
from denoise_batch.progress import Progress

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
# the niceness Ray starts its workers with (its system config worker_niceness, default 15): the
# driver's own runs (LocalRun) get as much, so that Ray's start beside them keeps its CPUs
try:
    WORKER_NICENESS = int(os.environ.get("RAY_worker_niceness", "15"))
except ValueError:
    WORKER_NICENESS = 15


def _segment_task(job: dict, seg: dict, chain: str, use_gpu: bool) -> dict:
    if use_gpu:
        import ray
        chain = chainmod.with_denoise_options(chain, {"device": str(segment.device_index(ray.get_gpu_ids()))})
    return segment.run(job, seg, chain)


def start(address: str | None, cpus: int | None):
    """Connect to the cluster at `address`, or start Ray on this machine with `cpus` CPUs (None:
    the machine's count). Returns the ray module. Called in RayOwner's thread: in the main
    thread ray.init() would set a SIGTERM handler of its own (sys.exit)."""
    import ray
    kw = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    if address:
        # the workers of a cluster import this package from a copy Ray ships to them
        ray.init(address=address, runtime_env={"py_modules": [PACKAGE_DIR]}, **kw)
    else:
        # local workers inherit the environment of the Ray processes started here
        parent = os.path.dirname(PACKAGE_DIR)
        pp = os.environ.get("PYTHONPATH", "")
        if parent not in pp.split(os.pathsep):
            os.environ["PYTHONPATH"] = parent + (os.pathsep + pp if pp else "")
        ray.init(num_cpus=cpus, **kw)
    return ray


class RayOwner:
    """Ray's start and stop in a thread of its own that lives from ray.init() to ray.shutdown().

    - Signals: ray.init() in the main thread would set a SIGTERM handler of its own (sys.exit),
      and SIGTERM or SIGINT there raise inside its start: a core worker half set up then makes
      the process abort or crash on the way out. Here the main thread waits (result()) with the
      driver's own handlers, and an interrupt lets the start finish before Ray is stopped.
    - Lifetime: Ray's processes started here die with the thread that started them (their
      PR_SET_PDEATHSIG follows the creating thread), so this thread stays until stop().
    result() returns the ray module (or raises what the start raised); stop() stops Ray (the
    timings' phase "ray shutdown") and, with wait, waits for it."""

    def __init__(self, address: str | None, cpus: int | None, timings_=None):
        self.address, self.cpus, self.t = address, cpus, timings_
        self.ray = None
        self.error: BaseException | None = None
        self._ready = threading.Event()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="denoise-batch-ray", daemon=True)
        self.thread.start()

    def _phase(self, name):
        return self.t.phase(name) if self.t else nullcontext()

    def _run(self) -> None:
        try:
            with self._phase("ray import"):
                import ray  # noqa: F401  (start()'s import, timed apart from the start)
            with self._phase("ray start"):
                self.ray = start(self.address, self.cpus)
        except BaseException as e:
            self.error = e
        self._ready.set()
        self._stop.wait()
        ray = self.ray or sys.modules.get("ray")
        if ray is not None:
            try:
                with self._phase("ray shutdown"):
                    stop(ray)
            except Exception:  # a start that failed half way: nothing more to stop
                pass

    def result(self):
        self._ready.wait()
        if self.error is not None:
            raise self.error
        return self.ray

    def stop(self, wait: bool = True) -> None:
        self._stop.set()
        if wait:
            self.thread.join()


def stop(ray) -> None:
    """ray.shutdown(): stop the Ray started here (or disconnect from a cluster). The autoscaler's
    monitor process of a Ray started here is killed first: ray.shutdown() stops the raylet and
    the GCS, then sends the monitor SIGTERM, on which it tries to report its end to the GCS that
    is gone, and waits a second for it before SIGKILL. Nothing of ours lives in it."""
    node = getattr(getattr(getattr(ray, "_private", None), "worker", None), "_global_node", None)
    try:
        for info in node.all_processes.get("monitor", []) if node is not None else []:
            info.process.kill()
    except Exception:  # another Ray's internals: ray.shutdown() alone then
        pass
    ray.shutdown()


class LocalRun:
    """One segment that the driver runs itself, in a thread, its ffmpeg a child of the driver:
    the head start, while Ray starts (cli.HeadStart). done() tells when it has ended; result and
    error are then segment.run()'s return value or exception. kill() ends its ffmpeg."""

    def __init__(self, job: dict, seg: dict, chain: str, env: dict | None = None):
        self.job, self.seg, self.env = job, seg, env
        self.submitted = timings.now()
        self.result: dict | None = None
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._proc = None
        self._killed = False
        self.thread = threading.Thread(target=self._run, args=(chain,), daemon=True,
                                       name=f"denoise-batch-segment-{seg['index']}")
        self.thread.start()

    def _run(self, chain: str) -> None:
        try:
            self.result = segment.run(self.job["task_job"], self.seg, chain, on_start=self._started, env=self.env,
                                      nice=WORKER_NICENESS)
        except BaseException as e:
            self.error = e

    def _started(self, proc) -> None:
        with self._lock:
            self._proc = proc
            if self._killed:
                proc.kill()

    def done(self) -> bool:
        return not self.thread.is_alive()

    def kill(self) -> None:
        """End its ffmpeg and wait for the thread (segment.run removes the attempt's file)."""
        with self._lock:
            self._killed = True
            if self._proc is not None:
                self._proc.kill()
        self.thread.join()


class Runner:
    """Runs the segments of every job; calls on_complete(job) when a job's last segment is done
    and on_failed(job, message) when one of its segments has failed for good."""

    def __init__(self, ray, gpus_per_task: float, cpus_per_task: float, retries: int, max_inflight: int | None,
                 progress_quiet: bool, progress_interval: float, timings=None):
        self.ray = ray
        self.timings = timings
        self.use_gpu = gpus_per_task > 0
        self.retries = retries
        self.max_inflight = max_inflight
        self.quiet, self.interval = progress_quiet, progress_interval
        self.prog: Progress | None = None
        self.inflight: dict = {}
        opts = dict(num_cpus=cpus_per_task, max_retries=0)
        if self.use_gpu:
            # 1 / --tasks-per-gpu: Ray runs that many tasks on a GPU at once
            opts["num_gpus"] = gpus_per_task
        self.task = ray.remote(_segment_task).options(**opts)

    def run(self, jobs: list[dict], on_complete, on_failed, on_idle=None, local: list | None = None,
            capacity: int | None = None, start: float | None = None) -> None:
        """Run the segments not done. on_idle(), where given, is called once no task runs or
        waits any more (Ray is then no longer needed), before the last jobs' on_complete: the
        caller stops Ray beside those joins. `local`: LocalRun()s already running (the head
        start); while any runs, the Ray tasks in flight are at most `capacity` less their number
        (Ray does not know of them). `start`: when the job began (time.monotonic(): the head start's
        first run), for the progress line's rate (default: now)."""
        local = list(local or [])
        running_here = {id(r.seg) for r in local}
        queue = deque()
        last: list = []  # jobs completed by the last tasks: joined after on_idle()
        total = already = nsegs = segs_done = 0
        for job in jobs:
            for s in job["segments"]:
                total += s["frames"]
                nsegs += 1
                if s["index"] in job["done"]:
                    already += s["frames"]
                    segs_done += 1
                elif id(s) not in running_here:
                    _remove(os.path.join(job["work"], _progress_name(s)))
                    queue.append((job, s))
        for job in jobs:
            if job["segments"] and len(job["done"]) == len(job["segments"]):
                on_complete(job)
        prog = self.prog = Progress(total, already, nsegs, quiet=self.quiet, interval=self.interval, start=start)
        done_frames = already
        inflight = self.inflight
        submitted: dict = {}

        def limit() -> float:
            cap = self.max_inflight if self.max_inflight is not None else float("inf")
            if local and capacity is not None:
                cap = min(cap, capacity) - len(local)
            return cap

        def submit():
            while queue and len(inflight) < limit():
                job, s = queue.popleft()
                if job.get("failed"):
                    continue
                with interrupt.deferred():
                    ref = self.task.remote(job["task_job"], s, job["chain"], self.use_gpu)
                inflight[ref] = (job, s)
                submitted[ref] = timings.now()

        def finished(job: dict, s: dict, result, error, since: float, here: bool = False) -> None:
            nonlocal done_frames, segs_done
            if self.timings:
                self.timings.segment(s["index"], job["input"], since, timings.now(), result, here)
            if error is not None:
                s["attempts"] = s.get("attempts", 0) + 1
                why, retry = _reason(error)
                s["error"] = why
                manifest.save(job["work"], job["manifest"])
                name = f"segment {s['index']} (frames {s['first']}..{s['last']})"
                log = os.path.join(job["work"], _log_name(s))
                if job.get("failed"):
                    pass
                elif not retry:
                    job["failed"] = True
                    on_failed(job, f"{name} failed: {why} (log: {log}; not retried: another "
                                   f"attempt would fail alike)")
                elif s["attempts"] <= self.retries:
                    prog.message(f"denoise-batch: {job['input']}: {name} failed (attempt "
                                 f"{s['attempts']}), retrying: {why}")
                    _remove(os.path.join(job["work"], _progress_name(s)))
                    queue.appendleft((job, s))
                else:
                    job["failed"] = True
                    on_failed(job, f"{name} failed after {s['attempts']} attempts: {why} "
                                   f"(log: {log}; the same command again retries what is not done)")
                return
            s["done"] = True
            s["attempts"] = s.get("attempts", 0) + 1
            s.pop("error", None)
            job["done"].add(s["index"])
            done_frames += s["frames"]
            segs_done += 1
            manifest.save(job["work"], job["manifest"])
            if len(job["done"]) == len(job["segments"]) and not job.get("failed"):
                if inflight or queue or local:
                    on_complete(job)
                else:
                    last.append(job)

        submit()
        while inflight or local:
            ready = []
            with interrupt.deferred():
                if inflight:
                    # (polled more often while the driver's own runs go on: ray.wait sees only Ray's)
                    ready, _ = self.ray.wait(list(inflight), num_returns=1, timeout=0.2 if local else 1.0)
                else:
                    time.sleep(0.2)
            for ref in ready:
                job, s = inflight.pop(ref)
                result = error = None
                try:
                    with interrupt.deferred():
                        result = self.ray.get(ref)
                except Exception as e:  # a task error or a dead worker: retried alike
                    error = e
                finished(job, s, result, error, submitted.pop(ref))
            for r in [r for r in local if r.done()]:
                local.remove(r)
                finished(r.job, r.seg, r.result, r.error, r.submitted, here=True)
            submit()
            running = 0
            for job, s in list(inflight.values()) + [(r.job, r.seg) for r in local]:
                running += segment.frames_done(os.path.join(job["work"], _progress_name(s)))
            prog.update(min(total, done_frames + running), segs_done, len(inflight) + len(local))
        if on_idle:
            # no ObjectRef may outlive Ray's stop (on_idle's, in another thread): freeing one
            # then makes Ray's core worker end the process
            ready = ref = result = error = _ = None  # noqa: F841
            on_idle()
        for job in last:
            on_complete(job)
        prog.close(done_frames, segs_done)


def _progress_name(s: dict) -> str:
    return os.path.splitext(s["file"])[0] + ".progress"


def _log_name(s: dict) -> str:
    return os.path.splitext(s["file"])[0] + ".log"


def _remove(p: str) -> None:
    try:
        os.unlink(p)
    except FileNotFoundError:
        pass


def _reason(e: Exception) -> tuple[str, bool]:
    """(why a task failed, whether another attempt may succeed)."""
    cause = e if isinstance(e, segment.SegmentError) else getattr(e, "cause", None)
    if isinstance(cause, segment.SegmentError):
        return str(cause), cause.retry
    text = str(e).strip().splitlines()
    name = type(e).__name__
    if "WorkerCrashed" in name or "died" in " ".join(text[:3]).lower():
        return "the Ray worker running it died", True
    return f"{name}: {text[-1] if text else ''}", True
