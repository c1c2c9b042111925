// safetensors reader: see safetensors.h for what is checked and why.
#include "safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

namespace denoise {

using json = nlohmann::json;

std::string shape_str(const std::vector<int64_t> &shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i) s += ",";
        s += std::to_string(shape[i]);
    }
    return s + "]";
}

std::string base_name(const std::string &path) {
    size_t p = path.find_last_of('/');
    return p == std::string::npos ? path : path.substr(p + 1);
}

namespace {

// A header larger than this is not a weight file of ours (ours is ~20 KB); refusing early stops
// a corrupt length from making us allocate gigabytes.
constexpr uint64_t kMaxHeader = 64u << 20;

bool fail(std::string *err, const std::string &file, const std::string &msg) {
    *err = file + ": " + msg;
    return false;
}

}  // namespace

// msg with every byte outside printable ASCII as \xNN (a parser's message may quote the file's
// bytes; a log line must stay text)
static std::string printable(const std::string &msg) {
    std::string s;
    for (unsigned char c : msg) {
        if (c >= 0x20 && c < 0x7f) {
            s += (char)c;
        } else {
            char t[8];
            std::snprintf(t, sizeof t, "\\x%02x", c);
            s += t;
        }
    }
    return s;
}

bool load_safetensors(const std::string &path, StFile *out, std::string *err) {
    const std::string file = base_name(path).empty() ? path : base_name(path);
    out->path = path;
    out->metadata.clear();
    out->tensors.clear();

    FILE *f = std::fopen(path.c_str(), "rb");
    if (!f) return fail(err, path, std::string("cannot open weight file: ") + std::strerror(errno));
    std::vector<unsigned char> bytes;
    {
        unsigned char buf[1 << 16];
        size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.insert(bytes.end(), buf, buf + n);
        const int e = errno;
        const bool bad = std::ferror(f);
        std::fclose(f);
        if (bad) return fail(err, path, std::string("cannot read the weight file: ") + std::strerror(e));
    }
    const uint64_t size = bytes.size();
    if (size < 8) return fail(err, file, "truncated: " + std::to_string(size) + " bytes, no header length");
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | bytes[i];
    // A header length that cannot be right, and no '{' where the JSON header must begin (the
    // format's rule): another kind of file (a text file, an image, a PyTorch checkpoint), which
    // says more than the length its first 8 bytes would mean.
    if ((hlen > kMaxHeader || 8 + hlen > size) && !(size > 8 && bytes[8] == '{')) {
        std::string head;
        for (uint64_t i = 0; i < std::min<uint64_t>(size, 8); ++i)
            head += bytes[i] >= 0x20 && bytes[i] < 0x7f ? (char)bytes[i] : '.';
        return fail(err, file, "not a safetensors file: byte 8 is not the '{' that starts its JSON header (its first 8 bytes: \"" +
                                   head + "\", of " + std::to_string(size) + " bytes)");
    }
    if (hlen > kMaxHeader) return fail(err, file, "header length " + std::to_string(hlen) + " is not sane (max " + std::to_string(kMaxHeader) + ")");
    if (8 + hlen > size)
        return fail(err, file, "truncated: header length " + std::to_string(hlen) + " is beyond the file size " + std::to_string(size));

    json hdr;
    try {
        hdr = json::parse(bytes.begin() + 8, bytes.begin() + 8 + hlen);
    } catch (const std::exception &e) {
        return fail(err, file, "corrupt JSON header: " + printable(e.what()));
    }
    if (!hdr.is_object()) return fail(err, file, "corrupt JSON header: not an object");

    const uint64_t data_size = size - 8 - hlen;
    const unsigned char *data = bytes.data() + 8 + hlen;
    struct Span { uint64_t b, e; std::string name; };
    std::vector<Span> spans;

    for (auto it = hdr.begin(); it != hdr.end(); ++it) {
        const std::string &name = it.key();
        const json &v = it.value();
        if (name == "__metadata__") {
            if (!v.is_object()) return fail(err, file, "__metadata__ is not an object");
            for (auto m = v.begin(); m != v.end(); ++m) {
                if (!m.value().is_string()) return fail(err, file, "__metadata__ '" + m.key() + "' is not a string");
                out->metadata[m.key()] = m.value().get<std::string>();
            }
            continue;
        }
        const std::string tn = "tensor '" + name + "'";
        if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets") ||
            !v["dtype"].is_string() || !v["shape"].is_array() || !v["data_offsets"].is_array() ||
            v["data_offsets"].size() != 2)
            return fail(err, file, tn + " has a malformed header entry (needs dtype, shape, data_offsets)");
        StTensor t;
        t.dtype = v["dtype"].get<std::string>();
        size_t esize;
        if (t.dtype == "F32") esize = 4;
        else if (t.dtype == "BF16") esize = 2;
        else return fail(err, file, tn + " has dtype " + t.dtype + "; only F32 and BF16 are supported");
        uint64_t count = 1;
        for (const json &d : v["shape"]) {
            if (!d.is_number_unsigned()) return fail(err, file, tn + " has a non-integer or negative dimension");
            uint64_t n = d.get<uint64_t>();
            if (n > (1ull << 40) || (n && count > (1ull << 40) / n)) return fail(err, file, tn + " has an absurd shape");
            count *= n;
            t.shape.push_back((int64_t)n);
        }
        const json &o = v["data_offsets"];
        if (!o[0].is_number_unsigned() || !o[1].is_number_unsigned()) return fail(err, file, tn + " has invalid data_offsets");
        uint64_t b = o[0].get<uint64_t>(), e = o[1].get<uint64_t>();
        if (e < b) return fail(err, file, tn + " has data_offsets end before begin");
        if (e - b != count * esize)
            return fail(err, file, tn + " " + t.dtype + shape_str(t.shape) + " needs " + std::to_string(count * esize) +
                                   " bytes but its data_offsets span " + std::to_string(e - b));
        if (e > data_size)
            return fail(err, file, "truncated: " + tn + " ends at byte " + std::to_string(e) + " of a data area of " +
                                   std::to_string(data_size) + " bytes");
        spans.push_back({b, e, name});
        t.data.resize(count);
        const unsigned char *p = data + b;
        if (esize == 4) {
            if (count)  // an empty tensor's data() may be null, and memcpy's arguments must not be
                std::memcpy(t.data.data(), p, count * 4);  // little-endian host assumed (x86-64, aarch64)
        } else {
            for (uint64_t i = 0; i < count; ++i) {
                uint32_t u = (uint32_t)(p[2 * i] | (p[2 * i + 1] << 8)) << 16;
                std::memcpy(&t.data[i], &u, 4);
            }
        }
        out->tensors.emplace(name, std::move(t));
    }

    std::sort(spans.begin(), spans.end(), [](const Span &a, const Span &b) { return a.b < b.b; });
    for (size_t i = 1; i < spans.size(); ++i)
        if (spans[i].b < spans[i - 1].e && spans[i].e > spans[i].b)
            return fail(err, file, "tensor '" + spans[i].name + "' overlaps tensor '" + spans[i - 1].name + "'");
    return true;
}

}  // namespace denoise
