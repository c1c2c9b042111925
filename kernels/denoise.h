/*
 * libdenoise: the engine behind FFmpeg's denoise filter.
 *
 * A temporal Swin U-Net (weights/denoise_train/model.py is the source of truth) that denoises a stream of
 * video frames in their own pixel format. The caller pushes frames in display order and pulls
 * one output frame per input frame, in the same order. Output t needs input frames t-R..t+R
 * (R = the model's temporal radius, 3 for models v1 and v2: two fusion windows of radius 2 around t-1,
 * t, t+1 feed the 3x3x3 head), so pulls lag pushes by denoise_latency() frames until
 * denoise_flush() marks the end of a segment; frames outside [0, N-1] are taken by mirroring
 * (index -k -> k, N-1+k -> N-1-k, repeated for very short segments), exactly as
 * weights/denoise_train/model.py's reflect_index() does.
 *
 * Frames in and out are native frames: planes and linesizes as an AVFrame holds them, described
 * by a DenoisePixelFormat (which bytes hold which component) and a DenoiseColor (libplacebo's
 * colour representation and the chroma location). The engine does all the pixel work:
 *   in:  samples -> normalised code values v = code / (2^depth - 1) (floats as they are, with
 *        NaN -> 0, +Inf -> 1, -Inf -> 0 and finite values clamped to [-1, 2]); subsampled chroma
 *        upsampled bilinearly at its chroma location; Y'CbCr -> non-linear R'G'B' with
 *        pl_color_repr_decode()'s matrix and offsets; gray as Y' with neutral chroma.
 *   net: x = 2 R'G'B' - 1 in [-1, 1], reflect-padded, space-to-depth 2x2, U-Net, head, clamp.
 *   out: the change d = (denoised - input) / 2 in R'G'B' units is taken back to the frame's own
 *        representation by the inverse of the decoding matrix (no offsets: it is a difference),
 *        chroma changes brought to chroma resolution by the adjoint of the upsampling, scaled by
 *        the amounts (DenoiseAmount), and added to the frame's ORIGINAL samples with blue-noise
 *        dither (a fixed 64 x 64 tile of libplacebo's generator, common/blue_noise.h):
 *        out = clip(orig + floor(d * (2^depth - 1) + noise)),
 *        noise in [0, 1), clipped to the container's range [0, 2^depth - 1]; R'G'B' frames take
 *        one noise value per pixel for all three components (as libplacebo's pl_shader_dither),
 *        so a neutral change stays neutral. A zero change keeps a sample bit-exact. Floats: out = orig + d where both are finite and d != 0, else the
 *        sample's own bits (a non-finite sample stays as it was).
 *        Alpha components and padding bytes are never read or written.
 * The CPU backend (fp32) is the reference; the CUDA backend does the same work on the GPU, so a
 * CUDA frame never leaves the device and a host frame crosses the bus once each way.
 *
 * Units: sigma is the noise standard deviation in 8-bit code values of R'G'B' (0..255 scale)
 * whatever the bit depth: the root mean square over R', G', B' of the noise's standard deviation
 * (weights/denoise_train/noise_models.py); the network sees a constant map channel sigma/255. A model with a
 * sigma gate G (model v2's config "sigma_gate") scales the change of output t by
 * min(1, sigma_t / G), sigma_t the sigma of F_t: sigma 0 returns the input exactly, and the
 * change fades in linearly up to sigma G (as the amounts below do).
 *
 * sigma=auto (sigma DENOISE_SIGMA_AUTO): the engine estimates sigma from the frames, per segment
 * (the estimate restarts at the first push after a flush, i.e. at every scene cut or stream
 * start) and updated with every frame pushed (kernels/sigma_auto.h):
 *   per frame, weak-texture patch PCA (Liu, Tanaka & Okutomi, IEEE TIP 2013) on the frame's
 *   R'G'B' planes as the network gets them, or, for subsampled Y'CbCr, on the native Y', Cb, Cr
 *   planes with sigma^2 = (1/3) sum_c sum_j dec[c][j]^2 var_j through the frame's decoding matrix
 *   (the R'G'B' noise of independent Y', Cb, Cr noise, as weights/denoise_train/noise_models.py defines it);
 *   smoothed over the segment: the patches' scatter matrices S and counts n are summed as
 *   S = 0.9 S + S_frame, n = 0.9 n + n_frame (an exponential moving average, ~10 frames of
 *   memory) and the estimate is the PCA variance of S / n.
 * Feature map F_s (frames s-r..s+r) gets the estimate after frame min(s + r, N - 1); output t
 * reports the sigma of F_t (denoise_output_sigma). While a segment has no estimate yet (frames
 * smaller than about 20x20 pixels, or no weak-texture patch), the stream's last estimate is used
 * (0 at the start). Cost: CPU 4 % (4:2:0) to 8 % (R'G'B') of the CPU network at 854x480 and
 * less at larger sizes (the patch grid is capped), computed within the push. CUDA: two small
 * kernels per frame on a stream of their own, queued by the frame's push and read by the host at
 * the next push (or at denoise_flush() for a segment's last frame), by when they are done in
 * practice, so the host does not wait for them in the steady state; feature maps wait for the
 * estimates they need, which costs one frame of latency (denoise_latency()). The host does wait
 * on a segment's first frame (Immerkaer's start and three rounds, each needing the one before:
 * three waits at the second push), and at the flush if the last frame's kernels are still
 * running. With memory CUDA those kernels follow the work queued on cuda_stream before the push
 * (the frame's producer), and so what the engine itself put there: the wait for the output
 * pulled last, whose work was queued one push earlier. Output values are the same whichever
 * push reads an estimate. CPU and CUDA estimates agree within 0.5 % + 0.01 (float summation
 * order; tests/gpu/noise_check.cpp checks it).
 *
 * Errors: functions return 0 or a positive count on success and a negative DENOISE_E* code on
 * failure; denoise_last_error() then holds a message that names the cause (the weight file and
 * tensor for a bad file, the CUDA runtime's error name and text for a device error). An engine is
 * not thread-safe: one engine per stream, calls from one thread at a time. Several engines may
 * share one GPU.
 */
