// model/: precision names map to LibTorch dtypes, and bad names are errors that list the good;
// the CPU compute set-up (subnormals flushed, OpenBLAS's kernels matched to the CPU).
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <c10/core/ScalarType.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "core/error.h"
#include "core/threads.h"
#include "model/precision.h"

// OpenBLAS's start-up, to put its kernels back to what an older OpenBLAS picks on a CPU it does
// not know (Prescott's) before matching them.
extern "C" void gotoblas_dynamic_init() __attribute__((weak));
extern "C" void gotoblas_dynamic_quit() __attribute__((weak));

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

// Debian 12's OpenBLAS (0.3.21) takes Prescott's SSE3 kernels on CPUs newer than it knows
// (Sapphire Rapids): match_blas_kernels moves them to the CPU's level, once, and never against
// OPENBLAS_CORETYPE.
TEST(Precision, BlasKernelsAreMatchedToTheCpu) {
  ASSERT_TRUE(gotoblas_dynamic_init != nullptr && gotoblas_dynamic_quit != nullptr)
      << "this test binary does not link a DYNAMIC_ARCH OpenBLAS";
  auto force = [](const char* core) {
    setenv("OPENBLAS_CORETYPE", core, 1);
    gotoblas_dynamic_quit();
    gotoblas_dynamic_init();
  };
  const at::Tensor a = at::randint(-8, 8, {300, 200}, at::kDouble);
  const at::Tensor b = at::randint(-8, 8, {200, 100}, at::kDouble);
  force("Prescott");
  ASSERT_EQ(blas_kernels(), "Prescott");
  const at::Tensor before = a.mm(b);
  EXPECT_EQ(match_blas_kernels(), "") << "OPENBLAS_CORETYPE is the user's choice";
  EXPECT_EQ(blas_kernels(), "Prescott");
  unsetenv("OPENBLAS_CORETYPE");

  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const std::string want = avx512 ? "SkylakeX" : avx2 ? "Haswell" : "";
  const std::string message = match_blas_kernels();
  if (want.empty()) {
    EXPECT_EQ(message, "");
    EXPECT_EQ(blas_kernels(), "Prescott");
  } else {
    EXPECT_NE(message.find("Prescott kernels on a CPU with"), std::string::npos) << message;
    EXPECT_NE(message.find("switched to " + want), std::string::npos) << message;
    EXPECT_EQ(blas_kernels(), want);
  }
  EXPECT_EQ(getenv("OPENBLAS_CORETYPE"), nullptr) << "the environment is left as it was";
  EXPECT_EQ(match_blas_kernels(), "") << "a second call finds the kernels matched";
  // Integer-valued products are exact in float64 whatever the kernels' order of summation.
  EXPECT_TRUE(at::equal(a.mm(b), before));
  EXPECT_TRUE(at::allclose(a.to(at::kFloat).mm(b.to(at::kFloat)).to(at::kDouble), before));
}

}  // namespace ddgnn
