// A CPU emulator of the warp primitives in kernels/cuda/warp_mma.h, so that a kernel body written
// against them (swin_block_fused.cu's swin_block_tile) runs unchanged on the CPU.
//
// Each thread of the CTA is a fiber (ucontext) on its own stack, run one at a time; plain code
// runs per thread, and every collective (ldmatrix, mma, shuffle, the CTA barrier) is a rendezvous:
// a thread deposits its operands and yields until all threads of its warp (or the CTA) have
// arrived at the same kind of collective, then the last one computes every lane's result from the
// PTX ISA's fragment definitions (repeated in warp_mma.h's header). Checked on the way: all lanes
// of a warp meet at the same kind of collective (a divergent collective aborts with the warp and
// the kinds), ldmatrix row addresses are 16-byte aligned and inside the CTA's shared memory, a
// shuffle's lane mask is the same on all lanes, and a CTA that stops making progress (deadlock)
// aborts. Values: mma multiplies bf16 exactly in fp32 and sums in fp32, k in order, then adds C.
//
// Shared-memory hazards (as compute-sanitizer's racecheck finds them on a GPU, here for every
// thread order at once): each byte of the CTA's shared memory keeps its last write (thread, CTA
// barrier epoch, warp barrier epoch) and the readers since (warps; lanes, while one warp reads
// it), from ldmatrix (each lane reads the 16-byte row whose address it gives) and the kernels'
// DN_LDS / DN_STS / DN_STS_ADD (warp_mma.h). Two accesses of different threads to a byte, one a write, are a hazard unless a CTA
// barrier lies between them, or, for lanes of one warp, a warp barrier (sync_warp): ldmatrix, mma
// and shuffles order no memory. Which thread ran first in the emulation does not matter, only the
// barriers between, so a hazard is found even where every schedule the emulator (or a GPU) runs
// happens to give the right bits. Hazards are counted and the first kMaxHazards kept (hazards()),
// for the test to check and print; a kernel that uses plain pointers instead of those macros is
// checked on its ldmatrix reads only (no hazard can show: they are all reads).
//
// Include after defining DENOISE_WARP_EMULATION and before the kernel source; one translation unit.
#ifndef DENOISE_TESTS_WARP_EMU_H
#define DENOISE_TESTS_WARP_EMU_H

#ifndef DENOISE_WARP_EMULATION
#error "define DENOISE_WARP_EMULATION before including warp_emu.h"
#endif

#include <ucontext.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "cuda/warp_mma.h"

#if defined(__SANITIZE_ADDRESS__)
#define WARP_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WARP_EMU_ASAN 1
#endif
#endif
#ifdef WARP_EMU_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace warp_emu {

enum Kind { kNone, kLdsmX4, kLdsmX4T, kLdsmX2, kMma, kShfl, kSync, kSyncWarp };

inline const char *kind_name(int k) {
    static const char *const n[] = {"none", "ldmatrix.x4", "ldmatrix.x4.trans", "ldmatrix.x2", "mma", "shfl.xor", "bar.sync",
                                    "bar.warp.sync"};
    return k >= 0 && k <= kSyncWarp ? n[k] : "?";
}

// One hazard: thread `tid` accessed shared byte `offset` (a write if `write`) after `other` did (a
// thread, or -1 with other_warp: some lane of that warp; a write if `other_write`), with no
// barrier between that orders them.
struct Hazard {
    size_t offset = 0;
    int tid = 0, other = -1, other_warp = -1;
    bool write = false, other_write = false;
};
constexpr int kMaxHazards = 16;
struct HazardLog {
    uint64_t count = 0;
    std::vector<Hazard> first;  // the first kMaxHazards
    void clear() {
        count = 0;
        first.clear();
    }
};
inline HazardLog &hazards() {
    static HazardLog h;
    return h;
}
inline std::string hazard_text(const Hazard &h) {
    char b[256];
    const char *what = h.other_write ? (h.write ? "write-after-write" : "read-after-write") : "write-after-read";
    if (h.other >= 0)
        std::snprintf(b, sizeof b, "%s at byte %zu: thread %d (warp %d lane %d) after thread %d (warp %d lane %d)", what,
                      h.offset, h.tid, h.tid / 32, h.tid % 32, h.other, h.other / 32, h.other % 32);
    else
        std::snprintf(b, sizeof b, "%s at byte %zu: thread %d (warp %d lane %d) after a lane of warp %d", what, h.offset, h.tid,
                      h.tid / 32, h.tid % 32, h.other_warp);
    return b;
}

