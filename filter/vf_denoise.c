/*
 * Copyright (c) 2025 the denoise authors
 *
 * This file is part of FFmpeg.
 *
 * FFmpeg is free software; you can redistribute it and/or
 * modify it under the terms of the GNU Lesser General Public
 * License as published by the Free Software Foundation; either
 * version 2.1 of the License, or (at your option) any later version.
 *
 * FFmpeg is distributed in the hope that it will be useful,
 * but WITHOUT ANY WARRANTY; without even the implied warranty of
 * MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE.  See the GNU
 * Lesser General Public License for more details.
 *
 * You should have received a copy of the GNU Lesser General Public
 * License along with FFmpeg; if not, write to the Free Software
 * Foundation, Inc., 51 Franklin Street, Fifth Floor, Boston, MA 02110-1301 USA
 */

/**
 * @file
 * Neural video denoiser: a temporal Swin U-Net (libdenoise, kernels/denoise.h) that runs on
 * an NVIDIA GPU (CUDA) or on the CPU.
 *
 * The filter is FFmpeg plumbing only: options, formats, the frame queue, scene cuts, the
 * timeline, EOF, CUDA frames. The engine does all the pixel work: it takes each frame in its
 * own pixel format (DenoisePixelFormat, filled from the AVPixFmtDescriptor) and colour
 * representation (DenoiseColor, from the frame's colour space, range and chroma location via
 * libplacebo's libav helpers), and writes the denoised frame back in the same format: only
 * colour components are written, a sample the network does not change stays bit-exact, alpha
 * and padding are never touched.
 *
 * Output t needs input frames t-R..t+R (R = 3 for model v1; mirrored at the stream ends and at
 * scene cuts), so frames are queued until the engine can return them. Exactly one output frame
 * is produced per input frame, with its pts, duration, side data and metadata: for software
 * frames the output IS the input frame, made writable; CUDA frames (AV_PIX_FMT_CUDA) are
 * denoised on the device into a frame of the output's hardware frames pool, with the input's
 * properties copied onto it.
 */

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <libplacebo/colorspace.h>
#include <libplacebo/utils/libav.h>

#include "config.h"

#include "libavutil/common.h"
#include "libavutil/dict.h"
#include "libavutil/fifo.h"
#include "libavutil/hwcontext.h"
#include "libavutil/intfloat.h"
#include "libavutil/intreadwrite.h"
#include "libavutil/mem.h"
#include "libavutil/opt.h"
#include "libavutil/pixdesc.h"
#include "libavutil/timestamp.h"
#if CONFIG_CUDA
#include "libavutil/cuda_check.h"
#include "libavutil/hwcontext_cuda_internal.h"
#endif

#include "avfilter.h"
#include "filters.h"
#include "formats.h"
#include "video.h"

#include "denoise.h"

/* The build (filter/inject.sh) puts the generated denoise_config.h next to this file; it
 * defines DENOISE_DATADIR (install prefix's share/denoise), DENOISE_BUILD_WEIGHTS (the weight
 * file in the source tree, so an uninstalled build finds its weights) and DENOISE_HAVE_CUDA
 * when libdenoise has its CUDA backend. */
#if defined(__has_include)
#  if __has_include("denoise_config.h")
#    include "denoise_config.h"
#  endif
#endif
#ifndef DENOISE_DATADIR
#define DENOISE_DATADIR "/usr/local/share/denoise"
#endif

#define DENOISE_WEIGHTS_NAME "denoise-v2.safetensors"

/* Built-in scene-cut detector: luma block means over B x B pixels, B sized for the frame so
 * that every frame size is judged on about SCD_GRID blocks (the 40 x 24 blocks of 8 x 8 of the
 * 320x192 frames the threshold was first measured on), never smaller than SCD_BLOCK_MIN: with a
 * fixed 8 x 8 block a 1920x1080 frame's block means keep detail that a smaller frame's average
 * away, so ordinary motion scored 2x higher there and cut shots apart. Frames with fewer than
 * SCD_MIN_PIXELS pixels are too small to judge (a few noisy samples look like a cut) and never
 * trigger it. Default threshold: see docs/robustness.md for the measurement. */
#define SCD_BLOCK_MIN 8
#define SCD_GRID 960
#define SCD_MIN_PIXELS 256
#define SCENE_DEFAULT 10.0
#define SIGMA_AUTO    DENOISE_SIGMA_AUTO
/* the default: auto (docs/sigma-auto.md measures it against fixed sigmas) */
#define SIGMA_DEFAULT SIGMA_AUTO

typedef struct QueuedFrame {
    /* software frames and timeline-disabled frames: the input frame (its data become the
     * output; a disabled CUDA frame's are copied into a frame of the output pool); other CUDA
     * frames: only the input's properties (av_frame_copy_props, no buffers), the engine having
     * copied the samples at the push */
    AVFrame *frame;
    int disabled;       /* timeline: pass this frame through unchanged */
    int sigma_auto;     /* sigma was auto when it was pushed (its output's sigma is an estimate) */
} QueuedFrame;

typedef struct DenoiseContext {
    const AVClass *class;

    /* options */
    float sigma;
    char *model;
    int   backend;
    int   device;
    int   cpu_threads;          /* 0 = ff_filter_get_nb_threads() */
    int64_t gpu_mem;            /* MiB, 0 = the engine's default */
    int   tile;
    float amount, luma, chroma; /* DenoiseAmount, run-time */

    char *model_path;           /* resolved weight file */

    /* format (for CUDA frames: their sw_format) */
    enum AVPixelFormat format;  /* format the per-format fields below describe */
    const AVPixFmtDescriptor *desc;
    DenoisePixelFormat pixfmt;  /* the engine's description of `format` */
    int is_rgb, is_float, is_full_range_fmt;

    /* CUDA frames (AV_PIX_FMT_CUDA in and out) */
    int hw;
    AVBufferRef *hw_frames_ref; /* the input's frames context (keeps the device alive) */
#if CONFIG_CUDA
    AVCUDADeviceContext *cuda;
#endif

    /* engine, opened for width x height */
    DenoiseEngine *engine;
    int width, height;
    int latency;                /* denoise_latency(): frames queued before the first output */
    int draining;               /* flushed: every queued frame can be pulled */
    float engine_sigma;
    float logged_sigma;         /* sigma=auto: the value last logged at -v verbose (-1: none this segment) */
    DenoiseAmount engine_amount;
    float sigma_lo, sigma_hi;   /* noise levels the model was trained on (denoise_model_sigma_range) */
    int   sigma_range_from_file;
    float warned_sigma;         /* last out-of-range sigma warned about (-1: none) */

    AVFifo *queue;              /* QueuedFrame: frames pushed, output not yet pulled */
    /* why frames could still be queued at uninit (see uninit()) */
    int   out_closed;           /* the output's consumer closed it (EOF back from downstream) */
    int   out_wanted;           /* after the last activate(): a frame was requested and not sent yet */
    int   failed;               /* first error activate() returned (AVERROR), 0 if none */
    int warned_csp;
    int warned_cuda_opts;       /* device/gpu_mem/tile set for the CPU engine: said once */
    int warned_nonfinite;

    /* built-in scene-cut detector (option scene): block means of the native frame's Y' (G for
     * R'G'B'), compared with the previous frame's (see scene_cut()) */
    float scene;                /* threshold in percent of full scale; 0 = off */
    int   scd_block;            /* block side in pixels (scd_block_size()) */
    int   scd_bw, scd_bh;       /* blocks per row / column */
    float *scd_cur, *scd_prev;  /* block means (normalised code values) */
    int   *scd_count;           /* pixels per block */
    int   scd_have_prev;
    double scd_prev_mafd;
    int   nb_scene_cuts;
} DenoiseContext;

#define OFFSET(x) offsetof(DenoiseContext, x)
#define FLAGS  (AV_OPT_FLAG_FILTERING_PARAM | AV_OPT_FLAG_VIDEO_PARAM)
#define TFLAGS (FLAGS | AV_OPT_FLAG_RUNTIME_PARAM)

