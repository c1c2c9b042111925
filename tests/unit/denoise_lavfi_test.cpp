// libavfilter API tests of the denoise filter: buffer -> denoise -> buffersink through the
// public API only (avfilter_graph_create_filter, av_buffersrc_add_frame_flags,
// av_buffersink_get_frame), linked against the build's libavfilter/libavutil.
//
// Environment (same names as tests/common/lib.sh):
//   DENOISE_SOURCE_DIR  repository root (default: found from this file's path or the cwd)
//   DENOISE_WEIGHTS     trained weights (default: weights/denoise-v2.safetensors); the quality
//                       checks are skipped when the file is missing
// The frame-flow checks use tests/data/golden_weights.safetensors (random weights of the v1
// architecture): they check frames, timestamps and formats, not quality.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

extern "C" {
#include <libavfilter/avfilter.h>
#include <libavfilter/buffersink.h>
#include <libavfilter/buffersrc.h>
#include <libavutil/dict.h>
#include <libavutil/error.h>
#include <libavutil/frame.h>
#include <libavutil/log.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>
}

namespace {

bool exists(const std::string &p)
{
    struct stat st;
    return !p.empty() && stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string source_dir()
{
    if (const char *e = std::getenv("DENOISE_SOURCE_DIR"))
        return e;
#ifdef DENOISE_SOURCE_DIR
    return DENOISE_SOURCE_DIR;
#else
    const std::string marker = "/tests/data/golden_weights.safetensors";
    std::string f = __FILE__;  // .../tests/unit/denoise_lavfi_test.cpp
    size_t cut = f.rfind("/tests/");
    if (cut != std::string::npos && exists(f.substr(0, cut) + marker))
        return f.substr(0, cut);
    char buf[4096];
    if (getcwd(buf, sizeof(buf))) {
        std::string d = buf;
        for (int i = 0; i < 4 && !d.empty(); i++) {
            if (exists(d + marker))
                return d;
            d = d.substr(0, d.rfind('/'));
        }
    }
    return ".";
#endif
}

std::string test_weights() { return source_dir() + "/tests/data/golden_weights.safetensors"; }

std::string trained_weights()
{
    if (const char *e = std::getenv("DENOISE_WEIGHTS"))
        return e;
    return source_dir() + "/weights/denoise-v2.safetensors";
}

// av_log capture (the filter logs through av_log; tests check what it says)
std::mutex g_log_mutex;
std::string g_log;

void log_callback(void *avcl, int level, const char *fmt, va_list vl)
{
    if (level > AV_LOG_INFO)
        return;
    char line[2048];
    int print_prefix = 1;
    av_log_format_line(avcl, level, fmt, vl, line, sizeof(line), &print_prefix);
    std::lock_guard<std::mutex> lock(g_log_mutex);
    g_log += line;
}

std::string take_log()
{
    std::lock_guard<std::mutex> lock(g_log_mutex);
    std::string s;
    s.swap(g_log);
    return s;
}

std::string err2str(int err)
{
    char buf[AV_ERROR_MAX_STRING_SIZE] = {0};
    av_strerror(err, buf, sizeof(buf));
    return buf;
}

// buffer -> denoise=<args> -> buffersink
struct Graph {
    AVFilterGraph *graph = nullptr;
    AVFilterContext *src = nullptr, *sink = nullptr;
    int error = 0;          // first failure while building/configuring
    std::string where;

    Graph(int w, int h, AVPixelFormat fmt, const std::string &args)
    {
        graph = avfilter_graph_alloc();
        if (!graph) { error = AVERROR(ENOMEM); where = "alloc"; return; }
        char srcargs[256];
        snprintf(srcargs, sizeof(srcargs),
                 "video_size=%dx%d:pix_fmt=%d:time_base=1/25:pixel_aspect=1/1", w, h, (int)fmt);
        AVFilterContext *dn = nullptr;
        int ret = avfilter_graph_create_filter(&src, avfilter_get_by_name("buffer"), "in",
                                               srcargs, nullptr, graph);
        if (ret < 0) { error = ret; where = "buffer"; return; }
        const AVFilter *f = avfilter_get_by_name("denoise");
        if (!f) { error = AVERROR_FILTER_NOT_FOUND; where = "denoise not registered"; return; }
        ret = avfilter_graph_create_filter(&dn, f, "denoise", args.c_str(), nullptr, graph);
        if (ret < 0) { error = ret; where = "denoise init"; return; }
        ret = avfilter_graph_create_filter(&sink, avfilter_get_by_name("buffersink"), "out",
                                           nullptr, nullptr, graph);
        if (ret < 0) { error = ret; where = "buffersink"; return; }
        if ((ret = avfilter_link(src, 0, dn, 0)) < 0 || (ret = avfilter_link(dn, 0, sink, 0)) < 0) {
            error = ret; where = "link"; return;
        }
        ret = avfilter_graph_config(graph, nullptr);
        if (ret < 0) { error = ret; where = "config"; return; }
    }
    ~Graph() { avfilter_graph_free(&graph); }

    // push one frame (the graph takes a reference); < 0 on error
    int push(AVFrame *f) { return av_buffersrc_add_frame_flags(src, f, AV_BUFFERSRC_FLAG_KEEP_REF); }
    int push_eof() { return av_buffersrc_add_frame_flags(src, nullptr, 0); }

    // collect every frame available (all of them after EOF); returns the last status
    int drain(std::vector<AVFrame *> &out)
    {
        for (;;) {
            AVFrame *f = av_frame_alloc();
            int ret = av_buffersink_get_frame(sink, f);
            if (ret < 0) {
                av_frame_free(&f);
                return ret;
            }
            out.push_back(f);
        }
    }
};

void free_frames(std::vector<AVFrame *> &v)
{
    for (AVFrame *&f : v)
        av_frame_free(&f);
    v.clear();
}

AVFrame *make_frame(int w, int h, AVPixelFormat fmt, int64_t pts)
{
    AVFrame *f = av_frame_alloc();
    f->width = w;
    f->height = h;
    f->format = fmt;
    f->pts = pts;
    f->duration = 1;
    if (av_frame_get_buffer(f, 0) < 0)
        av_frame_free(&f);
    return f;
}

// random 8-bit planar content
void fill_random(AVFrame *f, std::mt19937 &rng)
{
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get((AVPixelFormat)f->format);
    std::uniform_int_distribution<int> u(0, 255);
    for (int p = 0; p < 4 && f->data[p]; p++) {
        int w = p == 1 || p == 2 ? AV_CEIL_RSHIFT(f->width, d->log2_chroma_w) : f->width;
        int h = p == 1 || p == 2 ? AV_CEIL_RSHIFT(f->height, d->log2_chroma_h) : f->height;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                f->data[p][y * f->linesize[p] + x] = (uint8_t)u(rng);
    }
}

// smooth 8-bit yuv420p pattern that moves slowly with t
void fill_smooth_yuv(AVFrame *f, int t)
{
    for (int y = 0; y < f->height; y++)
        for (int x = 0; x < f->width; x++)
            f->data[0][y * f->linesize[0] + x] =
                (uint8_t)lrint(126 + 60 * std::sin((x + t) / 9.0) * std::cos(y / 7.0));
    for (int y = 0; y < f->height / 2; y++)
        for (int x = 0; x < f->width / 2; x++) {
            f->data[1][y * f->linesize[1] + x] = (uint8_t)lrint(128 + 30 * std::sin(x / 11.0 + y / 13.0));
            f->data[2][y * f->linesize[2] + x] = (uint8_t)lrint(128 + 25 * std::cos(y / 10.0 - x / 17.0));
        }
}

std::string args_with(const std::string &model, const std::string &rest)
{
    return "model=" + model + ":backend=cpu" + (rest.empty() ? "" : ":" + rest);
}

class DenoiseLavfi : public ::testing::Test {
protected:
    void SetUp() override
    {
        av_log_set_level(AV_LOG_INFO);
        av_log_set_callback(log_callback);
        take_log();
    }
    void TearDown() override { av_log_set_callback(av_log_default_callback); }
};

// N frames in -> N frames out, same pts in order, same size and format.
// N = 1..10 (shorter than, as long as, and longer than the window t-3..t+3) and 60 frames;
// duration, side data and metadata of each frame come out with it.
TEST_F(DenoiseLavfi, OneOutputPerInputWithPts)
{
    if (!exists(test_weights()))
        GTEST_SKIP() << "missing " << test_weights();
    const int W = 32, H = 32;
    for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 60}) {
        SCOPED_TRACE("N = " + std::to_string(n));
        Graph g(W, H, AV_PIX_FMT_YUV420P, args_with(test_weights(), "sigma=20:threads=1"));
        ASSERT_EQ(g.error, 0) << g.where << ": " << err2str(g.error) << "\n" << take_log();
        std::mt19937 rng(1234 + n);
        std::vector<AVFrame *> out;
        std::vector<int64_t> pts_in;
        for (int i = 0; i < n; i++) {
            AVFrame *f = make_frame(W, H, AV_PIX_FMT_YUV420P, 1000 + 3 * i);
            ASSERT_NE(f, nullptr);
            fill_random(f, rng);
            f->duration = 2 + i % 3;
            AVFrameSideData *sd = av_frame_new_side_data(f, AV_FRAME_DATA_A53_CC, 8);
            ASSERT_NE(sd, nullptr);
            for (int k = 0; k < 8; k++)
                sd->data[k] = (uint8_t)(i * 8 + k);
            av_dict_set_int(&f->metadata, "test.frame", i, 0);
            pts_in.push_back(f->pts);
            int ret = g.push(f);
            av_frame_free(&f);
            ASSERT_GE(ret, 0) << err2str(ret) << "\n" << take_log();
            ret = g.drain(out);
            ASSERT_EQ(ret, AVERROR(EAGAIN)) << err2str(ret);
        }
        ASSERT_GE(g.push_eof(), 0);
        int ret = g.drain(out);
        EXPECT_EQ(ret, AVERROR_EOF) << err2str(ret);
        ASSERT_EQ((int)out.size(), n);
        for (int i = 0; i < n; i++) {
            EXPECT_EQ(out[i]->pts, pts_in[i]) << "frame " << i;
            EXPECT_EQ(out[i]->width, W);
            EXPECT_EQ(out[i]->height, H);
            EXPECT_EQ(out[i]->format, AV_PIX_FMT_YUV420P);
            EXPECT_EQ(out[i]->duration, 2 + i % 3) << "frame " << i;
            const AVFrameSideData *sd = av_frame_get_side_data(out[i], AV_FRAME_DATA_A53_CC);
            ASSERT_NE(sd, nullptr) << "frame " << i << " lost its side data";
            ASSERT_EQ(sd->size, 8u);
            for (int k = 0; k < 8; k++)
                EXPECT_EQ(sd->data[k], (uint8_t)(i * 8 + k)) << "frame " << i;
            const AVDictionaryEntry *e = av_dict_get(out[i]->metadata, "test.frame", nullptr, 0);
            ASSERT_NE(e, nullptr) << "frame " << i << " lost its metadata";
            EXPECT_EQ(std::string(e->value), std::to_string(i));
        }
        free_frames(out);
    }
}

