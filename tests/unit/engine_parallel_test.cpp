// The engine's host thread pool (kernels/common/parallel.h): every index exactly once, nested and
// concurrent callers run serially instead of deadlocking, thread count changes take effect.
// OpenBLAS's thread count as the engines set it: a GPU engine alone one thread, so that
// sigma=auto's eigenproblems leave no OpenBLAS worker spinning between frames; a CPU engine's
// count kept whatever opens after it.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "common/noise_estimate.h"
#include "common/parallel.h"

using denoise::parallel_for;

TEST(Parallel, EveryIndexOnce) {
    for (int threads : {1, 2, 3}) {
        denoise::set_num_threads(threads);
        EXPECT_EQ(denoise::num_threads(), threads);
        for (int64_t n : {0, 1, 7, 1000, 100003}) {
            for (int64_t grain : {1, 3, 64, 200000}) {
                std::vector<std::atomic<int>> hits(n);
                parallel_for(n, grain, [&](int64_t b, int64_t e) {
                    EXPECT_LE(e - b, grain);
                    for (int64_t i = b; i < e; ++i) hits[i]++;
                });
                for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n " << n << " grain " << grain;
            }
        }
    }
    denoise::set_num_threads(0);
}

TEST(Parallel, NestedAndConcurrentCallers) {
    denoise::set_num_threads(2);
    std::atomic<int64_t> sum{0};
    auto job = [&] {
        for (int r = 0; r < 50; ++r)
            parallel_for(16, 1, [&](int64_t b, int64_t e) {
                for (int64_t i = b; i < e; ++i)
                    parallel_for(10, 3, [&](int64_t b2, int64_t e2) { sum += e2 - b2; });
            });
    };
    std::thread a(job), b(job);
    job();
    a.join();
    b.join();
    EXPECT_EQ(sum.load(), 3 * 50 * 16 * 10);
    denoise::set_num_threads(0);
}

// process CPU time (all threads), seconds
static double cpu_seconds() {
    rusage r{};
    getrusage(RUSAGE_SELF, &r);
    return r.ru_utime.tv_sec + r.ru_stime.tv_sec + 1e-6 * (r.ru_utime.tv_usec + r.ru_stime.tv_usec);
}

// One process-wide sequence (a CPU engine's setting cannot be undone): the GPU engine's single
// thread, its eigenproblems' CPU time, then a CPU engine's counts winning.
TEST(BlasThreads, GpuEngineOneThreadUnlessCpuEngineSetIt) {
    const int at_load = denoise::blas_threads();
    // an OPENBLAS_NUM_THREADS of the caller's is kept (checked first: unset it for the rest)
    setenv("OPENBLAS_NUM_THREADS", "2", 1);
    denoise::blas_threads_for_gpu_engine();
    EXPECT_EQ(denoise::blas_threads(), at_load);
    unsetenv("OPENBLAS_NUM_THREADS");
    denoise::blas_threads_for_gpu_engine();
    EXPECT_EQ(denoise::blas_threads(), 1);

    // sigma=auto's host work on a 49 x 49 scatter matrix, a frame's worth (6 calls) every 5 ms:
    // the process's CPU time stays near the calls' own (~0.1 ms each; with OpenBLAS's workers
    // threaded they spin-yield in between, ~5 ms of CPU per call on 2 cores)
    const int p = 49;
    std::mt19937 rng(7);
    std::normal_distribution<double> nd;
    std::vector<double> x((size_t)200 * p), a((size_t)p * p);
    for (double &v : x) v = nd(rng);
    for (int i = 0; i < p; ++i)
        for (int j = 0; j < p; ++j) {
            double s = 0;
            for (int k = 0; k < 200; ++k) s += x[(size_t)k * p + i] * x[(size_t)k * p + j];
            a[(size_t)i * p + j] = s;
        }
    ASSERT_EQ(denoise::noise_estimate_detail::smallest_eigenvalues(a, p, 2).size(), 2u);
    // OpenBLAS's workers spin for a while after they start (at load) and after a threaded call
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const double c0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    for (int f = 0; f < 20; ++f) {
        for (int k = 0; k < 6; ++k) ASSERT_EQ(denoise::noise_estimate_detail::smallest_eigenvalues(a, p, 2).size(), 2u);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const double cpu = cpu_seconds() - c0;
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    RecordProperty("cpu_ms", (int)(cpu * 1e3));
    EXPECT_LT(cpu, 0.05) << "120 eigenproblems over " << wall << " s took " << cpu
                         << " s of CPU: OpenBLAS's workers spin between them";

    denoise::blas_threads_for_cpu_engine(2);
    EXPECT_EQ(denoise::blas_threads(), 2);
    denoise::blas_threads_for_gpu_engine();
    EXPECT_EQ(denoise::blas_threads(), 2) << "a GPU engine opened after a CPU engine changed its GEMMs' threads";
    denoise::blas_threads_for_cpu_engine(0);
    EXPECT_EQ(denoise::blas_threads(), at_load);
}
