// libFuzzer target for the weight loader (kernels/safetensors.cpp) and the model config parser
// (kernels/model_config.cpp): a weight file is untrusted input (docs/robustness.md).
//
//   make fuzz                      build (clang -fsanitize=fuzzer,address,undefined) and run
//                                  FUZZ_TIME seconds (default 60) on tests/fuzz/corpus/
//   build/fuzz/fuzz_safetensors -max_total_time=60 tests/fuzz/corpus   (by hand)
//
// Each input is written to a memfd and loaded through load_safetensors("/proc/self/fd/N"), the
// same entry point the engine uses (no loader change needed for the fuzzer). When the file
// loads, its __metadata__ "config" goes through parse_model_config() and, when valid,
// expected_tensors() is checked against the loaded tensors as the engine does. The input as a
// whole is also given to parse_model_config() as JSON text.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "model_config.h"
#include "safetensors.h"

static int g_fd = -1;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (g_fd < 0) {
        g_fd = memfd_create("fuzz_safetensors", 0);
        if (g_fd < 0) {
            perror("memfd_create");
            abort();
        }
    }
    if (ftruncate(g_fd, 0) != 0 || pwrite(g_fd, data, size, 0) != (ssize_t)size) {
        perror("memfd write");
        abort();
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", g_fd);

    denoise::StFile f;
    std::string err;
    if (denoise::load_safetensors(path, &f, &err)) {
        auto it = f.metadata.find("config");
        if (it != f.metadata.end()) {
            denoise::ModelConfig cfg;
            if (denoise::parse_model_config(it->second, &cfg, &err)) {
                size_t found = 0;
                for (const auto &t : denoise::expected_tensors(cfg)) {
                    auto ft = f.tensors.find(t.first);
                    if (ft != f.tensors.end() && ft->second.shape == t.second)
                        found++;
                }
                (void)found;
            }
        }
        for (const auto &t : f.tensors) {
            size_t n = 1;
            for (int64_t d : t.second.shape)
                n *= (size_t)d;
            if (n != t.second.data.size())
                abort();   // the loader promised product(shape) elements
        }
    } else if (err.empty()) {
        abort();           // a refusal must say why
    }

    denoise::ModelConfig cfg;
    std::string err2;
    denoise::parse_model_config(std::string((const char *)data, size), &cfg, &err2);
    return 0;
}