// Which backend runs, and why, is logged at info level when the engine opens.
TEST_F(DenoiseLavfi, BackendAndReasonAreLogged)
{
    if (!exists(test_weights()))
        GTEST_SKIP() << "missing " << test_weights();
    {
        Graph g(32, 24, AV_PIX_FMT_YUV420P, args_with(test_weights(), "threads=1"));
        ASSERT_EQ(g.error, 0) << g.where << ": " << err2str(g.error) << "\n" << take_log();
    }
    const std::string log = take_log();
    EXPECT_NE(log.find("running the CPU engine"), std::string::npos) << log;
    EXPECT_NE(log.find("backend cpu requested"), std::string::npos) << log;
}

// An empty stream: EOF straight away, no frame, no error.
TEST_F(DenoiseLavfi, EmptyStream)
{
    if (!exists(test_weights()))
        GTEST_SKIP() << "missing " << test_weights();
    Graph g(64, 48, AV_PIX_FMT_YUV420P, args_with(test_weights(), ""));
    ASSERT_EQ(g.error, 0) << g.where << ": " << err2str(g.error) << "\n" << take_log();
    ASSERT_GE(g.push_eof(), 0);
    std::vector<AVFrame *> out;
    EXPECT_EQ(g.drain(out), AVERROR_EOF);
    EXPECT_TRUE(out.empty());
    free_frames(out);
}

