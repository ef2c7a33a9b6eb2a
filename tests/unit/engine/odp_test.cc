// FaultInRange (engine/memory/odp.h): what an ODP access may touch.
#include "engine/memory/odp.h"

#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace softrnic::engine {
namespace {

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

class OdpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    void* m = mmap(nullptr, 4 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(m, MAP_FAILED);
    base_ = static_cast<uint8_t*>(m);
  }
  void TearDown() override { munmap(base_, 4 * kPage); }
  size_t Resident() const {
    unsigned char vec[4];
    EXPECT_EQ(mincore(base_, 4 * kPage, vec), 0);
    size_t n = 0;
    for (unsigned char v : vec) n += v & 1;
    return n;
  }
  uint8_t* base_ = nullptr;
};

TEST_F(OdpTest, FaultsInExactlyThePagesOfTheRange) {
  EXPECT_EQ(Resident(), 0u);
  // 2 bytes straddling pages 1 and 2.
  EXPECT_TRUE(FaultInRange(base_ + 2 * kPage - 1, 2, true));
  EXPECT_EQ(Resident(), 2u);
  EXPECT_TRUE(FaultInRange(base_ + 3 * kPage, kPage, false));
  EXPECT_EQ(Resident(), 3u);
}

TEST_F(OdpTest, HolesAndProtectionFail) {
  ASSERT_EQ(munmap(base_ + 2 * kPage, kPage), 0);
  EXPECT_FALSE(FaultInRange(base_ + kPage, 2 * kPage, false));  // reaches the hole
  EXPECT_TRUE(FaultInRange(base_ + kPage, kPage, false));
  ASSERT_EQ(mprotect(base_, kPage, PROT_READ), 0);
  EXPECT_TRUE(FaultInRange(base_, kPage, false));
  EXPECT_FALSE(FaultInRange(base_, kPage, true));  // read-only: no write fault-in
  ASSERT_EQ(mprotect(base_, kPage, PROT_NONE), 0);
  EXPECT_FALSE(FaultInRange(base_, 1, false));
}

TEST_F(OdpTest, EmptyAndWrappingRanges) {
  EXPECT_TRUE(FaultInRange(nullptr, 0, true));  // nothing to touch
  EXPECT_FALSE(FaultInRange(base_, UINT64_MAX, false));  // wraps the address space
  EXPECT_FALSE(FaultInRange(nullptr, 1, false));  // page 0 is never mapped
}

}  // namespace
}  // namespace softrnic::engine
