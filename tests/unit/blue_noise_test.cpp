// The dither tile (kernels/common/blue_noise.h): a permutation of ranks, its float form, and where it
// comes from. libplacebo's generator depends on the process's rand() state, which is why the
// engine keeps its output as data: the table must equal what the generator gives from the
// initial state (srand(1): the tile of every earlier build in a process that had not called
// rand(), so outputs and goldens stay the same), and any other state gives another tile.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <vector>

#include <libplacebo/dither.h>

#include "backend.h"
#include "common/blue_noise.h"

using namespace denoise;

namespace {

constexpr int kN = kBlueNoiseSize * kBlueNoiseSize;

std::vector<float> libplacebo_tile(unsigned seed) {
    std::vector<float> t(kN);
    srand(seed);
    pl_generate_blue_noise(t.data(), kBlueNoiseSize);
    return t;
}

TEST(BlueNoise, RanksArePermutation) {
    std::vector<int> seen(kN, 0);
    for (int i = 0; i < kN; ++i) {
        ASSERT_LT(kBlueNoiseRanks[i], kN) << "at " << i;
        ++seen[kBlueNoiseRanks[i]];
    }
    for (int r = 0; r < kN; ++r) EXPECT_EQ(seen[r], 1) << "rank " << r;
}

TEST(BlueNoise, TileIsRankBinCentres) {
    const float *t = blue_noise_tile();
    ASSERT_EQ(t, blue_noise_tile());
    double sum = 0;
    for (int i = 0; i < kN; ++i) {
        EXPECT_EQ(t[i], (kBlueNoiseRanks[i] + 0.5f) / 4096.0f) << "at " << i;
        EXPECT_GT(t[i], 0.0f);
        EXPECT_LT(t[i], 1.0f);
        // a change of less than 1/8192 code value either way moves no sample
        EXPECT_EQ(std::floor(t[i] - 1.0f / 8200), 0.0f) << "at " << i;
        EXPECT_EQ(std::floor(t[i] + 1.0f / 8200), 0.0f) << "at " << i;
        sum += t[i];
    }
    EXPECT_EQ(sum / kN, 0.5) << "the dither is biased";
}

TEST(BlueNoise, TableIsLibplacebosTileFromTheInitialRandState) {
    const std::vector<float> a = libplacebo_tile(1);
    int diff = 0;
    for (int i = 0; i < kN; ++i) diff += a[i] != kBlueNoiseRanks[i] / 4096.0f;
    EXPECT_EQ(diff, 0) << "pl_generate_blue_noise(64) after srand(1) differs from kBlueNoiseRanks at " << diff
                       << " of " << kN << " values (another libplacebo version?)";
    // the reason for the table: another rand() state, another tile
    const std::vector<float> b = libplacebo_tile(2);
    int moved = 0;
    for (int i = 0; i < kN; ++i) moved += a[i] != b[i];
    EXPECT_GT(moved, kN / 2) << "srand(2) moved only " << moved << " values";
    srand(1);
}

}  // namespace
