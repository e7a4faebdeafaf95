// Tests of the element table: symbol <-> atomic number round trip for all 118 elements, the
// accepted letter cases, unknown symbols, and a few standard atomic masses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "loader/elements.h"

namespace ddgnn {
namespace {

using ::testing::HasSubstr;

TEST(Elements, RoundTripsAllSymbols) {
  for (int z = 1; z <= kMaxAtomicNumber; ++z) {
    const std::string& s = element_symbol(z);
    ASSERT_FALSE(s.empty()) << z;
    EXPECT_EQ(atomic_number(s), z) << s;
  }
}

TEST(Elements, KnownSymbols) {
  EXPECT_EQ(atomic_number("H"), 1);
  EXPECT_EQ(atomic_number("He"), 2);
  EXPECT_EQ(atomic_number("C"), 6);
  EXPECT_EQ(atomic_number("Cu"), 29);
  EXPECT_EQ(atomic_number("W"), 74);
  EXPECT_EQ(atomic_number("U"), 92);
  EXPECT_EQ(atomic_number("Og"), 118);
  EXPECT_EQ(element_symbol(29), "Cu");
  EXPECT_EQ(element_symbol(118), "Og");
}

TEST(Elements, AcceptsLowerAndUpperCase) {
  EXPECT_EQ(atomic_number("cu"), 29);
  EXPECT_EQ(atomic_number("CU"), 29);
  EXPECT_EQ(atomic_number("h"), 1);
  EXPECT_EQ(atomic_number("cU"), 0);
}

TEST(Elements, UnknownSymbolsAreZero) {
  EXPECT_EQ(atomic_number(""), 0);
  EXPECT_EQ(atomic_number("X"), 0);
  EXPECT_EQ(atomic_number("Xx"), 0);
  EXPECT_EQ(atomic_number("Cuu"), 0);
  EXPECT_EQ(atomic_number("1"), 0);
  EXPECT_EQ(atomic_number("C1"), 0);
  EXPECT_EQ(atomic_number("Q"), 0);
}

TEST(Elements, OutOfRangeAtomicNumberThrows) {
  EXPECT_THROW(element_symbol(0), DataError);
  EXPECT_THROW(atomic_mass(119), DataError);
  try {
    element_symbol(119);
    FAIL() << "no exception";
  } catch (const DataError& e) {
    EXPECT_THAT(e.what(), HasSubstr("119"));
    EXPECT_THAT(e.what(), HasSubstr("1..118"));
  }
}

TEST(Elements, StandardMasses) {
  EXPECT_DOUBLE_EQ(atomic_mass(1), 1.008);
  EXPECT_DOUBLE_EQ(atomic_mass(6), 12.011);
  EXPECT_DOUBLE_EQ(atomic_mass(8), 15.999);
  EXPECT_DOUBLE_EQ(atomic_mass(29), 63.546);
  EXPECT_DOUBLE_EQ(atomic_mass(79), 196.966569);
  EXPECT_DOUBLE_EQ(atomic_mass(92), 238.02891);
  for (int z = 2; z <= kMaxAtomicNumber; ++z) {
    EXPECT_GT(atomic_mass(z), atomic_mass(1)) << z;
    EXPECT_LT(atomic_mass(z), 300.0) << z;
  }
}

}  // namespace
}  // namespace ddgnn