// A frame size change mid-stream (buffersrc passes it on with a warning): the filter ends the
// segment, reopens the engine and still gives one frame per input frame, each at its own size.
TEST_F(DenoiseLavfi, SizeChangeMidStream)
{
    if (!exists(test_weights()))
        GTEST_SKIP() << "missing " << test_weights();
    Graph g(64, 48, AV_PIX_FMT_YUV420P, args_with(test_weights(), ""));
    ASSERT_EQ(g.error, 0) << g.where << ": " << err2str(g.error) << "\n" << take_log();
    std::mt19937 rng(7);
    std::vector<AVFrame *> out;
    const int sizes[][2] = {{64, 48}, {64, 48}, {64, 48}, {64, 48}, {64, 48},
                            {80, 64}, {80, 64}, {80, 64}, {80, 64}};
    const int n = sizeof(sizes) / sizeof(sizes[0]);
    for (int i = 0; i < n; i++) {
        AVFrame *f = make_frame(sizes[i][0], sizes[i][1], AV_PIX_FMT_YUV420P, i);
        fill_random(f, rng);
        int ret = g.push(f);
        av_frame_free(&f);
        ASSERT_GE(ret, 0) << err2str(ret) << "\n" << take_log();
        g.drain(out);
    }
    ASSERT_GE(g.push_eof(), 0);
    EXPECT_EQ(g.drain(out), AVERROR_EOF);
    ASSERT_EQ((int)out.size(), n);
    for (int i = 0; i < n; i++) {
        EXPECT_EQ(out[i]->pts, i);
        EXPECT_EQ(out[i]->width, sizes[i][0]);
        EXPECT_EQ(out[i]->height, sizes[i][1]);
    }
    free_frames(out);
}

// The options are visible with their ranges (what `ffmpeg -h filter=denoise` prints), the
// run-time ones flagged; no private option named threads shadows libavfilter's generic one.
TEST_F(DenoiseLavfi, Options)
{
    const AVFilter *f = avfilter_get_by_name("denoise");
    ASSERT_NE(f, nullptr);
    ASSERT_NE(f->priv_class, nullptr);
    const AVClass *cls = f->priv_class;
    const AVOption *o = av_opt_find(&cls, "sigma", nullptr, 0, AV_OPT_SEARCH_FAKE_OBJ);
    ASSERT_NE(o, nullptr);
    EXPECT_EQ(o->default_val.dbl, -1.0);  // auto
    EXPECT_EQ(o->min, -1.0);
    EXPECT_EQ(o->max, 100.0);
    const AVOption *a = av_opt_find(&cls, "auto", "sigma", 0, AV_OPT_SEARCH_FAKE_OBJ);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->type, AV_OPT_TYPE_CONST);
    EXPECT_EQ(a->default_val.i64, -1);
    for (const char *name : {"model", "backend", "device", "cpu_threads", "gpu_mem", "tile"}) {
        o = av_opt_find(&cls, name, nullptr, 0, AV_OPT_SEARCH_FAKE_OBJ);
        ASSERT_NE(o, nullptr) << name;
        EXPECT_FALSE(o->flags & AV_OPT_FLAG_RUNTIME_PARAM) << name;
        EXPECT_TRUE(o->help && std::strlen(o->help) > 20) << name;
    }
    for (const char *name : {"sigma", "scene", "amount", "luma", "chroma"}) {
        o = av_opt_find(&cls, name, nullptr, 0, AV_OPT_SEARCH_FAKE_OBJ);
        ASSERT_NE(o, nullptr) << name;
        EXPECT_TRUE(o->flags & AV_OPT_FLAG_RUNTIME_PARAM) << name;
        EXPECT_TRUE(o->help && std::strlen(o->help) > 20) << name;
    }
    for (const char *name : {"amount", "luma", "chroma"}) {
        o = av_opt_find(&cls, name, nullptr, 0, AV_OPT_SEARCH_FAKE_OBJ);
        EXPECT_EQ(o->default_val.dbl, 1.0) << name;
        EXPECT_EQ(o->min, 0.0) << name;
        EXPECT_EQ(o->max, 1.0) << name;
    }
    EXPECT_EQ(av_opt_find(&cls, "threads", nullptr, 0, AV_OPT_SEARCH_FAKE_OBJ), nullptr)
        << "a private 'threads' option shadows AVFilterContext's";
}

