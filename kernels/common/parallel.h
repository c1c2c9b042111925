// The engine's host thread pool: parallel_for over index ranges, used for every non-BLAS loop of
// the CPU backend and for the host work shared by both backends (noise estimate, frame layouts).
//
// Why not OpenMP's parallel for: GCC's libgomp spin-waits at the end of every region (its wait
// policy can only be changed by an environment variable read when the library loads), and
// OpenBLAS's pthread workers spin-yield after every GEMM; on a 2-core machine that also runs
// decoders (or other jobs) the two pools burnt 1.5-3x the useful CPU time and made the 2-thread
// engine slower than one thread (docs/cpu-engine.md has the numbers). These workers sleep on a
// condition variable between jobs, so a busy machine costs a wake-up (~10 us) per loop instead.
#ifndef DENOISE_COMMON_PARALLEL_H
#define DENOISE_COMMON_PARALLEL_H

#include <cstdint>
#include <functional>

namespace denoise {

// Threads used by parallel_for, the caller included (process-wide, like OpenMP's ICV).
// n <= 0: the hardware concurrency. Takes effect for the next parallel_for.
void set_num_threads(int n);
int num_threads();

// Calls fn(begin, end) on disjoint chunks [begin, end) of [0, n), at most `grain` indices each,
// from the pool's threads and the caller; returns when all chunks are done. Chunks are handed
// out dynamically (a descheduled thread delays only its current chunk). A call made from inside
// a chunk, or while another thread's call holds the pool, runs serially on the caller.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)> &fn);

// A chunk size for a loop of n cheap iterations (rows, tokens): ~4 chunks per thread, so a
// thread that is descheduled delays a quarter of its share rather than all of it.
inline int64_t grain_for(int64_t n) {
    const int64_t g = n / (4 * (int64_t)num_threads());
    return g > 0 ? g : 1;
}

}  // namespace denoise

#endif
