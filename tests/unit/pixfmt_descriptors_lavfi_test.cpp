// tests/common/pixfmt_descriptors.h against the built libavutil: every entry's colour components, chroma
// subsampling, sample word size and plane count equal what av_pix_fmt_desc_get() and
// av_pix_fmt_count_planes() give for its name, mapped as filter/vf_denoise.c maps a descriptor
// (alpha left out; chroma subsampling only for Y'CbCr; words of 1, 2 or 4 bytes by depth and the
// float flag).
#include <gtest/gtest.h>

#include <string>

#include "pixfmt_descriptors.h"

extern "C" {
#include <libavutil/pixdesc.h>
}

namespace {

using denoise_test::PixFmtDescriptor;

TEST(PixFmtDescriptors, MatchLibavutil) {
    ASSERT_FALSE(denoise_test::pixfmt_descriptors().empty());
    for (const PixFmtDescriptor &d : denoise_test::pixfmt_descriptors()) {
        SCOPED_TRACE(d.name);
        const enum AVPixelFormat fmt = av_get_pix_fmt(d.name);
        ASSERT_NE(fmt, AV_PIX_FMT_NONE) << "libavutil has no pixel format of that name";
        const AVPixFmtDescriptor *desc = av_pix_fmt_desc_get(fmt);
        ASSERT_NE(desc, nullptr);
        const bool rgb = desc->flags & AV_PIX_FMT_FLAG_RGB, is_float = desc->flags & AV_PIX_FMT_FLAG_FLOAT;
        const int nb = desc->nb_components - !!(desc->flags & AV_PIX_FMT_FLAG_ALPHA);
        EXPECT_EQ(d.f.nb_components, nb);
        for (int c = 0; c < nb && c < 3; ++c) {
            SCOPED_TRACE("component " + std::to_string(c));
            EXPECT_EQ(d.f.comp[c].plane, desc->comp[c].plane);
            EXPECT_EQ(d.f.comp[c].offset, desc->comp[c].offset);
            EXPECT_EQ(d.f.comp[c].step, desc->comp[c].step);
            EXPECT_EQ(d.f.comp[c].shift, desc->comp[c].shift);
            EXPECT_EQ(d.f.comp[c].depth, desc->comp[c].depth);
        }
        EXPECT_EQ(d.f.log2_chroma_w, nb == 3 && !rgb ? desc->log2_chroma_w : 0);
        EXPECT_EQ(d.f.log2_chroma_h, nb == 3 && !rgb ? desc->log2_chroma_h : 0);
        EXPECT_EQ(d.f.is_float, is_float ? 1 : 0);
        EXPECT_EQ(d.f.bytes, is_float ? 4 : desc->comp[0].depth > 8 ? 2 : 1);
        EXPECT_EQ(d.nb_planes, av_pix_fmt_count_planes(fmt));
    }
}

}  // namespace