// The hazard state of one byte of shared memory (see the top): the last write, and the reads in
// CTA epoch r_epoch since it: the warps that read (bits), and while only one warp did, its lanes
// since its warp epoch r_wepoch.
struct ShadowByte {
    int32_t w_tid = -1;
    uint32_t w_epoch = 0, w_wepoch = 0;
    uint32_t r_epoch = 0, r_wepoch = 0, r_warps = 0, r_lanes = 0;
};

struct Slot {
    int kind = kNone, arrived = 0, need = 32;
    uint64_t gen = 0;
    const void *addr[32] = {};
    uint32_t a[32][4] = {}, b[32][2] = {};
    float c[32][4] = {}, f[32] = {};
    int mask[32] = {};
    uint32_t out[32][4] = {};
    float fout[32][4] = {};
};

struct Fiber {
    ucontext_t uc;
    char *stack = nullptr;
    int tid = 0;
    bool done = false;
    Slot *wait = nullptr;
    uint64_t wait_gen = 0;
    // cp.async copies issued and not yet waited for: (shared-memory destination, the 4 bytes read
    // at issue: the kernels copy read-only global data)
    std::vector<std::pair<uint8_t *, uint32_t>> async;
};

struct Cta {
    int nthreads = 0;
    std::vector<Fiber> fibers;
    std::vector<Slot> warps;
    Slot all;
    ucontext_t sched;
    int cur = -1;
    const uint8_t *smem = nullptr;
    size_t smem_bytes = 0;
    const std::function<void(int)> *body = nullptr;
    const void *sched_stack = nullptr;
    size_t sched_stack_size = 0;
    // hazard check: CTA barriers passed, warp barriers passed per warp, per-byte state
    uint32_t epoch = 0;
    std::vector<uint32_t> wepoch;
    std::vector<ShadowByte> shadow;
};

constexpr size_t kStack = 256 * 1024;

inline Cta *&current() {
    static Cta *c = nullptr;
    return c;
}

[[noreturn]] inline void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::fprintf(stderr, "warp_emu: ");
    std::vfprintf(stderr, fmt, ap);
    std::fprintf(stderr, "\n");
    va_end(ap);
    std::abort();
}

inline void switch_to(ucontext_t *from, ucontext_t *to, const void *to_stack, size_t to_size) {
#ifdef WARP_EMU_ASAN
    void *fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, to_stack, to_size);
    swapcontext(from, to);
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
    (void)to_stack;
    (void)to_size;
    swapcontext(from, to);
#endif
}

inline void trampoline(int i) {
    Cta &c = *current();
#ifdef WARP_EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &c.sched_stack, &c.sched_stack_size);
#endif
    (*c.body)(c.fibers[i].tid);
    if (!c.fibers[i].async.empty()) die("thread %d ended with %zu cp.async copies not waited for", i, c.fibers[i].async.size());
    c.fibers[i].done = true;
#ifdef WARP_EMU_ASAN
    __sanitizer_start_switch_fiber(nullptr, c.sched_stack, c.sched_stack_size);
#endif
    // returning resumes uc_link (the scheduler)
}