// A file that is not a weight file: an AVERROR, not a crash.
TEST_F(DenoiseLavfi, BadModelFileIsAnError)
{
    char path[] = "/tmp/denoise_bad_model_XXXXXX";
    int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    const char junk[] = "this is not a safetensors file\n";
    ASSERT_EQ(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
    close(fd);

    int err = 0;
    {
        Graph g(64, 48, AV_PIX_FMT_YUV420P, args_with(path, ""));
        err = g.error;
        if (!err) {  // an engine that loads lazily: the error must come with the first frames
            std::vector<AVFrame *> out;
            for (int i = 0; i < 8 && !err; i++) {
                AVFrame *f = make_frame(64, 48, AV_PIX_FMT_YUV420P, i);
                std::mt19937 rng(i);
                fill_random(f, rng);
                int ret = g.push(f);
                av_frame_free(&f);
                if (ret < 0)
                    err = ret;
            }
            if (!err && g.push_eof() >= 0) {
                int ret = g.drain(out);
                if (ret != AVERROR_EOF)
                    err = ret;
            }
            free_frames(out);
        }
    }
    unlink(path);
    EXPECT_LT(err, 0) << "a junk weight file was accepted";
    EXPECT_NE(err, AVERROR(EAGAIN));
    std::string log = take_log();
    EXPECT_NE(log.find(path), std::string::npos) << "the error should name the file; log:\n" << log;
}

// model=/nonexistent: an error whose message names the path.
TEST_F(DenoiseLavfi, MissingModelNamesThePath)
{
    const std::string path = "/nonexistent/denoise-weights.safetensors";
    Graph g(64, 48, AV_PIX_FMT_YUV420P, args_with(path, ""));
    EXPECT_LT(g.error, 0);
    std::string log = take_log();
    EXPECT_NE(log.find(path), std::string::npos) << "log:\n" << log;
}

// Runs `frames` through denoise and returns the outputs (all of them, after EOF).
std::vector<AVFrame *> run_clip(const std::string &args, const std::vector<AVFrame *> &in, int *err)
{
    std::vector<AVFrame *> out;
    Graph g(in[0]->width, in[0]->height, (AVPixelFormat)in[0]->format, args);
    *err = g.error;
    if (*err)
        return out;
    for (AVFrame *f : in) {
        AVFrame *c = av_frame_clone(f);
        *err = g.push(c);
        av_frame_free(&c);
        if (*err < 0)
            return out;
        g.drain(out);
    }
    g.push_eof();
    int ret = g.drain(out);
    *err = ret == AVERROR_EOF ? 0 : ret;
    return out;
}

// sigma = 0 on a clean, smooth clip: the output stays close to the input.
TEST_F(DenoiseLavfi, SigmaZeroKeepsCleanInput)
{
    const std::string wts = trained_weights();
    if (!exists(wts))
        GTEST_SKIP() << "trained weights not there yet (" << wts << ")";
    const int W = 96, H = 64, N = 7;
    std::vector<AVFrame *> in;
    for (int t = 0; t < N; t++) {
        AVFrame *f = make_frame(W, H, AV_PIX_FMT_YUV420P, t);
        fill_smooth_yuv(f, t);
        in.push_back(f);
    }
    int err = 0;
    std::vector<AVFrame *> out = run_clip(args_with(wts, "sigma=0"), in, &err);
    ASSERT_EQ(err, 0) << err2str(err) << "\n" << take_log();
    ASSERT_EQ(out.size(), in.size());
    double sum = 0;
    long n = 0;
    for (int t = 0; t < N; t++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++, n++)
                sum += std::abs(out[t]->data[0][y * out[t]->linesize[0] + x] -
                                in[t]->data[0][y * in[t]->linesize[0] + x]);
    const double mad = sum / n;
    RecordProperty("luma_mean_abs_diff", std::to_string(mad));
    EXPECT_LT(mad, 2.0) << "sigma=0 changed a clean clip by " << mad << " code values on average";
    free_frames(in);
    free_frames(out);
}

// AWGN sigma 20 on a smooth R'G'B' clip (gbrpf32le, unclipped: the benchmark protocol): the
// denoised clip is closer to the clean one by more than 1 dB.
TEST_F(DenoiseLavfi, NoisyInputGetsCloserToClean)
{
    const std::string wts = trained_weights();
    if (!exists(wts))
        GTEST_SKIP() << "trained weights not there yet (" << wts << ")";
    const int W = 128, H = 96, N = 7;
    const double sigma = 20.0 / 255.0;
    std::mt19937 rng(42);
    std::normal_distribution<float> gauss(0.0f, 1.0f);
    std::vector<AVFrame *> clean, noisy;
    for (int t = 0; t < N; t++) {
        AVFrame *c = make_frame(W, H, AV_PIX_FMT_GBRPF32LE, t);
        AVFrame *n = make_frame(W, H, AV_PIX_FMT_GBRPF32LE, t);
        for (int p = 0; p < 3; p++)
            for (int y = 0; y < H; y++) {
                float *cr = (float *)(c->data[p] + y * c->linesize[p]);
                float *nr = (float *)(n->data[p] + y * n->linesize[p]);
                for (int x = 0; x < W; x++) {
                    cr[x] = 0.5f + 0.25f * std::sin((x + t + 7 * p) / 10.0f) * std::cos((y - 5 * p) / 8.0f);
                    nr[x] = cr[x] + (float)sigma * gauss(rng);
                }
            }
        clean.push_back(c);
        noisy.push_back(n);
    }
    int err = 0;
    std::vector<AVFrame *> out = run_clip(args_with(wts, "sigma=20"), noisy, &err);
    ASSERT_EQ(err, 0) << err2str(err) << "\n" << take_log();
    ASSERT_EQ(out.size(), noisy.size());
    auto mse = [&](const std::vector<AVFrame *> &a) {
        double s = 0;
        long n = 0;
        for (int t = 0; t < N; t++)
            for (int p = 0; p < 3; p++)
                for (int y = 0; y < H; y++) {
                    const float *ar = (const float *)(a[t]->data[p] + y * a[t]->linesize[p]);
                    const float *cr = (const float *)(clean[t]->data[p] + y * clean[t]->linesize[p]);
                    for (int x = 0; x < W; x++, n++)
                        s += (ar[x] - cr[x]) * (double)(ar[x] - cr[x]);
                }
        return s / n;
    };
    const double psnr_in = 10 * std::log10(1.0 / mse(noisy));
    const double psnr_out = 10 * std::log10(1.0 / mse(out));
    RecordProperty("psnr_noisy", std::to_string(psnr_in));
    RecordProperty("psnr_denoised", std::to_string(psnr_out));
    EXPECT_GT(psnr_out - psnr_in, 1.0) << "PSNR " << psnr_in << " dB -> " << psnr_out << " dB";
    free_frames(clean);
    free_frames(noisy);
    free_frames(out);
}


// ------------------------------------------------------------------------------------------
// Robustness (issue 6; docs/robustness.md)

// Height of plane p of a frame (chroma planes of Y'CbCr formats are subsampled).
int plane_height(const AVFrame *f, int p)
{
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get((AVPixelFormat)f->format);
    int h = f->height;
    if (!(d->flags & AV_PIX_FMT_FLAG_RGB))
        for (int c = 1; c < 3 && c < d->nb_components; c++)
            if (d->comp[c].plane == p && d->nb_components > 2)
                h = AV_CEIL_RSHIFT(f->height, d->log2_chroma_h);
    return h;
}

// every byte of every plane (padding included) random
void fill_bytes_random(AVFrame *f, std::mt19937 &rng)
{
    std::uniform_int_distribution<int> u(0, 255);
    for (int p = 0; p < 4 && f->data[p]; p++)
        for (int y = 0; y < plane_height(f, p); y++)
            for (int x = 0; x < f->linesize[p]; x++)
                f->data[p][y * f->linesize[p] + x] = (uint8_t)u(rng);
}

// all values of component c (raw bits, 32 bits wide for float)
std::vector<uint32_t> component(const AVFrame *f, int c)
{
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get((AVPixelFormat)f->format);
    const bool chroma = !(d->flags & AV_PIX_FMT_FLAG_RGB) && (c == 1 || c == 2) && d->nb_components > 2;
    const int w = chroma ? AV_CEIL_RSHIFT(f->width, d->log2_chroma_w) : f->width;
    const int h = chroma ? AV_CEIL_RSHIFT(f->height, d->log2_chroma_h) : f->height;
    std::vector<uint32_t> v((size_t)w * h);
    for (int y = 0; y < h; y++)
        av_read_image_line2(v.data() + (size_t)y * w, (const uint8_t **)f->data, f->linesize, d,
                            0, y, c, w, 0, 4);
    return v;
}

// max |a - b| over all samples of two frames of the same 8-bit planar format
int max_abs_diff_8bit(const AVFrame *a, const AVFrame *b)
{
    const AVPixFmtDescriptor *d = av_pix_fmt_desc_get((AVPixelFormat)a->format);
    int m = 0;
    for (int c = 0; c < d->nb_components; c++) {
        std::vector<uint32_t> x = component(a, c), y = component(b, c);
        for (size_t i = 0; i < x.size(); i++)
            m = std::max(m, std::abs((int)x[i] - (int)y[i]));
    }
    return m;
}

std::vector<AVFrame *> clone_frames(const std::vector<AVFrame *> &v, size_t from, size_t to)
{
    std::vector<AVFrame *> r;
    for (size_t i = from; i < to; i++)
        r.push_back(av_frame_clone(v[i]));
    return r;
}

// Alpha is passed through bit-exact, whatever the layout (planar, packed, gray+alpha, float),
// even with random colour samples (random bytes: out-of-range high bits, NaN/Inf floats).
TEST_F(DenoiseLavfi, AlphaBitExact)
{
    if (!exists(test_weights()))
        GTEST_SKIP() << "missing " << test_weights();
    const int W = 32, H = 24, N = 3;
    for (AVPixelFormat fmt : {AV_PIX_FMT_YUVA420P, AV_PIX_FMT_YUVA422P, AV_PIX_FMT_YUVA444P,
                              AV_PIX_FMT_YUVA420P10LE, AV_PIX_FMT_YUVA444P12LE, AV_PIX_FMT_YUVA422P16LE,
                              AV_PIX_FMT_GBRAP, AV_PIX_FMT_GBRAP10LE, AV_PIX_FMT_GBRAP16LE,
                              AV_PIX_FMT_GBRAPF32LE, AV_PIX_FMT_RGBA, AV_PIX_FMT_BGRA, AV_PIX_FMT_ARGB,
                              AV_PIX_FMT_ABGR, AV_PIX_FMT_RGBA64LE, AV_PIX_FMT_BGRA64LE,
                              AV_PIX_FMT_YA8, AV_PIX_FMT_YA16LE}) {
        const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(fmt);
        SCOPED_TRACE(d->name);
        ASSERT_TRUE(d->flags & AV_PIX_FMT_FLAG_ALPHA);
        const int ac = d->nb_components - 1;
        std::mt19937 rng(99);
        std::vector<AVFrame *> in;
        for (int t = 0; t < N; t++) {
            AVFrame *f = make_frame(W, H, fmt, t);
            ASSERT_NE(f, nullptr);
            fill_bytes_random(f, rng);
            in.push_back(f);
        }
        int err = 0;
        std::vector<AVFrame *> out = run_clip(args_with(test_weights(), "sigma=30:threads=1"), in, &err);
        ASSERT_EQ(err, 0) << err2str(err) << "\n" << take_log();
        ASSERT_EQ((int)out.size(), N);
        for (int t = 0; t < N; t++) {
            ASSERT_EQ(out[t]->format, fmt);
            EXPECT_TRUE(component(out[t], ac) == component(in[t], ac)) << "alpha of frame " << t << " changed";
        }
        free_frames(in);
        free_frames(out);
    }
}

// A pixel format change mid-stream (buffersrc passes it on with a warning): the segment ends,
// the filter takes the new format, no frame is lost; a frame in a format the filter does not
// take is an error, not a crash.
TEST_F(DenoiseLavfi, FormatChangeMidStream)
{
    if (!exists(test_weights()))
        GTEST_SKIP() << "missing " << test_weights();
    const AVPixelFormat fmts[] = {AV_PIX_FMT_YUV420P, AV_PIX_FMT_YUV420P, AV_PIX_FMT_YUV420P, AV_PIX_FMT_YUV420P,
                                  AV_PIX_FMT_GBRP, AV_PIX_FMT_GBRP, AV_PIX_FMT_GBRP,
                                  AV_PIX_FMT_YUV444P10LE, AV_PIX_FMT_YUV444P10LE,
                                  AV_PIX_FMT_YUV420P, AV_PIX_FMT_YUV420P};
    const int n = sizeof(fmts) / sizeof(fmts[0]);
    {
        Graph g(32, 24, AV_PIX_FMT_YUV420P, args_with(test_weights(), "threads=1"));
        ASSERT_EQ(g.error, 0) << g.where << ": " << err2str(g.error) << "\n" << take_log();
        std::mt19937 rng(5);
        std::vector<AVFrame *> out;
        for (int i = 0; i < n; i++) {
            AVFrame *f = make_frame(32, 24, fmts[i], i);
            fill_random(f, rng);   // 8-bit random: valid in every format here
            int ret = g.push(f);
            av_frame_free(&f);
            ASSERT_GE(ret, 0) << err2str(ret) << "\n" << take_log();
            g.drain(out);
        }
        ASSERT_GE(g.push_eof(), 0);
        EXPECT_EQ(g.drain(out), AVERROR_EOF) << take_log();
        ASSERT_EQ((int)out.size(), n);
        for (int i = 0; i < n; i++) {
            EXPECT_EQ(out[i]->pts, i);
            EXPECT_EQ(out[i]->format, fmts[i]) << "frame " << i;
        }
        free_frames(out);
    }
    {
        Graph g(32, 24, AV_PIX_FMT_YUV420P, args_with(test_weights(), "threads=1"));
        ASSERT_EQ(g.error, 0);
        std::mt19937 rng(6);
        std::vector<AVFrame *> out;
        int err = 0;
        for (int i = 0; i < 3 && err >= 0; i++) {
            AVFrame *f = make_frame(32, 24, i < 2 ? AV_PIX_FMT_YUV420P : AV_PIX_FMT_BAYER_RGGB8, i);
            fill_bytes_random(f, rng);
            err = g.push(f);
            av_frame_free(&f);
            if (err >= 0) {
                int ret = g.drain(out);
                if (ret != AVERROR(EAGAIN))
                    err = ret;
            }
        }
        EXPECT_LT(err, 0) << "a Bayer frame mid-stream was accepted";
        EXPECT_NE(take_log().find("bayer"), std::string::npos);
        free_frames(out);
    }
}

// Two scenes: A (a smooth pattern, slowly moving) for frames 0..11, B (a checkerboard in other
// colours) from frame 12; plus AWGN of sigma `noise` (8-bit code values) when > 0.
std::vector<AVFrame *> two_scenes(int W, int H, int n, int cut, double noise, unsigned seed)
{
    std::mt19937 rng(seed);
    std::normal_distribution<double> g(0.0, 1.0);
    std::vector<AVFrame *> v;
    for (int t = 0; t < n; t++) {
        AVFrame *f = make_frame(W, H, AV_PIX_FMT_YUV420P, t);
        if (t < cut) {
            fill_smooth_yuv(f, t);
        } else {
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++)
                    f->data[0][y * f->linesize[0] + x] = ((x + t) / 8 + y / 8) % 2 ? 200 : 50;
            for (int y = 0; y < H / 2; y++)
                for (int x = 0; x < W / 2; x++) {
                    f->data[1][y * f->linesize[1] + x] = (uint8_t)(90 + x);
                    f->data[2][y * f->linesize[2] + x] = (uint8_t)(170 - y);
                }
        }
        if (noise > 0)
            for (int p = 0; p < 3; p++)
                for (int y = 0; y < (p ? H / 2 : H); y++)
                    for (int x = 0; x < (p ? W / 2 : W); x++) {
                        uint8_t &s = f->data[p][y * f->linesize[p] + x];
                        s = (uint8_t)std::min(255L, std::max(0L, lrint(s + noise * g(rng))));
                    }
        v.push_back(f);
    }
    return v;
}