#ifndef DENOISE_H
#define DENOISE_H

#include <stddef.h>
#include <stdint.h>

#include <libplacebo/colorspace.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DENOISE_API_VERSION 4

typedef enum DenoiseBackend {
    DENOISE_BACKEND_AUTO = 0, /* CUDA where it is built in and a usable NVIDIA GPU is found, else CPU */
    DENOISE_BACKEND_CPU  = 1, /* fp32 reference engine, BLAS sgemm */
    DENOISE_BACKEND_CUDA = 2, /* bf16 storage, fp32 accumulation */
} DenoiseBackend;

/* Where the sample data of pushed and pulled images lives. */
typedef enum DenoiseMemory {
    DENOISE_MEMORY_HOST = 0, /* ordinary (pageable) host memory */
    DENOISE_MEMORY_CUDA = 1, /* device memory of the CUDA context current at denoise_open() */
} DenoiseMemory;

/* Error codes (negative). */
#define DENOISE_EAGAIN   (-1)  /* pull: needs more input (push or flush first) */
#define DENOISE_EOF      (-2)  /* pull: segment flushed and fully drained */
#define DENOISE_EINVAL   (-3)  /* bad argument or call order */
#define DENOISE_ENOMEM   (-4)  /* host or device allocation failed (after any tiling fallback) */
#define DENOISE_EMODEL   (-5)  /* weight file missing, truncated, corrupt or of another architecture */
#define DENOISE_ENOSYS   (-6)  /* backend not built into this library, no usable device, or a
                                * format / memory combination the backend does not run */
#define DENOISE_EDEVICE  (-7)  /* GPU runtime error (lost device, launch failure, ...) */

/* One colour component in memory, as libavutil's AVComponentDescriptor: sample x of row y is
 * the little-endian word at data[plane] + y * linesize[plane] + offset + x * step, shifted right
 * by `shift` and masked to `depth` bits (integer formats), or the float32 there (is_float). */
typedef struct DenoiseComponent {
    int plane;
    int offset;  /* bytes */
    int step;    /* bytes */
    int shift;   /* bits */
    int depth;   /* bits, 8..16 for integers, 32 for float */
} DenoiseComponent;

/* The layout of a pixel format's colour components (alpha excluded). All colour components
 * share one depth. denoise_open() refuses a layout outside these rules (DENOISE_EINVAL). */