inline void complete(Slot &s, const Cta &c) {
    auto in_smem = [&](const void *p) {
        const uint8_t *q = static_cast<const uint8_t *>(p);
        if (((uintptr_t)q & 15) != 0) die("ldmatrix row address not 16-byte aligned");
        if (q < c.smem || q + 16 > c.smem + c.smem_bytes) die("ldmatrix row address outside shared memory");
        return reinterpret_cast<const uint16_t *>(q);
    };
    switch (s.kind) {
    case kLdsmX4:
    case kLdsmX4T:
    case kLdsmX2: {
        const int nm = s.kind == kLdsmX2 ? 2 : 4;
        const bool tr = s.kind == kLdsmX4T;
        for (int i = 0; i < nm; ++i) {
            const uint16_t *rows[8];
            for (int r = 0; r < 8; ++r) rows[r] = in_smem(s.addr[8 * i + r]);
            for (int l = 0; l < 32; ++l) {
                const int g = l / 4, t = l % 4;
                const uint16_t lo = tr ? rows[2 * t][g] : rows[g][2 * t];
                const uint16_t hi = tr ? rows[2 * t + 1][g] : rows[g][2 * t + 1];
                s.out[l][i] = (uint32_t)lo | ((uint32_t)hi << 16);
            }
        }
        break;
    }
    case kMma: {
        float A[16][16], B[16][8], C[16][8];
        auto lo = [](uint32_t v) { return denoise::cuda::warp::bf16_lo(v); };
        auto hi = [](uint32_t v) { return denoise::cuda::warp::bf16_hi(v); };
        for (int l = 0; l < 32; ++l) {
            const int g = l / 4, t = l % 4;
            A[g][2 * t] = lo(s.a[l][0]);
            A[g][2 * t + 1] = hi(s.a[l][0]);
            A[g + 8][2 * t] = lo(s.a[l][1]);
            A[g + 8][2 * t + 1] = hi(s.a[l][1]);
            A[g][2 * t + 8] = lo(s.a[l][2]);
            A[g][2 * t + 9] = hi(s.a[l][2]);
            A[g + 8][2 * t + 8] = lo(s.a[l][3]);
            A[g + 8][2 * t + 9] = hi(s.a[l][3]);
            B[2 * t][g] = lo(s.b[l][0]);
            B[2 * t + 1][g] = hi(s.b[l][0]);
            B[2 * t + 8][g] = lo(s.b[l][1]);
            B[2 * t + 9][g] = hi(s.b[l][1]);
            C[g][2 * t] = s.c[l][0];
            C[g][2 * t + 1] = s.c[l][1];
            C[g + 8][2 * t] = s.c[l][2];
            C[g + 8][2 * t + 1] = s.c[l][3];
        }
        for (int l = 0; l < 32; ++l) {
            const int g = l / 4, t = l % 4;
            const int rr[4] = {g, g, g + 8, g + 8}, cc[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
            for (int r = 0; r < 4; ++r) {
                float acc = 0.f;
                for (int k = 0; k < 16; ++k) acc += A[rr[r]][k] * B[k][cc[r]];
                s.fout[l][r] = acc + C[rr[r]][cc[r]];
            }
        }
        break;
    }
    case kShfl:
        for (int l = 0; l < 32; ++l) {
            if (s.mask[l] != s.mask[0]) die("shfl.xor with different lane masks (%d, %d)", s.mask[0], s.mask[l]);
            s.fout[l][0] = s.f[l ^ s.mask[l]];
        }
        break;
    default:
        break;
    }
}

// The calling thread has deposited its operands in s (at its lane): meet the others.
inline void arrive(Slot &s, int kind, int need) {
    Cta &c = *current();
    Fiber &me = c.fibers[c.cur];
    if (s.arrived == 0) {
        s.kind = kind;
        s.need = need;
    } else if (s.kind != kind) {
        die("warp %d: a thread reached %s while others wait at %s", me.tid / 32, kind_name(kind), kind_name(s.kind));
    }
    if (++s.arrived == s.need) {
        complete(s, c);
        if (kind == kSync) ++c.epoch;
        if (kind == kSyncWarp) ++c.wepoch[me.tid / 32];
        s.arrived = 0;
        ++s.gen;
        return;
    }
    me.wait = &s;
    me.wait_gen = s.gen;
    switch_to(&me.uc, &c.sched, c.sched_stack, c.sched_stack_size);
    me.wait = nullptr;
}

inline Slot &warp_slot(int *lane) {
    Cta &c = *current();
    const int tid = c.fibers[c.cur].tid;
    *lane = tid & 31;
    return c.warps[tid >> 5];
}

// The calling thread accesses bytes [p, p + n) of shared memory: check them against the earlier
// accesses (hazards, see the top), then record this one.
inline void note_access(const void *p, size_t n, bool write) {
    Cta &c = *current();
    const uint8_t *q = static_cast<const uint8_t *>(p);
    if (q < c.smem || q + n > c.smem + c.smem_bytes) die("shared-memory access outside the CTA's shared memory");
    const int tid = c.fibers[c.cur].tid, w = tid / 32, l = tid % 32;
    const uint32_t E = c.epoch, S = c.wepoch[w], wbit = 1u << w;
    HazardLog &log = hazards();
    bool found = false;  // one hazard per access, at its first byte that has one
    auto report = [&](size_t off, int other, int other_warp, bool other_write) {
        if (found) return;
        found = true;
        if (log.count++ < (uint64_t)kMaxHazards) {
            Hazard h;
            h.offset = off;
            h.tid = tid;
            h.other = other;
            h.other_warp = other_warp;
            h.write = write;
            h.other_write = other_write;
            log.first.push_back(h);
        }
    };
    for (size_t i = 0; i < n; ++i) {
        const size_t off = (size_t)(q - c.smem) + i;
        ShadowByte &b = c.shadow[off];
        // the last write: ordered before this access by a CTA barrier since, or a warp barrier
        // since if it was another lane of this warp
        if (b.w_tid >= 0 && b.w_tid != tid && b.w_epoch == E && !(b.w_tid / 32 == w && b.w_wepoch != S))
            report(off, b.w_tid, -1, true);
        if (b.r_epoch != E) {
            b.r_epoch = E;
            b.r_warps = 0;
        }
        if (write) {
            if (b.r_warps & ~wbit) {
                int ow = 0;
                while (!((b.r_warps & ~wbit) >> ow & 1)) ++ow;
                report(off, -1, ow, false);
            } else if (b.r_warps == wbit && b.r_wepoch == S && (b.r_lanes & ~(1u << l))) {
                int ol = 0;
                while (!((b.r_lanes & ~(1u << l)) >> ol & 1)) ++ol;
                report(off, 32 * w + ol, -1, false);
            }
            b.w_tid = tid;
            b.w_epoch = E;
            b.w_wepoch = S;
            b.r_warps = 0;
        } else {
            if (b.r_warps == 0 || (b.r_warps == wbit && b.r_wepoch != S)) {
                b.r_wepoch = S;
                b.r_lanes = 0;
            }
            b.r_warps |= wbit;
            b.r_lanes |= 1u << l;
        }
    }
}

// Fiber stacks, kept across CTAs, freed at exit.
struct StackPool {
    std::vector<char *> v;
    ~StackPool() {
        for (char *p : v) std::free(p);
    }
};
inline std::vector<char *> &stacks() {
    static StackPool pool;
    return pool.v;
}

// Run `body(tid)` for tid = 0 .. nthreads - 1 as one CTA with `smem` (smem_bytes) as its shared
// memory. nthreads a multiple of 32.
inline void run_cta(int nthreads, uint8_t *smem, size_t smem_bytes, const std::function<void(int)> &body) {
    Cta c;
    c.nthreads = nthreads;
    c.fibers.resize(nthreads);
    c.warps.resize(nthreads / 32);
    c.smem = smem;
    c.smem_bytes = smem_bytes;
    c.body = &body;
    if (nthreads > 32 * 32) die("more than 32 warps per CTA");
    c.wepoch.assign(nthreads / 32, 0);
    c.shadow.assign(smem_bytes, ShadowByte{});
    current() = &c;
    auto &pool = stacks();
    while ((int)pool.size() < nthreads) pool.push_back(static_cast<char *>(std::malloc(kStack)));
    for (int i = 0; i < nthreads; ++i) {
        Fiber &f = c.fibers[i];
        f.tid = i;
        f.stack = pool[i];
        getcontext(&f.uc);
        f.uc.uc_stack.ss_sp = f.stack;
        f.uc.uc_stack.ss_size = kStack;
        f.uc.uc_link = &c.sched;
        makecontext(&f.uc, (void (*)())trampoline, 1, i);
    }
    // Warps drift: each round a pseudo-random set of warps sits out (xorshift64, a fixed seed per
    // process, so runs repeat), so that warps get many collectives apart, as on a GPU where they
    // are not in lock-step. A kernel that relies on lock-step instead of a barrier (a missing
    // __syncthreads between one phase's shared-memory reads and the next phase's writes) then
    // reads the wrong phase's data and fails its comparison; in strict round-robin every warp
    // finished its reads before any warp wrote, and such a race passed.
    static uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (;;) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        const uint64_t hold = rng;
        bool all_done = true, progress = false;
        for (int pass = 0; pass < 2 && !progress; ++pass) {  // pass 1: the held warps too, if no other could run
            all_done = true;
            for (int i = 0; i < nthreads; ++i) {
                Fiber &f = c.fibers[i];
                if (f.done) continue;
                all_done = false;
                if (f.wait && f.wait->gen == f.wait_gen) continue;
                if (pass == 0 && (hold >> ((i / 32) & 63) & 1)) continue;
                c.cur = i;
                switch_to(&c.sched, &f.uc, f.stack, kStack);
                progress = true;
            }
            if (all_done) break;
        }
        if (all_done) break;
        if (!progress) {
            for (int w = 0; w < nthreads / 32; ++w)
                if (c.warps[w].arrived)
                    std::fprintf(stderr, "warp_emu: warp %d: %d of 32 lanes wait at %s\n", w, c.warps[w].arrived,
                                 kind_name(c.warps[w].kind));
            die("deadlock: %d of %d threads wait at the CTA barrier", c.all.arrived, nthreads);
        }
    }
    current() = nullptr;
}

}  // namespace warp_emu

