// model/channel_coupling.h: the fused CPU kernel (a loop over atoms, the entries inside, channels
// innermost), an autograd function whose backward calls it again with swapped entries, and the
// ATen reference that runs off the CPU.
#include "model/channel_coupling.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/device.h"
#include "model/kernels.h"
#include "model/run_sum.h"

namespace ddgnn {

ChannelCoupling ChannelCoupling::for_x() const {
  ChannelCoupling t{I, R, J, {}};
  t.entries.reserve(entries.size());
  for (const Entry& e : entries) t.entries.push_back({e.i, e.r, e.j, e.c});
  return t;
}

ChannelCoupling ChannelCoupling::for_y() const {
  ChannelCoupling t{J, R, I, {}};
  t.entries.reserve(entries.size());
  for (const Entry& e : entries) t.entries.push_back({e.j, e.r, e.i, e.c});
  return t;
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

void check(const at::Tensor& x, const at::Tensor& y, const ChannelCoupling& c) {
  const std::string op = "couple_channels";
  for (const auto& e : c.entries)
    if (e.r < 0 || e.r >= c.R || e.i < 0 || e.i >= c.I || e.j < 0 || e.j >= c.J)
      throw Error(op + ": entry (" + std::to_string(e.r) + ", " + std::to_string(e.i) + ", " +
                  std::to_string(e.j) + ") outside R=" + std::to_string(c.R) +
                  ", I=" + std::to_string(c.I) + ", J=" + std::to_string(c.J));
  if (x.dim() != 3 || y.dim() != 3 || x.size(1) != c.I || y.size(1) != c.J ||
      x.size(0) != y.size(0) || x.size(2) != y.size(2))
    throw Error(op + ": X " + c10::str(x.sizes()) + " and Y " + c10::str(y.sizes()) +
                " do not match [N, " + std::to_string(c.I) + ", F] and [N, " + std::to_string(c.J) +
                ", F]");
  if (x.scalar_type() != y.scalar_type() || x.device() != y.device())
    throw Error(op + ": X and Y must share one dtype and one device");
}

// The coupling as an autograd context keeps it.
void save(AutogradContext* ctx, const ChannelCoupling& c) {
  const int64_t n = int64_t(c.entries.size());
  at::Tensor idx = at::empty({n, 3}, at::kLong), coef = at::empty({n}, at::kDouble);
  int64_t* ip = idx.data_ptr<int64_t>();
  double* cp = coef.data_ptr<double>();
  for (const auto& e : c.entries) {
    *ip++ = e.r;
    *ip++ = e.i;
    *ip++ = e.j;
    *cp++ = e.c;
  }
  ctx->saved_data["R"] = c.R;
  ctx->saved_data["I"] = c.I;
  ctx->saved_data["J"] = c.J;
  ctx->saved_data["idx"] = idx;
  ctx->saved_data["coef"] = coef;
}

ChannelCoupling saved(AutogradContext* ctx) {
  ChannelCoupling c{
      ctx->saved_data["R"].toInt(), ctx->saved_data["I"].toInt(), ctx->saved_data["J"].toInt(), {}};
  const at::Tensor idx = ctx->saved_data["idx"].toTensor();
  const at::Tensor coef = ctx->saved_data["coef"].toTensor();
  const int64_t* ip = idx.data_ptr<int64_t>();
  const double* cp = coef.data_ptr<double>();
  for (int64_t k = 0; k < coef.numel(); ++k)
    c.entries.push_back({ip[3 * k], ip[3 * k + 1], ip[3 * k + 2], cp[k]});
  return c;
}

// Atoms [begin, end): out[a, r] = sum over entries of c x[a, i] * y[a, j]. ent holds the entries'
// row offsets (r, i, j, times F), ordered by r, and runs[k]..runs[k + 1] are the entries of one r,
// summed in registers (run_sum) and written once.
template <int VB, typename T>
__attribute__((always_inline)) inline void couple_body(int64_t begin, int64_t end, const T* xp,
                                                       const T* yp, T* op, const int64_t* ent,
                                                       const int64_t* runs, int64_t n_runs,
                                                       const T* coef, int64_t f, int64_t xs,
                                                       int64_t ys, int64_t os) {
  for (int64_t a = begin; a < end; ++a) {
    const T* xa = xp + a * xs;
    const T* ya = yp + a * ys;
    T* oa = op + a * os;
    std::fill(oa, oa + os, T(0));  // here, while the block is in cache, not in a pass of its own
    for (int64_t k = 0; k < n_runs; ++k)
      run_sum<VB, T>(
          oa + ent[3 * runs[k]], f, ent, runs[k], runs[k + 1],
          [&](const int64_t* e) { return coef[(e - ent) / 3]; },
          [&](const int64_t* e) { return xa + e[1]; }, [&](const int64_t* e) { return ya + e[2]; });
  }
}

// couple_body in 64-byte vectors (AVX-512, or a CPU other than x86) and in 32-byte ones (AVX2).
template <typename T>
DDGNN_VECTOR_KERNEL void couple_loop(int64_t begin, int64_t end, const T* xp, const T* yp, T* op,
                                     const int64_t* ent, const int64_t* runs, int64_t n_runs,
                                     const T* coef, int64_t f, int64_t xs, int64_t ys, int64_t os) {
  couple_body<64>(begin, end, xp, yp, op, ent, runs, n_runs, coef, f, xs, ys, os);
}
template <typename T>
DDGNN_AVX2_LOOP void couple_loop_avx2(int64_t begin, int64_t end, const T* xp, const T* yp, T* op,
                                      const int64_t* ent, const int64_t* runs, int64_t n_runs,
                                      const T* coef, int64_t f, int64_t xs, int64_t ys,
                                      int64_t os) {
  couple_body<32>(begin, end, xp, yp, op, ent, runs, n_runs, coef, f, xs, ys, os);
}

at::Tensor couple_raw(const at::Tensor& x_in, const at::Tensor& y_in, const ChannelCoupling& c) {
  const at::Tensor x = x_in.contiguous(), y = y_in.contiguous();
  const int64_t n_atoms = x.size(0), f = x.size(2), n = int64_t(c.entries.size());
  if (n_atoms == 0 || f == 0 || n == 0) return at::zeros({n_atoms, c.R, f}, x.options());
  at::Tensor out =
      at::empty({n_atoms, c.R, f}, x.options());  // every atom's block zeroed by the loop
  // The entries by output row (stably), their row offsets in elements of an atom's block, and
  // where each row's run starts.
  const KeyRuns kr = runs_by_key(n, [&](int64_t k) { return c.entries[size_t(k)].r; });
  const std::vector<int64_t>& order = kr.order;
  const std::vector<int64_t>& runs = kr.starts;
  std::vector<int64_t> ent(size_t(3 * n));
  for (int64_t k = 0; k < n; ++k) {
    const ChannelCoupling::Entry& e = c.entries[size_t(order[size_t(k)])];
    ent[size_t(3 * k)] = e.r * f;
    ent[size_t(3 * k + 1)] = e.i * f;
    ent[size_t(3 * k + 2)] = e.j * f;
  }
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "couple_channels", [&] {
    std::vector<scalar_t> coef(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k)
      coef[size_t(k)] = scalar_t(c.entries[size_t(order[size_t(k)])].c);
    const scalar_t* xp = x.data_ptr<scalar_t>();
    const scalar_t* yp = y.data_ptr<scalar_t>();
    scalar_t* op = out.data_ptr<scalar_t>();
    at::parallel_for(0, n_atoms, 64, [&](int64_t begin, int64_t end) {
      const auto loop = kernels::avx2_loops() ? couple_loop_avx2<scalar_t> : couple_loop<scalar_t>;
      loop(begin, end, xp, yp, op, ent.data(), runs.data(), int64_t(runs.size()) - 1, coef.data(),
           f, c.I * f, c.J * f, c.R * f);
    });
  });
  return out;
}

struct CoupleChannels : public torch::autograd::Function<CoupleChannels> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& y,
                            const ChannelCoupling* c) {
    save(ctx, *c);
    ctx->save_for_backward({x, y});
    return couple_raw(x, y, *c);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto xy = ctx->get_saved_variables();
    const ChannelCoupling c = saved(ctx);
    at::Tensor dx, dy;
    if (ctx->needs_input_grad(0)) {
      const ChannelCoupling cx = c.for_x();
      dx = CoupleChannels::apply(grad[0], xy[1], &cx);
    }
    if (ctx->needs_input_grad(1)) {
      const ChannelCoupling cy = c.for_y();
      dy = CoupleChannels::apply(grad[0], xy[0], &cy);
    }
    return {dx, dy, at::Tensor()};
  }
};

}  // namespace

