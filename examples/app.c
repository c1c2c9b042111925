/*
 * examples/app.c: the denoise filter in an application, through libavfilter's public API.
 *
 *   app INPUT OUTPUT [FILTER_OPTIONS [ENCODER]]
 *   app in.mp4 out.mkv                      denoise=sigma=20, FFV1 (lossless) into out.mkv
 *   app in.mp4 out.mp4 sigma=25 libx264     another sigma, H.264 (full FFmpeg build)
 *
 * The first video stream of INPUT is decoded with libavformat/libavcodec, each frame goes
 * through a graph  buffer -> denoise=FILTER_OPTIONS -> format=<what ENCODER takes> -> buffersink,
 * and the result is encoded with ENCODER (default ffv1) and muxed into OUTPUT (container from its
 * name). Video only: audio and other streams are not copied. Every input frame gives exactly one
 * output frame with its pts; the filter holds three frames for its look-ahead, so frames come out
 * three behind and the rest after the end of the input is signalled (av_buffersrc_add_frame(src,
 * NULL)). Build: see README.md ("In an app"); make check builds and runs it (tests/cli/cli_app.sh).
 *
 * Exit status 0 on success, 1 on any error (with the libav* error text on stderr).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libavcodec/avcodec.h>
#include <libavfilter/avfilter.h>
#include <libavfilter/buffersink.h>
#include <libavfilter/buffersrc.h>
#include <libavformat/avformat.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>

typedef struct App {
    AVFormatContext *in, *out;
    AVCodecContext *dec, *enc;
    AVFilterGraph *graph;
    AVFilterContext *src, *sink;
    AVStream *out_stream;
    int in_index;
    const AVCodec *encoder;
    const char *output, *filter_opts;
    int64_t frames_in, frames_out;
} App;

static int fail(const char *what, int err)
{
    fprintf(stderr, "app: %s: %s\n", what, av_err2str(err));
    return err;
}

static int open_input(App *a, const char *path)
{
    const AVCodec *codec;
    int ret;

    if ((ret = avformat_open_input(&a->in, path, NULL, NULL)) < 0)
        return fail(path, ret);
    if ((ret = avformat_find_stream_info(a->in, NULL)) < 0)
        return fail("reading stream information", ret);
    ret = av_find_best_stream(a->in, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (ret < 0)
        return fail("no decodable video stream in the input", ret);
    a->in_index = ret;
    if (!(a->dec = avcodec_alloc_context3(codec)))
        return fail("allocating the decoder", AVERROR(ENOMEM));
    if ((ret = avcodec_parameters_to_context(a->dec, a->in->streams[a->in_index]->codecpar)) < 0)
        return fail("decoder parameters", ret);
    a->dec->pkt_timebase = a->in->streams[a->in_index]->time_base;
    if ((ret = avcodec_open2(a->dec, codec, NULL)) < 0)
        return fail("opening the decoder", ret);
    return 0;
}

/* buffer -> denoise=... -> format=<encoder's formats> -> buffersink, for the first frame's
 * size and format (the denoise filter itself follows later changes of the colour properties). */
static int open_graph(App *a, const AVFrame *first)
{
    const AVStream *st = a->in->streams[a->in_index];
    const enum AVPixelFormat *fmts = NULL;
    AVFilterInOut *outputs = avfilter_inout_alloc(), *inputs = avfilter_inout_alloc();
    AVRational sar = first->sample_aspect_ratio.num ? first->sample_aspect_ratio : (AVRational){ 1, 1 };
    char args[512], chain[1024], list[512] = "";
    int nb = 0, ret;

    if (!outputs || !inputs || !(a->graph = avfilter_graph_alloc())) {
        ret = fail("allocating the filter graph", AVERROR(ENOMEM));
        goto end;
    }
    snprintf(args, sizeof(args), "video_size=%dx%d:pix_fmt=%d:time_base=%d/%d:pixel_aspect=%d/%d:"
             "colorspace=%d:range=%d", first->width, first->height, first->format, st->time_base.num,
             st->time_base.den, sar.num, sar.den, first->colorspace, first->color_range);
    if ((ret = avfilter_graph_create_filter(&a->src, avfilter_get_by_name("buffer"), "in", args, NULL, a->graph)) < 0 ||
        (ret = avfilter_graph_create_filter(&a->sink, avfilter_get_by_name("buffersink"), "out", NULL, NULL,
                                            a->graph)) < 0) {
        fail("creating buffer/buffersink", ret);
        goto end;
    }

    /* the pixel formats the encoder takes; FFmpeg converts only if the input's is not one */
    ret = avcodec_get_supported_config(NULL, a->encoder, AV_CODEC_CONFIG_PIX_FORMAT, 0, (const void **)&fmts, &nb);
    if (ret < 0) {
        fail("querying the encoder's pixel formats", ret);
        goto end;
    }
    for (int i = 0; fmts && i < nb; i++)
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? "|" : "", av_get_pix_fmt_name(fmts[i]));
    snprintf(chain, sizeof(chain), "denoise=%s%s%s", a->filter_opts, *list ? ",format=pix_fmts=" : "", list);

    outputs->name = av_strdup("in");
    outputs->filter_ctx = a->src;
    inputs->name = av_strdup("out");
    inputs->filter_ctx = a->sink;
    if (!outputs->name || !inputs->name) {
        ret = fail("allocating the filter graph", AVERROR(ENOMEM));
        goto end;
    }
    if ((ret = avfilter_graph_parse_ptr(a->graph, chain, &inputs, &outputs, NULL)) < 0) {
        fail(chain, ret);
        goto end;
    }
    if ((ret = avfilter_graph_config(a->graph, NULL)) < 0)
        fail("configuring the filter graph (see the messages above)", ret);
    else
        fprintf(stderr, "app: %s (%s) -> denoise=%s -> %s (%s)\n", a->dec->codec->name,
                av_get_pix_fmt_name(first->format), a->filter_opts,
                av_get_pix_fmt_name(av_buffersink_get_format(a->sink)), a->encoder->name);
