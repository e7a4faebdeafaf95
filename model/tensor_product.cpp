// The tensor-product message family of model/tensor_product.h: fused CPU kernels (loops over
// edges, F innermost, no [E, rows, F] intermediate) as autograd functions whose backward passes
// call each other, and the ATen versions that run off the CPU.
#include "model/tensor_product.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/device.h"
#include "model/kernels.h"
#include "model/run_sum.h"
#include "model/saved_index.h"
#include "model/segment_generic.h"

namespace ddgnn {

CouplingPattern CouplingPattern::transposed() const {
  CouplingPattern t;
  t.I = J;
  t.J = I;
  t.P = P;
  t.entries.reserve(entries.size());
  for (const auto& [i, j, p] : entries) t.entries.push_back({j, i, p});
  return t;
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Throws unless every entry is in range and no (i, j) repeats.
void check_pattern(const CouplingPattern& c, const char* op) {
  if (c.I < 0 || c.J < 0 || c.P < 0)
    throw Error(std::string(op) + ": coupling pattern with negative dimensions");
  std::vector<char> seen(size_t(c.I * c.J), 0);
  for (const auto& [i, j, p] : c.entries) {
    if (i < 0 || i >= c.I || j < 0 || j >= c.J || p < 0 || p >= c.P)
      throw Error(std::string(op) + ": coupling entry (" + std::to_string(i) + ", " +
                  std::to_string(j) + ", " + std::to_string(p) +
                  ") outside I=" + std::to_string(c.I) + ", J=" + std::to_string(c.J) +
                  ", P=" + std::to_string(c.P));
    if (seen[size_t(i * c.J + j)]++)
      throw Error(std::string(op) + ": coupling entry (" + std::to_string(i) + ", " +
                  std::to_string(j) + ") appears twice");
  }
}

// Throws unless t is [rows, a, b] (a or b < 0: any size).
void check_shape(const at::Tensor& t, int64_t rows, int64_t a, int64_t b, const char* op,
                 const char* name) {
  if (t.dim() != 3 || t.size(0) != rows || (a >= 0 && t.size(1) != a) || (b >= 0 && t.size(2) != b))
    throw Error(std::string(op) + ": " + name + " has shape " + std::to_string(t.dim()) + "-D " +
                c10::str(t.sizes()) + ", expected [" + std::to_string(rows) + ", " +
                (a >= 0 ? std::to_string(a) : "*") + ", " + (b >= 0 ? std::to_string(b) : "*") +
                "]");
}

// Throws unless src and dst map the e edges and the three tensors share a dtype and a device.
void check_maps(const SegmentIndex& src, const SegmentIndex& dst, int64_t e, const at::Tensor& a,
                const at::Tensor& b, const at::Tensor& c, const char* op) {
  if (src.index.numel() != e || dst.index.numel() != e)
    throw Error(std::string(op) + ": src and dst must map the " + std::to_string(e) + " edges");
  if (a.scalar_type() != b.scalar_type() || a.scalar_type() != c.scalar_type() ||
      a.device() != b.device() || a.device() != c.device())
    throw Error(std::string(op) + ": the three tensors must share one dtype and one device");
}

// The pattern as the kernels and autograd contexts keep it: entries [n, 3] int64 on the CPU.
struct Coupling {
  int64_t I = 0, J = 0, P = 0;
  at::Tensor entries;

  int64_t size() const { return entries.size(0); }
  const int64_t* data() const { return entries.data_ptr<int64_t>(); }
  Coupling transposed() const {
    at::Tensor t = at::stack({entries.select(1, 1), entries.select(1, 0), entries.select(1, 2)}, 1);
    return {J, I, P, t};
  }
};

Coupling make_coupling(const CouplingPattern& c) {
  at::Tensor entries = at::empty({int64_t(c.entries.size()), 3}, at::kLong);
  int64_t* ep = entries.data_ptr<int64_t>();
  for (const auto& e : c.entries)
    for (int64_t k = 0; k < 3; ++k) *ep++ = e[size_t(k)];
  return {c.I, c.J, c.P, entries};
}

void save_coupling(AutogradContext* ctx, const Coupling& c, const SegmentIndex* src,
                   const SegmentIndex* dst) {
  ctx->saved_data["I"] = c.I;
  ctx->saved_data["J"] = c.J;
  ctx->saved_data["P"] = c.P;
  ctx->saved_data["entries"] = c.entries;
  save_index(ctx, "src", src);
  save_index(ctx, "dst", dst);
}

Coupling saved_coupling(AutogradContext* ctx) {
  return {ctx->saved_data["I"].toInt(), ctx->saved_data["J"].toInt(), ctx->saved_data["P"].toInt(),
          ctx->saved_data["entries"].toTensor()};
}

// G itself when it is contiguous [E, I, J] or the transpose of a contiguous [E, J, I] (the
// backward passes hand the kernels G^T), else a contiguous copy; the kernels read it by strides.
at::Tensor plain_or_transposed(const at::Tensor& g) {
  const int64_t i = g.size(1), j = g.size(2);
  const bool transposed = g.stride(0) == i * j && g.stride(1) == 1 && g.stride(2) == i;
  return g.is_contiguous() || transposed ? g : g.contiguous();
}

// The sizes and maps of one kernel call: E edges, n entries, I rows, J columns, P paths, F
// channels; G's strides (gi, gj); the edges' source and destination rows; the entries (i, j, p).
struct Loop {
  int64_t e_count, n, ni, nj, np, f, gi, gj;
  const int64_t *from, *to, *ent;
};

Loop loop_of(const at::Tensor& g, const Coupling& c, const SegmentIndex& src,
             const SegmentIndex& dst, int64_t e_count, int64_t f) {
  return {e_count,
          c.size(),
          c.I,
          c.J,
          c.P,
          f,
          g.defined() ? g.stride(1) : 0,
          g.defined() ? g.stride(2) : 0,
          src.index.data_ptr<int64_t>(),
          dst.index.data_ptr<int64_t>(),
          c.data()};
}

// The entries ordered by their column `key` (0: i, 2: p), stably, and the runs of one key
// (run_sum.h's runs_by_key): entries [starts[r], starts[r + 1]) share one.
struct Runs {
  std::vector<int64_t> entries;  // (i, j, p) flattened
  std::vector<int64_t> starts;   // n_runs + 1
};

Runs runs_by(const Coupling& c, int key) {
  const int64_t* e = c.data();
  KeyRuns kr = runs_by_key(c.size(), [&](int64_t k) { return e[3 * k + key]; });
  Runs r{{}, std::move(kr.starts)};
  r.entries.reserve(size_t(3 * c.size()));
  for (const int64_t k : kr.order) r.entries.insert(r.entries.end(), e + 3 * k, e + 3 * k + 3);
  return r;
}

// tp_message's loop: each edge's products added straight into out[dst(e)], edges in their own
// order (W and G, the large operands, are read sequentially); entries in runs of one row i. With
// `zero_first` (the edges sorted by destination) a row is zeroed at its first edge, in cache,
// instead of in a pass of its own.
template <int VB, typename T>
__attribute__((always_inline)) inline void tp_message_body(const Loop& L, const Runs& R,
                                                           const T* gp, const T* wp, const T* xp,
                                                           T* op, bool zero_first) {
  const int64_t f = L.f, n_runs = int64_t(R.starts.size()) - 1;
  const int64_t* ent = R.entries.data();
  for (int64_t e = 0; e < L.e_count; ++e) {
    const T* ge = gp + e * L.ni * L.nj;
    const T* we = wp + e * L.np * f;
    const T* xe = xp + L.from[e] * L.nj * f;
    T* oe = op + L.to[e] * L.ni * f;
    if (zero_first && (e == 0 || L.to[e] != L.to[e - 1])) std::fill(oe, oe + L.ni * f, T(0));
    for (int64_t r = 0; r < n_runs; ++r) {
      const int64_t begin = R.starts[size_t(r)], end = R.starts[size_t(r + 1)];
      run_sum<VB, T>(
          oe + ent[3 * begin] * f, f, ent, begin, end,
          [&](const int64_t* x) { return ge[x[0] * L.gi + x[1] * L.gj]; },
          [&](const int64_t* x) { return we + x[2] * f; },
          [&](const int64_t* x) { return xe + x[1] * f; });
    }
  }
}

// tp_weight_grad's loop; entries in runs of one path p.
template <int VB, typename T>
__attribute__((always_inline)) inline void tp_weight_grad_body(const Loop& L, const Runs& R,
                                                               const T* gp, const T* xp,
                                                               const T* yp, T* op) {
  const int64_t f = L.f, n_runs = int64_t(R.starts.size()) - 1;
  const int64_t* ent = R.entries.data();
  for (int64_t e = 0; e < L.e_count; ++e) {
    const T* ge = gp + e * L.ni * L.nj;
    const T* xe = xp + L.from[e] * L.nj * f;
    const T* ye = yp + L.to[e] * L.ni * f;
    T* oe = op + e * L.np * f;
    std::fill(oe, oe + L.np * f, T(0));  // in cache, instead of a zero-filled output
    for (int64_t r = 0; r < n_runs; ++r) {
      const int64_t begin = R.starts[size_t(r)], end = R.starts[size_t(r + 1)];
      run_sum<VB, T>(
          oe + ent[3 * begin + 2] * f, f, ent, begin, end,
          [&](const int64_t* x) { return ge[x[0] * L.gi + x[1] * L.gj]; },
          [&](const int64_t* x) { return xe + x[1] * f; },
          [&](const int64_t* x) { return ye + x[0] * f; });
    }
  }
}

// The two loops above in 64-byte vectors (AVX-512, or a CPU other than x86) and in 32-byte ones
// (AVX2), and the one this CPU runs.
template <typename T>
DDGNN_VECTOR_KERNEL void tp_message_loop(const Loop& L, const Runs& R, const T* gp, const T* wp,
                                         const T* xp, T* op, bool zero_first) {
  tp_message_body<64>(L, R, gp, wp, xp, op, zero_first);
}
template <typename T>
DDGNN_AVX2_LOOP void tp_message_loop_avx2(const Loop& L, const Runs& R, const T* gp, const T* wp,
                                          const T* xp, T* op, bool zero_first) {
  tp_message_body<32>(L, R, gp, wp, xp, op, zero_first);
}
template <typename T>
DDGNN_VECTOR_KERNEL void tp_weight_grad_loop(const Loop& L, const Runs& R, const T* gp, const T* xp,
                                             const T* yp, T* op) {
  tp_weight_grad_body<64>(L, R, gp, xp, yp, op);
}
template <typename T>
DDGNN_AVX2_LOOP void tp_weight_grad_loop_avx2(const Loop& L, const Runs& R, const T* gp,
                                              const T* xp, const T* yp, T* op) {
  tp_weight_grad_body<32>(L, R, gp, xp, yp, op);
}

// tp_coupling_grad's loop. The sum over f runs in kLanes interleaved partial sums (so that it
// vectorises without reassociation flags).
template <typename T>
DDGNN_VECTOR_KERNEL void tp_coupling_grad_loop(const Loop& L, const T* wp, const T* xp, const T* yp,
                                               T* op) {
  constexpr int64_t kLanes = 8;
  const int64_t f = L.f, f_lanes = f - f % kLanes;
  for (int64_t e = 0; e < L.e_count; ++e) {
    const T* we = wp + e * L.np * f;
    const T* xe = xp + L.from[e] * L.nj * f;
    const T* ye = yp + L.to[e] * L.ni * f;
    T* oe = op + e * L.ni * L.nj;
    std::fill(oe, oe + L.ni * L.nj, T(0));  // the (i, j) no entry couples stay 0
    for (int64_t k = 0; k < L.n; ++k) {
      const int64_t i = L.ent[3 * k], j = L.ent[3 * k + 1], p = L.ent[3 * k + 2];
      const T* __restrict__ ws = we + p * f;
      const T* __restrict__ xs = xe + j * f;
      const T* __restrict__ ys = ye + i * f;
      T lane[kLanes] = {};
      for (int64_t q = 0; q < f_lanes; q += kLanes)
        for (int64_t l = 0; l < kLanes; ++l) lane[l] += ws[q + l] * xs[q + l] * ys[q + l];
      T acc = 0;
      for (int64_t q = f_lanes; q < f; ++q) acc += ws[q] * xs[q] * ys[q];
      for (int64_t l = 0; l < kLanes; ++l) acc += lane[l];
      oe[i * L.nj + j] = acc;
    }
  }
}

// tp_message without autograd.
at::Tensor tp_message_raw(const at::Tensor& g_in, const at::Tensor& w_in, const at::Tensor& x_in,
                          const Coupling& c, const SegmentIndex& src, const SegmentIndex& dst) {
  const at::Tensor g = plain_or_transposed(g_in), w = w_in.contiguous(), x = x_in.contiguous();
  const int64_t e_count = g.size(0), f = w.size(2);
  const bool empty = e_count == 0 || f == 0 || c.size() == 0;
  // Edges sorted by destination (dst.order undefined, segment.h): the loop zeroes each row at its
  // first edge, and only the rows without edges are zeroed before it.
  const bool sorted = !empty && !dst.order.defined() && dst.ptr.defined();
  at::Tensor out = sorted ? at::empty({dst.n_rows, c.I, f}, x.options())
                          : at::zeros({dst.n_rows, c.I, f}, x.options());
  if (empty) return out;
  const Loop loop = loop_of(g, c, src, dst, e_count, f);
  const Runs runs = runs_by(c, 0);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "tp_message", [&] {
    scalar_t* op = out.data_ptr<scalar_t>();
    if (sorted) {
      const int64_t* ptr = dst.ptr.data_ptr<int64_t>();
      const int64_t row = c.I * f;
      for (int64_t r = 0; r < dst.n_rows; ++r)
        if (ptr[r] == ptr[r + 1]) std::fill(op + r * row, op + (r + 1) * row, scalar_t(0));
    }
    (kernels::avx2_loops() ? tp_message_loop_avx2<scalar_t>
                           : tp_message_loop<scalar_t>)(loop, runs, g.data_ptr<scalar_t>(),
                                                        w.data_ptr<scalar_t>(),
                                                        x.data_ptr<scalar_t>(), op, sorted);
  });
  return out;
}

// tp_weight_grad without autograd.
at::Tensor tp_weight_grad_raw(const at::Tensor& g_in, const at::Tensor& x_in,
                              const at::Tensor& y_in, const Coupling& c, const SegmentIndex& src,
                              const SegmentIndex& dst) {
  const at::Tensor g = plain_or_transposed(g_in), x = x_in.contiguous(), y = y_in.contiguous();
  const int64_t e_count = g.size(0), f = x.size(2);
  if (e_count == 0 || f == 0 || c.size() == 0) return at::zeros({e_count, c.P, f}, x.options());
  at::Tensor out = at::empty({e_count, c.P, f}, x.options());  // zeroed edge by edge by the loop
  const Loop loop = loop_of(g, c, src, dst, e_count, f);
  const Runs runs = runs_by(c, 2);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "tp_weight_grad", [&] {
    (kernels::avx2_loops() ? tp_weight_grad_loop_avx2<scalar_t>
                           : tp_weight_grad_loop<scalar_t>)(loop, runs, g.data_ptr<scalar_t>(),
                                                            x.data_ptr<scalar_t>(),
                                                            y.data_ptr<scalar_t>(),
                                                            out.data_ptr<scalar_t>());
  });
  return out;
}

