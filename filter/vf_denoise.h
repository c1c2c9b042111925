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
 * The denoise filter's context (vf_denoise.c) and its side of libdenoise (vf_denoise_engine.c):
 * the engine's lifetime under the frames' CUDA context, its errors as AVERRORs, and the frames
 * as the engine sees them (DenoiseImage, DenoiseColor).
 */

#ifndef AVFILTER_VF_DENOISE_H
#define AVFILTER_VF_DENOISE_H

#include "config.h"

#include "libavutil/fifo.h"
#include "libavutil/frame.h"
#include "libavutil/pixdesc.h"
#if CONFIG_CUDA
#include "libavutil/hwcontext_cuda_internal.h"
#endif

#include "avfilter.h"

#include "denoise.h"

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
    int latency;                /* denoise_latency() for the sigma in force: frames queued before the first output */
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

    /* built-in scene-cut detector (option scene), the engine's scores of each frame against
     * the one before it (denoise_scene_cut()) */
    float scene;                /* threshold in percent of full scale; 0 = off */
    int   nb_scene_cuts;
} DenoiseContext;

/* Map an engine error to an AVERROR and log the engine's own message under `what`. */
int ff_denoise_engine_error(AVFilterContext *ctx, int err, const char *what);

/* CUDA frames: make the frames' CUcontext current around an engine call (push, then pop).
 * Software frames: nothing to do. */
int ff_denoise_cuda_push(AVFilterContext *ctx);
void ff_denoise_cuda_pop(AVFilterContext *ctx);

/* (Re)open the engine for w x h frames of the current format; free it. */
int ff_denoise_engine_open(AVFilterContext *ctx, int w, int h);
void ff_denoise_engine_free(AVFilterContext *ctx);

/* Frame f for the engine: its planes (host or device memory) and its colour representation. */
void ff_denoise_frame_image(const AVFrame *f, DenoiseImage *im);
void ff_denoise_frame_color(AVFilterContext *ctx, const AVFrame *f, DenoiseColor *c);

#endif /* AVFILTER_VF_DENOISE_H */
