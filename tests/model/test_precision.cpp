// model/: precision names map to LibTorch dtypes, and bad names are errors that list the good.
#include <gtest/gtest.h>

#include <c10/core/ScalarType.h>

#include <thread>

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

// 1e-20 squared is subnormal in float32 (below 1.2e-38): nonzero by default, zero once
// flush_denormals has run on the thread, and on a thread that thread starts. In a thread of its
// own, so the test binary's other threads keep the default.
float square(float x) {
  volatile float a = x;
  return a * a;
}

TEST(Precision, FlushDenormalsZeroesSubnormalsOnTheThreadAndItsChildren) {
  std::thread([] {
    EXPECT_GT(square(1e-20f), 0.0f);
    const bool flushed = flush_denormals();
    float in_child = -1;
    std::thread([&] { in_child = square(1e-20f); }).join();
    if (flushed) {
      EXPECT_EQ(square(1e-20f), 0.0f);
      EXPECT_EQ(in_child, 0.0f);
    } else {  // a CPU without the mode: nothing changed
      EXPECT_GT(square(1e-20f), 0.0f);
      EXPECT_GT(in_child, 0.0f);
    }
    EXPECT_FLOAT_EQ(square(1e-10f), 1e-20f);  // normal values are untouched
  }).join();
}

}  // namespace ddgnn