static const AVOption denoise_options[] = {
    { "sigma",   "noise standard deviation in 8-bit code values of R'G'B' (0..255 scale, whatever the "
                 "bit depth), or auto (also -1, the default): estimated from the frames, per scene; "
                 "each output frame's lavfi.denoise.sigma metadata holds the value used; a fixed sigma "
                 "outside the noise levels the model was trained on (0..55 for the shipped model) is "
                 "warned about",
        OFFSET(sigma),   AV_OPT_TYPE_FLOAT,  { .dbl = SIGMA_DEFAULT }, -1, 100, TFLAGS, .unit = "sigma" },
        { "auto", "estimate sigma from the frames (weak-texture patch PCA, smoothed over the scene)",
            0, AV_OPT_TYPE_CONST, { .i64 = -1 }, 0, 0, TFLAGS, .unit = "sigma" },
    { "model",   "weight file (safetensors); default: the shipped " DENOISE_WEIGHTS_NAME,
        OFFSET(model),   AV_OPT_TYPE_STRING, { .str = NULL }, 0, 0, FLAGS },
    { "backend", "engine backend: auto, cuda or cpu (the one that runs, and why, is logged at "
                 "info level)",
        OFFSET(backend), AV_OPT_TYPE_INT,    { .i64 = DENOISE_BACKEND_AUTO }, 0, 2, FLAGS, .unit = "backend" },
        { "auto", "CUDA where a usable NVIDIA GPU is found, else the CPU", 0, AV_OPT_TYPE_CONST, { .i64 = DENOISE_BACKEND_AUTO }, 0, 0, FLAGS, .unit = "backend" },
        { "cuda", "NVIDIA GPU (fail if none is usable)",                  0, AV_OPT_TYPE_CONST, { .i64 = DENOISE_BACKEND_CUDA }, 0, 0, FLAGS, .unit = "backend" },
        { "cpu",  "CPU reference engine (fp32, slow)",                    0, AV_OPT_TYPE_CONST, { .i64 = DENOISE_BACKEND_CPU  }, 0, 0, FLAGS, .unit = "backend" },
    { "device",  "CUDA device index for software frames (CUDA frames run on their own device)",
        OFFSET(device),  AV_OPT_TYPE_INT,    { .i64 = 0 }, 0, 16, FLAGS },
    { "cpu_threads", "worker threads of the CPU engine; 0 = the filter's thread count (the generic "
                 "threads option, else the graph's: -filter_threads, by default the CPU count + 1)",
        OFFSET(cpu_threads), AV_OPT_TYPE_INT, { .i64 = 0 }, 0, 1024, FLAGS },
    { "gpu_mem", "cap on the CUDA engine's GPU memory in MiB (0 = the default, 2560); frames whose "
                 "working set does not fit run in overlapping tiles",
        OFFSET(gpu_mem), AV_OPT_TYPE_INT64,  { .i64 = 0 }, 0, 1 << 20, FLAGS },
    { "tile",    "largest tile side in pixels for the CUDA engine (0 = whole frames when they fit "
                 "gpu_mem)",
        OFFSET(tile),    AV_OPT_TYPE_INT,    { .i64 = 0 }, 0, 32768, FLAGS },
    { "scene",   "built-in scene-cut threshold: scdet's score in percent of full scale, on block "
                 "means sized for the frame (0 = off); a cut ends the temporal window, frames are "
                 "never fused across it; software frames only",
        OFFSET(scene),   AV_OPT_TYPE_FLOAT,  { .dbl = SCENE_DEFAULT }, 0, 100, TFLAGS },
    { "amount",  "blend of the change: output = input + amount x (denoised - input); 0 gives the "
                 "input back bit-exact, 1 the network's output",
        OFFSET(amount),  AV_OPT_TYPE_FLOAT,  { .dbl = 1 }, 0, 1, TFLAGS },
    { "luma",    "scale of the luma change (Y'; for R'G'B' frames the BT.709 luma of the change), "
                 "0 = luma kept, 1 = fully denoised",
        OFFSET(luma),    AV_OPT_TYPE_FLOAT,  { .dbl = 1 }, 0, 1, TFLAGS },
    { "chroma",  "scale of the chroma change (Cb and Cr; for R'G'B' frames the change minus its "
                 "luma), 0 = chroma kept, 1 = fully denoised",
        OFFSET(chroma),  AV_OPT_TYPE_FLOAT,  { .dbl = 1 }, 0, 1, TFLAGS },
    { NULL }
};

AVFILTER_DEFINE_CLASS(denoise);

/* Every format below goes through the engine's generic DenoiseComponent path (plane, step,
 * offset, shift, depth): planar, semi-planar and packed layouts, 8..16-bit little-endian
 * integers and 32-bit float.  Big-endian, bit-packed (x2rgb10, v210...) and Bayer formats are
 * not listed.  AV_PIX_FMT_CUDA: frames on the GPU whose sw_format is one of these without
 * alpha (hwcontext_cuda has nv12, p010, p016, yuv420p, yuv444p, yuv444p16, bgr0, rgb0). */
static const enum AVPixelFormat pix_fmts[] = {
    /* Y'CbCr, limited or full range (yuvj* full) */
    AV_PIX_FMT_YUV410P,  AV_PIX_FMT_YUV411P,  AV_PIX_FMT_YUV420P,  AV_PIX_FMT_YUV422P,
    AV_PIX_FMT_YUV440P,  AV_PIX_FMT_YUV444P,
    AV_PIX_FMT_YUVJ411P, AV_PIX_FMT_YUVJ420P, AV_PIX_FMT_YUVJ422P, AV_PIX_FMT_YUVJ440P,
    AV_PIX_FMT_YUVJ444P,
    AV_PIX_FMT_YUV420P9LE,  AV_PIX_FMT_YUV422P9LE,  AV_PIX_FMT_YUV444P9LE,
    AV_PIX_FMT_YUV420P10LE, AV_PIX_FMT_YUV422P10LE, AV_PIX_FMT_YUV440P10LE, AV_PIX_FMT_YUV444P10LE,
    AV_PIX_FMT_YUV420P12LE, AV_PIX_FMT_YUV422P12LE, AV_PIX_FMT_YUV440P12LE, AV_PIX_FMT_YUV444P12LE,
    AV_PIX_FMT_YUV420P14LE, AV_PIX_FMT_YUV422P14LE, AV_PIX_FMT_YUV444P14LE,
    AV_PIX_FMT_YUV420P16LE, AV_PIX_FMT_YUV422P16LE, AV_PIX_FMT_YUV444P16LE,
    /* Y'CbCr with alpha (passed through) */
    AV_PIX_FMT_YUVA420P, AV_PIX_FMT_YUVA422P, AV_PIX_FMT_YUVA444P,
    AV_PIX_FMT_YUVA420P9LE,  AV_PIX_FMT_YUVA422P9LE,  AV_PIX_FMT_YUVA444P9LE,
    AV_PIX_FMT_YUVA420P10LE, AV_PIX_FMT_YUVA422P10LE, AV_PIX_FMT_YUVA444P10LE,
    AV_PIX_FMT_YUVA422P12LE, AV_PIX_FMT_YUVA444P12LE,
    AV_PIX_FMT_YUVA420P16LE, AV_PIX_FMT_YUVA422P16LE, AV_PIX_FMT_YUVA444P16LE,
    /* semi-planar and packed Y'CbCr */
    AV_PIX_FMT_NV12, AV_PIX_FMT_NV21, AV_PIX_FMT_NV16, AV_PIX_FMT_NV24, AV_PIX_FMT_NV42,
    AV_PIX_FMT_P010LE, AV_PIX_FMT_P012LE, AV_PIX_FMT_P016LE,
    AV_PIX_FMT_P210LE, AV_PIX_FMT_P216LE, AV_PIX_FMT_P410LE, AV_PIX_FMT_P416LE,
    AV_PIX_FMT_YUYV422, AV_PIX_FMT_UYVY422,
    /* gray */
    AV_PIX_FMT_GRAY8, AV_PIX_FMT_GRAY9LE, AV_PIX_FMT_GRAY10LE, AV_PIX_FMT_GRAY12LE,
    AV_PIX_FMT_GRAY14LE, AV_PIX_FMT_GRAY16LE, AV_PIX_FMT_GRAYF32LE,
    AV_PIX_FMT_YA8, AV_PIX_FMT_YA16LE,
    /* planar R'G'B' (G, B, R planes) */
    AV_PIX_FMT_GBRP, AV_PIX_FMT_GBRP9LE, AV_PIX_FMT_GBRP10LE, AV_PIX_FMT_GBRP12LE,
    AV_PIX_FMT_GBRP14LE, AV_PIX_FMT_GBRP16LE, AV_PIX_FMT_GBRPF32LE,
    AV_PIX_FMT_GBRAP, AV_PIX_FMT_GBRAP10LE, AV_PIX_FMT_GBRAP12LE, AV_PIX_FMT_GBRAP16LE,
    AV_PIX_FMT_GBRAPF32LE,
    /* packed R'G'B' */
    AV_PIX_FMT_RGB24, AV_PIX_FMT_BGR24, AV_PIX_FMT_RGBA, AV_PIX_FMT_BGRA,
    AV_PIX_FMT_ARGB,  AV_PIX_FMT_ABGR,  AV_PIX_FMT_RGB0, AV_PIX_FMT_BGR0,
    AV_PIX_FMT_0RGB,  AV_PIX_FMT_0BGR,
    AV_PIX_FMT_RGB48LE, AV_PIX_FMT_BGR48LE, AV_PIX_FMT_RGBA64LE, AV_PIX_FMT_BGRA64LE,
#if CONFIG_CUDA
    AV_PIX_FMT_CUDA,
#endif
    AV_PIX_FMT_NONE
};

