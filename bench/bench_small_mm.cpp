// The small-operand matrix products (model/small_mm.h) against ATen's (OpenBLAS here) at the
// sizes of the layers' edge and atom MLPs in bench_train's shape (a) (8,640 edges, 1,728 atoms,
// 32 channels) and (b) (74,304 edges, 64 channels). For each: x a (a layer's forward and its input
// gradient), x^T g (its weight gradient); µs per product and GFLOP/s, interleaved in one run so
// that the ratio holds on a shared machine. float32, one thread. usage: bench_small_mm
// [repeats=200]
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "model/device.h"
#include "model/precision.h"
#include "model/small_mm.h"
#include "time_us.h"

using ddgnn::bench::time_us;

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 200;
  const std::string blas = ddgnn::set_up_cpu_compute(1);
  if (!blas.empty()) std::printf("BLAS kernels: %s\n", blas.c_str());
  torch::NoGradGuard no_grad;
  struct Case {
    const char* what;
    int64_t m, k, n;
  };
  const Case cases[] = {
      {"edges, F -> F", 8640, 32, 32},       {"edges, radial 6 -> F", 8640, 6, 32},
      {"edges, F -> 64", 8640, 32, 64},      {"edges, 64 -> F", 8640, 64, 32},
      {"atoms, F -> F", 1728, 32, 32},       {"atoms, paths 5F -> F", 1728, 160, 32},
      {"triplets, 42 -> 8", 35300, 42, 8},   {"molecules, F -> F", 72, 32, 32},
      {"(b) atoms, 64 -> 64", 1728, 64, 64}, {"(b) edges, 64 -> 64", 74304, 64, 64}};
  std::printf("%-22s %6s %4s %4s | %9s %9s %6s | %9s %9s %6s\n", "product", "M", "K", "N",
              "x a ATen", "fused", "GF/s", "x^T g ATen", "fused", "GF/s");
  for (const Case& c : cases) {
    const at::Tensor x = at::randn({c.m, c.k}), a = at::randn({c.k, c.n}),
                     g = at::randn({c.m, c.n});
    double aten_mm = 0, fused_mm = 0, aten_tn = 0, fused_tn = 0;
    for (int round = 0; round < 3; ++round) {  // interleaved
      {
        ddgnn::GenericKernels generic;
        aten_mm += time_us(repeats, [&] { ddgnn::small_mm(x, a); });
        aten_tn += time_us(repeats, [&] { ddgnn::small_tn(x, g); });
      }
      fused_mm += time_us(repeats, [&] { ddgnn::small_mm(x, a); });
      fused_tn += time_us(repeats, [&] { ddgnn::small_tn(x, g); });
    }
    const double flop = 2.0 * double(c.m * c.k * c.n);
    std::printf("%-22s %6lld %4lld %4lld | %9.1f %9.1f %6.1f | %9.1f %9.1f %6.1f\n", c.what,
                (long long)c.m, (long long)c.k, (long long)c.n, aten_mm / 3, fused_mm / 3,
                flop / (fused_mm / 3) / 1e3, aten_tn / 3, fused_tn / 3,
                flop / (fused_tn / 3) / 1e3);
  }
  return 0;
}
