"""One segment's ffmpeg run (on a worker): decode from the keyframe, feed the context and the
segment's frames to the chain, keep the segment's frames, encode them into the work folder.

The segment's log (seg-NNNNN.log in the work folder) holds the ffmpeg command line (line 1, shell
quoted: it can be run again as is), the worker's process context (line 2, process_context()),
ffmpeg's own messages, and last, once ffmpeg has exited, its times:
  # times: wall W s, cpu user U s, sys S s (ffmpeg's, from the worker's RUSAGE_CHILDREN)
Lines of ours start with "# "; a failure's reason is taken from the others.

The file appears under its final name only when it is complete (written under a name of its
own for this attempt, then renamed), so a killed or failed attempt never leaves a file that
looks finished, and two attempts of one segment never write the same file.
"""
from __future__ import annotations

import ctypes
import functools
import os
import re
import signal
import socket
import stat
import subprocess
import time

# prctl(PR_SET_PDEATHSIG): the ffmpeg child dies with its worker, so that a killed worker leaves
# no orphan encoding beside the retry
_PR_SET_PDEATHSIG = 1


# looked up here, in the parent: the child of a fork in a threaded process (the driver's head
# start runs segments while Ray starts in another thread) must not dlopen (the loader's lock may
# be held by a thread that does not exist in the child)
try:
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):
    _PRCTL = None


def _die_with_parent() -> None:
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _child_setup(nice: int) -> None:
    """In ffmpeg's process before it starts: die with the parent thread; `nice` more niceness."""
    _die_with_parent()
    if nice:
        os.nice(nice)


class SegmentError(RuntimeError):
    """A segment's run failed. `retry` is False where another attempt would fail alike: ffmpeg
    ran to its end but wrote another number of frames than the segment holds (the chain or the
    input drops or adds frames there)."""

    def __init__(self, message: str, retry: bool = True):
        super().__init__(message)
        self.retry = retry

    def __reduce__(self):
        # Ray pickles the error back to the driver: keep `retry`
        return (SegmentError, (str(self), self.retry))


def command(job: dict, seg: dict, chain: str, tmp: str, progress: str) -> list[str]:
    """The ffmpeg command line of one segment (job and seg: the manifest's entries)."""
    cmd = [job["ffmpeg"], "-nostdin", "-hide_banner", "-nostats", "-v", "error", "-y"]
    if seg["seek"] is not None:
        cmd += ["-ss", "%.6f" % seg["seek"], "-noaccurate_seek"]
    # -copyts: the trims place cuts at the source's own pts
    cmd += ["-copyts", "-i", job["input"], "-map", "0:v:0", "-an", "-sn", "-dn",
            "-map_metadata", "-1", "-map_chapters", "-1",
            "-vf", f"{seg['trim_in']},{chain},{seg['trim_out']},setpts=PTS-STARTPTS",
            "-fps_mode", "passthrough"]
    # the encoder keeps the source's time base (ffmpeg's default, 1/frame rate, would round
    # pts that are not on that grid: variable frame rates, millisecond time bases)
    if not any(a.split(":")[0] == "-enc_time_base" for a in job["encoder_options"][::2]):
        cmd += ["-enc_time_base:v", "demux"]
    cmd += job["encoder_options"]
    cmd += ["-progress", progress, tmp]
    return cmd