typedef struct DenoisePixelFormat {
    int nb_components;         /* 1 (gray: Y') or 3 */
    DenoiseComponent comp[3];  /* Y', Cb, Cr (Y'CbCr) or R', G', B' (R'G'B'), NOT memory order */
    int log2_chroma_w;         /* subsampling of components 1 and 2, 0..2 (Y'CbCr only; 0 for */
    int log2_chroma_h;         /* R'G'B', float and gray formats) */
    int bytes;                 /* bytes per sample word: 1, 2 (little-endian) or 4 (float32 LE) */
    int is_float;
} DenoisePixelFormat;

/* How a frame's samples map to R'G'B'. Per frame: it may change within a stream. */
typedef struct DenoiseColor {
    /* libplacebo colour representation: sys PL_COLOR_SYSTEM_RGB for R'G'B' and float formats
     * (float gray is then taken as R' = G' = B' = Y; R'G'B' is taken as full range whatever
     * `levels` says), else a Y'CbCr system that is a matrix (pl_color_system_is_linear(): not
     * BT.2020 CL, ICtCp or UNKNOWN; denoise_push() refuses those with DENOISE_EINVAL) and its
     * levels (UNKNOWN counts as limited, as in libplacebo). `bits` is not read: the engine
     * decodes with sample_depth = color_depth = the component depth, so that
     * pl_color_repr_decode() gives the matrix from normalised code values to R'G'B'. */
    struct pl_color_repr repr;
    /* chroma sample (0, 0) position in 1/256 luma pixels, as av_chroma_location_enum_to_pos()
     * gives it (0 co-sited, 128 centred); ignored without subsampling */
    int chroma_xpos, chroma_ypos;
} DenoiseColor;

/* A frame: plane pointers and linesizes as in an AVFrame (host or device memory as the engine
 * was opened with), its colour representation (read by push only). */
typedef struct DenoiseImage {
    uint8_t  *data[4];
    ptrdiff_t linesize[4];     /* bytes; may be negative (bottom-up) for host memory */
    DenoiseColor color;
} DenoiseImage;

typedef struct DenoiseParams {
    const char    *model_path; /* safetensors weight file */
    DenoiseBackend backend;
    int            device;     /* CUDA device index (memory HOST; with memory CUDA the device of
                                * the current context is used) */
    float          sigma;      /* 8-bit code values, 0..255, or DENOISE_SIGMA_AUTO */
    int            width;      /* frame size in pixels, 1..32768 */
    int            height;
    DenoisePixelFormat format;
    DenoiseMemory  memory;
    /* memory CUDA: the cudaStream_t the frames' producer and consumer use (NULL: the legacy
     * default stream). The engine orders its reads of a pushed frame after the work already
     * queued on it, and queues the consumer behind the writes of a pulled frame: no host sync.
     * Every call on an engine opened with memory CUDA must be made with the same CUDA context
     * current (cuCtxPushCurrent); the engine allocates in it and never changes it. */
    void          *cuda_stream;
    int            threads;    /* CPU engine worker threads; 0 = all cores */
    /* Cap on the engine's own GPU memory in bytes (weights, frame and feature rings,
     * workspace, staging); 0 = the default (DENOISE_GPU_MEMORY_DEFAULT). Frames whose working
     * set does not fit run in overlapping tiles. */
    int64_t        gpu_memory;
    /* Largest tile side in pixels; 0 = whole frames when they fit the cap (tests force tiling
     * with it). */
    int            tile;
} DenoiseParams;

/* sigma value meaning "estimate it from the frames" (see the note at the top). */
#define DENOISE_SIGMA_AUTO (-1.0f)

#define DENOISE_GPU_MEMORY_DEFAULT ((int64_t)2560 << 20)  /* 2.5 GiB */

/* Defaults for every field but model_path, width, height, format: backend AUTO, device 0,
 * sigma 15, memory HOST, stream NULL, threads 0, gpu_memory 0, tile 0. */
void denoise_params_defaults(DenoiseParams *p);

typedef struct DenoiseEngine DenoiseEngine;

/* Allocate an empty engine (holds the last error even if denoise_open() fails). NULL on OOM. */
DenoiseEngine *denoise_alloc(void);

/* Load the weights, check them against the architecture, pick the backend and size buffers.
 * Returns 0, DENOISE_EMODEL, DENOISE_ENOSYS, DENOISE_ENOMEM, DENOISE_EDEVICE or DENOISE_EINVAL. */
int denoise_open(DenoiseEngine *e, const DenoiseParams *p);