// tp_coupling_grad without autograd.
at::Tensor tp_coupling_grad_raw(const at::Tensor& w_in, const at::Tensor& x_in,
                                const at::Tensor& y_in, const Coupling& c, const SegmentIndex& src,
                                const SegmentIndex& dst) {
  const at::Tensor w = w_in.contiguous(), x = x_in.contiguous(), y = y_in.contiguous();
  const int64_t e_count = w.size(0), f = w.size(2);
  if (e_count == 0 || c.size() == 0) return at::zeros({e_count, c.I, c.J}, x.options());
  at::Tensor out = at::empty({e_count, c.I, c.J}, x.options());  // zeroed edge by edge by the loop
  const Loop loop = loop_of(at::Tensor(), c, src, dst, e_count, f);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "tp_coupling_grad", [&] {
    tp_coupling_grad_loop<scalar_t>(loop, w.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(),
                                    y.data_ptr<scalar_t>(), out.data_ptr<scalar_t>());
  });
  return out;
}

struct TpWeightGrad;
struct TpCouplingGrad;

struct TpMessage : public torch::autograd::Function<TpMessage> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& g, const at::Tensor& w,
                            const at::Tensor& x, const Coupling* c, const SegmentIndex* src,
                            const SegmentIndex* dst) {
    save_coupling(ctx, *c, src, dst);
    ctx->save_for_backward({g, w, x});
    return tp_message_raw(g, w, x, *c, *src, *dst);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad);
};

