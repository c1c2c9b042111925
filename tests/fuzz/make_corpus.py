#!/usr/bin/env python3
# Writes the fuzzer's seed corpus (tests/fuzz/corpus/): small valid and invalid safetensors
# files built around the v1 config (the real weights are 2-4 MB; these are a few KB each).
# Usage: python3 tests/fuzz/make_corpus.py [OUTDIR]
import json, os, struct, sys

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus")
os.makedirs(out, exist_ok=True)
config = {"channels": [32, 64, 128], "depths": {"dec0": 2, "dec1": 2, "enc0": 2, "enc1": 2, "mid": 3},
          "format": "denoise-swin", "fusion_radius": 2, "head_dim": 32, "head_radius": 1,
          "heads": [1, 2, 4], "ln_eps": 1e-05, "mlp_ratio": 4, "pad_multiple": 64, "s2d": 2,
          "shift": 4, "temporal_radius": 3, "version": 1, "window": 8}
meta = {"format": "denoise-swin", "version": "1", "config": json.dumps(config)}


def st(tensors, metadata=meta, extra=b"", hdr_override=None):
    hdr, data = {}, b""
    if metadata is not None:
        hdr["__metadata__"] = metadata
    for name, (dtype, shape, raw) in tensors.items():
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = hdr_override if hdr_override is not None else json.dumps(hdr).encode()
    return struct.pack("<Q", len(h)) + h + data + extra


f32 = lambda n: struct.pack("<%df" % n, *[0.25 * i for i in range(n)])
bf16 = lambda n: b"".join(struct.pack("<H", 0x3f80 + i) for i in range(n))
small = {"fusion.weight": ("F32", [2, 3], f32(6)), "head.bias": ("BF16", [4], bf16(4))}
files = {
    "valid_small": st(small),
    "valid_no_metadata": st(small, metadata=None),
    "valid_empty": st({}),
    "config_only.json": json.dumps(config).encode(),
    "config_bad_channels.json": json.dumps(dict(config, channels=[48, 96, 192])).encode(),
    "truncated_tensors": st(small)[:-5],
    "truncated_header": st(small)[:40],
    "header_len_huge": struct.pack("<Q", 1 << 40) + b"{}",
    "bad_dtype": st({"a": ("I32", [2], b"\0" * 8)}),
    "span_mismatch": st({"a": ("F32", [3], f32(2))}),
    "overlap": st({}, hdr_override=json.dumps({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                              "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}).encode(),
                  extra=f32(3)),
    "negative_dim": st({}, hdr_override=b'{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}', extra=f32(1)),
    "not_json": struct.pack("<Q", 5) + b"{nope",
    "metadata_not_string": st({}, metadata={"config": 5}),
    "zero_elements": st({"a": ("F32", [0], b""), "b": ("BF16", [2, 0], b""), "c": ("F32", [1], f32(1))}),
}
for name, b in files.items():
    with open(os.path.join(out, name), "wb") as fh:
        fh.write(b)
print("wrote %d files to %s (%d bytes)" % (len(files), out, sum(map(len, files.values()))))
