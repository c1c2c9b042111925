// libavfilter API tests of the denoise filter: buffer -> denoise -> buffersink through the
// public API only (avfilter_graph_create_filter, av_buffersrc_add_frame_flags,
// av_buffersink_get_frame), linked against the build's libavfilter/libavutil.
//
// Environment (same names as tests/lib.sh):
//   DENOISE_SOURCE_DIR  repository root (default: found from this file's path or the cwd)
//   DENOISE_WEIGHTS     trained weights (default: weights/denoise-v1.safetensors); the quality
//                       checks are skipped when the file is missing
// The frame-flow checks use tests/data/golden_weights.safetensors (random weights of the v1
// architecture): they check frames, timestamps and formats, not quality.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
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
    std::string f = __FILE__;  // .../tests/denoise_lavfi_test.cpp
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
    return source_dir() + "/weights/denoise-v1.safetensors";
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
TEST_F(DenoiseLavfi, OneOutputPerInputWithPts)
{
    if (!exists(test_weights()))
        GTEST_SKIP() << "missing " << test_weights();
    const int W = 64, H = 48;
    for (int n : {1, 2, 3, 7, 20}) {
        SCOPED_TRACE("N = " + std::to_string(n));
        Graph g(W, H, AV_PIX_FMT_YUV420P, args_with(test_weights(), "sigma=20"));
        ASSERT_EQ(g.error, 0) << g.where << ": " << err2str(g.error) << "\n" << take_log();
        std::mt19937 rng(1234 + n);
        std::vector<AVFrame *> out;
        std::vector<int64_t> pts_in;
        for (int i = 0; i < n; i++) {
            AVFrame *f = make_frame(W, H, AV_PIX_FMT_YUV420P, 1000 + 3 * i);
            ASSERT_NE(f, nullptr);
            fill_random(f, rng);
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
            EXPECT_EQ(out[i]->duration, 1);
        }
        free_frames(out);
    }
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

// The options are visible with their ranges (what `ffmpeg -h filter=denoise` prints).
TEST_F(DenoiseLavfi, Options)
{
    const AVFilter *f = avfilter_get_by_name("denoise");
    ASSERT_NE(f, nullptr);
    ASSERT_NE(f->priv_class, nullptr);
    const AVClass *cls = f->priv_class;
    const AVOption *o = av_opt_find(&cls, "sigma", nullptr, 0, AV_OPT_SEARCH_FAKE_OBJ);
    ASSERT_NE(o, nullptr);
    EXPECT_EQ(o->default_val.dbl, 15.0);
    EXPECT_EQ(o->min, 0.0);
    EXPECT_EQ(o->max, 100.0);
    for (const char *name : {"model", "backend", "device", "threads"})
        EXPECT_NE(av_opt_find(&cls, name, nullptr, 0, AV_OPT_SEARCH_FAKE_OBJ), nullptr) << name;
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

}  // namespace