struct TpWeightGrad : public torch::autograd::Function<TpWeightGrad> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& g, const at::Tensor& x,
                            const at::Tensor& y, const Coupling* c, const SegmentIndex* src,
                            const SegmentIndex* dst) {
    save_coupling(ctx, *c, src, dst);
    ctx->save_for_backward({g, x, y});
    return tp_weight_grad_raw(g, x, y, *c, *src, *dst);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad);
};

struct TpCouplingGrad : public torch::autograd::Function<TpCouplingGrad> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& w, const at::Tensor& x,
                            const at::Tensor& y, const Coupling* c, const SegmentIndex* src,
                            const SegmentIndex* dst) {
    save_coupling(ctx, *c, src, dst);
    ctx->save_for_backward({w, x, y});
    return tp_coupling_grad_raw(w, x, y, *c, *src, *dst);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad);
};

variable_list TpMessage::backward(AutogradContext* ctx, variable_list grad) {
  const auto saved = ctx->get_saved_variables();
  const Coupling c = saved_coupling(ctx);
  const SegmentIndex src_map = saved_index(ctx, "src"), dst_map = saved_index(ctx, "dst");
  const SegmentIndex *src = &src_map, *dst = &dst_map;
  const at::Tensor &g = saved[0], &w = saved[1], &x = saved[2], &gout = grad[0];
  at::Tensor dg, dw, dx;
  if (ctx->needs_input_grad(0)) dg = TpCouplingGrad::apply(w, x, gout, &c, src, dst);
  if (ctx->needs_input_grad(1)) dw = TpWeightGrad::apply(g, x, gout, &c, src, dst);
  if (ctx->needs_input_grad(2)) {
    const Coupling ct = c.transposed();
    dx = TpMessage::apply(g.transpose(1, 2), w, gout, &ct, dst, src);
  }
  return {dg, dw, dx, at::Tensor(), at::Tensor(), at::Tensor()};
}

