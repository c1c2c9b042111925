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
 * Per frame:
 *   1. the frame's samples are converted to non-linear R'G'B' in [0,1] at full resolution
 *      (Y'CbCr -> R'G'B' with libplacebo's pl_color_repr_decode() for the frame's colour
 *      system, range and bit depth; subsampled chroma upsampled bilinearly at the frame's
 *      chroma location) and pushed into the engine;
 *   2. the engine returns, three frames later (it needs t-3..t+3, mirrored at the stream
 *      ends), the change the network makes to that frame, in the same R'G'B' units;
 *   3. the change is converted back to the frame's own representation (the inverse of the
 *      decoding matrix without its offsets, since a change is a difference), chroma changes are
 *      brought to chroma resolution by the adjoint of the upsampling, and added to the frame's
 *      ORIGINAL samples with the change (not the value) quantised with blue-noise dither:
 *      out = orig + floor(delta * (2^depth - 1) + noise), noise in [0,1).  A zero change thus
 *      leaves a sample bit-exact; alpha planes and padding bytes are never written.
 *
 * Exactly one output frame is produced per input frame, with its pts, duration, side data
 * and metadata (the output IS the input frame, made writable).
 */

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <libplacebo/colorspace.h>
#include <libplacebo/dither.h>

#include "libavutil/common.h"
#include "libavutil/dict.h"
#include "libavutil/fifo.h"
#include "libavutil/intfloat.h"
#include "libavutil/intreadwrite.h"
#include "libavutil/mem.h"
#include "libavutil/opt.h"
#include "libavutil/pixdesc.h"

#include "avfilter.h"
#include "filters.h"
#include "formats.h"
#include "video.h"

#include "denoise.h"

/* The build (filter/inject.sh) puts the generated denoise_config.h next to this file; it
 * defines DENOISE_DATADIR (install prefix's share/denoise) and DENOISE_BUILD_WEIGHTS (the
 * weight file in the source tree, so an uninstalled build finds its weights). */
#if defined(__has_include)
#  if __has_include("denoise_config.h")
#    include "denoise_config.h"
#  endif
#endif
#ifndef DENOISE_DATADIR
#define DENOISE_DATADIR "/usr/local/share/denoise"
#endif

#define DENOISE_WEIGHTS_NAME "denoise-v1.safetensors"

/* Blue-noise dither tile: pl_generate_blue_noise() size (a power of two <= 256). */
#define NOISE_LOG2 6
#define NOISE_SIZE (1 << NOISE_LOG2)
#define NOISE_MASK (NOISE_SIZE - 1)

/* Built-in scene-cut detector: luma block means over SCD_BLOCK x SCD_BLOCK pixels; frames with
 * fewer than SCD_MIN_PIXELS pixels are too small to judge (a few noisy samples look like a
 * cut) and never trigger it. Default threshold: see docs/robustness.md for the measurement. */
#define SCD_BLOCK 8
#define SCD_MIN_PIXELS 256
#define SCENE_DEFAULT 10.0

typedef struct QueuedFrame {
    AVFrame *frame;
    int disabled;       /* timeline: pass this frame through unchanged */
} QueuedFrame;

/* Bilinear taps from full resolution to one chroma axis: luma coordinate i reads chroma
 * samples i0[i] (weight 1 - w[i]) and i1[i] (weight w[i]). */
typedef struct Taps {
    int   *i0, *i1;
    float *w;
    float *wsum;        /* per chroma sample: total weight it receives (for the adjoint) */
} Taps;

/* How one frame's samples map to the network's R'G'B'. */
typedef struct FrameRepr {
    struct pl_transform3x3 dec; /* normalised code values (code / (2^depth - 1)) -> R'G'B' */
    struct pl_matrix3x3    enc; /* R'G'B' change -> normalised code value change (dec.mat^-1) */
    int xpos, ypos;             /* chroma (0,0) in 1/256 luma pixels (av_chroma_location_enum_to_pos) */
} FrameRepr;

typedef struct DenoiseContext {
    const AVClass *class;

    /* options */
    float sigma;
    char *model;
    int   backend;
    int   device;
    int   threads;

    char *model_path;           /* resolved weight file */

    /* format */
    const AVPixFmtDescriptor *desc;
    int nb_color;               /* colour components (alpha excluded): 1 (gray) or 3 */
    int is_rgb, is_float, is_full_range_fmt;
    int depth;                  /* bits per colour component (integer formats) */
    int bytes;                  /* bytes per sample: 1, 2 or 4 (float) */

    /* engine, opened for width x height */
    DenoiseEngine *engine;
    int width, height;
    float engine_sigma;
    ptrdiff_t stride;           /* floats between rows of in[] / delta[] */
    float *in[3];               /* frame pushed into the engine, R G B */
    float *delta[3];            /* change pulled from the engine, R G B */

    /* chroma scratch (subsampled formats) */
    int cw, ch;                 /* chroma plane size */
    float *cplane;              /* one chroma plane as normalised floats, cw x ch */
    float *hrow;                /* 3 x cw: horizontal adjoint pass of one row */
    float *cacc;                /* 3 x cw x ch: accumulated chroma change R G B */
    Taps tx, ty;

    float *noise;               /* NOISE_SIZE^2 blue noise in [0,1) */
    AVFifo *queue;              /* QueuedFrame: frames pushed, change not yet pulled */
    int warned_csp;

    enum AVPixelFormat format;  /* format the per-format fields above describe */

    /* built-in scene-cut detector (option scene): block means of the luma of the network
     * input, compared with the previous frame's (see scene_cut()) */
    float scene;                /* threshold in percent of full scale; 0 = off */
    int   scd_bw, scd_bh;       /* blocks per row / column */
    float *scd_cur, *scd_prev;  /* block means (luma in [0,1]) */
    int   *scd_count;           /* pixels per block */
    int   scd_have_prev;
    double scd_prev_mafd;
    int   nb_scene_cuts;

    /* float input: non-finite samples replaced before the network */
    int warned_nonfinite;
} DenoiseContext;