end:
    avfilter_inout_free(&inputs);
    avfilter_inout_free(&outputs);
    return ret;
}

/* encoder and muxer, from what the graph outputs */
static int open_output(App *a)
{
    const AVStream *ist = a->in->streams[a->in_index];
    AVRational rate = av_guess_frame_rate(a->in, (AVStream *)ist, NULL);
    int ret;

    if ((ret = avformat_alloc_output_context2(&a->out, NULL, NULL, a->output)) < 0)
        return fail(a->output, ret);
    if (!(a->enc = avcodec_alloc_context3(a->encoder)))
        return fail("allocating the encoder", AVERROR(ENOMEM));
    a->enc->width = av_buffersink_get_w(a->sink);
    a->enc->height = av_buffersink_get_h(a->sink);
    a->enc->pix_fmt = av_buffersink_get_format(a->sink);
    a->enc->sample_aspect_ratio = av_buffersink_get_sample_aspect_ratio(a->sink);
    a->enc->time_base = av_buffersink_get_time_base(a->sink);
    a->enc->framerate = rate.num ? rate : (AVRational){ 25, 1 };
    a->enc->color_range = a->dec->color_range;
    a->enc->colorspace = a->dec->colorspace;
    a->enc->color_primaries = a->dec->color_primaries;
    a->enc->color_trc = a->dec->color_trc;
    a->enc->chroma_sample_location = a->dec->chroma_sample_location;
    if (a->out->oformat->flags & AVFMT_GLOBALHEADER)
        a->enc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    if ((ret = avcodec_open2(a->enc, a->encoder, NULL)) < 0)
        return fail("opening the encoder", ret);
    if (!(a->out_stream = avformat_new_stream(a->out, NULL)))
        return fail("adding the output stream", AVERROR(ENOMEM));
    if ((ret = avcodec_parameters_from_context(a->out_stream->codecpar, a->enc)) < 0)
        return fail("encoder parameters", ret);
    a->out_stream->time_base = a->enc->time_base;
    a->out_stream->avg_frame_rate = a->enc->framerate;
    if (!(a->out->oformat->flags & AVFMT_NOFILE) &&
        (ret = avio_open(&a->out->pb, a->output, AVIO_FLAG_WRITE)) < 0)
        return fail(a->output, ret);
    if ((ret = avformat_write_header(a->out, NULL)) < 0)
        return fail("writing the output header", ret);
    return 0;
}

/* send one frame (NULL: flush) to the encoder and write what comes out */
static int encode(App *a, AVFrame *frame, AVPacket *pkt)
{
    int ret = avcodec_send_frame(a->enc, frame);
    if (ret < 0)
        return fail("encoding", ret);
    while ((ret = avcodec_receive_packet(a->enc, pkt)) >= 0) {
        av_packet_rescale_ts(pkt, a->enc->time_base, a->out_stream->time_base);
        pkt->stream_index = a->out_stream->index;
        if ((ret = av_interleaved_write_frame(a->out, pkt)) < 0)
            return fail("writing a packet", ret);
    }
    return ret == AVERROR(EAGAIN) || ret == AVERROR_EOF ? 0 : fail("encoding", ret);
}

/* everything the graph has ready goes to the encoder */
static int drain_graph(App *a, AVFrame *filt, AVPacket *pkt)
{
    int ret;
    while ((ret = av_buffersink_get_frame(a->sink, filt)) >= 0) {
        a->frames_out++;
        filt->pict_type = AV_PICTURE_TYPE_NONE;
        ret = encode(a, filt, pkt);
        av_frame_unref(filt);
        if (ret < 0)
            return ret;
    }
    return ret == AVERROR(EAGAIN) || ret == AVERROR_EOF ? 0 : fail("filtering", ret);
}