/* ------------------------------------------------------------------------------------------ */
/* engine helpers                                                                              */

/* Map an engine error to an AVERROR and log the engine's own message (names the weight file
 * and tensor for a bad model, the CUDA runtime's error for a device error). */
static int engine_error(AVFilterContext *ctx, int err, const char *what)
{
    DenoiseContext *s = ctx->priv;
    const char *msg = s->engine ? denoise_last_error(s->engine) : NULL;
    int ret;

    switch (err) {
    case DENOISE_EMODEL:  ret = AVERROR_INVALIDDATA; break;
    case DENOISE_ENOMEM:  ret = AVERROR(ENOMEM);     break;
    case DENOISE_ENOSYS:  ret = AVERROR(ENOSYS);     break;
    case DENOISE_EINVAL:  ret = AVERROR(EINVAL);     break;
    case DENOISE_EDEVICE: ret = AVERROR_EXTERNAL;    break;
    default:              ret = AVERROR_EXTERNAL;    break;
    }
    av_log(ctx, AV_LOG_ERROR, "%s failed (engine error %d): %s\n", what, err,
           msg && *msg ? msg : "no message from the engine");
    return ret;
}

static const char *backend_name(DenoiseBackend b)
{
    switch (b) {
    case DENOISE_BACKEND_CPU:  return "cpu";
    case DENOISE_BACKEND_CUDA: return "cuda";
    default:                   return "auto";
    }
}

/* CUDA frames: every engine call runs with the frames' CUcontext current (the engine
 * allocates in it and queues its work on the device context's stream), as FFmpeg's CUDA
 * filters do around their own work (vf_scale_cuda.c, vf_bwdif_cuda.c).  Software frames:
 * nothing to do. */
static int cuda_push(AVFilterContext *ctx)
{
#if CONFIG_CUDA
    DenoiseContext *s = ctx->priv;
    if (s->hw) {
        CudaFunctions *cu = s->cuda->internal->cuda_dl;
        return FF_CUDA_CHECK_DL(ctx, cu, cu->cuCtxPushCurrent(s->cuda->cuda_ctx));
    }
#endif
    return 0;
}

static void cuda_pop(AVFilterContext *ctx)
{
#if CONFIG_CUDA
    DenoiseContext *s = ctx->priv;
    if (s->hw) {
        CudaFunctions *cu = s->cuda->internal->cuda_dl;
        CUcontext dummy;
        FF_CUDA_CHECK_DL(ctx, cu, cu->cuCtxPopCurrent(&dummy));
    }
#endif
}

static void engine_free(AVFilterContext *ctx)
{
    DenoiseContext *s = ctx->priv;

    if (!s->engine)
        return;
    if (denoise_backend(s->engine) == DENOISE_BACKEND_CUDA)
        av_log(ctx, AV_LOG_VERBOSE, "GPU memory peak: %.1f MiB\n",
               denoise_gpu_memory_peak(s->engine) / 1048576.0);
    if (cuda_push(ctx) < 0) {
        /* the engine's device memory cannot be freed without its context; the host side still is */
        av_log(ctx, AV_LOG_WARNING, "freeing the engine without its CUDA context\n");
        denoise_free(&s->engine);
        return;
    }
    denoise_free(&s->engine);
    cuda_pop(ctx);
}

static void free_buffers(DenoiseContext *s)
{
    av_freep(&s->scd_cur);
    av_freep(&s->scd_prev);
    av_freep(&s->scd_count);
    s->scd_have_prev = 0;
}

/* Block side of the scene detector for w x h frames: about SCD_GRID blocks per frame, at least
 * SCD_BLOCK_MIN (8 up to 320x192; 21 at 854x480, 46 at 1920x1080, 93 at 3840x2160). */
static int scd_block_size(int w, int h)
{
    return FFMAX(SCD_BLOCK_MIN, (int)lrint(sqrt((double)w * h / SCD_GRID)));
}

/* (Re)open the engine for frames of w x h in the current format: loads the weights (the heavy
 * part, so it runs from config_props or on a size or format change, never in init). */
