// cuda_probe() (backend.h): whether the CUDA engine can run on a device, and why not, without
// creating a context (the runtime's device count and properties; libcuda.so.1 looked up to tell
// "no driver" from "driver too old").
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <string>

#include "../backend.h"

namespace denoise {

int cuda_probe(int device, std::string *why) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError();
        // the runtime says "driver version is insufficient" also when there is no driver at all
        if (e == cudaErrorInsufficientDriver) {
            void *libcuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
            if (!libcuda) {
                const char *d = dlerror();
                *why = std::string("no NVIDIA driver: libcuda.so.1 not found (") + (d ? d : "dlopen failed") + ")";
                return DENOISE_ENOSYS;
            }
            dlclose(libcuda);
        }
        *why = std::string(e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice ? "no CUDA driver or device: "
                                                                                         : "CUDA unavailable: ") +
               "cudaGetDeviceCount: " + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
        return DENOISE_ENOSYS;
    }
    if (n <= 0) {
        *why = "no CUDA device";
        return DENOISE_ENOSYS;
    }
    if (device < 0 || device >= n) {
        *why = "device " + std::to_string(device) + " does not exist (" + std::to_string(n) + " CUDA devices)";
        return DENOISE_ENOSYS;
    }
    cudaDeviceProp prop{};
    e = cudaGetDeviceProperties(&prop, device);
    if (e != cudaSuccess) {
        cudaGetLastError();
        *why = std::string("cudaGetDeviceProperties: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
        return DENOISE_ENOSYS;
    }
    const std::string cc = std::to_string(prop.major) + "." + std::to_string(prop.minor);
    if (prop.major < 8) {
        *why = "device " + std::to_string(device) + " (" + prop.name + ") has compute capability " + cc +
               "; the CUDA engine needs 8.0 or newer (bf16 tensor cores)";
        return DENOISE_ENOSYS;
    }
    *why = "CUDA device " + std::to_string(device) + ": " + prop.name + ", compute capability " + cc;
    return 0;
}

}  // namespace denoise
