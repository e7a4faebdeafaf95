// Gather + multiply + scatter-sum over edges, forward and backward: custom segment ops
// (gather_rows, scatter_sum), the fused gather_mul_sum, and LibTorch's index_select / index_add,
// at the sizes of bench_train's shapes (a) and (b). One thread.
// usage: bench_segment [repeats=200]
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "core/alloc.h"
#include "model/segment.h"

namespace {

double time_us(int repeats, const std::function<void()>& f) {
  f();  // warm-up
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < repeats; ++r) f();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
         repeats;
}

void run(const char* name, int64_t n_atoms, int64_t n_edges, int64_t f, int repeats) {
  torch::manual_seed(0);
  at::Tensor recv = std::get<0>(at::randint(0, n_atoms, {n_edges}, at::kLong).sort());
  at::Tensor send = at::randint(0, n_atoms, {n_edges}, at::kLong);
  const ddgnn::SegmentIndex r = ddgnn::make_segment_index(recv, n_atoms);
  const ddgnn::SegmentIndex s = ddgnn::make_segment_index(send, n_atoms);
  at::Tensor y = at::randn({n_atoms, f}).requires_grad_(true);
  at::Tensor w = at::randn({n_edges, f});
  const double custom = time_us(repeats, [&] {
    at::Tensor h = ddgnn::scatter_sum(ddgnn::gather_rows(y, s) * w, r);
    torch::autograd::grad({h.sum()}, {y});
  });
  const double fused = time_us(repeats, [&] {
    at::Tensor h = ddgnn::gather_mul_sum(y, w, s, r);
    torch::autograd::grad({h.sum()}, {y});
  });
  const double plain = time_us(repeats, [&] {
    at::Tensor h = at::zeros({n_atoms, f}).index_add(0, recv, y.index_select(0, send) * w);
    torch::autograd::grad({h.sum()}, {y});
  });
  std::printf("%-28s %8lld %8lld %4lld %12.1f %12.1f %12.1f %8.2fx %8.2fx\n", name,
              (long long)n_atoms, (long long)n_edges, (long long)f, custom, fused, plain,
              plain / custom, plain / fused);
}

}  // namespace

int main(int argc, char** argv) {
  ddgnn::tune_allocator();
  at::set_num_threads(1);
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 200;
  std::printf("%-28s %8s %8s %4s %12s %12s %12s %9s %9s\n", "shape", "atoms", "edges", "F",
              "segment us", "fused us", "index_add us", "speed-up", "fused");
  run("(a) 64 x 27 atoms, 5 nbrs", 64 * 27, 64 * 27 * 5, 32, repeats);
  run("(b) 16 x 108 atoms, 45 nbrs", 16 * 108, 16 * 108 * 45, 64, repeats / 4 + 1);
  return 0;
}
