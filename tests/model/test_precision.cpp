// model/: precision names map to LibTorch dtypes, and bad names are errors that list the good.
#include <gtest/gtest.h>

#include <c10/core/ScalarType.h>

#include "core/error.h"
#include "model/precision.h"

namespace ddgnn {

TEST(Precision, MapsNamesToDtypes) {
  EXPECT_EQ(to_dtype(parse_precision("fp32")), c10::ScalarType::Float);
  EXPECT_EQ(to_dtype(parse_precision("fp64")), c10::ScalarType::Double);
  EXPECT_EQ(to_string(parse_precision("double")), "fp64");
  // bf16 keeps float32 weights and tensors (its matrix products run in bfloat16).
  EXPECT_EQ(to_dtype(parse_precision("bf16")), c10::ScalarType::Float);
  EXPECT_EQ(to_string(parse_precision("bfloat16")), "bf16");
  EXPECT_FALSE(torch_version().empty());
}

TEST(Precision, UnknownNameListsKnownOnes) {
  try {
    parse_precision("fp8");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("fp8"), std::string::npos);
    EXPECT_NE(e.hint().find("fp32, bf16 or fp64"), std::string::npos);
  }
}

}  // namespace ddgnn
