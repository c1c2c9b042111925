"""denoise-batch: denoise long videos and whole libraries in segments on a Ray cluster.

Each input is split at keyframes into segments of about --segment-frames frames; each segment
is decoded with context frames on both sides (the network reads t-3..t+3), run through
`ffmpeg -vf CHAIN` with the user's encoder options, and only its own frames are kept; the
segments are concatenated without re-encoding and the result is checked against the source.
Ray runs one task per segment (with the CUDA engine the first few are run by the driver itself
while Ray starts: --head-start). docs/scale-out.md has the design and its guarantees.

Modules: cli (command line, per-input flow, --dry-run, the planner and head-start threads),
preflight (the checks: files, folders, the chain's frames), plan (probe and split), chain (the
filter chain), segment (one segment's ffmpeg run, on a worker or the driver), schedule (Ray's
start and stop, Ray tasks and the driver's own runs, retries, progress), manifest (the
resumable record of a work folder), assemble (concatenation and checks), progress (the progress
line), interrupt (SIGINT, SIGTERM and SIGHUP on the driver), children (the driver's child
processes of other threads), timings (--timings).
"""
