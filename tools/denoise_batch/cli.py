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
  --cpus-per-task N       CPUs a task asks for (default 1); with backend cpu also the filter's
                          threads= unless the chain sets it
  --workers N             segments running at once, at most (default: what the cluster's
                          resources allow); with backend cpu and no --address also the CPUs of
                          the Ray instance started here (--workers x --cpus-per-task)
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
  -h, --help

ENCODER OPTIONS: every other option starting with '-' is an ffmpeg output option with one
value, e.g. -c:v ffv1, -c:v libx264 -crf 18 -preset slow, -pix_fmt yuv420p10le. Options for
audio, subtitles or the container (-c:a, -b:a, -ar, -ac, -c:s, -metadata, -movflags, ...) apply
when the segments are joined (audio and subtitles are stream copies of the source otherwise);
the rest apply to every segment's encode. Each segment is a separate encode starting with a
keyframe: use an encoder setting that does not depend on the whole stream (CRF/QP, not
two-pass or a bitrate averaged over the file).

exit status: 0 when every input is done (or skipped as existing), 1 when any failed, 2 for a
usage error.
"""
from __future__ import annotations

import os
import shutil
import sys

from denoise_batch import assemble, manifest, plan, schedule
from denoise_batch import chain as chainmod

SEGMENT_EXTS = {".mkv", ".webm", ".nut", ".mov", ".mp4", ".m4v"}
MUX_OPTIONS = {"acodec", "scodec", "dcodec", "ab", "ac", "ar", "af", "aq", "sample_fmt",
               "ch_layout", "channel_layout", "metadata", "movflags", "disposition", "shortest",
               "brand", "write_tmcd"}
OWN_VALUE = {"-o", "--output-dir", "--input-list", "--segment-frames", "--vf", "--context",
             "--context-before", "--context-after", "--backend", "--cpus-per-task", "--workers",
             "--address", "--retries", "--work-dir", "--ffmpeg", "--ffprobe", "--progress-interval"}
OWN_FLAG = {"--keep-work", "-y", "-an", "-sn", "-q", "--quiet", "-h", "--help"}
# ffmpeg options that change which frames or timestamps a segment holds: the segment arithmetic
# (trim by pts, frame counts checked against the source) would no longer hold
FRAME_OPTIONS = {"-r", "-t", "-to", "-ss", "-sseof", "-frames", "-frames:v", "-vframes", "-fps_mode", "-vsync",
                 "-filter_complex", "-lavfi", "-itsoffset"}


class UsageError(Exception):
    pass


def parse(argv: list[str]) -> dict:
    o = {"inputs": [], "enc": [], "mux": [], "vf": "denoise", "segment_frames": 1000, "context": 3,
         "context_before": None, "context_after": None, "backend": "auto", "cpus_per_task": 1.0,
         "workers": None, "address": None, "retries": 2, "work_dir": None, "keep_work": False,
         "overwrite": False, "audio": True, "subtitles": True, "ffmpeg": None, "ffprobe": None,
         "quiet": False, "progress_interval": 10.0, "output": None, "output_dir": None,
         "input_list": None, "help": False}
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
    for k in ("segment_frames", "context", "context_before", "context_after", "retries", "workers"):
        if o[k] is not None:
            try:
                o[k] = int(o[k])
            except ValueError:
                raise UsageError(f"--{k.replace('_', '-')}: not an integer: {o[k]}") from None
            if o[k] < (1 if k in ("segment_frames", "workers") else 0):
                raise UsageError(f"--{k.replace('_', '-')}: out of range: {o[k]}")
    for k in ("cpus_per_task", "progress_interval"):
        try:
            o[k] = float(o[k])
        except ValueError:
            raise UsageError(f"--{k.replace('_', '-')}: not a number: {o[k]}") from None
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
    except (UsageError, chainmod.ChainError, OSError) as e:
        print(f"denoise-batch: {e}\n(denoise-batch --help for the usage)", file=err)
        return 2
    ffmpeg, ffprobe = _tool("ffmpeg", o["ffmpeg"], bindir), _tool("ffprobe", o["ffprobe"], bindir)
    failed: list[str] = []
    ok: list[str] = []

    def fail(inp: str, msg: str) -> None:
        failed.append(f"{inp}: {msg}")
        print(f"denoise-batch: FAILED: {inp}: {msg}", file=err, flush=True)

    todo = []
    for inp, out in pairs:
        if os.path.exists(out) and not o["overwrite"]:
            print(f"denoise-batch: {out} exists, skipped (-y overwrites)", file=err)
        else:
            todo.append((inp, out))
    if not todo:
        return 0

    # the backend decides what a task asks Ray for
    backend = o["backend"]
    chain_backend = chainmod.denoise_options(o["vf"]).get("backend")
    if backend == "auto" and chain_backend in ("cpu", "cuda"):
        backend = chain_backend
    try:
        if o["address"] or os.environ.get("RAY_ADDRESS"):
            ray = schedule.start(o["address"] or os.environ["RAY_ADDRESS"], None)
        else:
            # CPU tasks: --workers of them fit; GPU tasks: Ray counts the GPUs it finds, and
            # --workers caps the tasks in flight
            w = o["workers"]
            cpus = int(w * o["cpus_per_task"] + 0.999) if w and backend != "cuda" else None
            ray = schedule.start(None, cpus)
    except ImportError:
        print("denoise-batch: the Python package 'ray' is not installed (python3 -m pip install ray)",
              file=err)
        return 2
    except Exception as e:  # Ray's own errors: no cluster at the address, a failed start
        print(f"denoise-batch: cannot start or reach Ray: {e}", file=err)
        return 2
    try:
        gpus = ray.cluster_resources().get("GPU", 0)
        if backend == "auto":
            backend = "cuda" if gpus > 0 else "cpu"
        if backend == "cuda" and gpus == 0:
            # a task asking for a GPU would wait for one forever
            print("denoise-batch: backend cuda, but the Ray cluster has no GPU (--backend cpu runs "
                  "on CPUs)", file=err)
            return 2
        extra = {"backend": backend}
        if backend == "cpu":
            extra["threads"] = "%d" % max(1, int(o["cpus_per_task"]))
        chain = chainmod.with_denoise_options(o["vf"], extra)

        jobs = []
        for inp, out in todo:
            job = prepare(o, inp, out, chain, ffmpeg, ffprobe, len(pairs) > 1, fail)
            if job:
                jobs.append(job)

        def complete(job):
            try:
                assemble.assemble(job["task_job"] | {"output": job["output"], "segments": job["segments"],
                                                     "audio": o["audio"], "subtitles": o["subtitles"],
                                                     "mux_options": o["mux"]},
                                  job["source"], ffprobe)
            except (assemble.AssembleError, OSError) as e:
                fail(job["input"], str(e))
                return
            ok.append(job["input"])
            print(f"denoise-batch: done: {job['input']} -> {job['output']} ({job['source'].frames} "
                  f"frames, {len(job['segments'])} segments)", file=err, flush=True)
            if not o["keep_work"]:
                shutil.rmtree(job["work"], ignore_errors=True)

        if jobs:
            runner = schedule.Runner(ray, backend == "cuda", o["cpus_per_task"], o["retries"], o["workers"],
                                     o["quiet"], o["progress_interval"])
            runner.run(jobs, complete, lambda job, msg: fail(job["input"], msg))
    except KeyboardInterrupt:
        print("denoise-batch: interrupted; run the same command again to continue", file=err)
        return 130
    finally:
        ray.shutdown()
    if failed:
        print(f"denoise-batch: {len(ok)} done, {len(failed)} failed:", file=err)
        for f in failed:
            print(f"  {f}", file=err)
        return 1
    return 0


def prepare(o, inp, out, chain, ffmpeg, ffprobe, several, fail) -> dict | None:
    """Probe and split one input, or resume its work folder. None when it is skipped or failed."""
    if not os.path.isfile(inp):
        fail(inp, "no such file")
        return None
    try:
        src = plan.probe(ffprobe, inp)
    except plan.ProbeError as e:
        fail(inp, str(e))
        return None
    ext = os.path.splitext(out)[1].lower()
    seg_ext = ext if ext in SEGMENT_EXTS else ".mkv"
    if o["work_dir"]:
        # always a folder of the job's own inside it: the user's folder is never removed
        work = os.path.join(o["work_dir"], os.path.basename(out) + ".denoise-batch")
    else:
        work = os.path.abspath(out) + ".denoise-batch"
    work = os.path.abspath(work)
    try:
        os.makedirs(os.path.dirname(os.path.abspath(out)) or ".", exist_ok=True)
        os.makedirs(work, exist_ok=True)
        params = {"vf": chain, "encoder_options": o["enc"], "segment_frames": o["segment_frames"],
                  "context_before": o["context_before"], "context_after": o["context_after"],
                  "segment_ext": seg_ext}
        ident = manifest.identity(inp, params)
        m = manifest.load(work)
        if m and m.get("identity") == ident:
            done = manifest.done(work, m)
            if done:
                print(f"denoise-batch: {inp}: resuming, {len(done)} of {len(m['segments'])} segments "
                      f"done", file=sys.stderr)
        else:
            if m:
                print(f"denoise-batch: {inp}: the work folder {work} was for other input or options: "
                      f"starting afresh", file=sys.stderr)
            manifest.clear(work)
            segs = []
            for s in plan.split(src, o["segment_frames"], o["context_before"], o["context_after"]):
                tin, tout = plan.trims(src, s)
                segs.append(s.to_json() | {"frames": s.frames, "seek": plan.seek(src, s), "trim_in": tin,
                                           "trim_out": tout, "file": "seg-%05d%s" % (s.index, seg_ext),
                                           "done": False, "attempts": 0})
            m = {"version": manifest.VERSION, "identity": ident, "segments": segs}
            manifest.save(work, m)
            done = set()
    except OSError as e:
        fail(inp, f"work folder {work}: {e}")
        return None
    for s in m["segments"]:
        s["done"] = s["index"] in done
    task_job = {"input": os.path.abspath(inp), "work": work, "ffmpeg": ffmpeg, "encoder_options": o["enc"]}
    return {"input": inp, "output": out, "work": work, "source": src, "manifest": m,
            "segments": m["segments"], "done": set(done), "chain": chain, "task_job": task_job}