#define OFFSET(x) offsetof(DenoiseContext, x)
#define FLAGS  (AV_OPT_FLAG_FILTERING_PARAM | AV_OPT_FLAG_VIDEO_PARAM)
#define TFLAGS (FLAGS | AV_OPT_FLAG_RUNTIME_PARAM)

static const AVOption denoise_options[] = {
    { "sigma",   "noise standard deviation in 8-bit code values (0..255 scale, whatever the bit depth)",
        OFFSET(sigma),   AV_OPT_TYPE_FLOAT,  { .dbl = 15 }, 0, 100, TFLAGS },
    { "model",   "weight file (safetensors); default: the shipped " DENOISE_WEIGHTS_NAME,
        OFFSET(model),   AV_OPT_TYPE_STRING, { .str = NULL }, 0, 0, FLAGS },
    { "backend", "engine backend",
        OFFSET(backend), AV_OPT_TYPE_INT,    { .i64 = DENOISE_BACKEND_AUTO }, 0, 2, FLAGS, .unit = "backend" },
        { "auto", "CUDA where a usable NVIDIA GPU is found, else the CPU", 0, AV_OPT_TYPE_CONST, { .i64 = DENOISE_BACKEND_AUTO }, 0, 0, FLAGS, .unit = "backend" },
        { "cuda", "NVIDIA GPU (fail if none is usable)",                  0, AV_OPT_TYPE_CONST, { .i64 = DENOISE_BACKEND_CUDA }, 0, 0, FLAGS, .unit = "backend" },
        { "cpu",  "CPU reference engine (fp32, slow)",                    0, AV_OPT_TYPE_CONST, { .i64 = DENOISE_BACKEND_CPU  }, 0, 0, FLAGS, .unit = "backend" },
    { "device",  "CUDA device index",
        OFFSET(device),  AV_OPT_TYPE_INT,    { .i64 = 0 }, 0, 16, FLAGS },
    { "threads", "CPU engine worker threads (0 = all cores)",
        OFFSET(threads), AV_OPT_TYPE_INT,    { .i64 = 0 }, 0, 1024, FLAGS },
    { "scene",   "built-in scene-cut threshold (score in percent, as scdet's; 0 = off): a cut ends "
                 "the temporal window (frames are never fused across it)",
        OFFSET(scene),   AV_OPT_TYPE_FLOAT,  { .dbl = SCENE_DEFAULT }, 0, 100, TFLAGS },
    { NULL }
};

AVFILTER_DEFINE_CLASS(denoise);

/* Every format below goes through the generic AVComponentDescriptor path (plane, step,
 * offset, shift, depth): planar, semi-planar and packed layouts, 8..16-bit little-endian
 * integers and 32-bit float.  Big-endian, bit-packed (x2rgb10, v210...) and Bayer formats are
 * not listed. */
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
    AV_PIX_FMT_NONE
};

/* ------------------------------------------------------------------------------------------ */
/* engine helpers                                                                              */

/* Map an engine error to an AVERROR and log the engine's own message (names the weight file
 * and tensor for a bad model). */
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

static void free_buffers(DenoiseContext *s)
{
    for (int i = 0; i < 3; i++) {
        av_freep(&s->in[i]);
        av_freep(&s->delta[i]);
    }
    av_freep(&s->cplane);
    av_freep(&s->hrow);
    av_freep(&s->cacc);
    av_freep(&s->scd_cur);
    av_freep(&s->scd_prev);
    av_freep(&s->scd_count);
    s->scd_have_prev = 0;
    av_freep(&s->tx.i0); av_freep(&s->tx.i1); av_freep(&s->tx.w); av_freep(&s->tx.wsum);
    av_freep(&s->ty.i0); av_freep(&s->ty.i1); av_freep(&s->ty.w); av_freep(&s->ty.wsum);
}

static int alloc_taps(Taps *t, int full, int sub)
{
    t->i0   = av_malloc_array(full, sizeof(*t->i0));
    t->i1   = av_malloc_array(full, sizeof(*t->i1));
    t->w    = av_malloc_array(full, sizeof(*t->w));
    t->wsum = av_malloc_array(sub,  sizeof(*t->wsum));
    return t->i0 && t->i1 && t->w && t->wsum ? 0 : AVERROR(ENOMEM);
}

/* (Re)open the engine for frames of w x h: loads the weights (the heavy part, so it runs
 * from config_props or on a size change, never in init) and sizes the buffers. */