variable_list TpWeightGrad::backward(AutogradContext* ctx, variable_list grad) {
  const auto saved = ctx->get_saved_variables();
  const Coupling c = saved_coupling(ctx);
  const SegmentIndex src_map = saved_index(ctx, "src"), dst_map = saved_index(ctx, "dst");
  const SegmentIndex *src = &src_map, *dst = &dst_map;
  const at::Tensor &g = saved[0], &x = saved[1], &y = saved[2], &gout = grad[0];
  at::Tensor dg, dx, dy;
  if (ctx->needs_input_grad(0)) dg = TpCouplingGrad::apply(gout, x, y, &c, src, dst);
  if (ctx->needs_input_grad(1)) {
    const Coupling ct = c.transposed();
    dx = TpMessage::apply(g.transpose(1, 2), gout, y, &ct, dst, src);
  }
  if (ctx->needs_input_grad(2)) dy = TpMessage::apply(g, gout, x, &c, src, dst);
  return {dg, dx, dy, at::Tensor(), at::Tensor(), at::Tensor()};
}

variable_list TpCouplingGrad::backward(AutogradContext* ctx, variable_list grad) {
  const auto saved = ctx->get_saved_variables();
  const Coupling c = saved_coupling(ctx);
  const SegmentIndex src_map = saved_index(ctx, "src"), dst_map = saved_index(ctx, "dst");
  const SegmentIndex *src = &src_map, *dst = &dst_map;
  const at::Tensor &w = saved[0], &x = saved[1], &y = saved[2], &gout = grad[0];
  at::Tensor dw, dx, dy;
  if (ctx->needs_input_grad(0)) dw = TpWeightGrad::apply(gout, x, y, &c, src, dst);
  if (ctx->needs_input_grad(1)) {
    const Coupling ct = c.transposed();
    dx = TpMessage::apply(gout.transpose(1, 2), w, y, &ct, dst, src);
  }
  if (ctx->needs_input_grad(2)) dy = TpMessage::apply(gout, w, x, &c, src, dst);
  return {dw, dx, dy, at::Tensor(), at::Tensor(), at::Tensor()};
}

