// The engine's host thread pool (kernels/common/parallel.h): every index exactly once, nested and
// concurrent callers run serially instead of deadlocking, thread count changes take effect.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

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