static int engine_open(AVFilterContext *ctx, int w, int h)
{
    DenoiseContext *s = ctx->priv;
    const AVPixFmtDescriptor *desc = s->desc;
    DenoiseParams p = {
        .model_path = s->model_path,
        .backend    = s->backend,
        .device     = s->device,
        .sigma      = s->sigma,
        .width      = w,
        .height     = h,
        .threads    = s->threads,
    };
    DenoiseBackend got;
    int ret;

    denoise_free(&s->engine);
    free_buffers(s);
    s->width = s->height = 0;

    s->engine = denoise_alloc();
    if (!s->engine)
        return AVERROR(ENOMEM);

    av_log(ctx, AV_LOG_VERBOSE, "loading '%s' for %dx%d, backend %s\n",
           s->model_path, w, h, backend_name(s->backend));
    ret = denoise_open(s->engine, &p);
    if (ret < 0) {
        char what[1100];
        snprintf(what, sizeof(what), "Opening the engine with model '%s' (backend %s)",
                 s->model_path, backend_name(s->backend));
        return engine_error(ctx, ret, what);
    }

    got = denoise_backend(s->engine);
    if (s->backend == DENOISE_BACKEND_AUTO && got == DENOISE_BACKEND_CPU)
        av_log(ctx, AV_LOG_INFO, "no usable NVIDIA GPU found: running the CPU engine (slow)\n");
    else
        av_log(ctx, AV_LOG_VERBOSE, "running the %s engine\n", backend_name(got));
    s->engine_sigma = s->sigma;

    s->stride = FFALIGN(w, 16);
    for (int i = 0; i < 3; i++) {
        s->in[i]    = av_malloc_array(s->stride * h, sizeof(float));
        s->delta[i] = av_malloc_array(s->stride * h, sizeof(float));
        if (!s->in[i] || !s->delta[i])
            return AVERROR(ENOMEM);
    }

    if (s->nb_color == 3 && !s->is_rgb && (desc->log2_chroma_w || desc->log2_chroma_h)) {
        s->cw = AV_CEIL_RSHIFT(w, desc->log2_chroma_w);
        s->ch = AV_CEIL_RSHIFT(h, desc->log2_chroma_h);
        s->cplane = av_malloc_array((size_t)s->cw * s->ch, sizeof(float));
        s->hrow   = av_malloc_array((size_t)3 * s->cw, sizeof(float));
        s->cacc   = av_malloc_array((size_t)3 * s->cw * s->ch, sizeof(float));
        if (!s->cplane || !s->hrow || !s->cacc)
            return AVERROR(ENOMEM);
        if ((ret = alloc_taps(&s->tx, w, s->cw)) < 0 ||
            (ret = alloc_taps(&s->ty, h, s->ch)) < 0)
            return ret;
    }

    s->scd_bw = (w + SCD_BLOCK - 1) / SCD_BLOCK;
    s->scd_bh = (h + SCD_BLOCK - 1) / SCD_BLOCK;
    s->scd_cur   = av_calloc((size_t)s->scd_bw * s->scd_bh, sizeof(*s->scd_cur));
    s->scd_prev  = av_calloc((size_t)s->scd_bw * s->scd_bh, sizeof(*s->scd_prev));
    s->scd_count = av_calloc((size_t)s->scd_bw * s->scd_bh, sizeof(*s->scd_count));
    if (!s->scd_cur || !s->scd_prev || !s->scd_count)
        return AVERROR(ENOMEM);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            s->scd_count[(y / SCD_BLOCK) * s->scd_bw + x / SCD_BLOCK]++;
    s->scd_have_prev = 0;
    s->scd_prev_mafd = 0;

    s->width  = w;
    s->height = h;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* colour representation                                                                       */

static enum pl_color_system pl_system(AVFilterContext *ctx, const AVFrame *f)
{
    DenoiseContext *s = ctx->priv;

    switch (f->colorspace) {
    case AVCOL_SPC_BT709:      return PL_COLOR_SYSTEM_BT_709;
    case AVCOL_SPC_BT470BG:
    case AVCOL_SPC_SMPTE170M:
    case AVCOL_SPC_FCC:        return PL_COLOR_SYSTEM_BT_601;
    case AVCOL_SPC_SMPTE240M:  return PL_COLOR_SYSTEM_SMPTE_240M;
    case AVCOL_SPC_BT2020_NCL: return PL_COLOR_SYSTEM_BT_2020_NC;
    case AVCOL_SPC_YCGCO:      return PL_COLOR_SYSTEM_YCGCO;
    case AVCOL_SPC_BT2020_CL:
        /* constant luminance is not a matrix (pl_color_system_is_linear() is false): the
         * network only needs an approximately right R'G'B', and the change goes back through
         * the exact inverse of the same matrix, so NCL is a safe stand-in. */
        if (!s->warned_csp++)
            av_log(ctx, AV_LOG_WARNING, "BT.2020 constant luminance treated as BT.2020 NCL\n");
        return PL_COLOR_SYSTEM_BT_2020_NC;
    case AVCOL_SPC_UNSPECIFIED:
    case AVCOL_SPC_RESERVED:
        break;
    default:
        if (!s->warned_csp++)
            av_log(ctx, AV_LOG_WARNING, "colour space %s not supported as a matrix, "
                   "guessing from the frame height\n", av_color_space_name(f->colorspace));
        break;
    }
    /* Unspecified: BT.601 for SD, BT.709 from 720 lines up (what players and swscale users
     * expect; libplacebo's pl_color_system_guess_ycbcr() makes the same split). */
    return f->height < 720 ? PL_COLOR_SYSTEM_BT_601 : PL_COLOR_SYSTEM_BT_709;
}

static void frame_repr(AVFilterContext *ctx, const AVFrame *f, FrameRepr *r)
{
    DenoiseContext *s = ctx->priv;
    enum AVChromaLocation loc = f->chroma_location;
    struct pl_color_repr repr;

    r->xpos = r->ypos = 0;
    if (s->is_rgb || s->is_float) {
        /* R'G'B' is the network's own domain; float gray is taken as R' = G' = B' = Y. */
        r->dec = pl_transform3x3_identity;
        r->enc = pl_matrix3x3_identity;
        return;
    }

    repr = (struct pl_color_repr) {
        .sys    = pl_system(ctx, f),
        .levels = f->color_range == AVCOL_RANGE_JPEG ? PL_COLOR_LEVELS_FULL    :
                  f->color_range == AVCOL_RANGE_MPEG ? PL_COLOR_LEVELS_LIMITED :
                  s->is_full_range_fmt               ? PL_COLOR_LEVELS_FULL    :
                                                       PL_COLOR_LEVELS_LIMITED,
        .alpha  = PL_ALPHA_UNKNOWN,
        /* input vectors are code / (2^depth - 1); libplacebo scales the limited-range
         * offsets (16 << (depth - 8) ...) from the bit encoding */
        .bits   = { .sample_depth = s->depth, .color_depth = s->depth },
    };
    r->dec = pl_color_repr_decode(&repr, NULL);
    /* A change is a difference of two colours: only the linear part of the transform
     * applies, so the way back is the inverse matrix without the offsets. */
    r->enc = r->dec.mat;
    pl_matrix3x3_invert(&r->enc);

    if (loc == AVCHROMA_LOC_UNSPECIFIED)
        /* H.26x and MPEG-2 default to "left" (co-sited horizontally); JPEG to "center" */
        loc = s->is_full_range_fmt ? AVCHROMA_LOC_CENTER : AVCHROMA_LOC_LEFT;
    if (av_chroma_location_enum_to_pos(&r->xpos, &r->ypos, loc) < 0)
        av_chroma_location_enum_to_pos(&r->xpos, &r->ypos, AVCHROMA_LOC_LEFT);
}

/* Bilinear taps for one axis: chroma sample k sits at luma coordinate k * sub + off with
 * off = pos / 256 * (sub - 1) (pos in av_chroma_location_enum_to_pos() units: 0 co-sited,
 * 128 centred for 2x subsampling). */
static void make_taps(Taps *t, int full, int n, int log2_sub, int pos)
{
    const int   sub = 1 << log2_sub;
    const float off = pos / 256.0f * (sub - 1);

    for (int k = 0; k < n; k++)
        t->wsum[k] = 0.0f;
    for (int i = 0; i < full; i++) {
        float c  = (i - off) / sub;
        int   c0 = (int)floorf(c);
        float w  = c - c0;
        t->i0[i] = av_clip(c0,     0, n - 1);
        t->i1[i] = av_clip(c0 + 1, 0, n - 1);
        t->w[i]  = w;
        t->wsum[t->i0[i]] += 1.0f - w;
        t->wsum[t->i1[i]] += w;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* sample access (generic over AVComponentDescriptor)                                          */

static inline const uint8_t *comp_row(const AVFrame *f, const AVComponentDescriptor *c, int y)
{
    return f->data[c->plane] + (ptrdiff_t)y * f->linesize[c->plane] + c->offset;
}

/* Component c of a w x h plane to floats, scaled by `scale` (1 / (2^depth - 1) for integers). */
static void load_comp(const DenoiseContext *s, const AVFrame *f, const AVComponentDescriptor *c,
                      int w, int h, float *dst, ptrdiff_t dst_stride)
{
    const int step = c->step, shift = c->shift;
    const unsigned mask = (1u << c->depth) - 1;
    const float scale = s->is_float ? 1.0f : 1.0f / mask;

    for (int y = 0; y < h; y++) {
        const uint8_t *src = comp_row(f, c, y);
        float *d = dst + y * dst_stride;
        if (s->bytes == 1) {
            for (int x = 0; x < w; x++)
                d[x] = ((src[x * step] >> shift) & mask) * scale;
        } else if (s->bytes == 2) {
            for (int x = 0; x < w; x++)
                d[x] = ((AV_RL16(src + x * step) >> shift) & mask) * scale;
        } else {
            for (int x = 0; x < w; x++)
                d[x] = av_int2float(AV_RL32(src + x * step));
        }
    }
}

/* Add a change (in normalised units) to component c of a w x h plane.  Integers:
 * out = clip(orig + floor(delta * (2^depth - 1) + noise)), noise in [0,1) from the blue-noise
 * tile, so the change is dithered and a zero change keeps the sample bit-exact; clipped to the
 * container's code range [0, 2^depth - 1] (not to the nominal 16..235: a noisy sample already
 * outside it must not move when its change is zero).  Float: orig + delta, unclipped. */
static void apply_comp(const DenoiseContext *s, AVFrame *f, const AVComponentDescriptor *c,
                       int w, int h, const float *delta, ptrdiff_t dstride, int comp_index)
{
    const int step = c->step, shift = c->shift;
    const unsigned mask = (1u << c->depth) - 1;
    const float scale = (float)mask;
    /* decorrelate the dither of the components by shifting the tile */
    const int ox = comp_index * 23, oy = comp_index * 41;

    for (int y = 0; y < h; y++) {
        uint8_t *dst = (uint8_t *)comp_row(f, c, y);
        const float *d = delta + y * dstride;
        const float *noise = s->noise + ((y + oy) & NOISE_MASK) * NOISE_SIZE;

        if (s->bytes == 4) {
            for (int x = 0; x < w; x++) {
                uint8_t *p = dst + x * step;
                const float o = av_int2float(AV_RL32(p));
                /* a non-finite sample (NaN, +-Inf) stays as it was, bit-exact; a non-finite
                 * change (never expected) is not applied */
                if (isfinite(o) && isfinite(d[x]))
                    AV_WL32(p, av_float2int(o + d[x]));
            }
        } else if (s->bytes == 2) {
            for (int x = 0; x < w; x++) {
                uint8_t *p = dst + x * step;
                unsigned raw = AV_RL16(p);
                int v = (int)((raw >> shift) & mask) +
                        (int)floorf(d[x] * scale + noise[(x + ox) & NOISE_MASK]);
                v = av_clip(v, 0, (int)mask);
                AV_WL16(p, (raw & ~(mask << shift)) | ((unsigned)v << shift));
            }
        } else {
            for (int x = 0; x < w; x++) {
                uint8_t *p = dst + x * step;
                unsigned raw = *p;
                int v = (int)((raw >> shift) & mask) +
                        (int)floorf(d[x] * scale + noise[(x + ox) & NOISE_MASK]);
                v = av_clip(v, 0, (int)mask);
                *p = (raw & ~(mask << shift)) | ((unsigned)v << shift);
            }
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* frame <-> engine                                                                            */

/* Frame -> R'G'B' planes s->in[] at full resolution. */
static void convert_in(AVFilterContext *ctx, const AVFrame *f, const FrameRepr *r)
{
    DenoiseContext *s = ctx->priv;
    const AVPixFmtDescriptor *desc = s->desc;
    const int w = s->width, h = s->height;
    const ptrdiff_t st = s->stride;

    if (s->nb_color == 1) {
        /* gray: Y' with neutral chroma; R' = G' = B' after decoding */
        load_comp(s, f, &desc->comp[0], w, h, s->in[0], st);
        if (!s->is_float) {
            const float neutral = (float)(1 << (s->depth - 1)) / ((1 << s->depth) - 1);
            const struct pl_transform3x3 *t = &r->dec;
            for (int y = 0; y < h; y++) {
                float *p = s->in[0] + y * st;
                for (int x = 0; x < w; x++) {
                    /* rows of a Y'CbCr decoding matrix give the same R', G', B' for neutral
                     * chroma; use row 0 (R') */
                    p[x] = t->mat.m[0][0] * p[x] + (t->mat.m[0][1] + t->mat.m[0][2]) * neutral + t->c[0];
                }
            }
        }
        for (int y = 0; y < h; y++) {
            memcpy(s->in[1] + y * st, s->in[0] + y * st, w * sizeof(float));
            memcpy(s->in[2] + y * st, s->in[0] + y * st, w * sizeof(float));
        }
        return;
    }

    if (s->is_rgb) {
        /* the descriptor lists R, G, B whatever the memory order (gbrp: planes 2, 0, 1) */
        for (int c = 0; c < 3; c++)
            load_comp(s, f, &desc->comp[c], w, h, s->in[c], st);
        return;
    }

    /* Y'CbCr: Y' at full resolution, chroma upsampled bilinearly */
    load_comp(s, f, &desc->comp[0], w, h, s->in[0], st);
    if (s->cplane) {
        make_taps(&s->tx, w, s->cw, desc->log2_chroma_w, r->xpos);
        make_taps(&s->ty, h, s->ch, desc->log2_chroma_h, r->ypos);
        for (int c = 1; c < 3; c++) {
            load_comp(s, f, &desc->comp[c], s->cw, s->ch, s->cplane, s->cw);
            for (int y = 0; y < h; y++) {
                const float *r0 = s->cplane + s->ty.i0[y] * s->cw;
                const float *r1 = s->cplane + s->ty.i1[y] * s->cw;
                const float wy = s->ty.w[y];
                float *d = s->in[c] + y * st;
                for (int x = 0; x < w; x++) {
                    const int i0 = s->tx.i0[x], i1 = s->tx.i1[x];
                    const float wx = s->tx.w[x];
                    const float a = r0[i0] + wx * (r0[i1] - r0[i0]);
                    const float b = r1[i0] + wx * (r1[i1] - r1[i0]);
                    d[x] = a + wy * (b - a);
                }
            }
        }
    } else {
        for (int c = 1; c < 3; c++)
            load_comp(s, f, &desc->comp[c], w, h, s->in[c], st);
    }

    for (int y = 0; y < h; y++) {
        float *p0 = s->in[0] + y * st, *p1 = s->in[1] + y * st, *p2 = s->in[2] + y * st;
        for (int x = 0; x < w; x++) {
            float v[3] = { p0[x], p1[x], p2[x] };
            pl_transform3x3_apply(&r->dec, v);
            p0[x] = v[0]; p1[x] = v[1]; p2[x] = v[2];
        }
    }
}

/* Add the change in s->delta[] (R'G'B') to the frame's own samples. */
static void apply_delta(AVFilterContext *ctx, AVFrame *f, const FrameRepr *r)
{
    DenoiseContext *s = ctx->priv;
    const AVPixFmtDescriptor *desc = s->desc;
    const int w = s->width, h = s->height;
    const ptrdiff_t st = s->stride;
    float *const *d = s->delta;

    if (s->is_rgb) {
        for (int c = 0; c < 3; c++)
            apply_comp(s, f, &desc->comp[c], w, h, d[c], st, c);
        return;
    }

    if (s->nb_color == 1 && s->is_float) {
        /* float gray: Y = R' = G' = B' going in, so take the change's BT.709 luma */
        for (int y = 0; y < h; y++) {
            float *p = d[0] + y * st;
            const float *g = d[1] + y * st, *b = d[2] + y * st;
            for (int x = 0; x < w; x++)
                p[x] = 0.2126f * p[x] + 0.7152f * g[x] + 0.0722f * b[x];
        }
        apply_comp(s, f, &desc->comp[0], w, h, d[0], st, 0);
        return;
    }

    /* Chroma first (it needs the R'G'B' change before row 0 overwrites d[0]). */
    if (s->nb_color == 3 && s->cplane) {
        /* Bring the change to chroma resolution with the adjoint (transpose) of the bilinear
         * upsampling used going in, normalised by the weight each chroma sample receives:
         * a weighted average over the luma pixels each chroma sample influenced, centred on
         * the sample's own location (per axis with 2x subsampling: [1 3 3 1]/8 for centred
         * chroma, [1 2 1]/4 for co-sited).  Averaging R'G'B' first and converting after
         * is the same thing since the conversion is linear. */
        const int cw = s->cw, ch = s->ch;
        const size_t cplane = (size_t)cw * ch;

        make_taps(&s->tx, w, cw, desc->log2_chroma_w, r->xpos);
        make_taps(&s->ty, h, ch, desc->log2_chroma_h, r->ypos);
        memset(s->cacc, 0, 3 * cplane * sizeof(float));
        for (int y = 0; y < h; y++) {
            const int j0 = s->ty.i0[y], j1 = s->ty.i1[y];
            const float wy = s->ty.w[y];
            memset(s->hrow, 0, 3 * cw * sizeof(float));
            for (int k = 0; k < 3; k++) {
                const float *src = d[k] + y * st;
                float *hr = s->hrow + k * cw;
                for (int x = 0; x < w; x++) {
                    const float wx = s->tx.w[x];
                    hr[s->tx.i0[x]] += (1.0f - wx) * src[x];
                    hr[s->tx.i1[x]] += wx * src[x];
                }
                for (int i = 0; i < cw; i++) {
                    s->cacc[k * cplane + j0 * cw + i] += (1.0f - wy) * hr[i];
                    s->cacc[k * cplane + j1 * cw + i] += wy * hr[i];
                }
            }
        }
        for (int j = 0; j < ch; j++) {
            for (int i = 0; i < cw; i++) {
                const float wt = s->tx.wsum[i] * s->ty.wsum[j];
                const float inv = wt > 0.0f ? 1.0f / wt : 0.0f;
                float v[3];
                for (int k = 0; k < 3; k++)
                    v[k] = s->cacc[k * cplane + j * cw + i] * inv;
                /* Cb, Cr change; reuse planes 1, 2 of cacc as the output */
                s->cacc[1 * cplane + j * cw + i] =
                    r->enc.m[1][0] * v[0] + r->enc.m[1][1] * v[1] + r->enc.m[1][2] * v[2];
                s->cacc[2 * cplane + j * cw + i] =
                    r->enc.m[2][0] * v[0] + r->enc.m[2][1] * v[1] + r->enc.m[2][2] * v[2];
            }
        }
        apply_comp(s, f, &desc->comp[1], cw, ch, s->cacc + 1 * cplane, cw, 1);
        apply_comp(s, f, &desc->comp[2], cw, ch, s->cacc + 2 * cplane, cw, 2);
    } else if (s->nb_color == 3) {
        /* 4:4:4: Cb, Cr change per pixel; d[1], d[2] are overwritten in place, so keep the
         * R'G'B' values of each pixel in locals first */
        for (int y = 0; y < h; y++) {
            float *p0 = d[0] + y * st, *p1 = d[1] + y * st, *p2 = d[2] + y * st;
            for (int x = 0; x < w; x++) {
                const float R = p0[x], G = p1[x], B = p2[x];
                p0[x] = r->enc.m[0][0] * R + r->enc.m[0][1] * G + r->enc.m[0][2] * B;
                p1[x] = r->enc.m[1][0] * R + r->enc.m[1][1] * G + r->enc.m[1][2] * B;
                p2[x] = r->enc.m[2][0] * R + r->enc.m[2][1] * G + r->enc.m[2][2] * B;
            }
        }
        for (int c = 0; c < 3; c++)
            apply_comp(s, f, &desc->comp[c], w, h, d[c], st, c);
        return;
    }

    /* Y' change (4:2:x and gray) */
    for (int y = 0; y < h; y++) {
        float *p0 = d[0] + y * st;
        const float *p1 = d[1] + y * st, *p2 = d[2] + y * st;
        for (int x = 0; x < w; x++)
            p0[x] = r->enc.m[0][0] * p0[x] + r->enc.m[0][1] * p1[x] + r->enc.m[0][2] * p2[x];
    }
    apply_comp(s, f, &desc->comp[0], w, h, d[0], st, 0);
}

/* Float input: NaN and +-Inf samples cannot go through the network (one of them would spread
 * to the whole window and the neighbouring frames).  Before the network: NaN -> 0, +Inf -> 1,
 * -Inf -> 0, and finite values are clamped to [-1, 2] (far outside [0,1]; only absurd values
 * are touched).  The output keeps the non-finite samples as they were (apply_comp). */
static void sanitize_float_input(AVFilterContext *ctx)
{
    DenoiseContext *s = ctx->priv;
    const int w = s->width, h = s->height;
    int64_t bad = 0;

    for (int c = 0; c < 3; c++) {
        for (int y = 0; y < h; y++) {
            float *p = s->in[c] + y * s->stride;
            for (int x = 0; x < w; x++) {
                const float v = p[x];
                if (!isfinite(v)) {
                    p[x] = isnan(v) ? 0.0f : v > 0 ? 1.0f : 0.0f;
                    bad++;
                } else if (v < -1.0f || v > 2.0f) {
                    p[x] = av_clipf(v, -1.0f, 2.0f);
                }
            }
        }
    }
    if (bad && !s->warned_nonfinite++)
        av_log(ctx, AV_LOG_WARNING, "input has non-finite samples (NaN or Inf; %"PRId64" in this "
               "frame): the network sees 0 (NaN, -Inf) or 1 (+Inf) there, the output keeps them "
               "unchanged (warned once)\n", bad);
}

/* Built-in scene-cut detector on the frame just converted into s->in[] (R'G'B' in [0,1]).
 * The score is the one of FFmpeg's scdet filter (libavfilter/vf_scdet.c, get_scene_score()):
 * mafd = mean absolute frame difference in percent of full scale, score = min(mafd,
 * |mafd - previous mafd|), a cut when score >= threshold; the min() makes a steady high
 * difference (noise, constant motion) not a cut, only a jump.  Unlike scdet the difference is
 * taken on SCD_BLOCK x SCD_BLOCK block means of the luma (BT.709 weights of R'G'B'), which
 * averages the noise down (sigma 50 8-bit noise moves an 8x8 block mean by about 2-3%) while a
 * hard cut changes most blocks by tens of percent.  Returns 1 for a cut. */
static int scene_cut(AVFilterContext *ctx, double *score_out)
{
    DenoiseContext *s = ctx->priv;
    const int w = s->width, h = s->height, bw = s->scd_bw, nb = s->scd_bw * s->scd_bh;
    double sad = 0, mafd, diff, score;
    float *tmp;

    *score_out = 0;
    memset(s->scd_cur, 0, nb * sizeof(*s->scd_cur));
    for (int y = 0; y < h; y++) {
        const float *r = s->in[0] + y * s->stride, *g = s->in[1] + y * s->stride,
                    *b = s->in[2] + y * s->stride;
        float *row = s->scd_cur + (y / SCD_BLOCK) * bw;
        for (int x = 0; x < w; x++)
            row[x / SCD_BLOCK] += 0.2126f * r[x] + 0.7152f * g[x] + 0.0722f * b[x];
    }
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

/* Pull one change from the engine and send its frame.  Returns 1 when a frame went out, 0
 * when the engine has none ready (EAGAIN) or the segment is drained (EOF), < 0 on error. */
static int output_one(AVFilterContext *ctx)
{
    DenoiseContext *s = ctx->priv;
    AVFilterLink *outlink = ctx->outputs[0];
    QueuedFrame q;
    FrameRepr r;
    int ret;

    if (!s->engine || !av_fifo_can_read(s->queue))
        return 0;

    ret = denoise_pull(s->engine, s->delta, s->stride);
    if (ret == DENOISE_EAGAIN || ret == DENOISE_EOF)
        return 0;
    if (ret < 0)
        return engine_error(ctx, ret, "Denoising a frame");

    av_fifo_read(s->queue, &q, 1);
    if (!q.disabled) {
        ret = av_frame_make_writable(q.frame);
        if (ret < 0) {
            av_frame_free(&q.frame);
            return ret;
        }
        frame_repr(ctx, q.frame, &r);
        apply_delta(ctx, q.frame, &r);
    }
    ret = ff_filter_frame(outlink, q.frame);
    return ret < 0 ? ret : 1;
}

/* End of a segment (end of stream or size change): flush the engine and send every frame
 * still queued, in order. */
static int drain(AVFilterContext *ctx)
{
    DenoiseContext *s = ctx->priv;
    int ret;

    if (!s->engine || !av_fifo_can_read(s->queue))
        return 0;

    ret = denoise_flush(s->engine);
    if (ret < 0)
        return engine_error(ctx, ret, "Flushing the engine");

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
    /* the engine reports DENOISE_EOF once drained; after that a push starts a new segment */
    ret = denoise_pull(s->engine, s->delta, s->stride);
    if (ret != DENOISE_EOF) {
        if (ret < 0 && ret != DENOISE_EAGAIN)
            return engine_error(ctx, ret, "Draining the engine");
        av_log(ctx, AV_LOG_ERROR, "engine returned more frames than were pushed\n");
        return AVERROR_BUG;
    }
    return 0;
}

static int set_format(AVFilterContext *ctx, enum AVPixelFormat fmt);

static int push_frame(AVFilterContext *ctx, AVFrame *in)
{
    DenoiseContext *s = ctx->priv;
    const float *planes[3];
    QueuedFrame q = { .frame = in, .disabled = ctx->is_disabled };
    FrameRepr r;
    int ret;

    /* A scene cut marked upstream by the scdet filter (-vf scdet,denoise) ends the segment:
     * the engine then mirrors the window at the cut instead of mixing two scenes. */
    if (s->engine && av_fifo_can_read(s->queue) &&
        av_dict_get(in->metadata, "lavfi.scd.time", NULL, 0)) {
        av_log(ctx, AV_LOG_DEBUG, "scene cut at pts %"PRId64": new segment\n", in->pts);
        if ((ret = drain(ctx)) < 0)
            goto fail;
    }

    if (in->format != s->format) {
        /* buffersrc (and other sources) pass a format change on mid-stream with a warning:
         * end the segment and take the new format if it is one of ours */
        av_log(ctx, AV_LOG_VERBOSE, "pixel format changed from %s to %s: ending the segment\n",
               av_get_pix_fmt_name(s->format), av_get_pix_fmt_name(in->format));
        if ((ret = drain(ctx)) < 0)
            goto fail;
        if ((ret = set_format(ctx, in->format)) < 0)
            goto fail;
        denoise_free(&s->engine);   /* reopened below for the new format's buffers */
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
    if (s->sigma != s->engine_sigma) {
        ret = denoise_set_sigma(s->engine, s->sigma);
        if (ret < 0) {
            ret = engine_error(ctx, ret, "Setting sigma");
            goto fail;
        }
        s->engine_sigma = s->sigma;
    }

    frame_repr(ctx, in, &r);
    convert_in(ctx, in, &r);
    if (s->is_float)
        sanitize_float_input(ctx);

    /* Built-in detector: frame t against t-1, decided before t goes into the engine; a cut
     * ends the segment (flush and drain: the window is mirrored at the cut) and t starts the
     * next one. */
    {
        double score;
        if (scene_cut(ctx, &score) && av_fifo_can_read(s->queue)) {
            s->nb_scene_cuts++;
            av_log(ctx, AV_LOG_VERBOSE, "scene cut at pts %"PRId64" (score %.2f >= %.2f): "
                   "new segment\n", in->pts, score, s->scene);
            if ((ret = drain(ctx)) < 0)
                goto fail;
        }
    }

    ret = av_fifo_write(s->queue, &q, 1);
    if (ret < 0)
        goto fail;
    planes[0] = s->in[0]; planes[1] = s->in[1]; planes[2] = s->in[2];
    ret = denoise_push(s->engine, planes, s->stride);
    if (ret < 0)
        /* the frame is in the queue: uninit frees it */
        return engine_error(ctx, ret, "Pushing a frame");
    return 0;

fail:
    av_frame_free(&in);
    return ret;
}

static int activate(AVFilterContext *ctx)
{
    AVFilterLink *inlink  = ctx->inputs[0];
    AVFilterLink *outlink = ctx->outputs[0];
    AVFrame *in;
    int64_t pts;
    int status, ret;

    FF_FILTER_FORWARD_STATUS_BACK(outlink, inlink);

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

    s->format = AV_PIX_FMT_NONE;
    s->queue = av_fifo_alloc2(8, sizeof(QueuedFrame), AV_FIFO_FLAG_AUTO_GROW);
    s->noise = av_malloc_array(NOISE_SIZE * NOISE_SIZE, sizeof(*s->noise));
    if (!s->queue || !s->noise)
        return AVERROR(ENOMEM);
    /* libplacebo's void-and-cluster blue noise, "roughly uniform in [0,1)"; ~10 ms for 64 */
    pl_generate_blue_noise(s->noise, NOISE_SIZE);
    for (int i = 0; i < NOISE_SIZE * NOISE_SIZE; i++)  /* guarantee [0,1): floor(0 + n) == 0 */
        s->noise[i] = av_clipf(s->noise[i], 0.0f, 0.99999994f);

    return 0;
}

/* Take the per-format fields from fmt (at configuration, or on a format change mid-stream). */
static int set_format(AVFilterContext *ctx, enum AVPixelFormat fmt)
{
    DenoiseContext *s = ctx->priv;
    const AVPixFmtDescriptor *desc = av_pix_fmt_desc_get(fmt);
    int listed = 0;

    for (int i = 0; pix_fmts[i] != AV_PIX_FMT_NONE; i++)
        listed |= pix_fmts[i] == fmt;
    if (!desc || !listed) {
        av_log(ctx, AV_LOG_ERROR, "frame in pixel format %s, which the filter does not take "
               "(a format change mid-stream must stay within the listed formats)\n",
               desc ? desc->name : "none");
        return AVERROR(EINVAL);
    }
    s->format    = fmt;
    s->desc      = desc;
    s->nb_color  = desc->nb_components - !!(desc->flags & AV_PIX_FMT_FLAG_ALPHA);
    s->is_rgb    = !!(desc->flags & AV_PIX_FMT_FLAG_RGB);
    s->is_float  = !!(desc->flags & AV_PIX_FMT_FLAG_FLOAT);
    s->depth     = desc->comp[0].depth;
    s->bytes     = s->is_float ? 4 : s->depth > 8 ? 2 : 1;
    s->is_full_range_fmt = fmt == AV_PIX_FMT_YUVJ411P ||
                           fmt == AV_PIX_FMT_YUVJ420P ||
                           fmt == AV_PIX_FMT_YUVJ422P ||
                           fmt == AV_PIX_FMT_YUVJ440P ||
                           fmt == AV_PIX_FMT_YUVJ444P;
    if (s->is_float && s->depth != 32) {
        av_log(ctx, AV_LOG_ERROR, "unsupported float format %s\n", desc->name);
        return AVERROR(ENOSYS);
    }
    return 0;
}

static int config_input(AVFilterLink *inlink)
{
    AVFilterContext *ctx = inlink->dst;
    int ret;

    if ((ret = set_format(ctx, inlink->format)) < 0)
        return ret;
    /* the weights load here (not in init) */
    return engine_open(ctx, inlink->w, inlink->h);
}

static av_cold void uninit(AVFilterContext *ctx)
{
    DenoiseContext *s = ctx->priv;
    QueuedFrame q;

    if (s->nb_scene_cuts)
        av_log(ctx, AV_LOG_VERBOSE, "%d scene cut(s) detected\n", s->nb_scene_cuts);
    if (s->queue) {
        /* Frames still queued here were never sent: the graph was torn down before EOF. The
         * ffmpeg CLI does that when the input's size or format changes mid-stream (it rebuilds
         * the graph without flushing the old one, see fftools/ffmpeg_filter.c send_frame()),
         * so say how many frames went and how to keep them. */
        size_t lost = av_fifo_can_read(s->queue);
        if (lost)
            av_log(ctx, AV_LOG_WARNING, "%zu queued frame(s) discarded: the filter graph was "
                   "freed before end of stream (with the ffmpeg CLI, a mid-stream size or format "
                   "change rebuilds the graph; -reinit_filter 0 keeps one graph, and denoise "
                   "handles the change itself)\n", lost);
        while (av_fifo_read(s->queue, &q, 1) >= 0)
            av_frame_free(&q.frame);
        av_fifo_freep2(&s->queue);
    }
    denoise_free(&s->engine);
    free_buffers(s);
    av_freep(&s->noise);
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
        .name = "default",
        .type = AVMEDIA_TYPE_VIDEO,
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
    .process_command = ff_filter_process_command,
    .flags           = AVFILTER_FLAG_SUPPORT_TIMELINE_INTERNAL,
};
