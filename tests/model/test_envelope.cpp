// The radial envelopes (model/spec.h: cosine and DimeNet's polynomial) and the smooth neighbour
// cap (RadiusGraphOptions::smooth_cap, Architecture.smooth_neighbour_cap): the envelopes' values
// and derivatives; the boundary edge of each capped receiver; an energy that stays continuous as
// neighbours change rank where the hard cap jumps; and forces and stress that are the derivatives
// of that energy (float64, finite differences) for SchNet and PAINN, the models with an envelope.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <torch/csrc/autograd/autograd.h>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "../common/small_spec.h"
#include "../common/structures.h"
#include "core/error.h"
#include "model/batch.h"
#include "model/gnn.h"
#include "model/predict.h"

namespace ddgnn {
namespace {

using testing::Structure;

TEST(Envelope, OneAtZeroZeroWithZeroSlopeAtTheRadiusAndItsDerivativesAreAutograds) {
  const double rc = 4.0;
  for (const Envelope& e :
       {Envelope{}, Envelope{Envelope::kPolynomial, 5}, Envelope{Envelope::kPolynomial, 6},
        Envelope{Envelope::kPolynomial, 1}}) {
    SCOPED_TRACE(to_string(e.kind) + " " + std::to_string(e.p));
    const auto ends = envelope_terms(at::tensor({1e-9, rc}, at::kDouble), rc, e);
    EXPECT_NEAR(ends[0][0].item<double>(), 1.0, 1e-9);
    EXPECT_NEAR(ends[0][1].item<double>(), 0.0, 1e-15);
    EXPECT_NEAR(ends[1][1].item<double>(), 0.0, 1e-14);
    at::manual_seed(5);
    const at::Tensor d = (0.05 + 0.95 * at::rand({50}, at::kDouble)) * rc;
    const at::Tensor x = d.clone().requires_grad_(true);
    const at::Tensor u = envelope_of(x / rc, e);
    const at::Tensor du = torch::autograd::grad({u.sum()}, {x}, {}, true, true)[0];
    const at::Tensor d2u = torch::autograd::grad({du.sum()}, {x})[0];
    const auto terms = envelope_terms(d, rc, e);
    const auto values = envelope_values(d, rc, e);
    for (const auto& t : {terms, values}) {
      EXPECT_LT((t[0] - u.detach()).abs().max().item<double>(), 1e-13);
      EXPECT_LT((t[1] - du.detach()).abs().max().item<double>(), 1e-12);
      EXPECT_LT((t[2] - d2u).abs().max().item<double>(), 1e-11);
    }
    // Between 0 and the radius it falls monotonically from 1 to 0.
    EXPECT_LE(terms[1].max().item<double>(), 0.0);
    EXPECT_GT(terms[0].min().item<double>(), 0.0);
    EXPECT_LT(terms[0].max().item<double>(), 1.0);
  }
  // The polynomial stays near 1 where the cosine has already fallen (a third of the radius).
  const at::Tensor third = at::tensor({rc / 3}, at::kDouble);
  EXPECT_GT(envelope_terms(third, rc, {Envelope::kPolynomial, 6})[0].item<double>(), 0.95);
  EXPECT_LT(envelope_terms(third, rc, {})[0].item<double>(), 0.8);
  EXPECT_THROW(envelope_terms(third, rc, {Envelope::kPolynomial, 0}), ConfigError);
}

TEST(SmoothCap, BoundaryIsTheFarthestKeptEdgeOfEachCappedReceiver) {
  const int64_t k = 4;
  // Every atom of the periodic cells has more than k neighbours within 3 Å; those of the
  // molecule have at most 4.
  const std::vector<Structure> ss = {testing::triclinic_cell({6, 8, 1, 1, 6, 8, 1, 1}, 3, 0.15),
                                     testing::methanol()};
  const GraphBatch b = testing::batch_of(ss, 3.0, at::kDouble, c10::Device(c10::kCPU), k, true);
  ASSERT_TRUE(b.cap_boundary.defined());
  EXPECT_EQ(b.cut_atoms, 8);
  const EdgeGeometry g(b, b.pos, 3.0);
  const at::Tensor ptr = b.receivers->ptr, boundary = b.cap_boundary, len = g.len();
  ASSERT_TRUE(g.edge_cutoff().defined());
  int capped = 0, free = 0;
  for (int64_t i = 0; i < b.n_atoms(); ++i) {
    const int64_t first = ptr[i].item<int64_t>(), end = ptr[i + 1].item<int64_t>();
    ASSERT_LE(end - first, k + 1) << "atom " << i;
    const bool is_capped = end - first == k + 1;
    capped += is_capped;
    free += !is_capped;
    for (int64_t e = first; e < end; ++e) {
      SCOPED_TRACE("atom " + std::to_string(i) + ", edge " + std::to_string(e));
      EXPECT_EQ(boundary[e].item<int64_t>(), is_capped ? end - 1 : -1);
      EXPECT_LE(len[e].item<double>(), len[end - 1].item<double>());
      EXPECT_DOUBLE_EQ(g.edge_cutoff()[e].item<double>(),
                       is_capped ? len[end - 1].item<double>() : 3.0);
    }
    if (is_capped) {  // the boundary edge itself has a zero envelope
      EXPECT_NEAR(g.envelope()[end - 1].item<double>(), 0.0, 1e-15);
    }
  }
  EXPECT_EQ(capped, 8);
  EXPECT_EQ(free, 5);
  EXPECT_THROW(g.cutoff_values(), Error);  // the radius moves with the positions
}

TEST(SmoothCap, NothingCappedLeavesTheBatchAsWithoutIt) {
  const std::vector<Structure> ss = {testing::methanol()};
  const GraphBatch on = testing::batch_of(ss, 3.0, at::kDouble, c10::Device(c10::kCPU), 4, true);
  const GraphBatch off = testing::batch_of(ss, 3.0, at::kDouble, c10::Device(c10::kCPU), 4);
  EXPECT_FALSE(on.cap_boundary.defined());
  EXPECT_TRUE(at::equal(on.edge_index, off.edge_index));
}

struct EnvelopeCase {
  std::string type;
  Envelope envelope;
};

class EnvelopeModel : public ::testing::TestWithParam<EnvelopeCase> {
 protected:
  std::shared_ptr<Gnn> model(double radius) const {
    at::manual_seed(11);
    GnnSpec spec = testing::small_spec(GetParam().type, radius);
    spec.layer.envelope = GetParam().envelope;
    auto gnn = std::make_shared<Gnn>(spec);
    gnn->to(at::kDouble);
    return gnn;
  }
};

Prediction predict_capped(Gnn& gnn, const std::vector<Structure>& ss, double radius, int64_t k,
                          bool smooth, bool stress) {
  const GraphBatch b =
      testing::batch_of(ss, radius, at::kDouble, c10::Device(c10::kCPU), k, smooth);
  TargetSpec t = testing::targets_of(gnn.spec(), /*conservative=*/true);
  t.stress = stress;
  return predict(gnn, t, b, /*create_graph=*/false);
}

// Six atoms, each with the five others within the radius, and max_neighbours 3: every center is
// capped, and the sixth atom moving from 1.2 to 2.9 Å of the first passes three of its
// neighbours in rank (and changes rank in the other atoms' lists too).
Structure moving_cluster(double t) {
  Structure s;
  s.z = {6, 8, 1, 1, 6, 1};
  const double r = 1.2 + 1.7 * t, u = r / std::sqrt(3.0);
  s.pos = {0, 0, 0, 1.4, 0, 0, 0, 1.8, 0, 0, 0, 2.2, -1.5, -1.5, 0.3, -u, 0.9 * u, u};
  s.cell = std::vector<double>(9, 0.0);
  s.pbc = {0, 0, 0};
  return s;
}

// The largest change of the energy between neighbouring points of n steps along the path.
double largest_step(Gnn& gnn, int n, bool smooth) {
  double prev = 0, most = 0;
  for (int i = 0; i <= n; ++i) {
    const double e = predict_capped(gnn, {moving_cluster(double(i) / n)}, 5.0, 3, smooth, false)
                         .energy.item<double>();
    if (i > 0) most = std::max(most, std::fabs(e - prev));
    prev = e;
  }
  return most;
}

TEST_P(EnvelopeModel, SmoothCapEnergyIsContinuousWhereTheHardCapJumps) {
  auto gnn = model(5.0);
  // A continuous energy: the largest step shrinks with the step size. A jump stays.
  const double smooth_coarse = largest_step(*gnn, 50, true);
  const double smooth_fine = largest_step(*gnn, 400, true);
  const double hard_coarse = largest_step(*gnn, 50, false);
  const double hard_fine = largest_step(*gnn, 400, false);
  EXPECT_GT(smooth_coarse, 0.0);
  EXPECT_LT(smooth_fine, 0.25 * smooth_coarse)
      << "smooth: " << smooth_coarse << " -> " << smooth_fine;
  EXPECT_GT(hard_fine, 0.5 * hard_coarse) << "hard: " << hard_coarse << " -> " << hard_fine;
}

TEST_P(EnvelopeModel, ForcesAndStressAreDerivativesOfTheEnergyWithASmoothCap) {
  const double radius = 3.0;
  const int64_t k = 6;
  auto gnn = model(radius);
  const std::vector<Structure> ss = {testing::triclinic_cell({6, 8, 1, 1, 6, 8, 1, 1}, 5, 0.12)};
  const Prediction p = predict_capped(*gnn, ss, radius, k, true, true);
  ASSERT_GT(testing::batch_of(ss, radius, at::kDouble, c10::Device(c10::kCPU), k, true).cut_atoms,
            0);
  auto energy = [&](const Structure& s) {
    return predict_capped(*gnn, {s}, radius, k, true, false).energy.item<double>();
  };
  const double h = 1e-5;
  for (int a : {0, 3, 6})
    for (int c = 0; c < 3; ++c) {
      Structure plus = ss[0], minus = ss[0];
      plus.pos[size_t(3 * a + c)] += h;
      minus.pos[size_t(3 * a + c)] -= h;
      const double fd = -(energy(plus) - energy(minus)) / (2 * h);
      EXPECT_NEAR(p.forces[a][c].item<double>(), fd, 1e-7 + 1e-6 * std::fabs(fd))
          << "atom " << a << " component " << c;
    }
  // Stress: (1/V) dE/dε under a diagonal and a shear strain of positions and cell.
  const double* cell = ss[0].cell.data();
  const double volume = std::fabs(cell[0] * (cell[4] * cell[8] - cell[5] * cell[7]) -
                                  cell[1] * (cell[3] * cell[8] - cell[5] * cell[6]) +
                                  cell[2] * (cell[3] * cell[7] - cell[4] * cell[6]));
  for (const auto& ij : std::vector<std::pair<int, int>>{{0, 0}, {2, 2}, {0, 1}, {1, 2}}) {
    const int i = ij.first, j = ij.second;  // a lambda may not capture structured bindings (C++17)
    auto strained = [&](double e) {
      double m[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
      m[3 * i + j] += e / 2;
      m[3 * j + i] += e / 2;
      Structure t = ss[0];
      for (auto* rows : {&t.pos, &t.cell})
        for (size_t r = 0; r + 2 < rows->size(); r += 3) {
          const double x = (*rows)[r], y = (*rows)[r + 1], z = (*rows)[r + 2];
          for (int c = 0; c < 3; ++c)
            (*rows)[r + size_t(c)] = x * m[c] + y * m[3 + c] + z * m[6 + c];
        }
      return t;
    };
    const double fd = (energy(strained(h)) - energy(strained(-h))) / (2 * h) / volume;
    EXPECT_NEAR(p.stress[0][i][j].item<double>(), fd, 1e-7 + 1e-6 * std::fabs(fd)) << "σ" << i << j;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, EnvelopeModel,
                         ::testing::Values(EnvelopeCase{"SchNet", {}}, EnvelopeCase{"PAINN", {}},
                                           EnvelopeCase{"SchNet", {Envelope::kPolynomial, 6}},
                                           EnvelopeCase{"PAINN", {Envelope::kPolynomial, 5}}),
                         [](const auto& info) {
                           return info.param.type +
                                  (info.param.envelope.kind == Envelope::kCosine
                                       ? std::string("_cosine")
                                       : "_polynomial" + std::to_string(info.param.envelope.p));
                         });

}  // namespace
}  // namespace ddgnn
