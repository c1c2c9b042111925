// Loader for safetensors weight files (https://github.com/huggingface/safetensors, format:
// u64 little-endian header length N, N bytes of JSON header, then the raw tensor bytes).
//
// The engine only runs fp32, so every tensor is widened to fp32 on load (F32 copied, BF16 widened
// exactly by a 16-bit shift); any other dtype is refused. The whole file is validated before any
// tensor is handed out, because a weight file is untrusted input: header length against the file
// size, every dtype, shape product x dtype size == byte span, spans inside the data area, spans
// pairwise disjoint, and no data area bytes beyond the last tensor missing (truncation).
#ifndef DENOISE_SAFETENSORS_H
#define DENOISE_SAFETENSORS_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace denoise {

struct StTensor {
    std::string dtype;             // as stored: "F32" or "BF16"
    std::vector<int64_t> shape;    // row-major, outermost first
    std::vector<float> data;       // widened to fp32, product(shape) elements
};

struct StFile {
    std::string path;
    std::map<std::string, std::string> metadata;  // __metadata__ (string -> string)
    std::map<std::string, StTensor> tensors;
};

// Read and validate `path` into `out`. Returns true on success; on failure returns false and sets
// *err to a message that starts with the file name and names the offending tensor where one is
// to blame (e.g. "w.safetensors: tensor 'a.b' has dtype I32; only F32 and BF16 are supported").
bool load_safetensors(const std::string &path, StFile *out, std::string *err);

// "[96,32]": the shape as the error messages print it.
std::string shape_str(const std::vector<int64_t> &shape);

// File name without directories, as used at the start of error messages.
std::string base_name(const std::string &path);

}  // namespace denoise

#endif
