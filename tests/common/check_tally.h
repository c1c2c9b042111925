// The report of the GPU checks (tests/gpu/: the area checks and fused_check; not GoogleTest): one
// line "PASS ..." or "FAIL ..." per check, counted, and a last line "N passed, N failed" that
// tests/run_tests.sh and tools/check_gpu.sh read.
#ifndef DENOISE_TESTS_CHECK_TALLY_H
#define DENOISE_TESTS_CHECK_TALLY_H

#include <cstdarg>
#include <cstdio>

namespace check_tally {

inline int n_pass = 0, n_fail = 0;

// Prints "PASS <what>" or "FAIL <what>" (printf format) and counts it; flushed at once, so that a
// crash later leaves every line before it in the log.
__attribute__((format(printf, 2, 3))) inline void result(bool ok, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::printf("%s ", ok ? "PASS" : "FAIL");
    std::vprintf(fmt, ap);
    std::printf("\n");
    va_end(ap);
    std::fflush(stdout);
    (ok ? n_pass : n_fail)++;
}

// Prints the last line "N passed, N failed"; returns the exit status: 0 if nothing failed, else 1.
inline int summary() {
    std::printf("%d passed, %d failed\n", n_pass, n_fail);
    std::fflush(stdout);
    return n_fail ? 1 : 0;
}

}  // namespace check_tally

#endif