at::Tensor couple_channels_reference(const at::Tensor& X, const at::Tensor& Y,
                                     const ChannelCoupling& c) {
  const int64_t n = int64_t(c.entries.size());
  const at::Tensor& idx = c.tables->get(0, X.device(), at::kLong, [&] {
    at::Tensor host = at::empty({3, n}, at::kLong);
    int64_t* hp = host.data_ptr<int64_t>();
    for (int64_t k = 0; k < n; ++k) {
      const auto& e = c.entries[size_t(k)];
      hp[k] = e.r;
      hp[n + k] = e.i;
      hp[2 * n + k] = e.j;
    }
    return host;
  });
  const at::Tensor& coef = c.tables->get(1, X.device(), X.scalar_type(), [&] {
    at::Tensor host = at::empty({n}, at::kDouble);
    double* cp = host.data_ptr<double>();
    for (int64_t k = 0; k < n; ++k) cp[k] = c.entries[size_t(k)].c;
    return host;
  });
  const at::Tensor prod =
      X.index_select(1, idx[1]) * Y.index_select(1, idx[2]) * coef.view({1, n, 1});  // [N, n, F]
  return at::zeros({X.size(0), c.R, X.size(2)}, X.options()).index_add(1, idx[0], prod);
}

at::Tensor couple_channels(const at::Tensor& X, const at::Tensor& Y, const ChannelCoupling& c) {
  check(X, Y, c);
  if (!fused_kernels(X)) return couple_channels_reference(X, Y, c);
  return CoupleChannels::apply(X, Y, &c);
}

}  // namespace ddgnn
