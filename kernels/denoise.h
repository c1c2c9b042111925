/*
 * libdenoise: the engine behind FFmpeg's denoise filter.
 *
 * A temporal Swin U-Net (model v1, weights/model.py is the source of truth) that denoises a
 * stream of RGB frames. The caller pushes frames in display order and pulls one output per input
 * frame, in the same order. Output t needs input frames t-3..t+3 (two fusion windows of radius 2
 * around t-1, t, t+1 feed the 3x3x3 head), so pulls lag pushes by three frames until
 * denoise_flush() marks the end of a segment; frames outside [0, N-1] are taken by mirroring
 * (index -k -> k, N-1+k -> N-1-k, repeated for very short segments), exactly as
 * weights/model.py's reflect_index() does.
 *
 * Layouts and units
 *   - frames in:  three planes R, G, B, float32, row-major, `linesize` floats between rows,
 *                 values in [0,1] = code value / (2^depth - 1) of the non-linear RGB the source
 *                 decodes to. Values outside [0,1] are allowed (unclipped noise).
 *   - frames out: the change the network makes, denoised - input, same layout and units. The
 *                 caller adds it to its own samples (so a pixel the network leaves alone stays
 *                 bit-exact after requantisation).
 *   - sigma:      noise standard deviation in 8-bit code values (0..255 scale) whatever the bit
 *                 depth; the network sees a constant map channel sigma/255.
 *
 * Errors: functions return 0 or a positive count on success and a negative DENOISE_E* code on
 * failure; denoise_last_error() then holds a message that names the cause (the weight file and
 * tensor for a bad file). The engine is not thread-safe: one engine per stream.
 */
#ifndef DENOISE_H
#define DENOISE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DENOISE_API_VERSION 1

typedef enum DenoiseBackend {
    DENOISE_BACKEND_AUTO = 0, /* CUDA where a usable NVIDIA GPU is found, else CPU */
    DENOISE_BACKEND_CPU  = 1, /* fp32 reference engine, BLAS sgemm */
    DENOISE_BACKEND_CUDA = 2, /* bf16 storage, fp32 accumulation */
} DenoiseBackend;

/* Error codes (negative). */
#define DENOISE_EAGAIN   (-1)  /* pull: needs more input (push or flush first) */
#define DENOISE_EOF      (-2)  /* pull: segment flushed and fully drained */
#define DENOISE_EINVAL   (-3)  /* bad argument or call order */
#define DENOISE_ENOMEM   (-4)  /* host or device allocation failed */
#define DENOISE_EMODEL   (-5)  /* weight file missing, truncated, corrupt or of another architecture */
#define DENOISE_ENOSYS   (-6)  /* backend not built into this library or no usable device */
#define DENOISE_EDEVICE  (-7)  /* GPU runtime error */

typedef struct DenoiseParams {
    const char    *model_path; /* safetensors weight file */
    DenoiseBackend backend;
    int            device;     /* CUDA device index (backend CUDA/AUTO) */
    float          sigma;      /* 8-bit code values, 0..255 */
    int            width;      /* frame size in pixels, >= 1 */
    int            height;
    int            threads;    /* CPU worker threads; 0 = all cores */
} DenoiseParams;

typedef struct DenoiseEngine DenoiseEngine;

/* Allocate an empty engine (holds the last error even if denoise_open() fails). NULL on OOM. */
DenoiseEngine *denoise_alloc(void);

/* Load the weights, check them against the architecture, pick the backend and size buffers.
 * Returns 0, DENOISE_EMODEL, DENOISE_ENOSYS, DENOISE_ENOMEM or DENOISE_EINVAL. */
int denoise_open(DenoiseEngine *e, const DenoiseParams *p);

/* Backend actually in use after denoise_open() (never AUTO). */
DenoiseBackend denoise_backend(const DenoiseEngine *e);

/* Change sigma for the frames pushed from now on (8-bit code values). */
int denoise_set_sigma(DenoiseEngine *e, float sigma);

/* Copy one input frame (planes R, G, B; width x height floats each; linesize in floats). */
int denoise_push(DenoiseEngine *e, const float *const planes[3], ptrdiff_t linesize);

/* Mark the end of the current segment (end of stream or a scene cut). Pulls then drain every
 * remaining frame with mirrored ends; after DENOISE_EOF the next push starts a new segment. */
int denoise_flush(DenoiseEngine *e);

/* Write the change for the oldest frame not yet pulled into `delta` (R, G, B planes).
 * Returns 0 when a frame was written, DENOISE_EAGAIN, DENOISE_EOF, or an error. */
int denoise_pull(DenoiseEngine *e, float *const delta[3], ptrdiff_t linesize);

/* Frames pushed but not yet pulled. */
int denoise_pending(const DenoiseEngine *e);

/* Message for the last failure ("" if none). Valid until the next call on this engine. */
const char *denoise_last_error(const DenoiseEngine *e);

/* Model metadata string (the weight file's __metadata__ "config" JSON), or "" before open. */
const char *denoise_model_config(const DenoiseEngine *e);

/* Free the engine and set *pe to NULL. Safe on NULL. */
void denoise_free(DenoiseEngine **pe);

#ifdef __cplusplus
}
#endif

#endif /* DENOISE_H */
