/*
 * noise: add reproducible additive white Gaussian noise (AWGN) to raw planar video.
 *
 * A pipe filter: reads raw frames on stdin, writes the noisy copy on stdout. It needs only
 * libc and libm (link: -lm), no FFmpeg libraries, so it can sit between two ffmpeg processes:
 *
 *   build/bin/ffmpeg -i clip.mkv -f rawvideo -pix_fmt gbrpf32le pipe:1 \
 *     | build/bin/denoise-noise --sigma 25 --seed 0 --size 854x480 --pix-fmt gbrpf32le \
 *     | build/bin/ffmpeg -f rawvideo -pix_fmt gbrpf32le -s 854x480 -r 25 -i pipe:0 -c:v ffv1 noisy.mkv
 *
 * Noise model
 *   sigma is given in 8-bit code values (0..255 scale) whatever the format, as the filter's
 *   sigma option is: the noise standard deviation is sigma/255 of the format's full scale, i.e.
 *   sigma/255 in [0,1] units for float formats and sigma/255*(2^depth-1) code values for integer
 *   formats. Integer output is rounded (floor(x + 0.5)) and clipped to [0, 2^depth-1] (what the
 *   filter sees when noisy footage is stored in a file); float output is left unclipped (the
 *   benchmark protocol: v + n, v in [0,1]). Every sample of every plane gets independent noise;
 *   for YUV formats the noise is added to the Y, U and V code values as stored (it is then not
 *   white in RGB: use a gbrp* format to reproduce the RGB AWGN the model is trained for).
 *
 * Random numbers: the counter-based generator that weights/denoise_train/awgn.py (the PyTorch evaluation)
 *   defines, so the C tool and PyTorch produce the same noisy clip on any machine, in any order:
 *   - mix(z): the SplitMix64 output function (Steele, Lea & Flood, "Fast splittable
 *     pseudorandom number generators", OOPSLA 2014; constants from Vigna's public-domain
 *     splitmix64.c, https://prng.di.unimi.it/splitmix64.c), all arithmetic mod 2^64:
 *       z += 0x9E3779B97F4A7C15; z = (z ^ z>>30) * 0xBF58476D1CE4E5B9;
 *       z = (z ^ z>>27) * 0x94D049BB133111EB; return z ^ z>>31;
 *   - base = mix(seed)
 *   - sample counter i = f * S + O_c + y * W_c + x, where f = frame number (0-based, plus
 *     --first-frame), S = samples per frame (all planes), c = component in *logical* order
 *     (RGB formats: 0 = R, 1 = G, 2 = B, although gbrp stores G, B, R; YUV/gray: Y, U, V),
 *     O_c = samples of the components before c, W_c = that component's plane width. For RGB
 *     this is awgn.py's i = ((f * 3 + c) * H + y) * W + x.
 *   - a = mix(base + 2i), b = mix(base + 2i + 1)
 *     u1 = ((a >> 11) + 1) * 2^-53 in (0, 1],  u2 = (b >> 11) * 2^-53 in [0, 1)
 *     g  = (float)(sqrt(-2 ln u1) * cos(2 pi u2))       (Box-Muller in double, stored as float)
 *   - float formats:   out = v + s * g, float32 arithmetic, s = (float)(sigma / 255)
 *     integer formats: v = code / M (float32, M = 2^depth - 1),
 *                      out = rint(clamp(v + s * g, 0, 1) * M)   (round half to even, as
 *                      torch.round; awgn.py's clip8 protocol for 8 bit)
 *   Results are bit-identical wherever libm's log/cos/sqrt agree (glibc's do across x86-64 and
 *   aarch64 in practice); the product s * g goes through a volatile float, so no compiler
 *   fuses s * g + v into an FMA.
 *
 * Exit status: 0 on success (including empty input), 1 on a read/write error or a truncated
 * last frame, 2 on a usage error.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

typedef struct PixFmt {
    const char *name;
    int planes;         /* number of planes */
    int log2_cw, log2_ch; /* chroma subsampling of planes 1 and 2 (planes 0 and 3 are full size) */
    int depth;          /* bits per sample; 0 = float32 */
    int bytes;          /* bytes per sample */
    int rgb;            /* planes stored G, B, R (logical component order R, G, B) */
} PixFmt;

