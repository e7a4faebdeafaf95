// The per-element and per-row bodies of the CUDA kernels (model/cuda/segment_rows.h,
// schnet_rows.h), compiled by g++ and run here over every (row, column) a grid would cover, one
// after another, against the generic ATen versions in float64: sorted and unsorted maps with
// empty rows, a map without edges, the CSR order given or not (a sorted index's identity), the
// row reductions split into 32 lanes' shares as a warp sums them. What only a GPU can check (the
// thread mappings, the launches, autograd on CUDA tensors): tests/gpu/test_gpu.cpp.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <string>
#include <vector>

#include "../common/derivatives.h"
#include "model/batch.h"
#include "model/cuda/schnet_rows.h"
#include "model/cuda/segment_rows.h"
#include "model/segment.h"
#include "model/segment_generic.h"

namespace ddgnn {
namespace {

using cuda::SegmentMap;

using testing::expect_rel;

// out[r, c] = body(r, c) for every row and column: the cells a rows_kernel's grid covers.
template <typename Body>
at::Tensor by_rows(int64_t rows, int64_t cols, Body body) {
  at::Tensor out = at::empty({rows, cols}, at::kDouble);
  double* op = out.data_ptr<double>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) op[r * cols + c] = body(r, c);
  return out;
}

// A row's sum as a warp takes it: the 32 lanes' shares, added.
template <typename Part>
double by_lanes(Part part) {
  double sum = 0.0;
  for (int lane = 0; lane < 32; ++lane) sum += part(lane, 32);
  return sum;
}

SegmentMap map_of(const SegmentIndex& s) {
  return {s.index.data_ptr<int64_t>(), s.order.defined() ? s.order.data_ptr<int64_t>() : nullptr,
          s.ptr.data_ptr<int64_t>()};
}

// Receivers sorted, senders not, over n rows of which some have no edge (the last three, and
// whichever the draw misses). `generic`: the maps as on a GPU (order always defined); else the
// CPU's (a sorted index without order).
struct Maps {
  int64_t n, e;
  SegmentIndex r, s;
};

Maps make_maps(int64_t n, int64_t e, int seed, bool generic) {
  at::manual_seed(seed);
  const at::Tensor recv =
      e > 0 ? std::get<0>(at::randint(0, n - 3, {e}, at::kLong).sort()) : at::empty({0}, at::kLong);
  const at::Tensor send = at::randint(0, n - 3, {e}, at::kLong);
  if (generic)
    return {n, e, generic::make_segment_index(recv, n), generic::make_segment_index(send, n)};
  return {n, e, make_segment_index(recv, n), make_segment_index(send, n)};
}

class CudaSegmentBodies : public ::testing::TestWithParam<int> {};

TEST_P(CudaSegmentBodies, MatchTheGenericVersions) {
  const int c = GetParam();
  const bool generic = c % 2 == 0;
  const int64_t e_count = c < 2 ? 200 : 0;
  SCOPED_TRACE(std::string(generic ? "CSR order given" : "sorted index without order") +
               (e_count == 0 ? ", no edges" : ""));
  const Maps m = make_maps(30, e_count, 11 + c, generic);
  if (!generic) {
    EXPECT_FALSE(m.r.order.defined()) << "a sorted index: the identity order";
  }
  const SegmentMap r = map_of(m.r), s = map_of(m.s);
  const int64_t k = 3, f = 5, n = m.n, e = m.e;
  at::manual_seed(5);
  const at::Tensor x = at::randn({e, k, f}, at::kDouble), y = at::randn({n, k, f}, at::kDouble);
  const at::Tensor q = at::randn({n, k, f}, at::kDouble), w = at::randn({e, f}, at::kDouble);
  const at::Tensor u = at::randn({e, k}, at::kDouble), y2 = at::randn({n, f}, at::kDouble);
  const double *xp = x.data_ptr<double>(), *yp = y.data_ptr<double>(), *qp = q.data_ptr<double>();
  const double *wp = w.data_ptr<double>(), *up = u.data_ptr<double>(), *y2p = y2.data_ptr<double>();
  const int64_t kf = k * f;

  // Segment sums in CSR order: the fused CPU kernels' order too (increasing edge order within a
  // row), so equal to them bit for bit.
  for (const auto* map : {&m.r, &m.s}) {
    const SegmentMap dm = map_of(*map);
    const at::Tensor sum = by_rows(
        n, kf, [&](int64_t i, int64_t j) { return cuda::segment_sum_at(xp, dm, kf, i, j); });
    expect_rel(sum, generic::scatter_sum(x, *map).view({n, kf}), 1e-14, "segment_sum");
    EXPECT_TRUE(at::equal(sum, scatter_sum(x, *map).view({n, kf}))) << "segment_sum, bitwise";
  }
  expect_rel(
      by_rows(n, kf,
              [&](int64_t i, int64_t j) { return cuda::difference_sum_at(xp, s, r, kf, i, j); }),
      (generic::scatter_sum(x, m.s) - generic::scatter_sum(x, m.r)).view({n, kf}), 1e-14,
      "difference_sum");
  expect_rel(by_rows(e, kf, [&](int64_t i, int64_t j) { return cuda::gather_at(yp, s, kf, i, j); }),
             generic::gather_rows(y, m.s).view({e, kf}), 0.0, "gather_rows");
  expect_rel(
      by_rows(e, kf, [&](int64_t i, int64_t j) { return cuda::difference_at(yp, s, r, kf, i, j); }),
      generic::edge_difference(y, m.s, m.r).view({e, kf}), 0.0, "edge_difference");
  // gather_mul_sum both ways round (the second is the first's backward in y), [N, K, F] and
  // [N, F].
  expect_rel(by_rows(n, kf,
                     [&](int64_t i, int64_t j) {
                       return cuda::gather_mul_sum_at(yp, wp, s, r, k, f, i, j);
                     }),
             generic::gather_mul_sum(y, w, m.s, m.r).view({n, kf}), 1e-13, "gather_mul_sum");
  expect_rel(
      by_rows(
          n, kf,
          [&](int64_t i, int64_t j) { return cuda::gather_mul_sum_at(yp, wp, r, s, k, f, i, j); }),
      generic::gather_mul_sum(y, w, m.r, m.s).view({n, kf}), 1e-13, "gather_mul_sum, maps swapped");
  expect_rel(by_rows(n, f,
                     [&](int64_t i, int64_t j) {
                       return cuda::gather_mul_sum_at(y2p, wp, s, r, 1, f, i, j);
                     }),
             generic::gather_mul_sum(y2, w, m.s, m.r), 1e-13, "gather_mul_sum [N, F]");
  expect_rel(by_rows(e, f,
                     [&](int64_t i, int64_t j) {
                       return cuda::gather_gather_dot_at(yp, qp, r, s, k, f, i, j);
                     }),
             generic::gather_gather_dot(y, q, m.r, m.s), 1e-13, "gather_gather_dot");
  expect_rel(
      by_rows(n, kf,
              [&](int64_t i, int64_t j) { return cuda::outer_sum_at(wp, up, s, k, f, i, j); }),
      generic::outer_sum(w, u, m.s).view({n, kf}), 1e-13, "outer_sum");
  // outer_sum's two contractions: over K (a thread per (e, f)) and over F (a warp per (e, k)).
  const at::Tensor g_edges = y.index_select(0, m.r.index);  // [E, K, F]
  expect_rel(
      by_rows(e, f,
              [&](int64_t i, int64_t j) { return cuda::contract_k_at(yp, up, r, k, f, i, j); }),
      (g_edges * u.unsqueeze(2)).sum(1), 1e-13, "contract over K");
  const at::Tensor over_f = (g_edges * w.unsqueeze(1)).sum(2);  // [E, K]
  expect_rel(by_rows(e, k,
                     [&](int64_t i, int64_t j) {
                       return cuda::contract_f_part(yp, wp, r, k, f, i, j, 0, 1);
                     }),
             over_f, 1e-13, "contract over F, one lane");
  expect_rel(by_rows(e, k,
                     [&](int64_t i, int64_t j) {
                       return by_lanes([&](int lane, int lanes) {
                         return cuda::contract_f_part(yp, wp, r, k, f, i, j, lane, lanes);
                       });
                     }),
             over_f, 1e-13, "contract over F, 32 lanes");
}

INSTANTIATE_TEST_SUITE_P(Maps, CudaSegmentBodies, ::testing::Values(0, 1, 2, 3));

// SchNet's filter: G, ssp and sigmoid, the cosine cutoff, and the row passes of its first and
// second derivatives (model/schnet_filter.cpp's CPU loops) against ATen formulas.
TEST(CudaSchnetBodies, MatchAtenFormulas) {
  const int64_t e = 37, ng = 12, nf = 45;  // nf > 32: lanes take more than one element
  const double rc = 3.0, spacing = rc / double(ng - 1), coeff = -0.5 / (spacing * spacing);
  at::manual_seed(9);
  const at::Tensor d = 0.3 + (rc - 0.3) * at::rand({e}, at::kDouble);
  const at::Tensor mu = at::linspace(0.0, rc, ng, at::kDouble);
  const at::Tensor x = d.unsqueeze(1) - mu.unsqueeze(0);
  const at::Tensor gauss = at::exp(at::clamp_min(coeff * x * x, -80.0));
  const double *dp = d.data_ptr<double>(), *mp = mu.data_ptr<double>(),
               *gp = gauss.data_ptr<double>();
  expect_rel(
      by_rows(e, ng,
              [&](int64_t i, int64_t k) { return cuda::clamped_gaussian(coeff, dp[i] - mp[k]); }),
      gauss, 1e-15, "Gaussians");

  const at::Tensor p = 12.0 * at::randn({e, nf}, at::kDouble);  // |P| past softplus's threshold
  at::Tensor s = at::empty_like(p), sig = at::empty_like(p);
  for (int64_t i = 0; i < p.numel(); ++i)
    cuda::ssp_sigmoid(p.data_ptr<double>()[i], s.data_ptr<double>() + i,
                      sig.data_ptr<double>() + i);
  expect_rel(s, at::softplus(p) - std::log(2.0), 1e-12, "ssp");
  expect_rel(sig, at::sigmoid(p), 1e-15, "sigmoid");

  const auto terms = envelope_terms(d, rc, Envelope());
  at::Tensor cut = at::empty({3, e}, at::kDouble);
  double* cp = cut.data_ptr<double>();
  for (int64_t i = 0; i < e; ++i)
    cuda::cosine_cutoff(rc, dp[i], cp + i, cp + e + i, cp + 2 * e + i);
  for (int64_t k = 0; k < 3; ++k)
    expect_rel(cut[k], terms[size_t(k)], 1e-14, "cosine cutoff " + std::to_string(k));

  // Row passes: the writes of every lane, and the sum of the lanes' shares.
  const at::Tensor gw = at::randn({e, nf}, at::kDouble), u = at::randn({e, nf}, at::kDouble);
  const at::Tensor c = cut[0].contiguous(), c1 = cut[1].contiguous();
  const at::Tensor v = at::randn({e}, at::kDouble), gg = at::randn({e, ng}, at::kDouble);
  const double *gwp = gw.data_ptr<double>(), *upp = u.data_ptr<double>(),
               *c0p = c.data_ptr<double>(), *c1p = c1.data_ptr<double>(),
               *vp = v.data_ptr<double>(), *ggp = gg.data_ptr<double>();
  at::Tensor gu = at::empty_like(gw), dgg = at::empty_like(gauss), dgw = at::empty_like(gw),
             du = at::empty_like(gw);
  at::Tensor sums = at::empty({4, e}, at::kDouble);  // r1, sum gG G x, sum gG G'', sum gU gW
  double* sp = sums.data_ptr<double>();
  for (int64_t i = 0; i < e; ++i) {
    sp[i] = by_lanes([&](int lane, int lanes) {
      return cuda::grad_through_cutoff_row(gwp, upp, c0p, nf, i, lane, lanes,
                                           gu.data_ptr<double>());
    });
    sp[e + i] = by_lanes([&](int lane, int lanes) {
      return cuda::gauss_dot_row(ggp, gp, dp, mp, ng, i, lane, lanes);
    });
    sp[2 * e + i] = by_lanes([&](int lane, int lanes) {
      return cuda::gauss_second_row(vp, ggp, gp, dp, mp, coeff, ng, i, lane, lanes,
                                    dgg.data_ptr<double>());
    });
    sp[3 * e + i] = by_lanes([&](int lane, int lanes) {
      return cuda::cutoff_second_row(upp, gwp, upp, vp, c0p, c1p, nf, i, lane, lanes,
                                     dgw.data_ptr<double>(), du.data_ptr<double>());
    });
  }
  expect_rel(gu, gw * c.unsqueeze(1), 1e-15, "gU");
  expect_rel(sums[0], (gw * u).sum(1), 1e-14, "r1");
  expect_rel(sums[1], (gg * gauss * x).sum(1), 1e-14, "sum gG G x");
  expect_rel(dgg, v.unsqueeze(1) * 2.0 * coeff * x * gauss, 1e-14, "dL/dgG");
  expect_rel(sums[2], (gg * (2.0 * coeff + 4.0 * coeff * coeff * x * x) * gauss).sum(1), 1e-14,
             "sum gG G''");
  expect_rel(dgw, u * c.unsqueeze(1) + (v * c1).unsqueeze(1) * u, 1e-14, "dL/dgW");
  expect_rel(du, (v * c1).unsqueeze(1) * gw, 1e-14, "dL/dU");
  expect_rel(sums[3], (u * gw).sum(1), 1e-14, "sum dL/dgU gW");

  at::Tensor dgs = at::empty_like(p), dpp = at::empty_like(p);
  for (int64_t i = 0; i < p.numel(); ++i)
    cuda::sigmoid_second_at(gw.data_ptr<double>(), u.data_ptr<double>(), sig.data_ptr<double>(), i,
                            dgs.data_ptr<double>(), dpp.data_ptr<double>());
  expect_rel(dgs, gw * sig, 1e-15, "dL/dgS");
  expect_rel(dpp, gw * u * sig * (1.0 - sig), 1e-15, "dL/dP");
}

}  // namespace
}  // namespace ddgnn