std::string scene_weights() { return exists(trained_weights()) ? trained_weights() : test_weights(); }

// A hard cut at frame 12: the outputs of frames 10..14 equal (within 1 code value) those of
// each scene denoised on its own: nothing of the other scene is fused in. With the detector
// off the cut does leak (checks that this test can see a leak at all).
TEST_F(DenoiseLavfi, SceneCutBuiltInDetector)
{
    if (!exists(scene_weights()))
        GTEST_SKIP() << "missing " << scene_weights();
    const int W = 64, H = 48, N = 20, CUT = 12;
    std::vector<AVFrame *> clip = two_scenes(W, H, N, CUT, 5.0, 11);
    std::vector<AVFrame *> a = clone_frames(clip, 0, CUT), b = clone_frames(clip, CUT, N);
    int err = 0;
    const std::string opts = "sigma=25:threads=1";
    std::vector<AVFrame *> out = run_clip(args_with(scene_weights(), opts), clip, &err);
    ASSERT_EQ(err, 0) << err2str(err) << "\n" << take_log();
    std::vector<AVFrame *> out_a = run_clip(args_with(scene_weights(), opts), a, &err);
    ASSERT_EQ(err, 0);
    std::vector<AVFrame *> out_b = run_clip(args_with(scene_weights(), opts), b, &err);
    ASSERT_EQ(err, 0);
    std::vector<AVFrame *> off = run_clip(args_with(scene_weights(), opts + ":scene=0"), clip, &err);
    ASSERT_EQ(err, 0);
    ASSERT_EQ((int)out.size(), N);
    ASSERT_EQ((int)off.size(), N);
    int leak_off = 0;
    for (int t = 10; t <= 14; t++) {
        const AVFrame *alone = t < CUT ? out_a[t] : out_b[t - CUT];
        const int d = max_abs_diff_8bit(out[t], alone);
        RecordProperty("max_abs_diff_frame_" + std::to_string(t), d);
        EXPECT_LE(d, 1) << "frame " << t << " differs from its scene denoised alone by " << d;
        leak_off = std::max(leak_off, max_abs_diff_8bit(off[t], alone));
    }
    RecordProperty("max_abs_diff_detector_off", leak_off);
    EXPECT_GT(leak_off, 1) << "with scene=0 the cut should leak (is the test sensitive?)";
    for (auto *v : {&clip, &a, &b, &out, &out_a, &out_b, &off})
        free_frames(*v);
}

