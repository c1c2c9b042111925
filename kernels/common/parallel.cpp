// Thread pool behind parallel_for; see parallel.h for why it is not OpenMP.
// One job at a time: the submitting thread publishes (fn, n, grain), bumps a generation counter
// and wakes the workers; everybody pulls chunks from an atomic cursor; the submitter waits until
// every worker that joined the generation has left it.
#include "parallel.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace denoise {

namespace {

thread_local bool t_in_pool_job = false;

class Pool {
public:
    ~Pool() {
        {
            std::lock_guard<std::mutex> l(m_);
            quit_ = true;
            ++gen_;
        }
        cv_.notify_all();
        for (auto &t : workers_) t.join();
    }

    void set_threads(int n) {
        std::lock_guard<std::mutex> busy(submit_);
        wanted_ = n > 0 ? n : (int)std::max(1u, std::thread::hardware_concurrency());
    }
    int threads() {
        std::lock_guard<std::mutex> busy(submit_);
        return wanted_;
    }

    void run(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)> &fn) {
        if (n <= 0) return;
        grain = std::max<int64_t>(1, grain);
        std::unique_lock<std::mutex> busy(submit_, std::try_to_lock);
        if (t_in_pool_job || !busy.owns_lock() || wanted_ <= 1 || n <= grain) {
            for (int64_t b = 0; b < n; b += grain) fn(b, std::min(n, b + grain));
            return;
        }
        grow(wanted_ - 1);
        {
            std::lock_guard<std::mutex> l(m_);
            fn_ = &fn;
            n_ = n;
            grain_ = grain;
            next_.store(0);
            job_workers_ = (int)std::min<int64_t>(wanted_ - 1, (n + grain - 1) / grain - 1);
            joined_ = left_ = 0;
            ++gen_;
        }
        cv_.notify_all();
        work();
        std::unique_lock<std::mutex> l(m_);
        done_cv_.wait(l, [&] { return left_ == job_workers_; });
        fn_ = nullptr;
    }

private:
    void grow(int n) {
        while ((int)workers_.size() < n) workers_.emplace_back([this] { loop(); });
    }

    void work() {
        t_in_pool_job = true;
        for (;;) {
            const int64_t b = next_.fetch_add(grain_);
            if (b >= n_) break;
            (*fn_)(b, std::min(n_, b + grain_));
        }
        t_in_pool_job = false;
    }

    void loop() {
        uint64_t seen = 0;
        std::unique_lock<std::mutex> l(m_);
        for (;;) {
            cv_.wait(l, [&] { return gen_ != seen; });
            seen = gen_;
            if (quit_) return;
            // Exactly job_workers_ workers join a job (the submitter waits for that many to leave).
            if (joined_ >= job_workers_) continue;
            ++joined_;
            l.unlock();
            work();
            l.lock();
            if (++left_ == job_workers_) done_cv_.notify_one();
        }
    }

    std::mutex submit_;  // held by the thread whose job runs
    std::mutex m_;
    std::condition_variable cv_, done_cv_;
    std::vector<std::thread> workers_;
    const std::function<void(int64_t, int64_t)> *fn_ = nullptr;
    int64_t n_ = 0, grain_ = 1;
    std::atomic<int64_t> next_{0};
    int job_workers_ = 0, joined_ = 0, left_ = 0;
    uint64_t gen_ = 0;
    bool quit_ = false;
    int wanted_ = (int)std::max(1u, std::thread::hardware_concurrency());
};

Pool &pool() {
    static Pool p;
    return p;
}

}  // namespace

void set_num_threads(int n) { pool().set_threads(n); }
int num_threads() { return pool().threads(); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)> &fn) { pool().run(n, grain, fn); }

namespace {
std::mutex blas_m;
int blas_at_load = 0;          // OpenBLAS's count before any engine set one (0: not read yet)
bool blas_cpu_engine = false;  // a CPU engine of this process has set the count

void note_load_count() {
    if (!blas_at_load) blas_at_load = std::max(1, openblas_get_num_threads());
}
}  // namespace

void blas_threads_for_cpu_engine(int n) {
    std::lock_guard<std::mutex> l(blas_m);
    note_load_count();
    blas_cpu_engine = true;
    openblas_set_num_threads(n > 0 ? n : blas_at_load);
}

void blas_threads_for_gpu_engine() {
    std::lock_guard<std::mutex> l(blas_m);
    note_load_count();
    const char *env = std::getenv("OPENBLAS_NUM_THREADS");
    if (!blas_cpu_engine && !(env && *env)) openblas_set_num_threads(1);
}

int blas_threads() { return openblas_get_num_threads(); }

}  // namespace denoise
