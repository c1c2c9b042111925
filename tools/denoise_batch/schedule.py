"""Ray as the scheduler: one task per segment, retries, the manifest, the progress line.

With backend=cuda a task asks for 1/--tasks-per-gpu of a GPU (num_gpus; 1: a GPU of its own),
the filter's device= being the GPU Ray assigned it, and for the CPUs the caller computed
(cli.task_cpus: with backend=cpu the CPU engine's threads). ray.init() starts Ray on this machine when no --address (or RAY_ADDRESS)
names a cluster. Tasks are submitted with max_retries=0 and retried here, so that a segment
whose worker died (SIGKILL, a lost node) and one whose ffmpeg failed are counted and reported
alike; after --retries more attempts the segment fails by name. A failure that another attempt
would repeat (segment.SegmentError with retry False: a wrong frame count) fails its input at
once. Segments are files in the work folder, which every node must see at the same path (shared
storage): only small dictionaries travel through Ray.
"""
from __future__ import annotations

import logging
import os
from collections import deque

from denoise_batch import chain as chainmod
from denoise_batch import interrupt, manifest, segment, timings
from denoise_batch.progress import Progress

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def _segment_task(job: dict, seg: dict, chain: str, use_gpu: bool) -> dict:
    if use_gpu:
        import ray
        chain = chainmod.with_denoise_options(chain, {"device": str(segment.device_index(ray.get_gpu_ids()))})
    return segment.run(job, seg, chain)


def start(address: str | None, cpus: int | None):
    """Connect to the cluster at `address`, or start Ray on this machine with `cpus` CPUs (None:
    the machine's count). Returns the ray module. ray.init() sets a SIGTERM handler of its own
    (sys.exit): the caller sets its own again afterwards."""
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

    def run(self, jobs: list[dict], on_complete, on_failed, on_idle=None) -> None:
        """Run the segments not done. on_idle(), where given, is called once no task runs or
        waits any more (Ray is then no longer needed), before the last jobs' on_complete: the
        caller stops Ray beside those joins."""
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
                else:
                    _remove(os.path.join(job["work"], _progress_name(s)))
                    queue.append((job, s))
        for job in jobs:
            if job["segments"] and len(job["done"]) == len(job["segments"]):
                on_complete(job)
        prog = self.prog = Progress(total, already, nsegs, quiet=self.quiet, interval=self.interval)
        done_frames = already
        inflight = self.inflight
        submitted: dict = {}

        def submit():
            while queue and (self.max_inflight is None or len(inflight) < self.max_inflight):
                job, s = queue.popleft()
                if job.get("failed"):
                    continue
                with interrupt.deferred():
                    ref = self.task.remote(job["task_job"], s, job["chain"], self.use_gpu)
                inflight[ref] = (job, s)
                submitted[ref] = timings.now()

        submit()
        while inflight:
            with interrupt.deferred():
                ready, _ = self.ray.wait(list(inflight), num_returns=1, timeout=1.0)
            for ref in ready:
                job, s = inflight.pop(ref)
                result = error = None
                try:
                    with interrupt.deferred():
                        result = self.ray.get(ref)
                except Exception as e:  # a task error or a dead worker: retried alike
                    error = e
                if self.timings:
                    self.timings.segment(s["index"], job["input"], submitted.pop(ref), timings.now(), result)
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
                    continue
                s["done"] = True
                s["attempts"] = s.get("attempts", 0) + 1
                s.pop("error", None)
                job["done"].add(s["index"])
                done_frames += s["frames"]
                segs_done += 1
                manifest.save(job["work"], job["manifest"])
                if len(job["done"]) == len(job["segments"]) and not job.get("failed"):
                    if inflight or queue:
                        on_complete(job)
                    else:
                        last.append(job)
            submit()
            running = 0
            for job, s in inflight.values():
                running += segment.frames_done(os.path.join(job["work"], _progress_name(s)))
            prog.update(min(total, done_frames + running), segs_done, len(inflight))
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
    cause = getattr(e, "cause", None)
    if isinstance(cause, segment.SegmentError):
        return str(cause), cause.retry
    text = str(e).strip().splitlines()
    name = type(e).__name__
    if "WorkerCrashed" in name or "died" in " ".join(text[:3]).lower():
        return "the Ray worker running it died", True
    return f"{name}: {text[-1] if text else ''}", True