/* Backend actually in use after denoise_open() (never AUTO). */
DenoiseBackend denoise_backend(const DenoiseEngine *e);

/* Why that backend runs, for a log line: the device ("CUDA device 0: NVIDIA H200, compute
 * capability 9.0") or, for the CPU, the reason CUDA was not used ("built without CUDA", "no CUDA
 * driver: cudaErrorInsufficientDriver ...", "no CUDA device", "device 0 has compute capability
 * 7.5; ..."). "" before open. */
const char *denoise_backend_reason(const DenoiseEngine *e);

/* Frames the engine holds before output 0 can be pulled without a flush, for the sigma in force
 * (denoise_set_sigma()): the temporal radius plus the outputs it keeps in flight to overlap
 * copies and compute (CPU 0, so R; CUDA 1 with either memory, so R + 1: output t+1 is queued
 * before t is written, and a pull waits, or with memory CUDA makes cuda_stream wait, for work
 * queued one push earlier only), plus 1 with sigma=auto on the CUDA backend (frame k's estimate
 * is read at push k + 1: the note at the top), so R + 2 there.
 * Output t can be pulled once frame t + latency is pushed. DENOISE_EINVAL before open. */
int denoise_latency(const DenoiseEngine *e);

/* Change sigma for the frames pushed from now on (8-bit code values, or DENOISE_SIGMA_AUTO). */
int denoise_set_sigma(DenoiseEngine *e, float sigma);

/* The sigma (8-bit code values) that the frame last written by denoise_pull() was denoised with:
 * the fixed sigma in force, or the estimate (sigma=auto). 0 with *sigma set, or DENOISE_EINVAL
 * before the first pull. */
int denoise_output_sigma(const DenoiseEngine *e, float *sigma);

/* How much of the network's change reaches the output (denoise_set_amount()), with
 * libplacebo's habit of a defaults macro:
 *     DenoiseAmount a = { DENOISE_AMOUNT_DEFAULTS };
 *     a.chroma = 0.5f;
 *     denoise_set_amount(e, &a);
 * The change d (denoised - input) is split into a luma and a chroma part, each scaled, and the
 * sum blended in: out = in + amount * (luma * d_luma + chroma * d_chroma). Y'CbCr: d_luma is the
 * Y' change, d_chroma the Cb and Cr changes (each in the frame's own representation, per plane);
 * gray: luma only; R'G'B' (no matrix of its own): d is split by its BT.709 luma
 * l = 0.2126 dR' + 0.7152 dG' + 0.0722 dB', d_luma = l (1, 1, 1), d_chroma = d - l (1, 1, 1).
 * amount 0 (or luma 0 and chroma 0) gives the input back bit-exact. */
typedef struct DenoiseAmount {
    float amount;  /* 0..1: blend of the whole change (1 = the network's output) */
    float luma;    /* 0..1: scale of the luma change */
    float chroma;  /* 0..1: scale of the chroma change */
} DenoiseAmount;

#define DENOISE_AMOUNT_DEFAULTS .amount = 1.0f, .luma = 1.0f, .chroma = 1.0f

/* Set the amounts for the frames pushed from now on: output t uses the amounts in force when
 * input frame t was pushed, whatever the backend's pipelining. NULL restores the defaults.
 * DENOISE_EINVAL (amounts unchanged) when a field is outside [0, 1] or NaN. */
int denoise_set_amount(DenoiseEngine *e, const DenoiseAmount *a);

/* The noise levels the model was trained on, sigma in 8-bit code values: the weight file's
 * __metadata__ "sigma_range" (a JSON list [lo, hi], written by weights/export.py) when it has
 * one, else 0..55, the range of models v1 and v2 (both trained on sigma ~ U(0, 55) per clip:
 * weights/denoise_train/noise_models.py, and weights/denoise_train/data.py make_noisy() for v1). The network extrapolates
 * outside it. Returns 1 when the range comes from the file, 0 for the default, DENOISE_EINVAL
 * before open. */
int denoise_model_sigma_range(const DenoiseEngine *e, float *lo, float *hi);

#define DENOISE_SIGMA_TRAINED_MIN 0.0f
#define DENOISE_SIGMA_TRAINED_MAX 55.0f

/* Push one input frame (format and size as opened). The engine copies what it needs: the
 * caller may reuse the frame's memory as soon as the call returns (memory HOST), or, memory
 * CUDA, for work it queues on cuda_stream after the call (the engine makes cuda_stream wait for
 * its copy of the frame; a reuse that is not ordered on cuda_stream must synchronise with it
 * first). The push may also compute outputs whose inputs it completes. */