// scdet's metadata (lavfi.scd.time on the first frame of the new scene) ends the segment too,
// with the built-in detector off.
TEST_F(DenoiseLavfi, SceneCutFromScdetMetadata)
{
    if (!exists(scene_weights()))
        GTEST_SKIP() << "missing " << scene_weights();
    const int W = 64, H = 48, N = 16, CUT = 12;
    std::vector<AVFrame *> clip = two_scenes(W, H, N, CUT, 0.0, 12);
    av_dict_set(&clip[CUT]->metadata, "lavfi.scd.time", "0.48", 0);
    std::vector<AVFrame *> a = clone_frames(clip, 0, CUT), b = clone_frames(clip, CUT, N);
    int err = 0;
    const std::string opts = "sigma=25:threads=1:scene=0";
    std::vector<AVFrame *> out = run_clip(args_with(scene_weights(), opts), clip, &err);
    ASSERT_EQ(err, 0) << err2str(err) << "\n" << take_log();
    std::vector<AVFrame *> out_a = run_clip(args_with(scene_weights(), opts), a, &err);
    std::vector<AVFrame *> out_b = run_clip(args_with(scene_weights(), opts), b, &err);
    ASSERT_EQ((int)out.size(), N);
    for (int t = 10; t <= 14; t++)
        EXPECT_LE(max_abs_diff_8bit(out[t], t < CUT ? out_a[t] : out_b[t - CUT]), 1) << "frame " << t;
    for (auto *v : {&clip, &a, &b, &out, &out_a, &out_b})
        free_frames(*v);
}

