// Benchmark of the radius graph (model/radius_graph): graphs/s and µs per graph for small
// periodic cells in batches of 64, and µs per atom for 4,000- and 32,000-atom cells (O(n_atoms)).
// Beside the cell lists, µs per graph of the tensor build (model/device_graph) on the CPU device:
// all pairs per graph, so it is run up to 4,000 atoms per graph. Single thread. Prints a table.
//
// usage: bench_radius_graph [seconds_per_case=1.0]
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "model/device_graph.h"
#include "model/radius_graph.h"

namespace {

using Clock = std::chrono::steady_clock;

// A batch of structures, concatenated as radius_graph_batch takes them.
struct Batch {
  std::vector<double> pos;  // [n_atoms, 3] Å
  std::vector<int64_t> offsets{0};
  std::vector<double> cells;  // [n_graphs, 9] Å
  std::vector<uint8_t> pbc;   // [n_graphs, 3]
  int64_t n_graphs() const { return static_cast<int64_t>(offsets.size()) - 1; }
};

// A crystal of reps^3 cubic cells of edge a (Å) with the given fractional basis, every atom
// displaced by `displace(rng)` (Å, per Cartesian component), appended to the batch.
template <class Displace>
void add_crystal(Batch& batch, int reps, double a, const std::vector<std::array<double, 3>>& basis,
                 std::mt19937_64& rng, Displace displace) {
  for (int x = 0; x < reps; ++x)
    for (int y = 0; y < reps; ++y)
      for (int z = 0; z < reps; ++z)
        for (const auto& p : basis) {
          const auto d = displace(rng);
          batch.pos.insert(batch.pos.end(),
                           {(x + p[0]) * a + d[0], (y + p[1]) * a + d[1], (z + p[2]) * a + d[2]});
        }
  batch.offsets.push_back(static_cast<int64_t>(batch.pos.size() / 3));
  const double l = a * reps;
  batch.cells.insert(batch.cells.end(), {l, 0, 0, 0, l, 0, 0, 0, l});
  batch.pbc.insert(batch.pbc.end(), {1, 1, 1});
}

struct Case {
  std::string name;
  std::vector<Batch> batches;  // timed round-robin (different structures each call)
  ddgnn::RadiusGraphOptions options;
  bool tensors = false;  // also convert to edge_index / shift tensors
};

struct Result {
  double seconds_per_batch = 0;
  int64_t edges = 0;
};

// Largest graphs the tensor build is timed on (all pairs: O(n_atoms^2) per graph).
constexpr int64_t kTensorMaxAtoms = 4000;

// One build of the batch's graph; returns the number of edges.
int64_t build(const Case& c, const Batch& b, bool tensor_build) {
  if (tensor_build) {
    const at::Tensor pos =
        at::from_blob(const_cast<double*>(b.pos.data()), {b.offsets.back(), 3}, at::kDouble);
    const ddgnn::DeviceEdges e = ddgnn::radius_graph_tensors(
        pos, b.pos.data(), b.offsets.data(), b.n_graphs(), b.cells.data(), b.pbc.data(), c.options);
    if (c.tensors && e.shift.to(at::kFloat).size(0) != e.edge_index.size(1)) std::abort();
    return e.edge_index.size(1);
  }
  const ddgnn::Edges e = ddgnn::radius_graph_batch(b.pos.data(), b.offsets.data(), b.n_graphs(),
                                                   b.cells.data(), b.pbc.data(), c.options);
  if (c.tensors) {
    const at::Tensor index = ddgnn::edge_index_tensor(e);
    const at::Tensor shift = ddgnn::edge_shift_tensor(e, at::kFloat);
    if (index.size(1) != shift.size(0)) std::abort();
  }
  return e.size();
}

Result run(const Case& c, double seconds, bool tensor_build) {
  Result best{1e30, 0};
  for (int repeat = 0; repeat < 3; ++repeat) {
    int64_t calls = 0;
    const auto start = Clock::now();
    double elapsed = 0;
    while (elapsed < seconds / 3 || calls < 2) {
      const Batch& b = c.batches[calls % c.batches.size()];
      best.edges = build(c, b, tensor_build);
      ++calls;
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    }
    best.seconds_per_batch = std::min(best.seconds_per_batch, elapsed / calls);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 1.0;
  at::set_num_threads(1);
  std::mt19937_64 rng(2024);
  const std::vector<std::array<double, 3>> sc{{0, 0, 0}};
  const std::vector<std::array<double, 3>> fcc{{0, 0, 0}, {0, .5, .5}, {.5, 0, .5}, {.5, .5, 0}};
  auto ball = [](std::mt19937_64& g) {  // uniform in a ball of radius 0.19 Å
    std::uniform_real_distribution<double> u(-0.19, 0.19);
    for (;;) {
      const std::array<double, 3> d{u(g), u(g), u(g)};
      if (d[0] * d[0] + d[1] * d[1] + d[2] * d[2] <= 0.19 * 0.19) return d;
    }
  };
  auto thermal = [](std::mt19937_64& g) {  // rms displacement 0.1 Å
    std::normal_distribution<double> n(0.0, 0.1 / std::sqrt(3.0));
    return std::array<double, 3>{n(g), n(g), n(g)};
  };

  std::vector<Case> cases;
  auto batches = [&](int n_batches, int per_batch, int reps, double a, const auto& basis,
                     auto displace) {
    std::vector<Batch> out(n_batches);
    for (auto& b : out)
      for (int g = 0; g < per_batch; ++g) add_crystal(b, reps, a, basis, rng, displace);
    return out;
  };
  cases.push_back({"sc 27 atoms, max_neighbours 5", batches(16, 64, 3, 3.8, sc, ball), {5.0, 5}});
  cases.push_back(cases.back());
  cases.back().name = "  same + edge tensors (fp32)";
  cases.back().tensors = true;
  cases.push_back({"fcc Cu 108 atoms", batches(4, 64, 3, 3.615, fcc, thermal), {5.0, 0}});
  cases.push_back({"fcc Cu 4,000 atoms", batches(2, 1, 10, 3.615, fcc, thermal), {5.0, 0}});
  cases.push_back({"fcc Cu 32,000 atoms", batches(1, 1, 20, 3.615, fcc, thermal), {5.0, 0}});

  std::printf("radius graph, radius 5 Å, single thread, %.1f s per case\n", seconds);
  std::printf("%-32s %8s %7s %10s %12s %12s %10s %14s\n", "case", "atoms/g", "batch", "edges/atom",
              "graphs/s", "us/graph", "us/atom", "tensors us/g");
  auto timed_tensors = [](const Case& c) {
    const Batch& b = c.batches.front();
    return b.offsets.back() / b.n_graphs() <= kTensorMaxAtoms;
  };
  for (const Case& c : cases) {  // warm-up: page faults, allocator thresholds
    run(c, 0.05, false);
    if (timed_tensors(c)) run(c, 0.05, true);
  }
  for (const Case& c : cases) {
    const Result r = run(c, seconds, false);
    const Batch& b = c.batches.front();
    const double graphs = static_cast<double>(b.n_graphs());
    const double atoms = static_cast<double>(b.offsets.back());
    std::printf("%-32s %8.0f %7.0f %10.1f %12.0f %12.2f %10.3f", c.name.c_str(), atoms / graphs,
                graphs, static_cast<double>(r.edges) / atoms, graphs / r.seconds_per_batch,
                1e6 * r.seconds_per_batch / graphs, 1e6 * r.seconds_per_batch / atoms);
    if (timed_tensors(c)) {
      if (build(c, b, true) != build(c, b, false)) std::abort();  // the same graph both ways
      const Result t = run(c, seconds, true);
      std::printf(" %14.2f\n", 1e6 * t.seconds_per_batch / graphs);
    } else {
      std::printf(" %14s\n", "-");
    }
  }
  return 0;
}