def frames_done(progress: str) -> int:
    """The last frame count an ffmpeg -progress file reports (0 if none yet)."""
    try:
        with open(progress, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            tail = f.read().decode("utf-8", "replace")
    except OSError:
        return 0
    n = 0
    for line in tail.splitlines():
        if line.startswith("frame="):
            try:
                n = int(line[6:])
            except ValueError:
                pass
    return n


# environment variables that change ffmpeg's process: thread pools (libgomp, OpenBLAS, MKL), the
# GPUs it sees, the libraries and allocator it loads (Ray preloads its jemalloc into some of its
# processes); a Ray worker sets OMP_NUM_THREADS to its task's CPUs (1 by default) where unset
CONTEXT_ENV = re.compile(r"^(OMP_|GOMP_|KMP_|OPENBLAS_|GOTO_|MKL_|MALLOC_|CUDA_VISIBLE_DEVICES$|LD_PRELOAD$"
                         r"|LD_LIBRARY_PATH$|GLIBC_TUNABLES$)")
NOTE_PREFIX = "# "  # the log's lines of ours (the context, the times), not ffmpeg's
CONTEXT_PREFIX = NOTE_PREFIX + "context: "


def process_context(environ=None, nice_add: int = 0) -> str:
    """One line for the segment's log: what in this process (the Ray worker; ffmpeg inherits all
    but stdin, which is /dev/null; for the driver's own runs, ffmpeg's `environ` and the niceness
    `nice_add` above the driver's) can change ffmpeg's speed:
      # context: env NAME=VALUE ... (CONTEXT_ENV's variables, shell quoted; '-' if none);
      RAY_* names only (their values are Ray's addresses and ids); cpus A of N (sched_getaffinity,
      os.cpu_count); nice K; cgroup cpu.max Q P (cgroup v2, '?' where unreadable); stdin KIND
      (tty, pipe, file, devnull, closed, other: the worker's own)
    tools/batch_overhead.sh exports the env part to replay a segment in the worker's environment."""
    environ = os.environ if environ is None else environ
    env = sorted(k for k in environ if CONTEXT_ENV.match(k))
    ray = sorted(k for k in environ if k.startswith("RAY_"))
    try:
        affinity = str(len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        affinity = "?"
    try:
        nice = str(os.nice(0) + nice_add)
    except OSError:
        nice = "?"
    return (CONTEXT_PREFIX + "env " + (" ".join(f"{k}={_quote(environ[k])}" for k in env) or "-")
            + "; RAY_* " + (" ".join(ray) or "-") + f"; cpus {affinity} of {os.cpu_count()}; nice {nice}"
            + f"; cgroup cpu.max {_cgroup_cpu_max()}; stdin {_stdin_kind()}")


def _cgroup_cpu_max() -> str:
    try:
        with open("/proc/self/cgroup") as f:
            path = next((l.split(":", 2)[2].strip() for l in f if l.startswith("0::")), None)
        if path is None:
            return "?"
        with open(os.path.join("/sys/fs/cgroup", path.lstrip("/"), "cpu.max")) as f:
            return f.read().strip()
    except (OSError, IndexError):
        return "?"


def _stdin_kind() -> str:
    try:
        st = os.fstat(0)
    except OSError:
        return "closed"
    if os.isatty(0):
        return "tty"
    if stat.S_ISFIFO(st.st_mode):
        return "pipe"
    if stat.S_ISREG(st.st_mode):
        return "file"
    if stat.S_ISCHR(st.st_mode) and os.path.realpath("/proc/self/fd/0") == "/dev/null":
        return "devnull"
    return "socket" if stat.S_ISSOCK(st.st_mode) else "other"


def device_index(gpu_ids: list) -> int:
    """The filter's device= for the GPU Ray assigned: Ray sets CUDA_VISIBLE_DEVICES to the
    assigned GPUs, which the process then sees as 0..n-1; without it the id is the device."""
    if not gpu_ids:
        return 0
    gid = str(gpu_ids[0])
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if visible:
        return visible.index(gid) if gid in visible else 0
    return int(gid) if gid.isdigit() else 0


def run(job: dict, seg: dict, chain: str, on_start=None, env: dict | None = None, nice: int = 0) -> dict:
    """Encode one segment into job['work']/seg['file']. Returns what it did; raises SegmentError
    (with the end of ffmpeg's log) on failure. For the driver's own runs (cli.HeadStart):
    on_start(popen) is called once ffmpeg runs (to end it on an interrupt), `env` is ffmpeg's
    environment (default: this process's) and `nice` is added to ffmpeg's niceness (as Ray
    starts its workers niced)."""
    work = job["work"]
    final = os.path.join(work, seg["file"])
    stem, ext = os.path.splitext(seg["file"])
    tag = f"{socket.gethostname()}-{os.getpid()}-{time.time_ns()}"
    tmp = os.path.join(work, f"{stem}.attempt-{tag}{ext}")
    progress = os.path.join(work, f"{stem}.progress")
    log = os.path.join(work, f"{stem}.log")
    cmd = command(job, seg, chain, tmp, progress)
    wall_start = time.time()
    t0 = time.monotonic()
    with open(log, "w") as lf:
        lf.write(" ".join(_quote(a) for a in cmd) + "\n")
        lf.write(process_context(env, nice) + "\n")
        lf.flush()
        try:
            p = subprocess.Popen(cmd, stdout=lf, stderr=lf, stdin=subprocess.DEVNULL, env=env,
                                 preexec_fn=functools.partial(_child_setup, nice))
        except OSError as e:
            raise SegmentError(f"cannot run {cmd[0]}: {e}") from e
        try:
            if on_start:
                on_start(p)
            # ffmpeg's own CPU time (wait4: the driver may run several at once, among other children)
            _, status, ru = os.wait4(p.pid, 0)
            rc = p.returncode = os.waitstatus_to_exitcode(status)
        except ChildProcessError:
            # reaped by p.kill() in another thread (its poll() takes a child that has exited)
            rc, ru = p.wait(), None
        except BaseException:
            p.kill()
            p.wait()
            raise
        seconds = time.monotonic() - t0
        wall_end = time.time()
        user, sys_ = (ru.ru_utime, ru.ru_stime) if ru else (0.0, 0.0)
        lf.write(f"{NOTE_PREFIX}times: wall {seconds:.3f} s, cpu user {user:.2f} s, sys {sys_:.2f} s\n")
    try:
        if rc != 0:
            why = f"killed by signal {-rc}" if rc < 0 else f"exit status {rc}"
            raise SegmentError(f"ffmpeg {why}: {_tail(log)}")
        got = frames_done(progress)
        if got != seg["frames"]:
            said = _tail(log)
            raise SegmentError(f"ffmpeg wrote {got} frames, expected {seg['frames']} (a filter that drops "
                               f"or adds frames, or frames the decoder drops)"
                               + ("" if said == NO_MESSAGE else f": {said}"), retry=False)
        os.replace(tmp, final)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    # (wall_start, wall_end: the worker's wall clock, for the driver's --timings)
    return {"index": seg["index"], "frames": seg["frames"], "seconds": seconds, "cpu_user": user,
            "cpu_sys": sys_, "wall_start": wall_start, "wall_end": wall_end, "host": socket.gethostname()}


NO_MESSAGE = "(no message)"
# ffmpeg's lines that follow an error without naming its cause
_ECHOES = re.compile(r"Task finished with error code|Terminating thread with return code|Error sending "
                     r"frames to consumers|Nothing was written into output file|Could not open encoder "
                     r"before EOF|Error opening output files?|Error while filtering|Conversion failed")


def ffmpeg_reason(stderr: str, lines: int = 3) -> str:
    """The first `lines` lines of ffmpeg's error output that name a cause, joined by ' | ',
    without the object addresses ("[ffv1 @ 0x55...]" -> "[ffv1]")."""
    out = []
    for l in stderr.splitlines():
        l = l.strip()
        if l and not _ECHOES.search(l):
            out.append(re.sub(r" @ 0x[0-9a-f]+\]", "]", l))
    return " | ".join(out[:lines]) or NO_MESSAGE


def _tail(log: str) -> str:
    try:
        with open(log) as f:
            lines = f.read().splitlines()[1:]  # ffmpeg's messages: not the command, not our notes
            return ffmpeg_reason("\n".join(l for l in lines if not l.startswith(NOTE_PREFIX)))
    except OSError:
        return "(no log)"


def _quote(a: str) -> str:
    if a and all(c.isalnum() or c in "-_./:=,+@%" for c in a):
        return a
    return "'" + a.replace("'", "'\\''") + "'"