// Heavy noise (sigma 50, 8-bit) on one scene is not a cut: with the default threshold the
// output is the one with the detector off.
TEST_F(DenoiseLavfi, SceneDetectorIgnoresNoiseSigma50)
{
    if (!exists(scene_weights()))
        GTEST_SKIP() << "missing " << scene_weights();
    const int W = 64, H = 48, N = 12;
    std::vector<AVFrame *> clip = two_scenes(W, H, N, N, 50.0, 13);  // no cut
    int err = 0;
    std::vector<AVFrame *> on = run_clip(args_with(scene_weights(), "sigma=50:threads=1"), clip, &err);
    ASSERT_EQ(err, 0) << err2str(err) << "\n" << take_log();
    std::vector<AVFrame *> off = run_clip(args_with(scene_weights(), "sigma=50:threads=1:scene=0"), clip, &err);
    ASSERT_EQ(err, 0);
    ASSERT_EQ((int)on.size(), N);
    ASSERT_EQ((int)off.size(), N);
    // within 1 code value, not bit-exact: two runs of the CPU engine on the same input can
    // differ in the last float bits, which moves a dithered sample by 1 (docs/robustness.md);
    // a cut changes the window and moves many samples by more
    for (int t = 0; t < N; t++)
        EXPECT_LE(max_abs_diff_8bit(on[t], off[t]), 1) << "frame " << t << ": noise was taken for a cut";
    free_frames(clip);
    free_frames(on);
    free_frames(off);
}

// NaN and Inf in float input: the output keeps them (bit-exact) and every other sample is
// finite and what the same input with NaN -> 0, +Inf -> 1, -Inf -> 0 gives (within 1e-4, the
// engine's run-to-run jitter): nothing spreads to other pixels or frames.
TEST_F(DenoiseLavfi, NonFiniteFloatInput)
{
    if (!exists(test_weights()))
        GTEST_SKIP() << "missing " << test_weights();
    const int W = 64, H = 48, N = 7;
    struct Bad { int t, p, x, y; float v, sane; };
    const float inf = INFINITY, nan = NAN;
    const Bad bad[] = {{3, 0, 10, 10, nan, 0.0f}, {3, 1, 20, 5, inf, 1.0f}, {3, 2, 30, 30, -inf, 0.0f},
                       {0, 2, 0, 0, nan, 0.0f}, {6, 0, 63, 47, inf, 1.0f}};
    std::vector<AVFrame *> in, sane;
    for (int t = 0; t < N; t++) {
        AVFrame *f = make_frame(W, H, AV_PIX_FMT_GBRPF32LE, t);
        for (int p = 0; p < 3; p++)
            for (int y = 0; y < H; y++) {
                float *r = (float *)(f->data[p] + y * f->linesize[p]);
                for (int x = 0; x < W; x++)
                    r[x] = 0.5f + 0.3f * std::sin((x + t + 5 * p) / 9.0f) * std::cos(y / 6.0f);
            }
        AVFrame *c = av_frame_clone(f);
        av_frame_make_writable(c);
        for (const Bad &b : bad)
            if (b.t == t) {
                ((float *)(f->data[b.p] + b.y * f->linesize[b.p]))[b.x] = b.v;
                ((float *)(c->data[b.p] + b.y * c->linesize[b.p]))[b.x] = b.sane;
            }
        in.push_back(f);
        sane.push_back(c);
    }
    int err = 0;
    std::vector<AVFrame *> out = run_clip(args_with(test_weights(), "sigma=20:threads=1"), in, &err);
    ASSERT_EQ(err, 0) << err2str(err) << "\n" << take_log();
    EXPECT_NE(take_log().find("non-finite"), std::string::npos) << "expected a warning";
    std::vector<AVFrame *> ref = run_clip(args_with(test_weights(), "sigma=20:threads=1"), sane, &err);
    ASSERT_EQ(err, 0);
    ASSERT_EQ((int)out.size(), N);
    ASSERT_EQ((int)ref.size(), N);
    long nonfinite = 0, differ = 0;
    for (int t = 0; t < N; t++)
        for (int p = 0; p < 3; p++)
            for (int y = 0; y < H; y++) {
                const float *o = (const float *)(out[t]->data[p] + y * out[t]->linesize[p]);
                const float *r = (const float *)(ref[t]->data[p] + y * ref[t]->linesize[p]);
                const float *i = (const float *)(in[t]->data[p] + y * in[t]->linesize[p]);
                for (int x = 0; x < W; x++) {
                    bool special = false;
                    for (const Bad &b : bad)
                        special |= b.t == t && b.p == p && b.x == x && b.y == y;
                    if (special) {
                        EXPECT_EQ(std::memcmp(&o[x], &i[x], 4), 0) << "non-finite sample not kept at "
                                                                    << t << "," << p << "," << x << "," << y;
                        continue;
                    }
                    nonfinite += !std::isfinite(o[x]);
                    differ += !(std::fabs(o[x] - r[x]) <= 1e-4f);
                }
            }
    EXPECT_EQ(nonfinite, 0) << "NaN/Inf spread to other samples";
    EXPECT_EQ(differ, 0) << "samples differ from the sanitised input's output";
    for (auto *v : {&in, &sane, &out, &ref})
        free_frames(*v);
}

