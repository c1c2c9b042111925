// The fused Swin block kernel (swin_block_fused.cu) described as data.
//
// Two levels:
//  - SwinTile (constexpr, compiled into the kernel too): the tile plan of one instantiation: the
//    CTA's window tile (TW windows = M = 64 TW token rows), its warps (NW), the MLP chunk (HC
//    hidden units), the shared-memory buffers (row strides and byte offsets) and, per GEMM phase,
//    how the warps split the output tile (SwinWarpGrid). The kernel takes every shape, stride and
//    offset from here, so the descriptor below and the kernel cannot disagree about them.
//  - SwinBlockDesc (host): the phases in execution order with their M/N/K, how many times each
//    runs per CTA, operand sources (shared-memory buffer and offset, registers, or weight-image
//    section with byte offset and size) and mma.sync.m16n8k16 count; the totals per CTA.
// swin_block_desc_check() verifies that the phases' FLOPs add up to the analytic FLOP count of
// the block, that mma = FLOP / 4096, that the weight-image sections tile the image exactly and
// that the GEMM phases' weight ranges cover each weight section exactly once. The phases name
// their shared-memory operands but not the bytes each lane touches nor the barriers between
// (a race between two lanes inside one phase, as the qa plan had, is below this level): the
// kernel's shared-memory hazards are checked on the kernel itself, in the warp emulator
// (tests/emu/warp_emu.h, every SWIN_FUSED_KERNELS kernel in swin_block_emu_test). The kernel's
// instrumented instantiation (kCount) counts the mma it issues; tests/gpu/fused_check.cpp (GPU) and
// tests/emu/swin_block_emu_test.cpp (CPU warp emulator) compare that count with mma_per_cta x CTAs.
#ifndef DENOISE_CUDA_SWIN_BLOCK_DESC_H
#define DENOISE_CUDA_SWIN_BLOCK_DESC_H

#include <cstdint>
#include <string>
#include <vector>

#include "swin_weight_image.h"