/* decoded frame (NULL at the end) into the graph, opening graph and output on the first one */
static int filter_frame(App *a, AVFrame *frame, AVFrame *filt, AVPacket *pkt)
{
    int ret;
    if (frame) {
        frame->pts = frame->best_effort_timestamp;
        if (!a->graph) {
            if ((ret = open_graph(a, frame)) < 0 || (ret = open_output(a)) < 0)
                return ret;
        }
        a->frames_in++;
    } else if (!a->graph) {
        fprintf(stderr, "app: the input has no video frames\n");
        return AVERROR_INVALIDDATA;
    }
    if ((ret = av_buffersrc_add_frame_flags(a->src, frame, AV_BUFFERSRC_FLAG_KEEP_REF)) < 0)
        return fail("feeding the filter graph", ret);
    return drain_graph(a, filt, pkt);
}

static int decode(App *a, const AVPacket *in_pkt, AVFrame *frame, AVFrame *filt, AVPacket *pkt)
{
    int ret = avcodec_send_packet(a->dec, in_pkt);
    if (ret < 0)
        return fail("decoding", ret);
    while ((ret = avcodec_receive_frame(a->dec, frame)) >= 0) {
        ret = filter_frame(a, frame, filt, pkt);
        av_frame_unref(frame);
        if (ret < 0)
            return ret;
    }
    return ret == AVERROR(EAGAIN) || ret == AVERROR_EOF ? 0 : fail("decoding", ret);
}

int main(int argc, char **argv)
{
    App a = { .filter_opts = "sigma=20" };
    const char *encoder_name = "ffv1";
    AVPacket *in_pkt = av_packet_alloc(), *pkt = av_packet_alloc();
    AVFrame *frame = av_frame_alloc(), *filt = av_frame_alloc();
    int ret;

    if (argc < 3 || argc > 5) {
        fprintf(stderr, "usage: %s INPUT OUTPUT [FILTER_OPTIONS [ENCODER]]\n"
                        "  e.g. %s in.mp4 out.mkv sigma=20 ffv1\n", argv[0], argv[0]);
        return 1;
    }
    a.output = argv[2];
    if (argc > 3)
        a.filter_opts = argv[3];
    if (argc > 4)
        encoder_name = argv[4];
    if (!in_pkt || !pkt || !frame || !filt) {
        ret = fail("allocating frames", AVERROR(ENOMEM));
        goto end;
    }
    if (!avfilter_get_by_name("denoise")) {
        fprintf(stderr, "app: this libavfilter has no denoise filter (link the one the project builds)\n");
        ret = AVERROR_FILTER_NOT_FOUND;
        goto end;
    }
    if (!(a.encoder = avcodec_find_encoder_by_name(encoder_name))) {
        fprintf(stderr, "app: no encoder '%s' in this FFmpeg\n", encoder_name);
        ret = AVERROR_ENCODER_NOT_FOUND;
        goto end;
    }
    if ((ret = open_input(&a, argv[1])) < 0)
        goto end;

    while ((ret = av_read_frame(a.in, in_pkt)) >= 0) {
        if (in_pkt->stream_index == a.in_index)
            ret = decode(&a, in_pkt, frame, filt, pkt);
        av_packet_unref(in_pkt);
        if (ret < 0)
            goto end;
    }
    if (ret != AVERROR_EOF) {
        fail("reading the input", ret);
        goto end;
    }
    /* end of input: flush the decoder, then the graph (the last three frames), then the encoder */
    if ((ret = decode(&a, NULL, frame, filt, pkt)) < 0 || (ret = filter_frame(&a, NULL, filt, pkt)) < 0 ||
        (ret = encode(&a, NULL, pkt)) < 0)
        goto end;
    if ((ret = av_write_trailer(a.out)) < 0) {
        fail("writing the output trailer", ret);
        goto end;
    }
    if (a.frames_out != a.frames_in) {
        fprintf(stderr, "app: %" PRId64 " frames in but %" PRId64 " out\n", a.frames_in, a.frames_out);
        ret = AVERROR_BUG;
        goto end;
    }
    fprintf(stderr, "app: %" PRId64 " frames denoised into %s\n", a.frames_out, a.output);
end:
    avfilter_graph_free(&a.graph);
    avcodec_free_context(&a.dec);
    avcodec_free_context(&a.enc);
    avformat_close_input(&a.in);
    if (a.out && !(a.out->oformat->flags & AVFMT_NOFILE))
        avio_closep(&a.out->pb);
    avformat_free_context(a.out);
    av_packet_free(&in_pkt);
    av_packet_free(&pkt);
    av_frame_free(&frame);
    av_frame_free(&filt);
    return ret < 0;
}