// The pattern as index tensors on `device`, for the ATen versions.
struct EntryMaps {
  at::Tensor i, j, p, ij;  // [n] int64: row, column, path, and flat i * J + j of every entry
};

EntryMaps entry_maps(const CouplingPattern& c, c10::Device device) {
  const at::Tensor& dev = c.tables->get(0, device, at::kLong, [&] {
    const int64_t n = int64_t(c.entries.size());
    at::Tensor host = at::empty({4, n}, at::kLong);
    int64_t* hp = host.data_ptr<int64_t>();
    for (int64_t k = 0; k < n; ++k) {
      const auto& [i, j, p] = c.entries[size_t(k)];
      hp[k] = i;
      hp[n + k] = j;
      hp[2 * n + k] = p;
      hp[3 * n + k] = i * c.J + j;
    }
    return host;
  });
  return {dev[0], dev[1], dev[2], dev[3]};
}

// out[e, index[k], ...] = sum over entries k of x[e, k, ...]: x [E, n, ...] -> [E, rows, ...].
at::Tensor sum_entries(const at::Tensor& x, const at::Tensor& index, int64_t rows) {
  std::vector<int64_t> shape = x.sizes().vec();
  shape[1] = rows;
  return at::zeros(shape, x.options()).index_add(1, index, x);
}

}  // namespace

