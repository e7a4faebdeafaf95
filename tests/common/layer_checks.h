// What the layer tests share: a small molecule with an isolated atom, input features that follow
// the atoms, one fixed rotation, and a tensor comparison.
#pragma once

#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../common/structures.h"
#include "model/batch.h"
#include "model/layer.h"

namespace ddgnn::testing {

// A distorted CH4 (4 neighbours each within 3 Å) and one isolated H (no neighbours), not periodic.
inline Structure ch4_and_lone_h() {
  Structure s;
  s.z = {6, 1, 1, 1, 1, 1};
  s.pos = {0.02,  -0.01, 0.03, 0.65, 0.6,   0.66,  -0.6, -0.64, 0.61,
           -0.63, 0.62,  -0.6, 0.61, -0.66, -0.62, 5.0,  5.0,   5.0};
  s.cell = std::vector<double>(9, 0.0);
  s.pbc = {0, 0, 0};
  return s;
}

// Input features [n_atoms, f], a fixed random row per atomic number (so they follow the atoms
// under permutation).
inline at::Tensor atom_features(const GraphBatch& b, int64_t f) {
  std::mt19937 rng(11);
  std::normal_distribution<double> normal;
  std::vector<double> table(size_t(128 * f));
  for (double& x : table) x = normal(rng);
  return at::tensor(table).view({128, f}).index_select(0, b.z);
}

// A proper rotation, Rz(0.7) Ry(-1.1) Rx(2.3), row-major [9].
inline std::vector<double> euler_rotation() {
  const double a = 0.7, c = -1.1, e = 2.3;
  const double rz[3][3] = {
      {std::cos(a), -std::sin(a), 0}, {std::sin(a), std::cos(a), 0}, {0, 0, 1}};
  const double ry[3][3] = {
      {std::cos(c), 0, std::sin(c)}, {0, 1, 0}, {-std::sin(c), 0, std::cos(c)}};
  const double rx[3][3] = {
      {1, 0, 0}, {0, std::cos(e), -std::sin(e)}, {0, std::sin(e), std::cos(e)}};
  double t[3][3] = {};
  std::vector<double> r(9, 0.0);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 3; ++k) t[i][j] += ry[i][k] * rx[k][j];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 3; ++k) r[size_t(3 * i + j)] += rz[i][k] * t[k][j];
  return r;
}

// Every 3 consecutive values of xs (a row vector) -> r x, r row-major [9].
inline void rotate_rows(std::vector<double>& xs, const std::vector<double>& r) {
  for (size_t k = 0; k + 2 < xs.size(); k += 3) {
    const double x[3] = {xs[k], xs[k + 1], xs[k + 2]};
    for (size_t i = 0; i < 3; ++i)
      xs[k + i] = r[3 * i] * x[0] + r[3 * i + 1] * x[1] + r[3 * i + 2] * x[2];
  }
}

// The structures {cell, molecule} transformed in the ways an energy must not notice, by name:
// rotated (cell and positions), translated, the cell's atoms in reverse order, and one atom of
// the cell (atom 3) moved by a lattice vector (a2 - a3).
inline std::vector<std::pair<std::string, std::vector<Structure>>> invariance_cases(
    const Structure& cell, const Structure& mol) {
  std::vector<std::pair<std::string, std::vector<Structure>>> out;
  Structure rc = cell, rm = mol;
  const std::vector<double> r = euler_rotation();
  rotate_rows(rc.pos, r), rotate_rows(rc.cell, r), rotate_rows(rm.pos, r);
  out.push_back({"rotation", {rc, rm}});
  Structure tc = cell, tm = mol;
  for (size_t k = 0; k < tc.pos.size(); ++k) tc.pos[k] += 0.37 * double(k % 3) - 0.5;
  for (size_t k = 0; k < tm.pos.size(); ++k) tm.pos[k] += 1.3 - 0.2 * double(k % 3);
  out.push_back({"translation", {tc, tm}});
  Structure pc = cell;
  const size_t n = cell.z.size();
  for (size_t a = 0; a < n; ++a) {
    pc.z[a] = cell.z[n - 1 - a];
    for (size_t c = 0; c < 3; ++c) pc.pos[3 * a + c] = cell.pos[3 * (n - 1 - a) + c];
  }
  out.push_back({"permutation", {pc, mol}});
  Structure sc = cell;
  for (size_t c = 0; c < 3; ++c) sc.pos[9 + c] += cell.cell[3 + c] - cell.cell[6 + c];
  out.push_back({"periodic image shift", {sc, mol}});
  return out;
}

