// Gather + multiply + scatter-sum over edges, forward and backward: custom segment ops
// (gather_rows, scatter_sum), the fused gather_mul_sum, and LibTorch's index_select / index_add,
// at the sizes of bench_train's shapes (a) and (b). Then every op with a fused CPU kernel against
// its device-agnostic version (model/device.h: ATen ops, what runs on a GPU), both timed on the
// CPU: forward + backward, and the force loss's double backward where the op takes part in it.
// float32, one thread. The generic versions allocate [E, (K,) F] intermediates that the kernels
// avoid: where first-touch page faults are slow, those above glibc's mmap threshold (shape (b),
// K = 3: 60 MB each) cost more than the arithmetic.
// usage: bench_segment [repeats=200]
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "core/alloc.h"
#include "model/activation.h"
#include "model/batch.h"
#include "model/device.h"
#include "model/schnet_filter.h"
#include "model/segment.h"
#include "time_us.h"

namespace {

using ddgnn::bench::time_us;

struct Shape {
  const char* name;
  int64_t n_atoms, n_edges, f;
  int repeats;
};

void run(const Shape& shape) {
  const int64_t n_atoms = shape.n_atoms, n_edges = shape.n_edges, f = shape.f;
  const int repeats = shape.repeats;
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
  std::printf("%-28s %8lld %8lld %4lld %12.1f %12.1f %12.1f %8.2fx %8.2fx\n", shape.name,
              (long long)n_atoms, (long long)n_edges, (long long)f, custom, fused, plain,
              plain / custom, plain / fused);
}

// One op timed with the fused kernels and with the generic versions: µs per call and the ratio.
void compare(const char* shape, const char* op, int repeats, const std::function<void()>& f) {
  const double fused = time_us(repeats, f);
  double generic = 0.0;
  {
    ddgnn::GenericKernels force;
    generic = time_us(repeats, f);
  }
  std::printf("%-4s %-34s %12.1f %12.1f %9.2fx\n", shape, op, fused, generic, generic / fused);
}

// d/dx of <g, out> with a graph, then the gradient of the result's square sum with respect to
// `wrt`: the force pass and the force loss's backward.
void double_backward(const at::Tensor& out, const at::Tensor& x,
                     const std::vector<at::Tensor>& wrt) {
  const at::Tensor g = torch::autograd::grad({out}, {x}, {at::ones_like(out)}, true, true)[0];
  torch::autograd::grad({(g * g).sum()}, wrt, {}, false, false, /*allow_unused=*/true);
}

void run_generic(const char* tag, const Shape& shape) {
  const int64_t n = shape.n_atoms, e = shape.n_edges, f = shape.f;
  const int repeats = shape.repeats;
  torch::manual_seed(0);
  const at::Tensor recv = std::get<0>(at::randint(0, n, {e}, at::kLong).sort());
  const at::Tensor send = at::randint(0, n, {e}, at::kLong);
  const ddgnn::SegmentIndex r = ddgnn::make_segment_index(recv, n);
  const ddgnn::SegmentIndex s = ddgnn::make_segment_index(send, n);
  const at::Tensor y = at::randn({n, f}).requires_grad_(true);
  const at::Tensor yk = at::randn({n, 3, f}).requires_grad_(true);
  const at::Tensor w = at::randn({e, f}).requires_grad_(true);
  const at::Tensor u = at::randn({e, 3}).requires_grad_(true);
  const at::Tensor pos = at::randn({n, 3}).requires_grad_(true);
  compare(tag, "make_segment_index (unsorted)", repeats,
          [&] { ddgnn::make_segment_index(send, n); });
  compare(tag, "gather_rows + scatter_sum", repeats, [&] {
    const at::Tensor h = ddgnn::scatter_sum(ddgnn::gather_rows(y, s) * w, r);
    torch::autograd::grad({h.sum()}, {y, w});
  });
  compare(tag, "gather_mul_sum [N, F]", repeats, [&] {
    torch::autograd::grad({ddgnn::gather_mul_sum(y, w, s, r).sum()}, {y, w});
  });
  compare(tag, "gather_mul_sum [N, 3, F]", repeats, [&] {
    torch::autograd::grad({ddgnn::gather_mul_sum(yk, w, s, r).sum()}, {yk, w});
  });
  compare(tag, "gather_gather_dot [N, 3, F]", repeats,
          [&] { torch::autograd::grad({ddgnn::gather_gather_dot(yk, yk, r, s).sum()}, {yk}); });
  compare(tag, "outer_sum [E, F] x [E, 3]", repeats, [&] {
    torch::autograd::grad({ddgnn::outer_sum(w, u, r).sum()}, {w, u});
  });
  compare(tag, "edge_difference [N, 3]", repeats,
          [&] { torch::autograd::grad({ddgnn::edge_difference(pos, s, r).pow(2).sum()}, {pos}); });
  compare(tag, "gather_mul_sum, double backward", repeats, [&] {
    const at::Tensor h = ddgnn::gather_mul_sum(at::tanh(y), w, s, r);
    double_backward(at::tanh(h), y, {y, w});
  });
  // Edge-wise kernels: the shifted softplus on [E, F], the Gaussians of edge lengths and the
  // SchNet filter (12 Gaussians, F filters), each through the force pass and its backward.
  const at::Tensor x = at::randn({e, f}).requires_grad_(true);
  compare(tag, "ssp [E, F], double backward", repeats,
          [&] { double_backward(ddgnn::apply_activation("ssp", x), x, {x}); });
  const double cutoff = 5.0;
  const at::Tensor d = (0.5 + 4.4 * at::rand({e})).requires_grad_(true);
  const at::Tensor mu = at::linspace(0.0, cutoff, 12);
  const double coeff = -0.5 / std::pow(cutoff / 11.0, 2);
  const at::Tensor gauss = at::exp(coeff * (d.detach().unsqueeze(1) - mu).pow(2));
  const at::Tensor a1 = (at::randn({f, 12}) / 3.0).requires_grad_(true);
  const at::Tensor b1 = at::randn({f}).requires_grad_(true);
  const at::Tensor a2 = (at::randn({f, f}) / 8.0).requires_grad_(true);
  const at::Tensor b2 = at::randn({f}).requires_grad_(true);
  compare(tag, "schnet_filter, double backward", repeats, [&] {
    const bool fused = ddgnn::fused_kernels(d);
    const ddgnn::FilterBasis basis{
        mu,
        coeff,
        cutoff,
        fused ? ddgnn::envelope_values(d, cutoff, ddgnn::Envelope()) : std::array<at::Tensor, 3>{},
        at::Tensor(),
        ddgnn::Envelope(),
        at::Tensor()};
    const at::Tensor wf =
        ddgnn::schnet_filter(d, fused ? gauss : at::Tensor(), basis, a1, b1, a2, b2);
    double_backward(wf, d, {d, a1, b1, a2, b2});
  });
}

}  // namespace

int main(int argc, char** argv) {
  ddgnn::tune_allocator();
  at::set_num_threads(1);
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 200;
  const Shape a{"(a) 64 x 27 atoms, 5 nbrs", 64 * 27, 64 * 27 * 5, 32, repeats};
  const Shape b{"(b) 16 x 108 atoms, 45 nbrs", 16 * 108, 16 * 108 * 45, 64, repeats / 4 + 1};
  std::printf("%-28s %8s %8s %4s %12s %12s %12s %9s %9s\n", "shape", "atoms", "edges", "F",
              "segment us", "fused us", "index_add us", "speed-up", "fused");
  run(a);
  run(b);
  std::printf("\nfused CPU kernels against their generic versions (ATen ops), µs per call\n");
  std::printf("%-4s %-34s %12s %12s %10s\n", "", "op", "fused us", "generic us", "generic/f");
  run_generic("(a)", a);
  run_generic("(b)", b);
  return 0;
}