static int engine_open(AVFilterContext *ctx, int w, int h)
{
    DenoiseContext *s = ctx->priv;
    DenoiseParams p;
    DenoiseBackend got;
    int ret, rc;

    engine_free(ctx);
    free_buffers(s);
    s->width = s->height = 0;

    denoise_params_defaults(&p);
    p.model_path = s->model_path;
    p.backend    = s->backend;
    p.device     = s->device;
    p.sigma      = s->sigma;
    p.width      = w;
    p.height     = h;
    p.format     = s->pixfmt;
    /* the engine's thread pool is its own (libavfilter's slice threads only sum the scene
     * detector's blocks, before a frame goes to the engine): it takes the thread count
     * libavfilter grants this filter unless cpu_threads says otherwise */
    p.threads    = s->cpu_threads ? s->cpu_threads : ff_filter_get_nb_threads(ctx);
    p.gpu_memory = s->gpu_mem << 20;
    p.tile       = s->tile;

    s->engine = denoise_alloc();
    if (!s->engine) {
        av_log(ctx, AV_LOG_ERROR, "cannot allocate the engine\n");
        return AVERROR(ENOMEM);
    }

    if ((ret = cuda_push(ctx)) < 0)
        return ret;
#if CONFIG_CUDA
    if (s->hw) {
        /* the frames' own device and stream: no copy, no host synchronisation */
        CudaFunctions *cu = s->cuda->internal->cuda_dl;
        CUdevice dev;
        ret = FF_CUDA_CHECK_DL(ctx, cu, cu->cuCtxGetDevice(&dev));
        if (ret < 0) {
            cuda_pop(ctx);
            return ret;
        }
        p.memory      = DENOISE_MEMORY_CUDA;
        p.cuda_stream = s->cuda->stream;
        p.device      = dev;
    }
#endif
    av_log(ctx, AV_LOG_VERBOSE, "loading '%s' for %dx%d %s%s, backend %s\n", s->model_path, w, h,
           s->hw ? "cuda/" : "", av_get_pix_fmt_name(s->format), backend_name(s->backend));
    rc = denoise_open(s->engine, &p);
    s->latency = rc < 0 ? rc : denoise_latency(s->engine);
    cuda_pop(ctx);
    if (rc < 0) {
        char what[1100];
        snprintf(what, sizeof(what), "Opening the engine with model '%s' (backend %s)",
                 s->model_path, backend_name(s->backend));
        return engine_error(ctx, rc, what);
    }

    got = denoise_backend(s->engine);
    if (got == DENOISE_BACKEND_CPU) {
        av_log(ctx, AV_LOG_INFO, "running the CPU engine (fp32, slow): %s\n",
               denoise_backend_reason(s->engine));
        av_log(ctx, AV_LOG_VERBOSE, "CPU engine: %d worker thread(s) (%s)\n", p.threads,
               s->cpu_threads ? "cpu_threads" : "the filter's thread count");
        if ((s->device || s->gpu_mem || s->tile) && !s->warned_cuda_opts++)
            av_log(ctx, AV_LOG_WARNING, "device, gpu_mem and tile are options of the CUDA engine: "
                   "not used by the CPU engine (device %d, gpu_mem %"PRId64", tile %d)\n",
                   s->device, s->gpu_mem, s->tile);
    } else
        av_log(ctx, AV_LOG_INFO, "running the CUDA engine: %s\n", denoise_backend_reason(s->engine));
    if (s->latency < 0)
        return engine_error(ctx, s->latency, "Querying the engine's latency");
    rc = denoise_model_sigma_range(s->engine, &s->sigma_lo, &s->sigma_hi);
    if (rc < 0)
        return engine_error(ctx, rc, "Querying the model's sigma range");
    s->sigma_range_from_file = rc;
    /* opened with s->sigma; the amounts are the engine's defaults until apply_params() */
    s->engine_sigma  = s->sigma;
    s->engine_amount = (DenoiseAmount) { DENOISE_AMOUNT_DEFAULTS };
    s->logged_sigma  = -1;
    s->draining = 0;

    s->scd_block = scd_block_size(w, h);
    s->scd_bw = (w + s->scd_block - 1) / s->scd_block;
    s->scd_bh = (h + s->scd_block - 1) / s->scd_block;
    s->scd_cur   = av_calloc((size_t)s->scd_bw * s->scd_bh, sizeof(*s->scd_cur));
    s->scd_prev  = av_calloc((size_t)s->scd_bw * s->scd_bh, sizeof(*s->scd_prev));
    s->scd_count = av_calloc((size_t)s->scd_bw * s->scd_bh, sizeof(*s->scd_count));
    if (!s->scd_cur || !s->scd_prev || !s->scd_count) {
        av_log(ctx, AV_LOG_ERROR, "cannot allocate the scene detector's block means for %dx%d\n", w, h);
        return AVERROR(ENOMEM);
    }
    for (int by = 0; by < s->scd_bh; by++)
        for (int bx = 0; bx < s->scd_bw; bx++)
            s->scd_count[by * s->scd_bw + bx] = (FFMIN((by + 1) * s->scd_block, h) - by * s->scd_block) *
                                                (FFMIN((bx + 1) * s->scd_block, w) - bx * s->scd_block);
    s->scd_have_prev = 0;
    s->scd_prev_mafd = 0;

    s->width  = w;
    s->height = h;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* frames as the engine sees them                                                              */

static enum pl_color_system pl_system(AVFilterContext *ctx, const AVFrame *f)
{
    DenoiseContext *s = ctx->priv;
    /* FCC's matrix is within 0.3% of BT.601's; libplacebo has no entry for it */
    enum pl_color_system sys = f->colorspace == AVCOL_SPC_FCC ? PL_COLOR_SYSTEM_BT_601
                                                              : pl_system_from_av(f->colorspace);

    if (sys == PL_COLOR_SYSTEM_BT_2020_C) {
        /* constant luminance is not a matrix (pl_color_system_is_linear() is false): the
         * network only needs an approximately right R'G'B', and the change goes back through
         * the exact inverse of the same matrix, so NCL is a safe stand-in. */
        if (!s->warned_csp++)
            av_log(ctx, AV_LOG_WARNING, "BT.2020 constant luminance treated as BT.2020 NCL\n");
        return PL_COLOR_SYSTEM_BT_2020_NC;
    }
    /* gray tagged RGB (the PNG decoder's gray): no matrix to miss, the luma weights are the guess's */
    if (f->colorspace == AVCOL_SPC_RGB && s->pixfmt.nb_components == 1)
        sys = PL_COLOR_SYSTEM_UNKNOWN;
    else if (f->colorspace != AVCOL_SPC_UNSPECIFIED && f->colorspace != AVCOL_SPC_RESERVED &&
        (sys == PL_COLOR_SYSTEM_UNKNOWN || !pl_color_system_is_ycbcr_like(sys) ||
         !pl_color_system_is_linear(sys))) {
        if (!s->warned_csp++)
            av_log(ctx, AV_LOG_WARNING, "colour space %s not supported as a matrix, "
                   "guessing from the frame height\n", av_color_space_name(f->colorspace));
        sys = PL_COLOR_SYSTEM_UNKNOWN;
    }
    if (sys != PL_COLOR_SYSTEM_UNKNOWN)
        return sys;
    /* Unspecified: BT.601 for SD, BT.709 from 720 lines up (what players and swscale users
     * expect; libplacebo's pl_color_system_guess_ycbcr() makes the same split). */
    return f->height < 720 ? PL_COLOR_SYSTEM_BT_601 : PL_COLOR_SYSTEM_BT_709;
}

/* The frame's colour representation for the engine. */
static void frame_color(AVFilterContext *ctx, const AVFrame *f, DenoiseColor *c)
{
    DenoiseContext *s = ctx->priv;
    enum AVChromaLocation loc = f->chroma_location;
    const int depth = s->desc->comp[0].depth;

    memset(c, 0, sizeof(*c));
    c->repr.alpha = PL_ALPHA_UNKNOWN;
    /* the engine's input is code / (2^depth - 1): libplacebo then scales the limited-range
     * offsets (16 << (depth - 8) ...) from the bit encoding */
    c->repr.bits.sample_depth = c->repr.bits.color_depth = depth;
    if (s->is_rgb || s->is_float) {
        /* R'G'B' is the network's own domain; float gray is taken as R' = G' = B' = Y. */
        c->repr.sys    = PL_COLOR_SYSTEM_RGB;
        c->repr.levels = PL_COLOR_LEVELS_FULL;
        return;
    }
    c->repr.sys    = pl_system(ctx, f);
    c->repr.levels = pl_levels_from_av(f->color_range);
    if (c->repr.levels == PL_COLOR_LEVELS_UNKNOWN)
        c->repr.levels = s->is_full_range_fmt ? PL_COLOR_LEVELS_FULL : PL_COLOR_LEVELS_LIMITED;

    if (loc == AVCHROMA_LOC_UNSPECIFIED)
        /* H.26x and MPEG-2 default to "left" (co-sited horizontally); JPEG to "center" */
        loc = s->is_full_range_fmt ? AVCHROMA_LOC_CENTER : AVCHROMA_LOC_LEFT;
    if (av_chroma_location_enum_to_pos(&c->chroma_xpos, &c->chroma_ypos, loc) < 0)
        av_chroma_location_enum_to_pos(&c->chroma_xpos, &c->chroma_ypos, AVCHROMA_LOC_LEFT);
}

/* Plane pointers and linesizes of f (host or device memory). */
static void frame_image(const AVFrame *f, DenoiseImage *im)
{
    memset(im, 0, sizeof(*im));
    for (int i = 0; i < 4; i++) {
        im->data[i]     = f->data[i];
        im->linesize[i] = f->linesize[i];
    }
}

/* Float input: NaN and +-Inf samples reach the network as 0 (NaN, -Inf) or 1 (+Inf) (the
 * engine replaces them) and stay as they were in the output.  Say so once per stream, with
 * the count of the first frame that has any. */
static void check_nonfinite(AVFilterContext *ctx, const AVFrame *f)
{
    DenoiseContext *s = ctx->priv;
    const AVPixFmtDescriptor *desc = s->desc;
    int64_t bad = 0;

    if (!s->is_float || s->hw || s->warned_nonfinite)
        return;
    for (int c = 0; c < s->pixfmt.nb_components; c++) {
        const AVComponentDescriptor *cd = &desc->comp[c];
        for (int y = 0; y < f->height; y++) {
            const uint8_t *row = f->data[cd->plane] + (ptrdiff_t)y * f->linesize[cd->plane] + cd->offset;
            for (int x = 0; x < f->width; x++)
                bad += !isfinite(av_int2float(AV_RL32(row + x * cd->step)));
        }
    }
    if (bad) {
        s->warned_nonfinite = 1;
        av_log(ctx, AV_LOG_WARNING, "input has non-finite samples (NaN or Inf; %"PRId64" in this "
               "frame): the network sees 0 (NaN, -Inf) or 1 (+Inf) there, the output keeps them "
               "unchanged (warned once)\n", bad);
    }
}

typedef struct SceneSliceArg {
    const AVFrame *f;
    unsigned mask;  /* the component's largest code value */
    float scale;    /* code value -> R'G'B' units */
} SceneSliceArg;

/* Block sums of one slice of block rows (jobnr of nb_jobs) into s->scd_cur: each block row is
 * one slice's alone and is summed in the same order whatever the slicing, so the scores do not
 * depend on the thread count. Per row, each block's run of B samples is summed in a register
 * (integers exactly; no division per sample: a 3840x2160 frame is 8.3 M samples). */
static int scene_block_sums(AVFilterContext *ctx, void *arg, int jobnr, int nb_jobs)
{
    DenoiseContext *s = ctx->priv;
    const SceneSliceArg *a = arg;
    const AVComponentDescriptor *c = &s->desc->comp[s->is_rgb ? 1 : 0];
    const int w = s->width, h = s->height, bw = s->scd_bw, B = s->scd_block;
    const int by0 = s->scd_bh * jobnr / nb_jobs, by1 = s->scd_bh * (jobnr + 1) / nb_jobs;
    const int step = c->step, shift = c->shift;
    const unsigned mask = a->mask;
    const float scale = a->scale;

    memset(s->scd_cur + by0 * bw, 0, (size_t)(by1 - by0) * bw * sizeof(*s->scd_cur));
    for (int y = by0 * B; y < FFMIN(by1 * B, h); y++) {
        const uint8_t *src = a->f->data[c->plane] + (ptrdiff_t)y * a->f->linesize[c->plane] + c->offset;
        float *row = s->scd_cur + (y / B) * bw;
        for (int bx = 0, x0 = 0; bx < bw; bx++, x0 += B) {
            const int x1 = FFMIN(x0 + B, w);
            if (s->is_float) {
                float sum = 0;
                for (int x = x0; x < x1; x++) {
                    float v = av_int2float(AV_RL32(src + x * step));
                    sum += !isfinite(v) ? (v > 0 ? 1.0f : 0.0f) : av_clipf(v, -1.0f, 2.0f);
                }
                row[bx] += sum;
            } else if (s->pixfmt.bytes == 2) {
                uint32_t sum = 0;
                for (int x = x0; x < x1; x++)
                    sum += (AV_RL16(src + x * step) >> shift) & mask;
                row[bx] += sum * scale;
            } else {
                uint32_t sum = 0;
                for (int x = x0; x < x1; x++)
                    sum += (src[x * step] >> shift) & mask;
                row[bx] += sum * scale;
            }
        }
    }
    return 0;
}

/* Built-in scene-cut detector on the native frame f (software frames).
 * The score is the one of FFmpeg's scdet filter (libavfilter/vf_scdet.c, get_scene_score()):
 * mafd = mean absolute frame difference in percent of full scale, score = min(mafd,
 * |mafd - previous mafd|), a cut when score >= threshold; the min() makes a steady high
 * difference (noise, constant motion) not a cut, only a jump.  Unlike scdet the difference is
 * taken on block means (scd_block_size()) of the luma read from the native frame: Y' in
 * R'G'B' units (normalised code values times the luma gain of the frame's decoding matrix,
 * 255/219 for 8-bit limited range, so that limited and full range score alike), or G of R'G'B'
 * frames (floats as the network sees them).  Block means average the noise down (sigma 50 8-bit
 * noise moves an 8x8 block mean by about 2-3%) while a hard cut changes most blocks by tens of
 * percent.  Returns 1 for a cut. */
static int scene_cut(AVFilterContext *ctx, const AVFrame *f, const DenoiseColor *color,
                     double *score_out)
{
    DenoiseContext *s = ctx->priv;
    const AVComponentDescriptor *c = &s->desc->comp[s->is_rgb ? 1 : 0];
    const int w = s->width, h = s->height, nb = s->scd_bw * s->scd_bh;
    const unsigned mask = (1u << FFMIN(c->depth, 16)) - 1;
    SceneSliceArg arg = { .f = f, .mask = mask, .scale = 1.0f / mask };
    double sad = 0, mafd, diff, score;
    float *tmp;

    if (color->repr.sys != PL_COLOR_SYSTEM_RGB) {
        struct pl_color_repr repr = color->repr;
        arg.scale *= pl_color_repr_decode(&repr, NULL).mat.m[0][0];
    }

    *score_out = 0;
    /* slices of block rows on the filter graph's threads (-filter_threads): the 8.3 M samples of
     * a 3840x2160 frame took a few ms on the one thread that also feeds the engine */
    ff_filter_execute(ctx, scene_block_sums, &arg, NULL, FFMIN(s->scd_bh, ff_filter_get_nb_threads(ctx)));
    for (int i = 0; i < nb; i++)
        s->scd_cur[i] /= s->scd_count[i];

    if (!s->scd_have_prev) {
        /* first frame of this size: nothing to compare with */
        tmp = s->scd_prev; s->scd_prev = s->scd_cur; s->scd_cur = tmp;
        s->scd_have_prev = 1;
        s->scd_prev_mafd = 0;
        return 0;
    }
    for (int i = 0; i < nb; i++)
        sad += s->scd_count[i] * fabs((double)s->scd_cur[i] - s->scd_prev[i]);
    tmp = s->scd_prev; s->scd_prev = s->scd_cur; s->scd_cur = tmp;

    mafd  = sad * 100.0 / ((double)w * h);
    diff  = fabs(mafd - s->scd_prev_mafd);
    score = av_clipd(FFMIN(mafd, diff), 0, 100);
    s->scd_prev_mafd = mafd;
    *score_out = score;
    av_log(ctx, AV_LOG_TRACE, "scene score %.3f (mafd %.3f)\n", score, mafd);
    return s->scene > 0 && (int64_t)w * h >= SCD_MIN_PIXELS && score >= s->scene;
}

/* ------------------------------------------------------------------------------------------ */
/* frame flow                                                                                  */

/* The sigma the engine denoised the frame just pulled with (the option's value, or with
 * sigma=auto its estimate): lavfi.denoise.sigma metadata on `out`; with sigma=auto also a
 * verbose line at a segment's first frame and whenever the estimate moves by 0.5 or more. */
static int sigma_report(AVFilterContext *ctx, AVFrame *out, int estimated)
{
    DenoiseContext *s = ctx->priv;
    char v[32];
    float used;

    if (denoise_output_sigma(s->engine, &used) < 0)
        return 0;
    snprintf(v, sizeof(v), "%.2f", used);
    if (estimated) {
        if (s->logged_sigma < 0 || fabsf(used - s->logged_sigma) >= 0.5f) {
            av_log(ctx, AV_LOG_VERBOSE, "sigma=auto: %s at pts %s\n", v, av_ts2str(out->pts));
            s->logged_sigma = used;
        } else {
            av_log(ctx, AV_LOG_DEBUG, "sigma=auto: %s at pts %s\n", v, av_ts2str(out->pts));
        }
    }
    return av_dict_set(&out->metadata, "lavfi.denoise.sigma", v, 0);
}

/* A software frame of the engine's current format and size (NULL when out of memory). */
static AVFrame *scratch_frame(const DenoiseContext *s)
{
    AVFrame *f = av_frame_alloc();

    if (!f)
        return NULL;
    f->format = s->format;
    f->width  = s->width;
    f->height = s->height;
    if (av_frame_get_buffer(f, 0) < 0)
        av_frame_free(&f);
    return f;
}

/* Pull the oldest queued frame's output from the engine and send it.  Returns 1 when a frame
 * went out, 0 when the engine has none ready yet, < 0 on error. */
static int output_one(AVFilterContext *ctx)
{
    DenoiseContext *s = ctx->priv;
    AVFilterLink *outlink = ctx->outputs[0];
    const size_t queued = s->queue ? av_fifo_can_read(s->queue) : 0;
    DenoiseImage img;
    QueuedFrame q;
    AVFrame *out;
    int64_t pts;
    int ret, rc;

    /* the engine returns output t once t + latency is pushed, or after a flush */
    if (!s->engine || !queued || (!s->draining && queued <= (size_t)s->latency))
        return 0;

    av_fifo_peek(s->queue, &q, 1, 0);
    if (!s->hw && !q.disabled) {
        /* software frames: the output is the input frame itself */
        if ((ret = av_frame_make_writable(q.frame)) < 0) {
            av_log(ctx, AV_LOG_ERROR, "cannot make the frame at pts %"PRId64" writable for its "
                   "output: %s\n", q.frame->pts, av_err2str(ret));
            return ret;
        }
        out = q.frame;
    } else {
        /* CUDA frames: a frame of the output pool; a timeline-disabled frame: a scratch frame
         * for its output (the engine still runs it, its neighbours need it), in the engine's
         * format and size, which after a change mid-stream (-reinit_filter 0) are the frame's
         * and no longer the output link's */
        out = s->hw ? ff_get_video_buffer(outlink, s->width, s->height) : scratch_frame(s);
        if (!out) {
            av_log(ctx, AV_LOG_ERROR, "no %s output frame of %dx%d %s for pts %"PRId64"\n",
                   s->hw ? "CUDA frames pool" : "scratch", s->width, s->height,
                   av_get_pix_fmt_name(s->format), q.frame->pts);
            return AVERROR(ENOMEM);
        }
    }
    frame_image(out, &img);
    if ((ret = cuda_push(ctx)) < 0)
        goto fail;
    rc = denoise_pull(s->engine, &img);
    cuda_pop(ctx);
    if (rc == DENOISE_EAGAIN || rc == DENOISE_EOF) {
        ret = 0;
        goto fail;
    }
    if (rc < 0) {
        ret = engine_error(ctx, rc, "Denoising a frame");
        goto fail;
    }

    av_fifo_read(s->queue, &q, 1);
    pts = q.frame->pts;
    if (q.disabled && !s->hw) {
        if (out != q.frame)
            av_frame_free(&out);
        out = q.frame;
    } else if (out != q.frame) {
        /* a disabled CUDA frame still leaves in a frame of the output pool, the link's
         * hw_frames_ctx (a consumer such as hwdownload refuses frames of another one): the
         * input's samples over the engine's output, a device copy on the device context's
         * stream, which denoise_pull has ordered after the engine's write */
        ret = q.disabled ? av_hwframe_transfer_data(out, q.frame, 0) : 0;
        if (ret >= 0)
            ret = av_frame_copy_props(out, q.frame);
        av_frame_free(&q.frame);
        if (ret < 0) {
            av_log(ctx, AV_LOG_ERROR, "cannot copy the frame %s onto the output at pts "
                   "%"PRId64": %s\n", q.disabled ? "(timeline-disabled: samples and properties)"
                   : "properties", pts, av_err2str(ret));
            av_frame_free(&out);
            return ret;
        }
    }
    /* a timeline-disabled frame leaves unchanged: no sigma of ours on it */
    if (!q.disabled && (ret = sigma_report(ctx, out, q.sigma_auto)) < 0) {
        av_frame_free(&out);
        return ret;
    }
    ret = ff_filter_frame(outlink, out);
    if (ret < 0) {
        av_log(ctx, AV_LOG_ERROR, "sending the output frame at pts %"PRId64" failed: %s\n",
               pts, av_err2str(ret));
        return ret;
    }
    return 1;

fail:
    if (out != q.frame)
        av_frame_free(&out);
    return ret;
}

/* End of a segment (end of stream, scene cut, size or format change): flush the engine and
 * send every frame still queued, in order. */
static int drain(AVFilterContext *ctx)
{
    DenoiseContext *s = ctx->priv;
    int ret, rc;

    if (!s->engine || !av_fifo_can_read(s->queue))
        return 0;

    if ((ret = cuda_push(ctx)) < 0)
        return ret;
    rc = denoise_flush(s->engine);
    cuda_pop(ctx);
    if (rc < 0)
        return engine_error(ctx, rc, "Flushing the engine");

    s->draining = 1;
    while (av_fifo_can_read(s->queue)) {
        ret = output_one(ctx);
        if (ret < 0)
            return ret;
        if (ret == 0) {
            av_log(ctx, AV_LOG_ERROR, "engine drained with %zu frame(s) still queued\n",
                   av_fifo_can_read(s->queue));
            return AVERROR_BUG;
        }
    }
    s->draining = 0;
    s->logged_sigma = -1;
    /* the next push starts a new segment */
    if (denoise_pending(s->engine)) {
        av_log(ctx, AV_LOG_ERROR, "engine holds %d frame(s) more than were queued\n",
               denoise_pending(s->engine));
        return AVERROR_BUG;
    }
    return 0;
}

static int set_format(AVFilterContext *ctx, enum AVPixelFormat fmt);

/* The software format of f (its sw_format for CUDA frames). */
static enum AVPixelFormat frame_sw_format(const AVFrame *f)
{
    if (f->format == AV_PIX_FMT_CUDA && f->hw_frames_ctx)
        return ((const AVHWFramesContext *)f->hw_frames_ctx->data)->sw_format;
    return f->format;
}

/* A sigma outside the noise levels the model was trained on: say so, once per value (at the
 * start and after each run-time change that lands outside). */
static void check_sigma_range(AVFilterContext *ctx)
{
    DenoiseContext *s = ctx->priv;

    if (s->sigma >= s->sigma_lo && s->sigma <= s->sigma_hi) {
        s->warned_sigma = -1;
        return;
    }
    if (s->sigma == s->warned_sigma)
        return;
    s->warned_sigma = s->sigma;
    av_log(ctx, AV_LOG_WARNING, "sigma %g is outside %g..%g, the noise levels the model '%s' was "
           "trained on (%s): the network extrapolates there\n", s->sigma, s->sigma_lo, s->sigma_hi,
           s->model_path, s->sigma_range_from_file ? "its metadata 'sigma_range'" :
           "models v1 and v2; the file has no 'sigma_range' metadata");
}

/* A run-time command: the generic option setter, then what the option ranges cannot say (sigma
 * below 0 other than auto, which init refuses too): refused with AVERROR(EINVAL), the value in
 * force kept. */
static int process_command(AVFilterContext *ctx, const char *cmd, const char *args, char *res,
                           int res_len, int flags)
{
    DenoiseContext *s = ctx->priv;
    const float sigma = s->sigma;
    int ret = ff_filter_process_command(ctx, cmd, args, res, res_len, flags);

    if (ret < 0)
        return ret;
    if (s->sigma < 0 && s->sigma != SIGMA_AUTO) {
        av_log(ctx, AV_LOG_ERROR, "sigma %g refused: use 0..100, or auto (-1) to estimate it\n", s->sigma);
        s->sigma = sigma;
        return AVERROR(EINVAL);
    }
    return 0;
}

/* Options changed at run time (process_command: sendcmd, zmq, avfilter_graph_send_command)
 * reach the engine here, before the next frame is pushed: the engine applies sigma and the
 * amounts from that frame on (its own output included). */
static int apply_params(AVFilterContext *ctx)
{
    DenoiseContext *s = ctx->priv;
    const DenoiseAmount a = { .amount = s->amount, .luma = s->luma, .chroma = s->chroma };
    int new_sigma, new_amount;
    int ret, rc = 0;

    new_sigma  = s->sigma != s->engine_sigma;
    new_amount = a.amount != s->engine_amount.amount || a.luma != s->engine_amount.luma ||
                 a.chroma != s->engine_amount.chroma;

    if (s->sigma != SIGMA_AUTO)
        check_sigma_range(ctx);
    if (!new_sigma && !new_amount)
        return 0;
    if ((ret = cuda_push(ctx)) < 0)
        return ret;
    if (new_sigma && (rc = denoise_set_sigma(s->engine, s->sigma)) >= 0) {
        if (s->sigma == SIGMA_AUTO)
            av_log(ctx, AV_LOG_VERBOSE, "sigma auto from the next frame on\n");
        else
            av_log(ctx, AV_LOG_VERBOSE, "sigma %g from the next frame on\n", s->sigma);
        s->engine_sigma = s->sigma;
        s->logged_sigma = -1;
    }
    if (new_amount && rc >= 0 && (rc = denoise_set_amount(s->engine, &a)) >= 0) {
        av_log(ctx, AV_LOG_VERBOSE, "amount %g, luma %g, chroma %g from the next frame on\n",
               a.amount, a.luma, a.chroma);
        s->engine_amount = a;
    }
    cuda_pop(ctx);
    return rc < 0 ? engine_error(ctx, rc, "Setting sigma and amounts") : 0;
}

static int push_frame(AVFilterContext *ctx, AVFrame *in)
{
    DenoiseContext *s = ctx->priv;
    QueuedFrame q = { .frame = in, .disabled = ctx->is_disabled };
    AVFrame *props = NULL;  /* CUDA frames: what the queue keeps of `in` */
    DenoiseImage img;
    int ret, rc;

    /* A scene cut marked upstream by the scdet filter (-vf scdet,denoise) ends the segment:
     * the engine then mirrors the window at the cut instead of mixing two scenes. */
    if (s->engine && av_fifo_can_read(s->queue) &&
        av_dict_get(in->metadata, "lavfi.scd.time", NULL, 0)) {
        av_log(ctx, AV_LOG_DEBUG, "scene cut at pts %"PRId64": new segment\n", in->pts);
        if ((ret = drain(ctx)) < 0)
            goto fail;
    }

    if (s->hw) {
        /* the output pool was made for the configured sw_format and size */
        if ((in->format != AV_PIX_FMT_CUDA) || frame_sw_format(in) != s->format ||
            in->width != s->width || in->height != s->height) {
            av_log(ctx, AV_LOG_ERROR, "CUDA frames changed mid-stream (%s %dx%d, configured for "
                   "cuda/%s %dx%d): reconfigure the graph for the new format or size\n",
                   av_get_pix_fmt_name(frame_sw_format(in)), in->width, in->height,
                   av_get_pix_fmt_name(s->format), s->width, s->height);
            ret = AVERROR(EINVAL);
            goto fail;
        }
    } else if (in->format != s->format) {
        /* buffersrc (and other sources) pass a format change on mid-stream with a warning:
         * end the segment and take the new format if it is one of ours */
        av_log(ctx, AV_LOG_VERBOSE, "pixel format changed from %s to %s: ending the segment\n",
               av_get_pix_fmt_name(s->format), av_get_pix_fmt_name(in->format));
        if ((ret = drain(ctx)) < 0)
            goto fail;
        if ((ret = set_format(ctx, in->format)) < 0)
            goto fail;
        engine_free(ctx);   /* reopened below for the new format */
    }

    if (!s->engine || in->width != s->width || in->height != s->height) {
        if (s->engine)
            av_log(ctx, AV_LOG_VERBOSE, "frame size changed from %dx%d to %dx%d: "
                   "ending the segment and reopening the engine\n",
                   s->width, s->height, in->width, in->height);
        if ((ret = drain(ctx)) < 0 ||
            (ret = engine_open(ctx, in->width, in->height)) < 0)
            goto fail;
    }
    if ((ret = apply_params(ctx)) < 0)
        goto fail;
    q.sigma_auto = s->engine_sigma == SIGMA_AUTO;

    check_nonfinite(ctx, in);

    frame_image(in, &img);
    frame_color(ctx, in, &img.color);

    /* Built-in detector (software frames: reading CUDA frames would cost the host round trip
     * they exist to avoid): frame t against t-1, decided before t goes into the engine; a cut
     * ends the segment (flush and drain: the window is mirrored at the cut) and t starts the
     * next one. */
    if (!s->hw && s->scene <= 0) {
        s->scd_have_prev = 0;   /* switched on later (sendcmd): start from the next frame */
    } else if (!s->hw) {
        double score;
        if (scene_cut(ctx, in, &img.color, &score) && av_fifo_can_read(s->queue)) {
            s->nb_scene_cuts++;
            av_log(ctx, AV_LOG_VERBOSE, "scene cut at pts %"PRId64" (%s s, score %.2f >= %.2f): "
                   "new segment\n", in->pts, av_ts2timestr(in->pts, &ctx->inputs[0]->time_base),
                   score, s->scene);
            if ((ret = drain(ctx)) < 0)
                goto fail;
        }
    }

    /* CUDA frames: the queue keeps only the properties, so that the input's buffer (a decoder
     * surface, a pool frame) goes back once the engine's copy of it is queued: the engine orders
     * that copy before the work queued on the device stream after the push (denoise.h,
     * denoise_push), which is where the buffer's next writer queues its work. A disabled frame
     * stays whole: its samples are its output's (output_one copies them into a pool frame). */
    if (s->hw && !q.disabled) {
        if (!(props = av_frame_alloc())) {
            ret = AVERROR(ENOMEM);
            goto fail;
        }
        if ((ret = av_frame_copy_props(props, in)) < 0) {
            av_log(ctx, AV_LOG_ERROR, "cannot keep the properties of the frame at pts %"PRId64": %s\n",
                   in->pts, av_err2str(ret));
            goto fail;
        }
        props->width  = in->width;
        props->height = in->height;
        q.frame = props;
    }
    ret = av_fifo_write(s->queue, &q, 1);
    if (ret < 0) {
        av_log(ctx, AV_LOG_ERROR, "cannot queue the frame at pts %"PRId64" (%zu queued): %s\n",
               in->pts, av_fifo_can_read(s->queue), av_err2str(ret));
        goto fail;
    }
    /* the queued frame is the queue's from here on: uninit frees it */
    if ((ret = cuda_push(ctx)) >= 0) {
        rc = denoise_push(s->engine, &img);
        cuda_pop(ctx);
        ret = rc < 0 ? engine_error(ctx, rc, "Pushing a frame") : 0;
    }
    if (props)
        av_frame_free(&in);   /* the engine has its copy, the queue its properties */
    return ret;

fail:
    av_frame_free(&props);
    av_frame_free(&in);
    return ret;
}

static int filter_frames(AVFilterContext *ctx)
{
    DenoiseContext *s = ctx->priv;
    AVFilterLink *inlink  = ctx->inputs[0];
    AVFilterLink *outlink = ctx->outputs[0];
    AVFrame *in;
    int64_t pts;
    int status, ret;

    if ((status = ff_outlink_get_status(outlink))) {
        /* the consumer wants no more frames (-frames:v, -t, trim...): pass it back upstream;
         * frames still queued were never asked for */
        s->out_closed = 1;
        ff_inlink_set_status(inlink, status);
        return 0;
    }

    ret = ff_inlink_consume_frame(inlink, &in);
    if (ret < 0)
        return ret;
    if (ret > 0) {
        if ((ret = push_frame(ctx, in)) < 0)
            return ret;
        while ((ret = output_one(ctx)) > 0)
            ;
        if (ret < 0)
            return ret;
        /* more input may be queued, or EOF pending behind it */
        ff_filter_set_ready(ctx, 10);
        return 0;
    }

    if (ff_inlink_acknowledge_status(inlink, &status, &pts)) {
        /* every queued frame goes out before the status, which keeps its pts: the frames
         * sent are exactly the frames received */
        if ((ret = drain(ctx)) < 0)
            return ret;
        ff_outlink_set_status(outlink, status, pts);
        return 0;
    }

    FF_FILTER_FORWARD_WANTED(outlink, inlink);

    return FFERROR_NOT_READY;
}

static int activate(AVFilterContext *ctx)
{
    DenoiseContext *s = ctx->priv;
    int ret = filter_frames(ctx);

    if (ret == AVERROR_EOF)
        s->out_closed = 1;
    else if (ret < 0 && ret != FFERROR_NOT_READY && !s->failed)
        s->failed = ret;
    s->out_wanted = ff_outlink_frame_wanted(ctx->outputs[0]);
    return ret;
}

/* ------------------------------------------------------------------------------------------ */
/* set-up                                                                                      */

static int file_readable(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    fclose(f);
    return 1;
}

static av_cold int init(AVFilterContext *ctx)
{
    DenoiseContext *s = ctx->priv;

    /* Cheap set-up only: FFmpeg's CLI creates and initialises a throwaway instance of the
     * graph; the weights are loaded in config_props. */
    if (s->model && *s->model) {
        if (!file_readable(s->model)) {
            int err = AVERROR(errno);
            av_log(ctx, AV_LOG_ERROR, "cannot read model file '%s': %s\n", s->model, av_err2str(err));
            return err;
        }
        s->model_path = av_strdup(s->model);
    } else {
        static const char *const candidates[] = {
            DENOISE_DATADIR "/" DENOISE_WEIGHTS_NAME,
#ifdef DENOISE_BUILD_WEIGHTS
            DENOISE_BUILD_WEIGHTS,
#endif
        };
        for (int i = 0; i < FF_ARRAY_ELEMS(candidates) && !s->model_path; i++)
            if (file_readable(candidates[i]))
                s->model_path = av_strdup(candidates[i]);
        if (!s->model_path) {
            av_log(ctx, AV_LOG_ERROR, "no model given and the shipped weights were found "
                   "neither at '%s' nor at '%s'; install them or pass model=PATH\n",
                   candidates[0], FF_ARRAY_ELEMS(candidates) > 1 ?
                   candidates[FF_ARRAY_ELEMS(candidates) - 1] : "(no build-tree path configured)");
            return AVERROR(ENOENT);
        }
    }
    if (!s->model_path)
        return AVERROR(ENOMEM);

    if (s->sigma < 0 && s->sigma != SIGMA_AUTO) {
        av_log(ctx, AV_LOG_ERROR, "sigma %g: use 0..100, or auto (-1) to estimate it\n", s->sigma);
        return AVERROR(EINVAL);
    }

    s->format = AV_PIX_FMT_NONE;
    s->warned_sigma = -1;
    s->queue = av_fifo_alloc2(8, sizeof(QueuedFrame), AV_FIFO_FLAG_AUTO_GROW);
    if (!s->queue)
        return AVERROR(ENOMEM);
    return 0;
}

/* Take the per-format fields from fmt (a software format: at configuration, or on a format
 * change mid-stream), including the engine's DenoisePixelFormat from the descriptor. */
static int set_format(AVFilterContext *ctx, enum AVPixelFormat fmt)
{
    DenoiseContext *s = ctx->priv;
    const AVPixFmtDescriptor *desc = av_pix_fmt_desc_get(fmt);
    DenoisePixelFormat *pf = &s->pixfmt;
    int listed = 0;

    for (int i = 0; pix_fmts[i] != AV_PIX_FMT_NONE; i++)
        listed |= pix_fmts[i] == fmt && fmt != AV_PIX_FMT_CUDA;
    if (!desc || !listed) {
        av_log(ctx, AV_LOG_ERROR, "frame in pixel format %s, which the filter does not take "
               "(a format change mid-stream must stay within the listed formats)\n",
               desc ? desc->name : "none");
        return AVERROR(EINVAL);
    }
    s->format    = fmt;
    s->desc      = desc;
    s->is_rgb    = !!(desc->flags & AV_PIX_FMT_FLAG_RGB);
    s->is_float  = !!(desc->flags & AV_PIX_FMT_FLAG_FLOAT);
    s->is_full_range_fmt = fmt == AV_PIX_FMT_YUVJ411P ||
                           fmt == AV_PIX_FMT_YUVJ420P ||
                           fmt == AV_PIX_FMT_YUVJ422P ||
                           fmt == AV_PIX_FMT_YUVJ440P ||
                           fmt == AV_PIX_FMT_YUVJ444P;
    if (s->is_float && desc->comp[0].depth != 32) {
        av_log(ctx, AV_LOG_ERROR, "unsupported float format %s\n", desc->name);
        return AVERROR(ENOSYS);
    }

    memset(pf, 0, sizeof(*pf));
    pf->nb_components = desc->nb_components - !!(desc->flags & AV_PIX_FMT_FLAG_ALPHA);
    for (int c = 0; c < pf->nb_components; c++) {
        /* the descriptor lists Y', Cb, Cr or R', G', B' whatever the memory order */
        pf->comp[c] = (DenoiseComponent) {
            .plane  = desc->comp[c].plane,
            .offset = desc->comp[c].offset,
            .step   = desc->comp[c].step,
            .shift  = desc->comp[c].shift,
            .depth  = desc->comp[c].depth,
        };
    }
    if (pf->nb_components == 3 && !s->is_rgb) {
        pf->log2_chroma_w = desc->log2_chroma_w;
        pf->log2_chroma_h = desc->log2_chroma_h;
    }
    pf->is_float = s->is_float;
    pf->bytes    = s->is_float ? 4 : desc->comp[0].depth > 8 ? 2 : 1;
    return 0;
}

static int config_input(AVFilterLink *inlink)
{
    AVFilterContext *ctx = inlink->dst;
    DenoiseContext *s = ctx->priv;
    enum AVPixelFormat fmt = inlink->format;
    int ret;

    s->hw = inlink->format == AV_PIX_FMT_CUDA;
    if (s->hw) {
#if CONFIG_CUDA
        FilterLink *l = ff_filter_link(inlink);
        AVHWFramesContext *frames;
        const AVPixFmtDescriptor *sw;

        if (!l->hw_frames_ctx) {
            av_log(ctx, AV_LOG_ERROR, "CUDA input without a hardware frames context\n");
            return AVERROR(EINVAL);
        }
        frames = (AVHWFramesContext *)l->hw_frames_ctx->data;
        sw = av_pix_fmt_desc_get(frames->sw_format);
#ifndef DENOISE_HAVE_CUDA
        av_log(ctx, AV_LOG_ERROR, "CUDA frames (cuda/%s) need the engine's CUDA backend, and "
               "this build's libdenoise has none (./configure --enable-cuda-engine); download "
               "them first: hwdownload,format=%s,denoise\n",
               sw ? sw->name : "?", sw ? sw->name : "nv12");
        return AVERROR(ENOSYS);
#endif
        if (!sw || (sw->flags & AV_PIX_FMT_FLAG_ALPHA)) {
            av_log(ctx, AV_LOG_ERROR, "CUDA frames in sw_format %s: formats with alpha are not "
                   "taken on the GPU (the output pool's alpha would not be written)\n",
                   sw ? sw->name : "none");
            return AVERROR(ENOSYS);
        }
        av_buffer_unref(&s->hw_frames_ref);
        s->hw_frames_ref = av_buffer_ref(l->hw_frames_ctx);
        if (!s->hw_frames_ref)
            return AVERROR(ENOMEM);
        s->cuda = ((AVHWDeviceContext *)frames->device_ref->data)->hwctx;
        fmt = frames->sw_format;
        if (s->scene > 0)
            av_log(ctx, AV_LOG_VERBOSE, "CUDA frames: the built-in scene detector is off "
                   "(scdet's lavfi.scd.time metadata still ends a segment)\n");
#else
        return AVERROR(ENOSYS);
#endif
    }
    if ((ret = set_format(ctx, fmt)) < 0)
        return ret;
    /* the weights load here (not in init) */
    return engine_open(ctx, inlink->w, inlink->h);
}

/* CUDA frames out: a frames pool on the input's device, same sw_format and size. */
static int config_output(AVFilterLink *outlink)
{
#if CONFIG_CUDA
    AVFilterContext *ctx = outlink->src;
    DenoiseContext *s = ctx->priv;
    FilterLink *ol = ff_filter_link(outlink);
    AVHWFramesContext *in_frames, *out_frames;
    AVBufferRef *ref;
    int ret;

    if (!s->hw)
        return 0;
    in_frames = (AVHWFramesContext *)s->hw_frames_ref->data;
    ref = av_hwframe_ctx_alloc(in_frames->device_ref);
    if (!ref)
        return AVERROR(ENOMEM);
    out_frames = (AVHWFramesContext *)ref->data;
    out_frames->format    = AV_PIX_FMT_CUDA;
    out_frames->sw_format = in_frames->sw_format;
    out_frames->width     = ctx->inputs[0]->w;
    out_frames->height    = ctx->inputs[0]->h;
    ret = av_hwframe_ctx_init(ref);
    if (ret < 0) {
        av_log(ctx, AV_LOG_ERROR, "cannot create the output's CUDA frames pool (%s %dx%d): %s\n",
               av_get_pix_fmt_name(out_frames->sw_format), out_frames->width, out_frames->height,
               av_err2str(ret));
        av_buffer_unref(&ref);
        return ret;
    }
    av_buffer_unref(&ol->hw_frames_ctx);
    ol->hw_frames_ctx = ref;
#endif
    return 0;
}

static av_cold void uninit(AVFilterContext *ctx)
{
    DenoiseContext *s = ctx->priv;
    QueuedFrame q;

    if (s->nb_scene_cuts)
        av_log(ctx, AV_LOG_VERBOSE, "%d scene cut(s) detected\n", s->nb_scene_cuts);
    if (s->queue) {
        /* Frames still queued here were never sent. Four ways to get here: an error stopped the
         * filtering (already logged); the consumer closed the output (EOF back from a trim
         * after us, as the ffmpeg CLI's -t inserts); the consumer stopped asking without saying
         * so (the ffmpeg CLI's -frames:v limit: it takes its last frame and frees the graph);
         * or the graph was freed while the output still waited for a frame: the ffmpeg CLI
         * does that when it rebuilds the graph for a mid-stream change of the input's frame
         * size, pixel format or colour properties: it drains what the graph has ready, then
         * frees it without a flush (fftools/ffmpeg_filter.c send_frame(), "Reconfiguring
         * filter graph"). Only the error and the rebuild lose frames someone wanted. */
        size_t lost = av_fifo_can_read(s->queue);
        if (lost && s->failed)
            av_log(ctx, AV_LOG_WARNING, "%zu queued frame(s) discarded: filtering stopped at an "
                   "error (%s)\n", lost, av_err2str(s->failed));
        else if (lost && (s->out_closed || !s->out_wanted))
            av_log(ctx, AV_LOG_VERBOSE, "%zu queued frame(s) not sent: the consumer %s before the "
                   "end of the input (e.g. a -t or -frames limit); they were never asked for\n",
                   lost, s->out_closed ? "closed the output" : "stopped asking for frames");
        else if (lost)
            av_log(ctx, AV_LOG_WARNING, "%zu queued frame(s) discarded: the filter graph was freed "
                   "while its output still waited for frames, before the input ended and "
                   "without a flush. The ffmpeg CLI does that when it rebuilds the graph for a "
                   "mid-stream change of frame size, pixel format or colour properties "
                   "(\"Reconfiguring filter graph\" above); -reinit_filter 0 keeps one graph, "
                   "and denoise handles such changes itself (its output then changes size or "
                   "format too: end the chain with scale=W:H,format=F for an encoder)\n", lost);
        while (av_fifo_read(s->queue, &q, 1) >= 0)
            av_frame_free(&q.frame);
        av_fifo_freep2(&s->queue);
    }
    engine_free(ctx);           /* with the CUDA context: before the frames context goes */
    av_buffer_unref(&s->hw_frames_ref);
    free_buffers(s);
    av_freep(&s->model_path);
}

static const AVFilterPad denoise_inputs[] = {
    {
        .name         = "default",
        .type         = AVMEDIA_TYPE_VIDEO,
        .config_props = config_input,
    },
};

static const AVFilterPad denoise_outputs[] = {
    {
        .name         = "default",
        .type         = AVMEDIA_TYPE_VIDEO,
        .config_props = config_output,
    },
};

const AVFilter ff_vf_denoise = {
    .name            = "denoise",
    .description     = NULL_IF_CONFIG_SMALL("Neural video denoiser (temporal Swin U-Net, CUDA or CPU)."),
    .priv_size       = sizeof(DenoiseContext),
    .priv_class      = &denoise_class,
    .init            = init,
    .uninit          = uninit,
    .activate        = activate,
    FILTER_INPUTS(denoise_inputs),
    FILTER_OUTPUTS(denoise_outputs),
    FILTER_PIXFMTS_ARRAY(pix_fmts),
    .process_command = process_command,
    .flags           = AVFILTER_FLAG_SUPPORT_TIMELINE_INTERNAL | AVFILTER_FLAG_SLICE_THREADS,
    .flags_internal  = FF_FILTER_FLAG_HWFRAME_AWARE,
};