// Same shape and max |a - b| < tol.
inline void expect_close(const at::Tensor& a, const at::Tensor& b, double tol,
                         const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const double err = (a - b).abs().max().item<double>();
  EXPECT_LT(err, tol) << what << ": max |difference| " << err;
}

// A layer against its plain-ops reference, both functions of the positions (float64): outputs,
// the parameter gradients of a weighted sum of them (each parameter used, when
// `every_parameter_used`) and, when `uses_pos`, the forces d sum(inv) / d pos and the parameter
// gradients of a weighted sum of the forces (second derivatives), each to 1e-10.
inline void expect_matches_reference(MessagePassing& l, const GraphBatch& b,
                                     const std::function<NodeState(const at::Tensor&)>& fast,
                                     const std::function<NodeState(const at::Tensor&)>& ref,
                                     bool uses_pos, bool every_parameter_used) {
  const std::vector<at::Tensor> params = l.parameters();
  std::vector<std::vector<at::Tensor>> grads1, grads2;
  std::vector<NodeState> outs;
  std::vector<at::Tensor> forces;
  at::Tensor w_inv, w_equiv;
  const at::Tensor w_pos = at::randn({b.n_atoms(), 3}, at::kDouble);
  for (int is_fast = 1; is_fast >= 0; --is_fast) {
    const at::Tensor pos = b.pos.clone().requires_grad_(true);
    const NodeState out = is_fast ? fast(pos) : ref(pos);
    if (!w_inv.defined()) w_inv = at::randn(out.inv.sizes(), at::kDouble);
    if (out.equiv.defined() && !w_equiv.defined())
      w_equiv = at::randn(out.equiv.sizes(), at::kDouble);
    outs.push_back(out);
    at::Tensor loss = (out.inv * w_inv).sum();
    if (out.equiv.defined()) loss = loss + (out.equiv * w_equiv).sum();
    grads1.push_back(torch::autograd::grad({loss}, params, {}, true, false, true));
    if (!uses_pos) continue;
    const at::Tensor force = torch::autograd::grad({out.inv.sum()}, {pos}, {}, true, true)[0];
    forces.push_back(force);
    grads2.push_back(
        torch::autograd::grad({(force * w_pos).sum()}, params, {}, false, false, true));
  }
  expect_close(outs[0].inv, outs[1].inv, 1e-10, "inv");
  if (outs[0].equiv.defined()) expect_close(outs[0].equiv, outs[1].equiv, 1e-10, "equiv");
  const auto names = l.named_parameters().keys();
  for (size_t k = 0; k < params.size(); ++k) {
    ASSERT_TRUE(grads1[0][k].defined() && grads1[1][k].defined()) << names[k];
    expect_close(grads1[0][k], grads1[1][k], 1e-10, "d loss / d " + names[k]);
    if (every_parameter_used) {
      EXPECT_GT(grads1[0][k].abs().max().item<double>(), 1e-6) << names[k] << " is not used";
    }
  }
  if (!uses_pos) return;
  expect_close(forces[0], forces[1], 1e-10, "d sum(inv) / d pos");
  EXPECT_GT(forces[0].abs().max().item<double>(), 1e-4);
  int n_defined = 0;
  for (size_t k = 0; k < params.size(); ++k) {
    ASSERT_EQ(grads2[0][k].defined(), grads2[1][k].defined()) << names[k];
    if (!grads2[0][k].defined()) continue;
    ++n_defined;
    expect_close(grads2[0][k], grads2[1][k], 1e-10, "d (forces . w) / d " + names[k]);
  }
  EXPECT_GT(n_defined, int(params.size()) / 2);
}

}  // namespace ddgnn::testing