// Out-of-range and unknown option values: an AVERROR and a message naming the option, no crash.
TEST_F(DenoiseLavfi, BadOptionValues)
{
    if (!exists(test_weights()))
        GTEST_SKIP() << "missing " << test_weights();
    const struct { const char *opt, *name; } cases[] = {
        {"sigma=-2", "sigma"}, {"sigma=-0.5", "sigma"}, {"sigma=1000", "sigma"}, {"sigma=nan", "sigma"}, {"backend=foo", "backend"},
        {"threads=-5", "threads"}, {"cpu_threads=-5", "cpu_threads"}, {"device=-1", "device"},
        {"scene=-1", "scene"}, {"scene=101", "scene"}, {"amount=2", "amount"}, {"luma=-0.5", "luma"},
        {"chroma=1.5", "chroma"}, {"nosuchoption=1", "nosuchoption"}};
    for (const auto &c : cases) {
        SCOPED_TRACE(c.opt);
        Graph g(32, 24, AV_PIX_FMT_YUV420P, args_with(test_weights(), c.opt));
        EXPECT_LT(g.error, 0);
        std::string log = take_log();
        EXPECT_NE(log.find(c.name), std::string::npos) << "log:\n" << log;
    }
    // a run-time command out of range is refused, the filter keeps its value
    Graph g(32, 24, AV_PIX_FMT_YUV420P, args_with(test_weights(), "threads=1"));
    ASSERT_EQ(g.error, 0);
    char res[256] = {0};
    EXPECT_LT(avfilter_graph_send_command(g.graph, "denoise", "sigma", "-3", res, sizeof(res), 0), 0);
    EXPECT_GE(avfilter_graph_send_command(g.graph, "denoise", "sigma", "30", res, sizeof(res), 0), 0);
    EXPECT_LT(avfilter_graph_send_command(g.graph, "denoise", "amount", "2", res, sizeof(res), 0), 0);
    for (const char *o : {"amount", "luma", "chroma", "scene"})
        EXPECT_GE(avfilter_graph_send_command(g.graph, "denoise", o, "0.5", res, sizeof(res), 0), 0) << o;
    // options that are not run-time: refused (ENOSYS), not silently ignored
    EXPECT_EQ(avfilter_graph_send_command(g.graph, "denoise", "backend", "cpu", res, sizeof(res), 0),
              AVERROR(ENOSYS));
    EXPECT_EQ(avfilter_graph_send_command(g.graph, "denoise", "cpu_threads", "2", res, sizeof(res), 0),
              AVERROR(ENOSYS));
    take_log();
}

// Weight files that are not usable: empty, truncated (in the header, in the tensors), random
// bytes, another architecture's tensors: each an AVERROR whose message names the file.
TEST_F(DenoiseLavfi, BadWeightFiles)
{
    if (!exists(test_weights()))
        GTEST_SKIP() << "missing " << test_weights();
    std::ifstream src(test_weights(), std::ios::binary);
    std::string good((std::istreambuf_iterator<char>(src)), std::istreambuf_iterator<char>());
    ASSERT_GT(good.size(), 200000u);
    std::mt19937 rng(3);
    std::string junk(4096, '\0');
    for (char &ch : junk)
        ch = (char)rng();
    const struct { const char *name; std::string bytes; } cases[] = {
        {"empty", ""},
        {"header_cut", good.substr(0, 100)},
        {"tensors_cut", good.substr(0, good.size() / 2)},
        {"random", junk},
    };
    auto check = [&](const std::string &path) {
        int err;
        {
            Graph g(32, 24, AV_PIX_FMT_YUV420P, args_with(path, "threads=1"));
            err = g.error;
        }
        EXPECT_LT(err, 0);
        EXPECT_NE(err, AVERROR(EAGAIN));
        std::string log = take_log();
        const std::string base = path.substr(path.rfind('/') + 1);
        EXPECT_NE(log.find(base), std::string::npos) << "the error should name the file; log:\n" << log;
    };
    for (const auto &c : cases) {
        SCOPED_TRACE(c.name);
        std::string path = std::string("/tmp/denoise_bad_") + c.name + "_" + std::to_string(getpid()) + ".safetensors";
        {
            std::ofstream o(path, std::ios::binary);
            o.write(c.bytes.data(), c.bytes.size());
        }
        check(path);
        unlink(path.c_str());
    }
    // another architecture: the golden tensor file is a valid safetensors file without the
    // network's tensors and config
    SCOPED_TRACE("other architecture");
    check(source_dir() + "/tests/data/golden_tensors.safetensors");
}

// Graphs created and destroyed repeatedly, with frames still queued inside the filter, a size
// change and a format change: run under ASan/LSan by `make check-asan` (leaks fail it).
TEST_F(DenoiseLavfi, RepeatedGraphsFreeEverything)
{
    if (!exists(test_weights()))
        GTEST_SKIP() << "missing " << test_weights();
    for (int round = 0; round < 4; round++) {
        SCOPED_TRACE("round " + std::to_string(round));
        Graph g(32, 24, AV_PIX_FMT_YUV420P, args_with(test_weights(), "threads=1"));
        ASSERT_EQ(g.error, 0) << take_log();
        std::mt19937 rng(round);
        std::vector<AVFrame *> out;
        for (int i = 0; i < 2 + round; i++) {
            AVFrame *f = make_frame(round == 3 && i > 2 ? 40 : 32, 24,
                                    round == 2 && i > 1 ? AV_PIX_FMT_NV12 : AV_PIX_FMT_YUV420P, i);
            fill_random(f, rng);
            ASSERT_GE(g.push(f), 0);
            av_frame_free(&f);
            g.drain(out);
        }
        if (round % 2)   // odd rounds end the stream, even ones free the graph mid-stream
            g.push_eof(), g.drain(out);
        free_frames(out);
    }
}

}  // namespace