static const PixFmt pix_fmts[] = {
    { "gray",        1, 0, 0,  8, 1, 0 },
    { "gray10le",    1, 0, 0, 10, 2, 0 },
    { "gray12le",    1, 0, 0, 12, 2, 0 },
    { "gray16le",    1, 0, 0, 16, 2, 0 },
    { "grayf32le",   1, 0, 0,  0, 4, 0 },
    { "gbrp",        3, 0, 0,  8, 1, 1 },
    { "gbrp10le",    3, 0, 0, 10, 2, 1 },
    { "gbrp12le",    3, 0, 0, 12, 2, 1 },
    { "gbrp16le",    3, 0, 0, 16, 2, 1 },
    { "gbrpf32le",   3, 0, 0,  0, 4, 1 },
    { "yuv420p",     3, 1, 1,  8, 1, 0 },
    { "yuv420p10le", 3, 1, 1, 10, 2, 0 },
    { "yuv422p",     3, 1, 0,  8, 1, 0 },
    { "yuv422p10le", 3, 1, 0, 10, 2, 0 },
    { "yuv444p",     3, 0, 0,  8, 1, 0 },
    { "yuv444p10le", 3, 0, 0, 10, 2, 0 },
};
#define NB_PIX_FMTS (sizeof(pix_fmts) / sizeof(pix_fmts[0]))

static uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Standard normal sample number i of the stream base = mix64(seed), rounded to float. */
static float gauss(uint64_t base, uint64_t i)
{
    uint64_t a = mix64(base + 2 * i), b = mix64(base + 2 * i + 1);
    double u1 = (double)((a >> 11) + 1) * 0x1.0p-53;
    double u2 = (double)(b >> 11) * 0x1.0p-53;
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

static int host_is_le(void)
{
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

static void usage(FILE *f)
{
    size_t i;
    fprintf(f,
"Usage: denoise-noise --sigma S --size WxH --pix-fmt FMT [--seed N] [--first-frame K] [--frames N]\n"
"\n"
"Reads raw planar video frames (FFmpeg -f rawvideo layout: planes one after another, no row\n"
"padding) on stdin and writes the same frames with additive white Gaussian noise on stdout.\n"
"\n"
"  --sigma S        noise standard deviation in 8-bit code values (0..255 scale) whatever the\n"
"                   format: std = S/255 of full scale (S/255 for float, S/255*(2^depth-1) code\n"
"                   values for integer formats). Same convention as the denoise filter's sigma.\n"
"  --seed N         64-bit seed (default 0). Same seed, frame and pixel -> same noise, on any\n"
"                   machine and however the input is chunked.\n"
"  --size WxH       frame size in pixels.\n"
"  --pix-fmt FMT    one of:");
    for (i = 0; i < NB_PIX_FMTS; i++)
        fprintf(f, " %s", pix_fmts[i].name);
    fprintf(f, "\n"
"                   Integer formats: noisy value rounded and clipped to [0, 2^depth-1] (what a\n"
"                   filter sees from a real file). Float (gbrpf32le, grayf32le; values in [0,1]):\n"
"                   noise added unclipped (benchmark protocol). YUV: noise on the stored Y/U/V code\n"
"                   values; use gbrp* for RGB AWGN.\n"
"  --first-frame K  number the first input frame K (default 0), e.g. to noise a clip in pieces.\n"
"  --frames N       stop after N frames (default: until end of input).\n"
"  -h, --help       this text.\n"
"\n"
"Generator (same as weights/denoise_train/awgn.py): n = Box-Muller(u1, u2), u1/u2 from SplitMix64's mixer\n"
"(Steele, Lea & Flood 2014) of mix(seed) + 2i and + 2i+1, i = ((frame*3 + c)*H + y)*W + x with\n"
"c = 0, 1, 2 for R, G, B (Y, U, V); see the comment at the top of tools/noise.c for the details.\n"
"\n"
"Example:\n"
"  ffmpeg -i clip.mkv -f rawvideo -pix_fmt gbrpf32le pipe:1 \\\n"
"    | denoise-noise --sigma 25 --seed 0 --size 854x480 --pix-fmt gbrpf32le \\\n"
"    | ffmpeg -f rawvideo -pix_fmt gbrpf32le -s 854x480 -r 25 -i pipe:0 -c:v ffv1 noisy.mkv\n");
}

static int parse_u64(const char *s, uint64_t *v)
{
    char *end;
    unsigned long long x;
    if (!s || !*s || *s == '-')
        return -1;
    errno = 0;
    x = strtoull(s, &end, 0);
    if (errno || *end)
        return -1;
    *v = x;
    return 0;
}

/* Read exactly n bytes; returns bytes read (< n only at end of input), -1 on error. */
static long long read_full(unsigned char *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        size_t r = fread(buf + got, 1, n - got, stdin);
        if (r == 0) {
            if (ferror(stdin))
                return -1;
            break;
        }
        got += r;
    }
    return (long long)got;
}

int main(int argc, char **argv)
{
    double sigma = -1;
    uint64_t seed = 0, first_frame = 0, max_frames = UINT64_MAX, frame;
    long w = 0, h = 0;
    const PixFmt *pf = NULL;
    size_t plane_w[4], plane_h[4], comp_size[4], frame_bytes = 0;
    uint64_t comp_offset[4], frame_samples = 0, base;
    float s;
    unsigned char *buf;
    int i, p, swap;

    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!v) {
            fprintf(stderr, "denoise-noise: option %s needs a value (try --help)\n", a);
            return 2;
        }
        if (!strcmp(a, "--sigma")) {
            char *end;
            sigma = strtod(v, &end);
            if (*end || !(sigma >= 0) || sigma > 1e6) {
                fprintf(stderr, "denoise-noise: bad --sigma '%s' (want a number >= 0)\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--seed")) {
            if (parse_u64(v, &seed)) {
                fprintf(stderr, "denoise-noise: bad --seed '%s' (want an integer >= 0)\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--first-frame")) {
            if (parse_u64(v, &first_frame)) {
                fprintf(stderr, "denoise-noise: bad --first-frame '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--frames")) {
            if (parse_u64(v, &max_frames)) {
                fprintf(stderr, "denoise-noise: bad --frames '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--size") || !strcmp(a, "-s")) {
            char x;
            if (sscanf(v, "%ld%c%ld", &w, &x, &h) != 3 || (x != 'x' && x != 'X') ||
                w < 1 || h < 1 || w > 65536 || h > 65536) {
                fprintf(stderr, "denoise-noise: bad --size '%s' (want WxH)\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--pix-fmt") || !strcmp(a, "--pix_fmt")) {
            size_t k;
            for (k = 0; k < NB_PIX_FMTS; k++)
                if (!strcmp(v, pix_fmts[k].name))
                    pf = &pix_fmts[k];
            if (!pf) {
                fprintf(stderr, "denoise-noise: unsupported --pix-fmt '%s' (see --help)\n", v);
                return 2;
            }
        } else {
            fprintf(stderr, "denoise-noise: unknown option '%s' (try --help)\n", a);
            return 2;
        }
        i++;
    }
    if (sigma < 0 || !w || !pf) {
        fprintf(stderr, "denoise-noise: --sigma, --size and --pix-fmt are required (try --help)\n");
        return 2;
    }
    for (p = 0; p < pf->planes; p++) {
        int sub = p == 1 || p == 2;
        plane_w[p] = sub ? (size_t)((w + (1 << pf->log2_cw) - 1) >> pf->log2_cw) : (size_t)w;
        plane_h[p] = sub ? (size_t)((h + (1 << pf->log2_ch) - 1) >> pf->log2_ch) : (size_t)h;
        frame_bytes += plane_w[p] * plane_h[p] * pf->bytes;
    }
    for (p = 0; p < pf->planes; p++) {
        int c = pf->rgb ? (p + 1) % 3 : p;
        comp_size[c] = plane_w[p] * plane_h[p];
    }
    for (p = 0; p < pf->planes; p++) {
        comp_offset[p] = frame_samples;
        frame_samples += comp_size[p];
    }
    s = (float)(sigma / 255.0);
    base = mix64(seed);
    buf = malloc(frame_bytes);
    if (!buf) {
        fprintf(stderr, "denoise-noise: out of memory\n");
        return 1;
    }
    swap = !host_is_le();

    for (frame = 0; frame < max_frames; frame++) {
        long long got = read_full(buf, frame_bytes);
        unsigned char *ptr = buf;
        if (got < 0) {
            fprintf(stderr, "denoise-noise: read error: %s\n", strerror(errno));
            return 1;
        }
        if (got == 0)
            break;
        if ((size_t)got < frame_bytes) {
            fprintf(stderr, "denoise-noise: truncated frame %llu: %lld of %zu bytes "
                    "(check --size and --pix-fmt)\n", (unsigned long long)frame, got, frame_bytes);
            return 1;
        }
        for (p = 0; p < pf->planes; p++) {
            /* logical component of storage plane p and the counter of its first sample */
            int c = pf->rgb ? (p + 1) % 3 : p; /* gbrp: G, B, R -> 1, 2, 0 */
            uint64_t i0 = (first_frame + frame) * frame_samples + comp_offset[c];
            size_t n = plane_w[p] * plane_h[p], k;
            if (pf->depth == 0) {
                for (k = 0; k < n; k++) {
                    unsigned char *q = ptr + 4 * k;
                    float f;
                    volatile float d; /* rounded product: no FMA contraction of s * g + v */
                    if (swap) { unsigned char t = q[0]; q[0] = q[3]; q[3] = t; t = q[1]; q[1] = q[2]; q[2] = t; }
                    memcpy(&f, q, 4);
                    d = s * gauss(base, i0 + k);
                    f = f + d;
                    memcpy(q, &f, 4);
                    if (swap) { unsigned char t = q[0]; q[0] = q[3]; q[3] = t; t = q[1]; q[1] = q[2]; q[2] = t; }
                }
            } else {
                const float maxv = (float)((1 << pf->depth) - 1);
                for (k = 0; k < n; k++) {
                    float x;
                    volatile float d; /* rounded product: no FMA contraction */
                    unsigned v;
                    if (pf->bytes == 1)
                        v = ptr[k];
                    else
                        v = ptr[2 * k] | (unsigned)ptr[2 * k + 1] << 8; /* little-endian on any host */
                    d = s * gauss(base, i0 + k);
                    x = (float)v / maxv + d;
                    x = x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x;
                    x = x * maxv;
                    v = (unsigned)rintf(x);
                    if (pf->bytes == 1) {
                        ptr[k] = (unsigned char)v;
                    } else {
                        ptr[2 * k]     = (unsigned char)(v & 0xff);
                        ptr[2 * k + 1] = (unsigned char)(v >> 8);
                    }
                }
            }
            ptr += n * pf->bytes;
        }
        if (fwrite(buf, 1, frame_bytes, stdout) != frame_bytes || fflush(stdout)) {
            fprintf(stderr, "denoise-noise: write error: %s\n", strerror(errno));
            return 1;
        }
    }
    free(buf);
    return 0;
}
