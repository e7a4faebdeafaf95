// The fixed batch shapes of training, chosen from the training set (train/static_shapes.h).
#include "train/static_shapes.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "config/train_settings.h"
#include "core/error.h"
#include "core/log.h"
#include "loader/split.h"
#include "train/model_setup.h"
#include "train/train_data.h"

namespace ddgnn {

namespace {

constexpr int64_t kSampleGraphs = 2048;  // graphs measured per rank
constexpr int64_t kDraws = 2000;         // batches drawn from them

// One graph's sizes.
struct GraphSize {
  int64_t atoms = 0, edges = 0, triplets = 0;
};

int64_t round_up(double x, int64_t to) {
  const int64_t v = int64_t(std::ceil(x));
  return (v + to - 1) / to * to;
}

int64_t ceil_div(int64_t a, int64_t b) {
  return b > 0 ? (a + b - 1) / b : 0;
}

// The sizes of the graphs of `b` (on the CPU, graph inputs made), appended to `out`; the most
// in-edges of one atom into `degree`.
void add_sizes(const GraphBatch& b, std::vector<GraphSize>& out, int64_t& degree) {
  const int64_t g = b.n_graphs;
  const at::Tensor edge_graph = b.graph_of_atom.index_select(0, b.edge_index[1]);
  const at::Tensor edges = at::bincount(edge_graph, {}, g);
  at::Tensor triplets;
  if (b.triplets.defined())
    triplets = at::bincount(edge_graph.index_select(0, b.triplets[1]), {}, g);
  const at::Tensor& ptr = b.receivers->ptr;
  if (b.n_atoms() > 0)
    degree = std::max(
        degree,
        (ptr.narrow(0, 1, b.n_atoms()) - ptr.narrow(0, 0, b.n_atoms())).max().item<int64_t>());
  const int64_t* a = b.atoms_per_graph.data_ptr<int64_t>();
  const int64_t* e = edges.data_ptr<int64_t>();
  const int64_t* t = triplets.defined() ? triplets.data_ptr<int64_t>() : nullptr;
  for (int64_t k = 0; k < g; ++k) out.push_back({a[k], e[k], t ? t[k] : 0});
}

}  // namespace

StaticShapes choose_static_shapes(const TrainSettings& s, const TrainData& data,
                                  const ModelSetup& setup_in) {
  ModelSetup setup = setup_in;  // batches measured on the host, unpadded
  setup.device = c10::Device(c10::kCPU);
  setup.static_shapes.reset();
  const int64_t n_train = data.size(kTrain);
  const int64_t stride =
      std::max<int64_t>(1, n_train / (std::max(1, data.group_size()) * kSampleGraphs));
  std::vector<GraphSize> sizes;
  int64_t stats[2] = {1, 1};  // most atoms of one graph (every local graph), most in-edges
  int64_t seen = 0;
  data.visit_local(kTrain, [&](const GraphBlock& block, const std::vector<int64_t>& ids) {
    std::vector<int64_t> picked;
    for (int64_t id : ids) {
      stats[0] = std::max<int64_t>(stats[0], block.n_atoms[size_t(id)]);
      if (seen++ % stride == 0 && int64_t(sizes.size() + picked.size()) < kSampleGraphs)
        picked.push_back(id);
    }
    for (size_t i = 0; i < picked.size(); i += 64) {
      const std::vector<int64_t> part(picked.begin() + long(i),
                                      picked.begin() + long(std::min(picked.size(), i + 64)));
      add_sizes(prepare_batch(block, part, setup).batch, sizes, stats[1]);
    }
  });
  data.max_stats(stats, 2);
  const int64_t graph_atoms = stats[0], degree = stats[1];
  StaticShapes out;
  out.pad.radius = setup.graph.radius;
  out.pad.pad_z = setup.spec.elements.empty() ? 1 : setup.spec.elements.front();
  out.pad.stress = setup.targets.stress;
  out.pad.cap_boundary = setup.graph.smooth_cap && setup.graph.max_neighbours > 0;
  const int64_t k_buckets = std::max<int64_t>(1, s.static_buckets);
  // Batches as training draws them (batch_size graphs, or fewer within the atom budget), from this
  // rank's measured graphs.
  std::vector<BatchSizes> draws;
  if (!sizes.empty()) {
    std::mt19937_64 rng(s.seed * 1000003ULL + 17);
    std::uniform_int_distribution<size_t> pick(0, sizes.size() - 1);
    for (int64_t d = 0; d < kDraws; ++d) {
      BatchSizes b;
      while (b.graphs < s.batch_size) {
        const GraphSize& g = sizes[pick(rng)];
        if (s.atom_budget > 0 && b.graphs > 0 && b.atoms + g.atoms > s.atom_budget) break;
        ++b.graphs;
        b.atoms += g.atoms;
        b.edges += g.edges;
        b.triplets += g.triplets;
        b.graph_atoms = std::max(b.graph_atoms, g.atoms);
      }
      draws.push_back(b);
    }
    std::sort(draws.begin(), draws.end(), [](const BatchSizes& a, const BatchSizes& b) {
      return a.atoms != b.atoms ? a.atoms < b.atoms : a.edges < b.edges;
    });
  }
  // Each group's shape: room for its largest batch, and for the padding of its smallest one
  // spread within `degree` (pad triplets over pad edges, pad edges over pad atoms).
  std::vector<int64_t> caps(size_t(6 * k_buckets), 0);
  for (int64_t k = 0; k < k_buckets && !draws.empty(); ++k) {
    const size_t lo = size_t(k) * draws.size() / size_t(k_buckets);
    const size_t hi = std::max(lo + 1, size_t(k + 1) * draws.size() / size_t(k_buckets));
    BatchSizes most, least = draws[lo];
    for (size_t i = lo; i < hi; ++i) {
      const BatchSizes& b = draws[i];
      most.graphs = std::max(most.graphs, b.graphs);
      most.atoms = std::max(most.atoms, b.atoms);
      most.edges = std::max(most.edges, b.edges);
      most.triplets = std::max(most.triplets, b.triplets);
      least.atoms = std::min(least.atoms, b.atoms);
      least.edges = std::min(least.edges, b.edges);
      least.triplets = std::min(least.triplets, b.triplets);
    }
    const int64_t t = most.triplets > 0 ? round_up(1.02 * double(most.triplets), 8) : 0;
    const int64_t e = round_up(std::max(1.02 * double(most.edges),
                                        double(most.edges + ceil_div(t - least.triplets, degree))),
                               8);
    const int64_t n =
        round_up(double(most.atoms + std::max<int64_t>(1, ceil_div(e - least.edges, degree))), 8);
    int64_t* c = &caps[size_t(6 * k)];
    c[0] = most.graphs + ceil_div(n - least.atoms, graph_atoms);
    c[1] = n;
    c[2] = e;
    c[3] = t;
  }
  data.max_stats(caps.data(), int64_t(caps.size()));
  for (int64_t k = 0; k < k_buckets; ++k) {
    const int64_t* c = &caps[size_t(6 * k)];
    if (c[1] == 0) continue;
    ShapeBucket b{c[0], c[1], c[2], c[3], graph_atoms, degree};
    // Groups of the same largest batch make the same shape: kept once.
    if (!out.buckets.empty() && out.buckets.back().atoms >= b.atoms &&
        out.buckets.back().edges >= b.edges && out.buckets.back().triplets >= b.triplets &&
        out.buckets.back().graphs >= b.graphs)
      continue;
    out.buckets.push_back(b);
  }
  int64_t fit = 0;
  double atoms = 0, edges = 0, atoms_padded = 0, edges_padded = 0;
  for (const BatchSizes& b : draws) {
    const int k = fit_bucket(out.buckets, b);
    if (k < 0) continue;
    ++fit;
    atoms += double(b.atoms);
    edges += double(b.edges);
    atoms_padded += double(out.buckets[size_t(k)].atoms);
    edges_padded += double(out.buckets[size_t(k)].edges);
  }
  out.fit_share = draws.empty() ? 0.0 : double(fit) / double(draws.size());
  out.atom_overhead = atoms > 0 ? atoms_padded / atoms - 1.0 : 0.0;
  out.edge_overhead = edges > 0 ? edges_padded / edges - 1.0 : 0.0;
  return out;
}

std::string describe(const StaticShapes& shapes) {
  std::string s = std::to_string(shapes.buckets.size()) + " shape(s): ";
  for (size_t k = 0; k < shapes.buckets.size(); ++k)
    s += (k ? "; " : "") + to_string(shapes.buckets[k]);
  return s + "; " + fmt("%.1f", 100.0 * shapes.fit_share) + "% of sampled batches fit one, " +
         "padding adds " + fmt("%.0f", 100.0 * shapes.atom_overhead) + "% atoms and " +
         fmt("%.0f", 100.0 * shapes.edge_overhead) + "% edges";
}

}  // namespace ddgnn
