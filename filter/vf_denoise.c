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
 * The filter is FFmpeg plumbing only: options, formats, the frame queue, where segments end
 * (scene cuts), the timeline, EOF, CUDA frames. The engine does all the pixel work, the
 * scene-cut scores and the non-finite sample count included: it takes each frame in its
 * own pixel format (DenoisePixelFormat, filled from the AVPixFmtDescriptor) and colour
 * representation (DenoiseColor, from the frame's colour space, range and chroma location via
 * libplacebo's libav helpers, vf_denoise_engine.c), and writes the denoised frame back in the
 * same format: only colour components are written, a sample the network does not change stays
 * bit-exact, alpha and padding are never touched.
 *
 * Output t needs input frames t-R..t+R (R = 3 for models v1 and v2; mirrored at the stream ends
 * and at scene cuts), so frames are queued until the engine can return them. Exactly one output frame
 * is produced per input frame, with its pts, duration, side data and metadata: for software
 * frames the output IS the input frame, made writable; CUDA frames (AV_PIX_FMT_CUDA) are
 * denoised on the device into a frame of the output's hardware frames pool, with the input's
 * properties copied onto it.
 */

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "config.h"

#include "libavutil/common.h"
#include "libavutil/dict.h"
#include "libavutil/fifo.h"
#include "libavutil/hwcontext.h"
#include "libavutil/mem.h"
#include "libavutil/opt.h"
#include "libavutil/pixdesc.h"
#include "libavutil/timestamp.h"
#if CONFIG_CUDA
#include "libavutil/hwcontext_cuda_internal.h"
#endif

#include "avfilter.h"
#include "filters.h"
#include "formats.h"
#include "video.h"

#include "denoise.h"
#include "vf_denoise.h"

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

/* Built-in scene-cut detector: the engine's scores (denoise_scene_cut()). Default threshold:
 * see docs/robustness.md for the measurement. */
#define SCENE_DEFAULT 10.0
#define SIGMA_AUTO    DENOISE_SIGMA_AUTO
/* the default: auto (docs/sigma-auto.md measures it against fixed sigmas) */
#define SIGMA_DEFAULT SIGMA_AUTO


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

/* Float input: NaN and +-Inf samples reach the network as 0 (NaN, -Inf) or 1 (+Inf) (the
 * engine replaces them) and stay as they were in the output.  Say so once per stream, with
 * the count (the engine's, denoise_count_nonfinite()) of the first frame that has any. */
static int check_nonfinite(AVFilterContext *ctx, const DenoiseImage *img)
{
    DenoiseContext *s = ctx->priv;
    int64_t bad;

    if (!s->is_float || s->hw || s->warned_nonfinite)
        return 0;
    bad = denoise_count_nonfinite(s->engine, img);
    if (bad < 0)
        return ff_denoise_engine_error(ctx, (int)bad, "Counting non-finite samples");
    if (bad) {
        s->warned_nonfinite = 1;
        av_log(ctx, AV_LOG_WARNING, "input has non-finite samples (NaN or Inf; %"PRId64" in this "
               "frame): the network sees 0 (NaN, -Inf) or 1 (+Inf) there, the output keeps them "
               "unchanged (warned once)\n", bad);
    }
    return 0;
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
    ff_denoise_frame_image(out, &img);
    if ((ret = ff_denoise_cuda_push(ctx)) < 0)
        goto fail;
    rc = denoise_pull(s->engine, &img);
    ff_denoise_cuda_pop(ctx);
    if (rc == DENOISE_EAGAIN || rc == DENOISE_EOF) {
        ret = 0;
        goto fail;
    }
    if (rc < 0) {
        ret = ff_denoise_engine_error(ctx, rc, "Denoising a frame");
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

    if ((ret = ff_denoise_cuda_push(ctx)) < 0)
        return ret;
    rc = denoise_flush(s->engine);
    ff_denoise_cuda_pop(ctx);
    if (rc < 0)
        return ff_denoise_engine_error(ctx, rc, "Flushing the engine");

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
    if ((ret = ff_denoise_cuda_push(ctx)) < 0)
        return ret;
    if (new_sigma && (rc = denoise_set_sigma(s->engine, s->sigma)) >= 0) {
        if (s->sigma == SIGMA_AUTO)
            av_log(ctx, AV_LOG_VERBOSE, "sigma auto from the next frame on\n");
        else
            av_log(ctx, AV_LOG_VERBOSE, "sigma %g from the next frame on\n", s->sigma);
        s->engine_sigma = s->sigma;
        s->logged_sigma = -1;
        /* with sigma=auto the CUDA engine holds one frame more (denoise_latency()) */
        s->latency = denoise_latency(s->engine);
    }
    if (new_amount && rc >= 0 && (rc = denoise_set_amount(s->engine, &a)) >= 0) {
        av_log(ctx, AV_LOG_VERBOSE, "amount %g, luma %g, chroma %g from the next frame on\n",
               a.amount, a.luma, a.chroma);
        s->engine_amount = a;
    }
    ff_denoise_cuda_pop(ctx);
    return rc < 0 ? ff_denoise_engine_error(ctx, rc, "Setting sigma and amounts") : 0;
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
        ff_denoise_engine_free(ctx);   /* reopened below for the new format */
    }

    if (!s->engine || in->width != s->width || in->height != s->height) {
        if (s->engine)
            av_log(ctx, AV_LOG_VERBOSE, "frame size changed from %dx%d to %dx%d: "
                   "ending the segment and reopening the engine\n",
                   s->width, s->height, in->width, in->height);
        if ((ret = drain(ctx)) < 0 ||
            (ret = ff_denoise_engine_open(ctx, in->width, in->height)) < 0)
            goto fail;
    }
    if ((ret = apply_params(ctx)) < 0)
        goto fail;
    q.sigma_auto = s->engine_sigma == SIGMA_AUTO;

    ff_denoise_frame_image(in, &img);
    ff_denoise_frame_color(ctx, in, &img.color);
    if ((ret = check_nonfinite(ctx, &img)) < 0)
        goto fail;

    /* Built-in detector (software frames: reading CUDA frames would cost the host round trip
     * they exist to avoid): frame t against t-1, decided before t goes into the engine; a cut
     * ends the segment (flush and drain: the window is mirrored at the cut) and t starts the
     * next one. */
    if (!s->hw && s->scene <= 0) {
        denoise_scene_reset(s->engine);   /* switched on later (sendcmd): start from the next frame */
    } else if (!s->hw) {
        double score;
        if ((rc = denoise_scene_cut(s->engine, &img, s->scene, &score)) < 0) {
            ret = ff_denoise_engine_error(ctx, rc, "Scoring a scene cut");
            goto fail;
        }
        av_log(ctx, AV_LOG_TRACE, "scene score %.3f\n", score);
        if (rc && av_fifo_can_read(s->queue)) {
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
    if ((ret = ff_denoise_cuda_push(ctx)) >= 0) {
        rc = denoise_push(s->engine, &img);
        ff_denoise_cuda_pop(ctx);
        ret = rc < 0 ? ff_denoise_engine_error(ctx, rc, "Pushing a frame") : 0;
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
        int found = 0;
        for (int i = 0; i < FF_ARRAY_ELEMS(candidates) && !found; i++) {
            if (file_readable(candidates[i])) {
                found = 1;
                if (!(s->model_path = av_strdup(candidates[i])))
                    return AVERROR(ENOMEM);
            }
        }
        if (!found) {
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
    return ff_denoise_engine_open(ctx, inlink->w, inlink->h);
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
    ff_denoise_engine_free(ctx); /* with the CUDA context: before the frames context goes */
    av_buffer_unref(&s->hw_frames_ref);
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
    .flags           = AVFILTER_FLAG_SUPPORT_TIMELINE_INTERNAL,
    .flags_internal  = FF_FILTER_FLAG_HWFRAME_AWARE,
};