int denoise_push(DenoiseEngine *e, const DenoiseImage *in);

/* Scene cuts, for a caller that ends segments at them (denoise_flush() before the first frame of
 * the new scene is pushed): the score of host frame `in` (format and size as opened; memory
 * HOST) against the frame this function scored before it, in percent of full scale (0..100),
 * into *score. The score is FFmpeg's scdet filter's (libavfilter/vf_scdet.c): mafd = the mean
 * absolute difference of the two frames, score = min(mafd, |mafd - the previous pair's mafd|),
 * so a steady high difference (noise, constant motion) is not a cut, only a jump; unlike scdet
 * the difference is taken on the means of blocks of max(8, round(sqrt(width height / 960)))
 * pixels square of the luma in R'G'B' units: Y' as normalised code values times the decoding
 * matrix's luma gain (255/219 for 8-bit limited range, so both ranges score alike), or G' of
 * R'G'B' frames (floats read as the network reads them). The value depends on the frames only,
 * not on the thread count (kernels/frame_scan.h).
 * Returns 1 when `in` starts a new scene (score >= threshold, threshold > 0, and the frame has at
 * least 256 pixels: smaller frames are too small to judge), 0 when not (always for the first
 * frame scored after denoise_open() or denoise_scene_reset(), whose score is 0),
 * DENOISE_EINVAL (engine not open, memory CUDA, a bad image or colour as denoise_push() checks
 * them) or DENOISE_ENOMEM. The frame is only read: scoring a frame does not push it. */
int denoise_scene_cut(DenoiseEngine *e, const DenoiseImage *in, float threshold, double *score);

/* Forget the frame denoise_scene_cut() scored last: the next frame scored is a first frame
 * (score 0, no cut). For a caller that stops scoring for a while. 0, or DENOISE_EINVAL for a
 * NULL engine. */
int denoise_scene_reset(DenoiseEngine *e);

/* Non-finite samples (NaN, +Inf, -Inf) among the colour components of host frame `in` (format
 * and size as opened; memory HOST): the samples the engine reads as 0 (NaN, -Inf) or 1 (+Inf)
 * and leaves unchanged in the output (see the note at the top). 0 for integer formats. Returns
 * the count, or DENOISE_EINVAL (engine not open, memory CUDA, a bad image). The frame is only
 * read. */
int64_t denoise_count_nonfinite(DenoiseEngine *e, const DenoiseImage *in);

/* Mark the end of the current segment (end of stream or a scene cut). Pulls then drain every
 * remaining frame with mirrored ends; after DENOISE_EOF the next push starts a new segment. */
int denoise_flush(DenoiseEngine *e);

/* Write the denoised frame for the oldest frame not yet pulled into `out` (same format, size
 * and memory). Host memory: only the colour components' bits are written (alpha, padding bytes
 * and the low bits of p010-style words keep the buffer's). CUDA memory (typically a fresh frame of
 * a hardware frames pool): every word that holds a colour sample is written whole, its bits
 * outside the component taken from the pushed frame (p010's low bits: the input's, zero in valid
 * P010); bytes that hold no colour sample (alpha plane, padding bytes) keep the buffer's.
 * `out` may be the pushed frame's own memory.
 * Returns 0 when a frame was written, DENOISE_EAGAIN, DENOISE_EOF, or an error. */
int denoise_pull(DenoiseEngine *e, const DenoiseImage *out);

/* Frames pushed but not yet pulled. */
int denoise_pending(const DenoiseEngine *e);

/* Peak device memory the engine has allocated so far, in bytes (0 on the CPU backend). */
int64_t denoise_gpu_memory_peak(const DenoiseEngine *e);

/* Message for the last failure ("" if none). Valid until the next call on this engine. */
const char *denoise_last_error(const DenoiseEngine *e);

/* Model metadata string (the weight file's __metadata__ "config" JSON), or "" before open. */
const char *denoise_model_config(const DenoiseEngine *e);

/* Free the engine and set *pe to NULL. Safe on NULL. With memory CUDA the context must be
 * current. */
void denoise_free(DenoiseEngine **pe);

#ifdef __cplusplus
}
#endif

#endif /* DENOISE_H */