at::Tensor tp_message_reference(const at::Tensor& G, const at::Tensor& W, const at::Tensor& X,
                                const CouplingPattern& pattern, const SegmentIndex& src,
                                const SegmentIndex& dst) {
  const EntryMaps m = entry_maps(pattern, X.device());
  const at::Tensor xe = generic::gather_rows(X.index_select(1, m.j), src);  // [E, n, F]
  const at::Tensor ge = G.flatten(1).index_select(1, m.ij).unsqueeze(2);    // [E, n, 1]
  const at::Tensor prod = ge * W.index_select(1, m.p) * xe;                 // [E, n, F]
  return generic::scatter_sum(sum_entries(prod, m.i, pattern.I), dst);      // [dst.n_rows, I, F]
}

at::Tensor tp_weight_grad_reference(const at::Tensor& G, const at::Tensor& X, const at::Tensor& Y,
                                    const CouplingPattern& pattern, const SegmentIndex& src,
                                    const SegmentIndex& dst) {
  const EntryMaps m = entry_maps(pattern, X.device());
  const at::Tensor xe = generic::gather_rows(X.index_select(1, m.j), src);  // [E, n, F]
  const at::Tensor ye = generic::gather_rows(Y.index_select(1, m.i), dst);  // [E, n, F]
  const at::Tensor ge = G.flatten(1).index_select(1, m.ij).unsqueeze(2);    // [E, n, 1]
  return sum_entries(ge * xe * ye, m.p, pattern.P);                         // [E, P, F]
}