namespace denoise {
namespace cuda {

// Largest dynamic shared memory a block may opt into on sm_90 (227 KB); smaller devices are
// checked at launch against their own limit.
constexpr uint32_t kSwinSmemMax = 232448;

// How NW warps split an output tile of MTT m-tiles (16 rows) x NTT n-tiles (8 columns): a WM x WN
// grid of warps, warp w at (w / WN, w % WN) owning MT = MTT / WM m-tiles and NTW = NTT / WN
// n-tiles, computed in chunks of NT n-tiles (MT x NT accumulator tiles live at a time).
struct SwinWarpGrid {
    int WM = 0, WN = 0, MT = 0, NTW = 0, NT = 0;
};

// The grid with the least operand traffic per warp: per k step MT A fragments (512 B, shared
// memory) and NT B fragments (256 B, weight image through L1/L2, counted twice as dear), A loaded
// again for every chunk. MT x NT <= MA accumulator tiles (4 MA registers: 64 at MA 16), NT <= 8.
// WM = 0 if none fits. The grid decides only which warp computes which output tile: every
// accumulator still adds its k steps in order, so any grid gives the same bits.
DN_HOSTDEV constexpr SwinWarpGrid swin_warp_grid(int MTT, int NTT, int NW, int KS, int MA = 16) {
    SwinWarpGrid best{};
    long best_cost = -1;
    for (int WM = 1; WM <= NW; WM *= 2) {
        if (NW % WM || MTT % WM) continue;
        const int WN = NW / WM;
        if (NTT % WN) continue;
        const int MT = MTT / WM, NTW = NTT / WN;
        int NT = 0;
        for (int d = 1; d <= NTW && d <= 8; ++d)
            if (NTW % d == 0 && MT * d <= MA) NT = d;
        if (!NT) continue;
        const long cost = (long)(NTW / NT) * KS * (MT * 512 + 2 * NT * 256);
        if (best_cost < 0 || cost < best_cost) {
            best = SwinWarpGrid{WM, WN, MT, NTW, NT};
            best_cost = cost;
        }
    }
    return best;
}

struct SwinTile {
    int C = 0, HD = 0, NH = 0;  // channels, head dim, heads
    int TW = 0, NW = 0;         // windows per CTA, warps per CTA
    // qa: q is projected inside the attention phase, per (query m-tile, head), and passes through
    // an at the item's output columns, so that u holds only k | v (less shared memory); ma:
    // accumulator tiles per warp at most in the GEMM phases (fewer registers when smaller)
    bool qa = false;
    int ma = 16;
    int M = 0, MTT = 0;         // token rows per CTA (64 TW) and their m-tiles
    int HC = 0, NCH = 0;        // MLP hidden units per chunk, chunks (4C / HC)
    // row strides in elements: xs fp32 (C + 8), an bf16 (C + 8), u bf16 as q | k | v (3C + 8) or,
    // with qa, k | v (2C + 8), hid bf16 (HC + 8); kcol, vcol: the first column of k and of v in u
    int sx = 0, sa = 0, sq = 0, sh = 0, kcol = 0, vcol = 0;
    // shared memory: xs (residual tile, fp32) | an (LN output / attention output, bf16; with qa
    // also q, each (m-tile, head) item's q where its output goes, a warp barrier between the
    // item's ldmatrix reads of q and its output's stores) | u (q | k | v or k | v, later the MLP
    // hidden chunk, bf16). Which phase may touch which bytes when, barriers included, is not
    // described here: tests/emu/swin_block_emu_test.cpp runs every kernel's own accesses through
    // the warp emulator's hazard check.
    uint32_t off_xs = 0, off_an = 0, off_u = 0, smem = 0;
    SwinWarpGrid qkv, proj, fc1, fc2;  // qkv: the q | k | v GEMM, with qa the k | v GEMM
    bool ok = false;
};

DN_HOSTDEV constexpr SwinTile swin_tile(int C, int HD, int TW, int NW, bool QA = false, int MA = 16) {
    SwinTile T{};
    T.C = C;
    T.HD = HD;
    T.NH = HD > 0 ? C / HD : 0;
    T.TW = TW;
    T.NW = NW;
    T.qa = QA;
    T.ma = MA;
    T.M = kSwinTokens * TW;
    T.MTT = T.M / 16;
    const int Ch = kSwinMlpRatio * C;
    // the largest multiple of 32 up to 128 that divides 4C (a whole number of fc2 k-pairs)
    T.HC = Ch < 128 ? Ch : 128;
    while (T.HC > 32 && Ch % T.HC) T.HC -= 32;
    T.NCH = T.HC > 0 ? Ch / T.HC : 0;
    // +8 elements per row: a row stride that is an odd multiple of 16 bytes for every C that is a
    // multiple of 16, so the 8 row addresses of an ldmatrix and the 8 rows of an accumulator store
    // fall in distinct banks.
    const int ucols = QA ? 2 * C : 3 * C;
    T.sx = C + 8;
    T.sa = C + 8;
    T.sq = ucols + 8;
    T.sh = T.HC + 8;
    T.kcol = QA ? 0 : C;
    T.vcol = T.kcol + C;
    T.off_xs = 0;
    T.off_an = T.off_xs + 4u * T.M * T.sx;
    T.off_u = T.off_an + 2u * T.M * T.sa;
    const uint32_t uq = 2u * T.M * T.sq, uh = 2u * T.M * T.sh;
    T.smem = T.off_u + (uq > uh ? uq : uh);
    const bool shape_ok = C >= 16 && C <= 256 && C % 16 == 0 && HD >= 16 && HD <= 64 && HD % 16 == 0 &&
                          C % HD == 0 && T.HC % 32 == 0 && Ch % T.HC == 0 && (TW == 1 || TW == 2) &&
                          (NW == 4 || NW == 8 || NW == 16) && (MA == 4 || MA == 8 || MA == 16);
    if (!shape_ok) return T;
    T.qkv = swin_warp_grid(T.MTT, ucols / 8, NW, C / 16, MA);
    T.proj = swin_warp_grid(T.MTT, C / 8, NW, C / 16, MA);
    T.fc1 = swin_warp_grid(T.MTT, T.HC / 8, NW, C / 16, MA);
    T.fc2 = swin_warp_grid(T.MTT, C / 8, NW, T.HC / 16, MA);
    T.ok = T.qkv.WM && T.proj.WM && T.fc1.WM && T.fc2.WM && T.smem <= kSwinSmemMax;
    return T;
}

// Shared memory per SM in bytes of compute capability `sm` (10 major + minor), 0 where not listed;
// each resident CTA takes 1 KB more of it for the system (CUDA C++ Programming Guide, compute
// capabilities table).
DN_HOSTDEV constexpr uint32_t swin_smem_per_sm(int sm) {
    return sm == 80 || sm == 87 ? 167936u : sm == 86 || sm == 89 ? 102400u : sm == 90 ? 233472u : 0u;
}

// The minimum of resident CTAs per SM a build asks of ptxas (__launch_bounds__'s second argument,
// which caps the registers at 64 K / (CTAs x threads)): `ctas` as the kernel table gives it, but
// no more than shared memory admits on the target `sm` (a build for 4 CTAs on sm_90 then keeps
// its registers on sm_89, where shared memory admits fewer). 0: no minimum, ptxas's own register
// heuristic; sm 0 (not known: the host pass): `ctas`.
DN_HOSTDEV constexpr int swin_min_ctas(int ctas, uint32_t smem, int sm) {
    const uint32_t per = swin_smem_per_sm(sm);
    if (ctas <= 1 || per == 0) return ctas;
    const int fit = (int)(per / (smem + 1024u));
    return fit < 1 ? 1 : ctas < fit ? ctas : fit;
}

// The kernels swin_block_fused.cu builds, as X(C, HD, TW, NW, QA, MA, PF, CTAS): the tile plan
// swin_tile(C, HD, TW, NW, QA, MA); PF 1: each GEMM phase's first weight fragments loaded before
// the barrier in front of it; compiled with ptxas's default register heuristic (CTAS 0) or for
// CTAS resident CTAs per SM (swin_min_ctas). Each for the three residual-stream forms, and once
// more instrumented (the mma count, fp32 stream) for one CTA per SM. Which one the engine runs is
// SWIN_FUSED_PREFERENCE's; denoise-cuda-bench --swin-sweep times them all. Resident CTAs x warps
// per SM on sm_90 (registers, ptxas of CUDA 13.0, and shared memory; docs/fused.md has the table):
//  C 32: 1/4 5 x 4 (93 registers; SM 0's choice), 1/4 ma 8 for 6: 6 x 4 (80), 1/8 3 x 8 (70),
//        1/8 for 4: 4 x 8 (64), 2/8 2 x 8 (93);
//  C 64: 1/4 3 x 4 (134; SM 0's choice), 1/4 ma 8 for 4: 4 x 4 (124), qa ma 8 for 4 / for 5:
//        4 / 5 x 4 (128 / 96; 45 KB instead of 53), 1/8 and 1/8 qa 3 x 8 (78 / 80), 2/8 1 x 8
//        (134), 2/8 ma 8 for 2: 2 x 8 (124);
//  C 128: 1/8 2 x 8 (102; SM 0's choice), 1/4 2 x 4 (136), 1/8 qa for 2: 2 x 8 (128; 84 KB:
//        fits sm_86 / sm_89's 99 KB per block, where 1/8's 100 KB does not).
// Builds that spilled in the fp32 forms on sm_90 were left out (C 64: 1/4 ma 16 for 4, 1/8 for 4,
// 1/8 with PF, 1/4 qa ma 8 for 5 with PF; C 32: 2/8 for 3).
#define SWIN_FUSED_KERNELS(X)     \
    X(32, 32, 1, 4, 0, 16, 0, 0)  \
    X(32, 32, 1, 4, 0, 16, 1, 0)  \
    X(32, 32, 1, 4, 0, 8, 0, 6)   \
    X(32, 32, 1, 4, 0, 8, 1, 6)   \
    X(32, 32, 1, 8, 0, 16, 0, 0)  \
    X(32, 32, 1, 8, 0, 16, 0, 4)  \
    X(32, 32, 1, 8, 0, 16, 1, 4)  \
    X(32, 32, 2, 8, 0, 16, 0, 0)  \
    X(48, 48, 1, 4, 0, 16, 0, 0)  \
    X(64, 32, 1, 4, 0, 16, 0, 0)  \
    X(64, 32, 1, 4, 0, 16, 1, 0)  \
    X(64, 32, 1, 4, 0, 8, 0, 4)   \
    X(64, 32, 1, 4, 0, 8, 1, 4)   \
    X(64, 32, 1, 4, 1, 8, 0, 4)   \
    X(64, 32, 1, 4, 1, 8, 0, 5)   \
    X(64, 32, 1, 8, 0, 16, 0, 0)  \
    X(64, 32, 1, 8, 1, 16, 0, 0)  \
    X(64, 32, 2, 8, 0, 16, 0, 0)  \
    X(64, 32, 2, 8, 0, 8, 0, 2)   \
    X(96, 32, 1, 4, 0, 16, 0, 0)  \
    X(128, 32, 1, 8, 0, 16, 0, 0) \
    X(128, 32, 1, 8, 0, 16, 1, 0) \
    X(128, 32, 1, 4, 0, 16, 0, 0) \
    X(128, 32, 1, 8, 1, 16, 0, 2) \
    X(192, 32, 1, 8, 0, 16, 0, 0) \
    X(256, 32, 1, 8, 0, 16, 0, 0)

// The engine's choice, as data: X(SM, C, HD, TW, NW, QA, MA, PF, CTAS) in order of preference, for
// devices of compute capability SM (10 major + minor; 0: any device). For a block (C, HD) the
// rows of the device's SM are tried first, then those of SM 0, then every kernel of
// SWIN_FUSED_KERNELS for (C, HD) in its order; the first one built whose shared memory the device
// allows per block runs (swin_block_fused_choice). SwinFusedParams can force another.
// SM 0: the tiles measured fastest on the H200 (docs/fused.md: at 1080p C 32 1/4 beat 2/8 by 14%,
// C 64 1/4 beat 2/8 by 22%, C 128 1/8 beat 1/4), then C 128's qa tile, which fits sm_86 / sm_89's
// 99 KB per block where the 100 KB of 1/8 does not. Rows per SM: from denoise-cuda-bench
// --swin-sweep (docs/fused.md, "Occupancy variants").
// SM 90: the sweep on an H100 (2026-12-08, ms per block at the 4K frame's token grids, each
// kernel bitwise equal to the SM 0 choice): C 32 1/8 pf for 4 CTAs 0.934 ms at level 0 against
// 1.039 (-10%); C 64 1/8 2.408 ms at levels 0 + 1 against 2.921 (-18%); C 128 1/8 pf 0.328 at
// level 2 against 0.330. The qa kernels of C 64 (1/4 qa ma 8 for 5 CTAs timed fastest, 2.338) are
// left out: racecheck reported shared-memory hazards in them on the same machine (a missing warp
// barrier, fixed since: docs/fused.md, "The qa race"; their racecheck rerun and timing are
// pending, on a GPU). The second row of C 32 and C 64 is the fastest kernel of one window a CTA
// with 4 warps, what a SwinFusedParams forcing tw 1 / nw 4 then runs.
#define SWIN_FUSED_PREFERENCE(X)     \
    X(90, 32, 32, 1, 8, 0, 16, 1, 4) \
    X(90, 32, 32, 1, 4, 0, 8, 1, 6)  \
    X(90, 64, 32, 1, 8, 0, 16, 0, 0) \
    X(90, 64, 32, 1, 4, 0, 8, 1, 4)  \
    X(90, 128, 32, 1, 8, 0, 16, 1, 0) \
    X(0, 32, 32, 1, 4, 0, 16, 0, 0)  \
    X(0, 64, 32, 1, 4, 0, 16, 0, 0)  \
    X(0, 128, 32, 1, 8, 0, 16, 0, 0) \
    X(0, 128, 32, 1, 8, 1, 16, 0, 2)

// FLOP of one Swin block over n tokens (2 per multiply-add; GEMMs and attention only, the
// LayerNorm/softmax/GELU arithmetic is not counted): 2 n (3C^2 + C^2 + 4C^2 + 4C^2) for qkv, proj,
// fc1, fc2 and 2 n 64 C twice for the scores and P V (heads x head dim = C).
inline int64_t swin_block_flop(int C, int64_t n) { return 2 * n * (12 * (int64_t)C * C) + 4 * n * 64 * (int64_t)C; }

// Bytes one block moves through DRAM per token: the residual stream read and written once.
inline int64_t swin_block_bytes_per_token(int C, bool bf16_residual) { return 2 * (int64_t)C * (bf16_residual ? 2 : 4); }

struct SwinOperand {
    std::string kind;  // "smem", "registers", "image"
    std::string what;  // buffer / section name and the columns read
    uint32_t offset = 0, bytes = 0;  // smem byte offset or image byte offset; bytes read (image)
    int stride = 0;                  // smem row stride (elements)
};

struct SwinPhase {
    std::string name;  // "qkv", "scores h0", "fc1 c1", ...
    bool gemm = false;
    int M = 0, N = 0, K = 0;  // one instance (tokens x outputs x reduction)
    int instances = 0;        // per CTA (windows x heads for the attention phases)
    SwinOperand a, b;         // mma A and B sources
    std::string epilogue;     // what happens to the accumulators
    int64_t mma = 0, flop = 0;  // per CTA
};

struct SwinBlockDesc {
    SwinTile tile;
    SwinImageLayout image;
    std::vector<SwinPhase> phases;
    int64_t mma_per_cta = 0, flop_per_cta = 0;
};

// The descriptor of the tile plan swin_tile(C, C / heads, TW, NW, QA, MA). tile.ok is false (and
// phases empty) for a combination the kernel cannot be built for.
SwinBlockDesc swin_block_desc(int C, int heads, int TW, int NW, bool QA = false, int MA = 16);

// The consistency checks listed at the top; false with *why naming the first one that fails.
bool swin_block_desc_check(const SwinBlockDesc &d, std::string *why);

// A printable table of the descriptor (one line per phase, then the totals).
std::string swin_block_desc_text(const SwinBlockDesc &d);

}  // namespace cuda
}  // namespace denoise

#endif
