// The weight loader's first checks (kernels/safetensors.cpp): a file that is not safetensors at
// all is called that, whatever its first 8 bytes would mean as a header length; a directory and
// an unreadable file say why; a corrupt header's bytes are escaped in the message.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "safetensors.h"

namespace {

std::string write_file(const std::string &name, const std::string &bytes) {
    const std::string path = ::testing::TempDir() + name;
    FILE *f = std::fopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr);
    if (f) {
        std::fwrite(bytes.data(), 1, bytes.size(), f);
        std::fclose(f);
    }
    return path;
}

std::string refusal(const std::string &path) {
    denoise::StFile st;
    std::string err;
    EXPECT_FALSE(denoise::load_safetensors(path, &st, &err)) << path;
    return err;
}

}  // namespace

TEST(Safetensors, TextFileIsNotASafetensorsFile) {
    // model=README.md: "# denois" read as a u64 is a huge header length
    const std::string err = refusal(write_file("README.md", "# denoise\n\nA neural video denoiser shipped as an FFmpeg filter.\n"));
    EXPECT_NE(err.find("README.md: not a safetensors file"), std::string::npos) << err;
    EXPECT_NE(err.find("first 8 bytes: \"# denois\""), std::string::npos) << err;
    EXPECT_EQ(err.find("not sane"), std::string::npos) << err;
}

TEST(Safetensors, BinaryFileIsNotASafetensorsFile) {
    // a PNG: its signature has non-printable bytes, shown as '.'
    const std::string png("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16);
    const std::string err = refusal(write_file("image.png", png));
    EXPECT_NE(err.find("image.png: not a safetensors file"), std::string::npos) << err;
    EXPECT_NE(err.find("first 8 bytes: \".PNG....\", of 16"), std::string::npos) << err;
}

TEST(Safetensors, SmallHeaderLengthWithJsonIsStillParsed) {
    // a real (empty) safetensors file: 2-byte header "{}" -> loads with no tensors
    std::string b(8, '\0');
    b[0] = 2;
    b += "{}";
    denoise::StFile st;
    std::string err;
    EXPECT_TRUE(denoise::load_safetensors(write_file("empty.safetensors", b), &st, &err)) << err;
    EXPECT_TRUE(st.tensors.empty());
}

TEST(Safetensors, ZeroElementTensorsLoadEmpty) {
    // shape [0] F32 and BF16 tensors with empty data_offsets beside a real one: they load, empty
    // (under check-asan's UBSan a copy from or to an empty vector's null data() would stop here)
    const std::string hdr = "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
                            "\"b\":{\"dtype\":\"BF16\",\"shape\":[2,0],\"data_offsets\":[0,0]},"
                            "\"c\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    std::string b(8, '\0');
    b[0] = (char)hdr.size();
    b += hdr;
    const float one = 1.0f;
    b.append(reinterpret_cast<const char *>(&one), 4);
    denoise::StFile st;
    std::string err;
    ASSERT_TRUE(denoise::load_safetensors(write_file("zero.safetensors", b), &st, &err)) << err;
    ASSERT_EQ(st.tensors.size(), 3u);
    EXPECT_TRUE(st.tensors.at("a").data.empty());
    EXPECT_TRUE(st.tensors.at("b").data.empty());
    ASSERT_EQ(st.tensors.at("c").data.size(), 1u);
    EXPECT_EQ(st.tensors.at("c").data[0], 1.0f);
}

TEST(Safetensors, DirectoryIsNamedAndSaysWhy) {
    // model=/some/dir/ : the path as given (its base name would be empty) and the system's reason
    const std::string dir = ::testing::TempDir();
    const std::string err = refusal(dir);
    EXPECT_EQ(err.rfind(dir + ": ", 0), 0u) << err;
    EXPECT_NE(err.find("Is a directory"), std::string::npos) << err;
}

TEST(Safetensors, CorruptHeaderBytesAreEscapedInTheMessage) {
    // a JSON header with a byte that is not UTF-8: the parser quotes it, the message must stay text
    const std::string json = "{\"a\": \xff}";
    std::string b(8, '\0');
    b[0] = (char)json.size();
    b += json;
    const std::string err = refusal(write_file("bad_utf8.safetensors", b));
    EXPECT_NE(err.find("corrupt JSON header"), std::string::npos) << err;
    for (unsigned char c : err) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << "byte " << (int)c << " in: " << err;
}
