// The small-operand matrix products (model/small_mm.h) against ATen's (OpenBLAS here) at the
// sizes of the layers' edge and atom MLPs in bench_train's shape (a) (8,640 edges, 1,728 atoms,
// 32 channels) and (b) (74,304 edges, 64 channels), and the wider maps of several tiles (MACE's
// path weights, DimeNet's output block). For each: x a (a layer's forward and its input
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
  struct Case {
    const char* what;
    int64_t m, k, n;
  };
  const Case cases[] = {
      {"edges, F -> F", 8640, 32, 32},           {"edges, radial 6 -> F", 8640, 6, 32},
      {"edges, F -> 64", 8640, 32, 64},          {"edges, 64 -> F", 8640, 64, 32},
      {"atoms, F -> F", 1728, 32, 32},           {"atoms, paths 5F -> F", 1728, 160, 32},
      {"triplets, 42 -> 8", 35300, 42, 8},       {"molecules, F -> F", 72, 32, 32},
      {"(b) atoms, 64 -> 64", 1728, 64, 64},     {"(b) edges, 64 -> 64", 74304, 64, 64},
      {"edges, F+1 -> 10 paths", 8640, 33, 320}, {"atoms, F -> 256", 1728, 32, 256},
      {"atoms, 256 -> 256", 1728, 256, 256},     {"edges, F -> 3F", 8640, 32, 96}};
  std::printf("%-22s %6s %4s %4s | %9s %9s %6s | %9s %9s %6s\n", "product", "M", "K", "N",
              "x a ATen", "fused", "GF/s", "x^T g ATen", "fused", "GF/s");
  for (const Case& c : cases) {
    torch::NoGradGuard no_grad;
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

  // One Linear(32, 32) as training runs it: forward, the force pass's backward (create_graph),
  // the loss's backward through both: the autograd nodes' overhead against the arithmetic, from
  // the rows of a batch of small molecules (where the step is bound by per-operation costs) to
  // shape (a)'s edges.
  std::printf(
      "\nLinear(32, 32) in a training step: forward, backward with create_graph, backward "
      "of that (us)\n%6s | %9s %9s\n",
      "rows", "ATen", "fused");
  const at::Tensor w = at::randn({32, 32}).requires_grad_(), b = at::randn({32}).requires_grad_();
  for (const int64_t m : {72, 288, 1728, 8640}) {
    const at::Tensor x0 = at::randn({m, 32});
    const auto step = [&] {
      const at::Tensor x = x0.clone().requires_grad_();
      const at::Tensor y = ddgnn::small_linear(x, w, b);
      const at::Tensor gx = torch::autograd::grad({(y * y).sum()}, {x}, {}, true, true)[0];
      (gx * gx).sum().backward();
    };
    double aten = 0, fused = 0;
    for (int round = 0; round < 3; ++round) {
      {
        ddgnn::GenericKernels generic;
        aten += time_us(repeats, step);
      }
      fused += time_us(repeats, step);
    }
    std::printf("%6lld | %9.1f %9.1f\n", (long long)m, aten / 3, fused / 3);
  }
  return 0;
}
