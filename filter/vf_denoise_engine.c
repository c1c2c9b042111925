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
 * The denoise filter's side of libdenoise (vf_denoise.h): opening and freeing the engine (with
 * the CUDA frames' context current), its errors as AVERRORs, and the frames as the engine sees
 * them: planes and linesizes as they are, the colour representation from the frame's colour
 * space, range and chroma location through libplacebo's libav helpers.
 */

#include <stdio.h>
#include <string.h>

#include <libplacebo/colorspace.h>
#include <libplacebo/utils/libav.h>

#include "config.h"

#include "libavutil/pixdesc.h"
#if CONFIG_CUDA
#include "libavutil/cuda_check.h"
#include "libavutil/hwcontext_cuda_internal.h"
#endif

#include "avfilter.h"
#include "filters.h"

#include "vf_denoise.h"

/* Map an engine error to an AVERROR and log the engine's own message (names the weight file
 * and tensor for a bad model, the CUDA runtime's error for a device error). */
int ff_denoise_engine_error(AVFilterContext *ctx, int err, const char *what)
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
int ff_denoise_cuda_push(AVFilterContext *ctx)
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

void ff_denoise_cuda_pop(AVFilterContext *ctx)
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

void ff_denoise_engine_free(AVFilterContext *ctx)
{
    DenoiseContext *s = ctx->priv;

    if (!s->engine)
        return;
    if (denoise_backend(s->engine) == DENOISE_BACKEND_CUDA)
        av_log(ctx, AV_LOG_VERBOSE, "GPU memory peak: %.1f MiB\n",
               denoise_gpu_memory_peak(s->engine) / 1048576.0);
    if (ff_denoise_cuda_push(ctx) < 0) {
        /* the engine's device memory cannot be freed without its context; the host side still is */
        av_log(ctx, AV_LOG_WARNING, "freeing the engine without its CUDA context\n");
        denoise_free(&s->engine);
        return;
    }
    denoise_free(&s->engine);
    ff_denoise_cuda_pop(ctx);
}

/* (Re)open the engine for frames of w x h in the current format: loads the weights (the heavy
 * part, so it runs from config_props or on a size or format change, never in init). */
int ff_denoise_engine_open(AVFilterContext *ctx, int w, int h)
{
    DenoiseContext *s = ctx->priv;
    DenoiseParams p;
    DenoiseBackend got;
    int ret, rc;

    ff_denoise_engine_free(ctx);
    s->width = s->height = 0;

    denoise_params_defaults(&p);
    p.model_path = s->model_path;
    p.backend    = s->backend;
    p.device     = s->device;
    p.sigma      = s->sigma;
    p.width      = w;
    p.height     = h;
    p.format     = s->pixfmt;
    /* the engine's thread pool is its own: it takes the thread count libavfilter grants this
     * filter unless cpu_threads says otherwise */
    p.threads    = s->cpu_threads ? s->cpu_threads : ff_filter_get_nb_threads(ctx);
    p.gpu_memory = s->gpu_mem << 20;
    p.tile       = s->tile;

    s->engine = denoise_alloc();
    if (!s->engine) {
        av_log(ctx, AV_LOG_ERROR, "cannot allocate the engine\n");
        return AVERROR(ENOMEM);
    }

    if ((ret = ff_denoise_cuda_push(ctx)) < 0)
        return ret;
#if CONFIG_CUDA
    if (s->hw) {
        /* the frames' own device and stream: no copy, no host synchronisation */
        CudaFunctions *cu = s->cuda->internal->cuda_dl;
        CUdevice dev;
        ret = FF_CUDA_CHECK_DL(ctx, cu, cu->cuCtxGetDevice(&dev));
        if (ret < 0) {
            ff_denoise_cuda_pop(ctx);
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
    ff_denoise_cuda_pop(ctx);
    if (rc < 0) {
        char what[1100];
        snprintf(what, sizeof(what), "Opening the engine with model '%s' (backend %s)",
                 s->model_path, backend_name(s->backend));
        return ff_denoise_engine_error(ctx, rc, what);
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
        return ff_denoise_engine_error(ctx, s->latency, "Querying the engine's latency");
    rc = denoise_model_sigma_range(s->engine, &s->sigma_lo, &s->sigma_hi);
    if (rc < 0)
        return ff_denoise_engine_error(ctx, rc, "Querying the model's sigma range");
    s->sigma_range_from_file = rc;
    /* opened with s->sigma; the amounts are the engine's defaults until apply_params() */
    s->engine_sigma  = s->sigma;
    s->engine_amount = (DenoiseAmount) { DENOISE_AMOUNT_DEFAULTS };
    s->logged_sigma  = -1;
    s->draining = 0;

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
void ff_denoise_frame_color(AVFilterContext *ctx, const AVFrame *f, DenoiseColor *c)
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
void ff_denoise_frame_image(const AVFrame *f, DenoiseImage *im)
{
    memset(im, 0, sizeof(*im));
    for (int i = 0; i < 4; i++) {
        im->data[i]     = f->data[i];
        im->linesize[i] = f->linesize[i];
    }
}