at::Tensor tp_coupling_grad_reference(const at::Tensor& W, const at::Tensor& X, const at::Tensor& Y,
                                      const CouplingPattern& pattern, const SegmentIndex& src,
                                      const SegmentIndex& dst) {
  const EntryMaps m = entry_maps(pattern, X.device());
  const at::Tensor xe = generic::gather_rows(X.index_select(1, m.j), src);  // [E, n, F]
  const at::Tensor ye = generic::gather_rows(Y.index_select(1, m.i), dst);  // [E, n, F]
  const at::Tensor val = (W.index_select(1, m.p) * xe * ye).sum(2);         // [E, n]
  return sum_entries(val, m.ij, pattern.I * pattern.J).view({W.size(0), pattern.I, pattern.J});
}

at::Tensor tp_message(const at::Tensor& G, const at::Tensor& W, const at::Tensor& X,
                      const CouplingPattern& pattern, const SegmentIndex& src,
                      const SegmentIndex& dst) {
  const char* op = "tp_message";
  check_pattern(pattern, op);
  const int64_t e = G.dim() > 0 ? G.size(0) : -1, f = X.dim() == 3 ? X.size(2) : -1;
  check_shape(G, e, pattern.I, pattern.J, op, "G");
  check_shape(W, e, pattern.P, f, op, "W");
  check_shape(X, src.n_rows, pattern.J, -1, op, "X");
  check_maps(src, dst, e, G, W, X, op);
  if (!fused_kernels(X)) return tp_message_reference(G, W, X, pattern, src, dst);
  const Coupling c = make_coupling(pattern);
  return TpMessage::apply(G, W, X, &c, &src, &dst);
}

at::Tensor tp_weight_grad(const at::Tensor& G, const at::Tensor& X, const at::Tensor& Y,
                          const CouplingPattern& pattern, const SegmentIndex& src,
                          const SegmentIndex& dst) {
  const char* op = "tp_weight_grad";
  check_pattern(pattern, op);
  const int64_t e = G.dim() > 0 ? G.size(0) : -1, f = X.dim() == 3 ? X.size(2) : -1;
  check_shape(G, e, pattern.I, pattern.J, op, "G");
  check_shape(X, src.n_rows, pattern.J, -1, op, "X");
  check_shape(Y, dst.n_rows, pattern.I, f, op, "Y");
  check_maps(src, dst, e, G, X, Y, op);
  if (!fused_kernels(X)) return tp_weight_grad_reference(G, X, Y, pattern, src, dst);
  const Coupling c = make_coupling(pattern);
  return TpWeightGrad::apply(G, X, Y, &c, &src, &dst);
}

at::Tensor tp_coupling_grad(const at::Tensor& W, const at::Tensor& X, const at::Tensor& Y,
                            const CouplingPattern& pattern, const SegmentIndex& src,
                            const SegmentIndex& dst) {
  const char* op = "tp_coupling_grad";
  check_pattern(pattern, op);
  const int64_t e = W.dim() > 0 ? W.size(0) : -1, f = X.dim() == 3 ? X.size(2) : -1;
  check_shape(W, e, pattern.P, f, op, "W");
  check_shape(X, src.n_rows, pattern.J, -1, op, "X");
  check_shape(Y, dst.n_rows, pattern.I, f, op, "Y");
  check_maps(src, dst, e, W, X, Y, op);
  if (!fused_kernels(X)) return tp_coupling_grad_reference(W, X, Y, pattern, src, dst);
  const Coupling c = make_coupling(pattern);
  return TpCouplingGrad::apply(W, X, Y, &c, &src, &dst);
}

}  // namespace ddgnn
