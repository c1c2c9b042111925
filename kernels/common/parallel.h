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

// OpenBLAS's thread count, process-wide as well: OpenBLAS takes it from OPENBLAS_NUM_THREADS, else
// OMP_NUM_THREADS, else the core count, when it loads. Its pthread workers spin-yield for tens of
// ms after every threaded call (the note above), and OpenBLAS (0.3.21, Debian 12's) threads even
// the small calls inside LAPACK's dsyevr on a 49 x 49 matrix: sigma=auto's eigenproblems (about 6
// per frame, noise_estimate.cpp) then keep all cores but one spinning for the whole run (2 cores,
// one call every 5 ms: 5 ms of CPU per call; 0.06 ms with one thread), beside the decoder and
// the encoder. Ray's workers set OMP_NUM_THREADS=1, so a denoise-batch segment never had them
// (docs/scale-out.md, "Measured").
// A CPU engine sets the count for its GEMMs: n > 0, or 0 for the count OpenBLAS chose when it
// loaded. A GPU engine, whose only BLAS work is those eigenproblems, sets 1 unless a CPU engine of
// this process has set it (its GEMMs then keep their threads) or OPENBLAS_NUM_THREADS is set (the
// user's choice, kept: tools/batch_overhead.sh times the old behaviour so). One thread also makes
// the eigenvalues, and so sigma=auto's estimate, the same whatever the machine's core count.
void blas_threads_for_cpu_engine(int n);
void blas_threads_for_gpu_engine();
// OpenBLAS's current thread count (openblas_get_num_threads), for tests and logs.
int blas_threads();

}  // namespace denoise

#endif
