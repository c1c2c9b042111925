// The fused Swin block kernel's descriptor: its phases as data (swin_block_desc.h), built from the
// same SwinTile plan and weight-image layout the kernel is compiled with, and its self-checks.
#include "swin_block_desc.h"

#include <algorithm>
#include <cstdio>

namespace denoise {
namespace cuda {

namespace {

int64_t mma_of(int M, int N, int K) { return (int64_t)(M / 16) * (N / 8) * (K / 16); }

SwinPhase gemm(const std::string &name, int M, int N, int K, int inst, SwinOperand a, SwinOperand b,
               const std::string &epi) {
    SwinPhase p;
    p.name = name;
    p.gemm = true;
    p.M = M;
    p.N = N;
    p.K = K;
    p.instances = inst;
    p.a = std::move(a);
    p.b = std::move(b);
    p.epilogue = epi;
    p.mma = mma_of(M, N, K) * inst;
    p.flop = 2 * (int64_t)M * N * K * inst;
    return p;
}

SwinPhase other(const std::string &name, SwinOperand a, SwinOperand b, const std::string &what) {
    SwinPhase p;
    p.name = name;
    p.a = std::move(a);
    p.b = std::move(b);
    p.epilogue = what;
    return p;
}

SwinOperand smem(const std::string &what, uint32_t off, int stride) { return SwinOperand{"smem", what, off, 0, stride}; }
SwinOperand image(const SwinImageLayout &L, int sec, uint32_t off, uint32_t bytes) {
    return SwinOperand{"image", swin_section_name(sec), L.off[sec] + off, bytes, 0};
}
SwinOperand regs(const std::string &what) { return SwinOperand{"registers", what, 0, 0, 0}; }
SwinOperand global(const std::string &what) { return SwinOperand{"global", what, 0, 0, 0}; }

}  // namespace

SwinBlockDesc swin_block_desc(int C, int heads, int TW, int NW, bool QA, int MA) {
    SwinBlockDesc d;
    const int HD = heads > 0 ? C / heads : 0;
    d.tile = swin_tile(C, HD, TW, NW, QA, MA);
    if (!d.tile.ok || heads < 1 || C % heads) {
        d.tile.ok = false;
        return d;
    }
    const SwinTile &T = d.tile;
    const SwinImageLayout L = swin_image_layout(C, heads);
    d.image = L;
    const int M = T.M;
    const std::string Cs = std::to_string(C);
    auto &ph = d.phases;
    ph.push_back(other("load", global("x (H, W, C) at the shifted window tokens"), SwinOperand{},
                       "-> smem xs fp32 (" + std::to_string(M) + " x " + Cs + ")"));
    ph.push_back(other("ln1", smem("xs", T.off_xs, T.sx), image(L, kSecLn1G, 0, L.bytes(kSecLn1G) * 2),
                       "fp32 stats -> smem an bf16"));
    // qkv_w rows [q | k | v], n-tile-major: head h's q rows are the contiguous units of n-tiles
    // h HD / 8 .. (h + 1) HD / 8 - 1, k | v the units after the C / 8 n-tiles of q
    const uint32_t unit_rows = (uint32_t)((C + 31) / 32) * 512u / 8u;  // bytes per weight row
    if (QA) {
        ph.push_back(gemm("kv", M, 2 * C, C, 1, smem("an (LN1 output)", T.off_an, T.sa),
                          image(L, kSecQkvW, unit_rows * C, unit_rows * 2 * C),
                          "+ qkv_b -> smem k | v bf16 (stride " + std::to_string(T.sq) + ")"));
        for (int h = 0; h < heads; ++h)
            ph.push_back(gemm("q h" + std::to_string(h), M, HD, C, 1, smem("an (LN1 output)", T.off_an, T.sa),
                              image(L, kSecQkvW, unit_rows * h * HD, unit_rows * HD),
                              "+ qkv_b, x hd^-0.5 log2(e) -> bf16, held in the attention warp, after a barrier -> smem an "
                              "cols " + std::to_string(h * HD) + "+" + std::to_string(HD) +
                                  " (where the item's attention output goes), then a warp barrier"));
    } else {
        ph.push_back(gemm("qkv", M, 3 * C, C, 1, smem("an (LN1 output)", T.off_an, T.sa),
                          image(L, kSecQkvW, 0, L.bytes(kSecQkvW)),
                          "+ qkv_b, q x hd^-0.5 log2(e) -> smem qkv bf16 (stride " + std::to_string(T.sq) + ")"));
    }
    for (int h = 0; h < heads; ++h) {
        const std::string hs = std::to_string(h), qc = std::to_string(h * HD), kc = std::to_string(T.kcol + h * HD),
                          vc = std::to_string(T.vcol + h * HD);
        SwinPhase s = gemm("scores h" + hs, kSwinTokens, kSwinTokens, HD, TW,
                           QA ? smem("an cols " + qc + "+" + std::to_string(HD) + " (q)", T.off_an, T.sa)
                              : smem("qkv cols " + qc + "+" + std::to_string(HD) + " (q)", T.off_u, T.sq),
                           smem(std::string(QA ? "kv" : "qkv") + " cols " + kc + "+" + std::to_string(HD) + " (k)", T.off_u,
                                T.sq),
                           "+ relb (image), shift mask, softmax fp32 -> P bf16 in registers");
        ph.push_back(s);
        ph.push_back(other("bias h" + hs, SwinOperand{},
                           image(L, kSecRelB, (uint32_t)h * 16384u, 16384u), "added to the score accumulators"));
        ph.push_back(gemm("pv h" + hs, kSwinTokens, HD, kSwinTokens, TW, regs("P (score accumulators)"),
                          smem(std::string(QA ? "kv" : "qkv") + " cols " + vc + "+" + std::to_string(HD) +
                                   " (v, ldmatrix.trans)",
                               T.off_u, T.sq),
                          "-> smem an cols " + qc + " bf16 (attention output" +
                              (QA ? std::string(", over the item's q after a warp barrier)") : std::string(")"))));
    }
    ph.push_back(gemm("proj", M, C, C, 1, smem("an (attention output)", T.off_an, T.sa),
                      image(L, kSecProjW, 0, L.bytes(kSecProjW)), "+ proj_b, xs += (fp32 residual)"));
    ph.push_back(other("proj bias", SwinOperand{}, image(L, kSecProjB, 0, L.bytes(kSecProjB)), "epilogue of proj"));
    ph.push_back(other("ln2", smem("xs", T.off_xs, T.sx),
                       image(L, kSecLn2G, 0, L.bytes(kSecLn2G) * 2), "fp32 stats -> smem an bf16"));
    const uint32_t fc1_chunk = swin_gemm_image_bytes(T.HC, C), fc2_chunk = swin_gemm_image_bytes(C, T.HC);
    for (int c = 0; c < T.NCH; ++c) {
        const std::string cs = std::to_string(c), h0 = std::to_string(c * T.HC);
        ph.push_back(gemm("fc1 c" + cs, M, T.HC, C, 1, smem("an (LN2 output)", T.off_an, T.sa),
                          image(L, kSecFc1W, c * fc1_chunk, fc1_chunk),
                          "+ fc1_b[" + h0 + "..], GELU tanh -> smem hid bf16 (stride " + std::to_string(T.sh) + ")"));
        ph.push_back(other("fc1 bias c" + cs, SwinOperand{}, image(L, kSecFc1B, 4u * c * T.HC, 4u * T.HC), "epilogue of fc1"));
        ph.push_back(gemm("fc2 c" + cs, M, C, T.HC, 1, smem("hid", T.off_u, T.sh),
                          image(L, kSecFc2W, c * fc2_chunk, fc2_chunk),
                          std::string(c == 0 ? "+ fc2_b, " : "") + "xs += (fp32 residual)"));
    }
    ph.push_back(other("fc2 bias", SwinOperand{}, image(L, kSecFc2B, 0, L.bytes(kSecFc2B)), "epilogue of fc2 c0"));
    ph.push_back(other("store", smem("xs", T.off_xs, T.sx), SwinOperand{}, "-> x at the same tokens (shift undone)"));
    for (const SwinPhase &p : ph) {
        d.mma_per_cta += p.mma;
        d.flop_per_cta += p.flop;
    }
    return d;
}

bool swin_block_desc_check(const SwinBlockDesc &d, std::string *why) {
    auto no = [&](const std::string &m) {
        *why = m;
        return false;
    };
    if (!d.tile.ok) return no("the tile plan is not valid");
    const SwinTile &T = d.tile;
    const int C = T.C;
    const int64_t analytic = swin_block_flop(C, T.M);
    if (d.flop_per_cta != analytic)
        return no("phases add up to " + std::to_string(d.flop_per_cta) + " FLOP per CTA, the block has " +
                  std::to_string(analytic));
    if (d.mma_per_cta * 4096 != d.flop_per_cta)
        return no("mma count " + std::to_string(d.mma_per_cta) + " x 4096 != " + std::to_string(d.flop_per_cta) + " FLOP");
    int64_t gemm_mma = 0;
    for (const SwinPhase &p : d.phases)
        if (p.gemm) {
            if (p.M % 16 || p.N % 8 || p.K % 16) return no("phase " + p.name + " is not a whole number of m16n8k16 tiles");
            gemm_mma += (int64_t)(p.M / 16) * (p.N / 8) * (p.K / 16) * p.instances;
        }
    if (gemm_mma != d.mma_per_cta) return no("per-phase mma counts do not add up to the total");

    // the image: sections tile it exactly, each 16-byte aligned, of the size its shape implies
    const SwinImageLayout &L = d.image;
    const int Ch = kSwinMlpRatio * C, heads = L.heads;
    const uint32_t want[kSwinSections] = {4u * C,
                                          4u * C,
                                          (uint32_t)(3 * C / 8) * ((C + 31) / 32) * 512u,
                                          12u * C,
                                          4u * heads * 4096u,
                                          (uint32_t)(C / 8) * ((C + 31) / 32) * 512u,
                                          4u * C,
                                          4u * C,
                                          4u * C,
                                          (uint32_t)(Ch / 8) * ((C + 31) / 32) * 512u,
                                          4u * Ch,
                                          (uint32_t)(C / 8) * ((Ch + 31) / 32) * 512u,
                                          4u * C};
    if (L.off[0] != 0) return no("the image does not start at offset 0");
    uint64_t sum = 0;
    for (int s = 0; s < kSwinSections; ++s) {
        if (L.off[s + 1] < L.off[s]) return no(std::string("section ") + swin_section_name(s) + " ends before it starts");
        if (L.off[s] % 16) return no(std::string("section ") + swin_section_name(s) + " is not 16-byte aligned");
        if (L.bytes(s) != want[s])
            return no(std::string("section ") + swin_section_name(s) + " has " + std::to_string(L.bytes(s)) +
                      " bytes, its shape needs " + std::to_string(want[s]));
        sum += want[s];
    }
    if (sum != L.total()) return no("sections add up to " + std::to_string(sum) + " bytes, the image has " + std::to_string(L.total()));

    // every byte of each GEMM weight section is read by exactly one GEMM phase, the bias table by
    // the attention phases, each once
    const int covered[] = {kSecQkvW, kSecProjW, kSecFc1W, kSecFc2W, kSecRelB, kSecFc1B};
    for (int sec : covered) {
        std::vector<std::pair<uint32_t, uint32_t>> r;
        for (const SwinPhase &p : d.phases)
            if (p.b.kind == "image" && p.b.what == swin_section_name(sec)) r.push_back({p.b.offset, p.b.bytes});
        std::sort(r.begin(), r.end());
        uint32_t at = L.off[sec];
        for (const auto &x : r) {
            if (x.first != at)
                return no(std::string("section ") + swin_section_name(sec) + ": phase ranges leave a gap or overlap at byte " +
                          std::to_string(at));
            at += x.second;
        }
        if (at != L.off[sec + 1])
            return no(std::string("section ") + swin_section_name(sec) + ": phase ranges end at " + std::to_string(at) +
                      ", the section at " + std::to_string(L.off[sec + 1]));
    }

    // shared memory: the three buffers in order, inside the plan's size
    if (T.off_an < T.off_xs + 4u * T.M * T.sx || T.off_u < T.off_an + 2u * T.M * T.sa ||
        T.smem < T.off_u + 2u * T.M * std::max(T.sq, T.sh))
        return no("shared-memory buffers overlap");
    if (T.smem > kSwinSmemMax) return no("shared memory " + std::to_string(T.smem) + " > " + std::to_string(kSwinSmemMax));
    return true;
}

std::string swin_block_desc_text(const SwinBlockDesc &d) {
    std::string s;
    char line[512];
    const SwinTile &T = d.tile;
    std::snprintf(line, sizeof line,
                  "fused Swin block C %d, %d heads of %d, tile %d window(s) = %d tokens, %d warps, MLP chunk %d x %d, "
                  "q %s, at most %d accumulator tiles per warp, smem %u B, image %u B\n",
                  T.C, T.NH, T.HD, T.TW, T.M, T.NW, T.HC, T.NCH, T.qa ? "in the attention phase" : "through shared memory",
                  T.ma, T.smem, d.image.total());
    s += line;
    auto grid = [&](const char *n, const SwinWarpGrid &g) {
        std::snprintf(line, sizeof line, "  warps %-4s %d x %d, warp tile %d m-tiles x %d n-tiles in chunks of %d\n", n, g.WM,
                      g.WN, g.MT, g.NTW, g.NT);
        s += line;
    };
    grid(T.qa ? "kv" : "qkv", T.qkv);
    grid("proj", T.proj);
    grid("fc1", T.fc1);
    grid("fc2", T.fc2);
    auto opnd = [](const SwinOperand &o) {
        if (o.kind.empty()) return std::string("-");
        if (o.kind == "image") return "image " + o.what + " @" + std::to_string(o.offset) + " +" + std::to_string(o.bytes);
        if (o.kind == "smem") return "smem " + o.what + " @" + std::to_string(o.offset) + " ld " + std::to_string(o.stride);
        return o.kind + " " + o.what;
    };
    for (const SwinPhase &p : d.phases) {
        if (p.gemm)
            std::snprintf(line, sizeof line, "  %-12s M %4d N %4d K %4d x%-2d mma %7lld | A %s | B %s | %s\n", p.name.c_str(),
                          p.M, p.N, p.K, p.instances, (long long)p.mma, opnd(p.a).c_str(), opnd(p.b).c_str(),
                          p.epilogue.c_str());
        else
            std::snprintf(line, sizeof line, "  %-12s %s | %s | %s\n", p.name.c_str(), opnd(p.a).c_str(), opnd(p.b).c_str(),
                          p.epilogue.c_str());
        s += line;
    }
    std::snprintf(line, sizeof line, "  total per CTA: %lld mma, %lld FLOP (%.1f FLOP per token)\n", (long long)d.mma_per_cta,
                  (long long)d.flop_per_cta, (double)d.flop_per_cta / T.M);
    s += line;
    return s;
}

}  // namespace cuda
}  // namespace denoise