namespace denoise {
namespace cuda {
namespace warp {

inline void ldsm_x4(uint32_t (&r)[4], const void *p) {
    int l;
    warp_emu::Slot &s = warp_emu::warp_slot(&l);
    s.addr[l] = p;
    warp_emu::note_access(p, 16, false);
    warp_emu::arrive(s, warp_emu::kLdsmX4, 32);
    for (int i = 0; i < 4; ++i) r[i] = s.out[l][i];
}
inline void ldsm_x4_t(uint32_t (&r)[4], const void *p) {
    int l;
    warp_emu::Slot &s = warp_emu::warp_slot(&l);
    s.addr[l] = p;
    warp_emu::note_access(p, 16, false);
    warp_emu::arrive(s, warp_emu::kLdsmX4T, 32);
    for (int i = 0; i < 4; ++i) r[i] = s.out[l][i];
}
inline void ldsm_x2(uint32_t (&r)[2], const void *p) {
    int l;
    warp_emu::Slot &s = warp_emu::warp_slot(&l);
    s.addr[l] = p;  // .x2 reads the addresses of lanes 0..15 only
    if (l < 16) warp_emu::note_access(p, 16, false);
    warp_emu::arrive(s, warp_emu::kLdsmX2, 32);
    r[0] = s.out[l][0];
    r[1] = s.out[l][1];
}
inline void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    int l;
    warp_emu::Slot &s = warp_emu::warp_slot(&l);
    for (int i = 0; i < 4; ++i) {
        s.a[l][i] = a[i];
        s.c[l][i] = d[i];
    }
    s.b[l][0] = b0;
    s.b[l][1] = b1;
    warp_emu::arrive(s, warp_emu::kMma, 32);
    for (int i = 0; i < 4; ++i) d[i] = s.fout[l][i];
}
inline float shfl_xor(float v, int m) {
    int l;
    warp_emu::Slot &s = warp_emu::warp_slot(&l);
    s.f[l] = v;
    s.mask[l] = m;
    warp_emu::arrive(s, warp_emu::kShfl, 32);
    return s.fout[l][0];
}
inline void sync_cta() {
    warp_emu::Cta &c = *warp_emu::current();
    // a barrier orders what is written, not copies still in flight: they must be waited for first
    if (!c.fibers[c.cur].async.empty())
        warp_emu::die("thread %d: a barrier with %zu cp.async copies not waited for", c.fibers[c.cur].tid,
                      c.fibers[c.cur].async.size());
    warp_emu::arrive(c.all, warp_emu::kSync, c.nthreads);
}
inline void sync_warp() {
    int l;
    warp_emu::arrive(warp_emu::warp_slot(&l), warp_emu::kSyncWarp, 32);
}
template <class T>
T lds(const T *p) {
    warp_emu::note_access(p, sizeof(T), false);
    return *p;
}
template <class T>
void sts(T *p, T v) {
    warp_emu::note_access(p, sizeof(T), true);
    *p = v;
}
template <class T>
void sts_add(T *p, T v) {
    warp_emu::note_access(p, sizeof(T), false);
    warp_emu::note_access(p, sizeof(T), true);
    *p += v;
}
// The copy lands at the thread's cp_async_wait_all, not before: a read of it before the wait finds
// the poison the test left in shared memory.
inline void cp_async4(void *smem, const void *gmem) {
    warp_emu::Cta &c = *warp_emu::current();
    uint8_t *d = static_cast<uint8_t *>(smem);
    if (((uintptr_t)d & 3) || ((uintptr_t)gmem & 3)) warp_emu::die("cp.async of 4 bytes not 4-byte aligned");
    if (d < c.smem || d + 4 > c.smem + c.smem_bytes) warp_emu::die("cp.async destination outside shared memory");
    uint32_t v;
    std::memcpy(&v, gmem, 4);
    c.fibers[c.cur].async.emplace_back(d, v);
}
inline void cp_async_wait_all() {
    warp_emu::Cta &c = *warp_emu::current();
    for (const auto &a : c.fibers[c.cur].async) {
        warp_emu::note_access(a.first, 4, true);
        std::memcpy(a.first, &a.second, 4);
    }
    c.fibers[c.cur].async.clear();
}

}  // namespace warp
}  // namespace cuda
}  // namespace denoise

#endif
