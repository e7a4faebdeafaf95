// SchNet's filter network as two autograd functions: SchnetFilter (d -> W) and its derivative
// SchnetFilterGrad (the force pass: dL/dW -> dL/dd), whose backward is written out by hand (the
// force loss's backward). Notation, per edge e: x_k = d - mu_k, G_k = exp(coeff x_k^2) with
// G' = 2 coeff x G and G'' = (2 coeff + 4 coeff^2 x^2) G; P = G A1^T + b1; S = ssp(P), s =
// sigmoid(P) = ssp'(P); U = S A2^T + b2; c = cutoff(d) with derivatives c1, c2; W = U c.
// Forward-pass values are kept (detached) in the context and reused by both derivatives. The
// single passes below are CPU loops, or on a CUDA device (GPU build) one kernel each
// (model/cuda/schnet_cuda.h); the matrix products are ATen's on both.
#include "model/schnet_filter.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/core/Dict.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <array>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "model/activation.h"
#include "model/batch.h"
#include "model/cuda/schnet_cuda.h"
#include "model/device.h"
#include "model/kernels.h"

namespace ddgnn {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr double kLn2 = 0.69314718055994530942;

// ---- Single passes over [E, F] rows (F = nf or ng), no autograd. ----

// S = ssp(P) and s = sigmoid(P).
std::pair<at::Tensor, at::Tensor> ssp_and_sigmoid(const at::Tensor& p) {
  if (p.is_cuda()) return cuda::ssp_and_sigmoid(p);
  if (p.scalar_type() == at::kFloat) {
    at::Tensor s_out = at::empty_like(p), sig = at::empty_like(p);
    kernels::softplus_sigmoid(p.data_ptr<float>(), s_out.data_ptr<float>(), sig.data_ptr<float>(),
                              p.numel(), float(kLn2));
    return {s_out, sig};
  }
  return {at::softplus(p) - kLn2, at::sigmoid(p)};
}

// W = U c (rows scaled).
at::Tensor scale_rows(const at::Tensor& u, const at::Tensor& c) {
  if (u.is_cuda()) return cuda::scale_rows(u, c);
  at::Tensor w = at::empty_like(u);
  const int64_t e_count = u.size(0), f = u.size(1);
  AT_DISPATCH_FLOATING_TYPES(u.scalar_type(), "scale_rows", [&] {
    const scalar_t *up = u.data_ptr<scalar_t>(), *cp = c.data_ptr<scalar_t>();
    scalar_t* wp = w.data_ptr<scalar_t>();
    for (int64_t e = 0; e < e_count; ++e)
      for (int64_t j = 0; j < f; ++j) wp[e * f + j] = up[e * f + j] * cp[e];
  });
  return w;
}

// gU = gW c and r1 = sum_f gW U ([E, nf] and [E]).
std::pair<at::Tensor, at::Tensor> grad_through_cutoff(const at::Tensor& gw, const at::Tensor& u,
                                                      const at::Tensor& c) {
  if (u.is_cuda()) return cuda::grad_through_cutoff(gw, u, c);
  at::Tensor gu = at::empty_like(u), r1 = at::empty({u.size(0)}, u.options());
  const int64_t e_count = u.size(0), f = u.size(1);
  AT_DISPATCH_FLOATING_TYPES(u.scalar_type(), "grad_through_cutoff", [&] {
    const scalar_t *gp = gw.data_ptr<scalar_t>(), *up = u.data_ptr<scalar_t>(),
                   *cp = c.data_ptr<scalar_t>();
    scalar_t *gup = gu.data_ptr<scalar_t>(), *rp = r1.data_ptr<scalar_t>();
    for (int64_t e = 0; e < e_count; ++e) {
      scalar_t acc = 0;
      for (int64_t j = 0; j < f; ++j) {
        gup[e * f + j] = gp[e * f + j] * cp[e];
        acc += gp[e * f + j] * up[e * f + j];
      }
      rp[e] = acc;
    }
  });
  return {gu, r1};
}

// out[e] = base[e] + sum_k g[e, k] G'[e, k] (G' = 2 coeff x G); base [E] or undefined.
at::Tensor gauss_grad_dot(const at::Tensor& g, const at::Tensor& gauss, const at::Tensor& d,
                          const at::Tensor& mu, double coeff, const at::Tensor& base) {
  if (d.is_cuda()) return cuda::gauss_grad_dot(g, gauss, d, mu, coeff, base);
  const int64_t e_count = gauss.size(0), n = gauss.size(1);
  at::Tensor out = at::empty({e_count}, d.options());
  AT_DISPATCH_FLOATING_TYPES(d.scalar_type(), "gauss_grad_dot", [&] {
    const scalar_t *gp = g.data_ptr<scalar_t>(), *gs = gauss.data_ptr<scalar_t>(),
                   *dp = d.data_ptr<scalar_t>(), *mp = mu.data_ptr<scalar_t>();
    const scalar_t* bp = base.defined() ? base.data_ptr<scalar_t>() : nullptr;
    scalar_t* op = out.data_ptr<scalar_t>();
    const scalar_t c2 = scalar_t(2 * coeff);
    for (int64_t e = 0; e < e_count; ++e) {
      scalar_t acc = 0;
      for (int64_t k = 0; k < n; ++k) acc += gp[e * n + k] * gs[e * n + k] * (dp[e] - mp[k]);
      op[e] = c2 * acc + (bp ? bp[e] : scalar_t(0));
    }
  });
  return out;
}

// The second-order pass over the Gaussians, given v = dL/d(gd) [E] and gG [E, ng]:
// dL/dgG = v G' [E, ng] and the direct term v sum_k gG G'' [E].
std::pair<at::Tensor, at::Tensor> gauss_second(const at::Tensor& v, const at::Tensor& gg,
                                               const at::Tensor& gauss, const at::Tensor& d,
                                               const at::Tensor& mu, double coeff) {
  if (d.is_cuda()) return cuda::gauss_second(v, gg, gauss, d, mu, coeff);
  const int64_t e_count = gauss.size(0), n = gauss.size(1);
  at::Tensor dgg = at::empty_like(gauss), dd = at::empty({e_count}, d.options());
  AT_DISPATCH_FLOATING_TYPES(d.scalar_type(), "gauss_second", [&] {
    const scalar_t *vp = v.data_ptr<scalar_t>(), *ggp = gg.data_ptr<scalar_t>(),
                   *gs = gauss.data_ptr<scalar_t>(), *dp = d.data_ptr<scalar_t>(),
                   *mp = mu.data_ptr<scalar_t>();
    scalar_t *dggp = dgg.data_ptr<scalar_t>(), *ddp = dd.data_ptr<scalar_t>();
    const scalar_t c = scalar_t(coeff);
    for (int64_t e = 0; e < e_count; ++e) {
      scalar_t acc = 0;
      for (int64_t k = 0; k < n; ++k) {
        const scalar_t x = dp[e] - mp[k], gv = gs[e * n + k];
        dggp[e * n + k] = vp[e] * 2 * c * x * gv;
        acc += ggp[e * n + k] * (2 * c + 4 * c * c * x * x) * gv;
      }
      ddp[e] = vp[e] * acc;
    }
  });
  return {dgg, dd};
}

// Through gP = gS s, given dL/dgP: dL/dgS = dL/dgP s and dL/dP = dL/dgP gS s (1 - s).
std::pair<at::Tensor, at::Tensor> sigmoid_second(const at::Tensor& dgp, const at::Tensor& gs,
                                                 const at::Tensor& sig) {
  if (dgp.is_cuda()) return cuda::sigmoid_second(dgp, gs, sig);
  at::Tensor dgs = at::empty_like(dgp), dp_out = at::empty_like(dgp);
  const int64_t n = dgp.numel();
  AT_DISPATCH_FLOATING_TYPES(dgp.scalar_type(), "sigmoid_second", [&] {
    const scalar_t *ap = dgp.data_ptr<scalar_t>(), *gp = gs.data_ptr<scalar_t>(),
                   *sp = sig.data_ptr<scalar_t>();
    scalar_t *op1 = dgs.data_ptr<scalar_t>(), *op2 = dp_out.data_ptr<scalar_t>();
    for (int64_t i = 0; i < n; ++i) {
      op1[i] = ap[i] * sp[i];
      op2[i] = ap[i] * gp[i] * sp[i] * (1 - sp[i]);
    }
  });
  return {dgs, dp_out};
}

// Through gU = gW c and gd's term r1 c1 (r1 = sum_f gW U), given dL/dgU and v = dL/d(gd):
// dL/dgW = dL/dgU c + v c1 U, dL/dU = v c1 gW, and the direct term on d,
// c1 sum_f dL/dgU gW + v r1 c2.
std::tuple<at::Tensor, at::Tensor, at::Tensor> cutoff_second(
    const at::Tensor& dgu, const at::Tensor& gw, const at::Tensor& u, const at::Tensor& v,
    const at::Tensor& c, const at::Tensor& c1, const at::Tensor& c2, const at::Tensor& r1) {
  if (u.is_cuda()) return cuda::cutoff_second(dgu, gw, u, v, c, c1, c2, r1);
  at::Tensor dgw = at::empty_like(u), du = at::empty_like(u),
             dd = at::empty({u.size(0)}, u.options());
  const int64_t e_count = u.size(0), f = u.size(1);
  AT_DISPATCH_FLOATING_TYPES(u.scalar_type(), "cutoff_second", [&] {
    const scalar_t *ap = dgu.data_ptr<scalar_t>(), *gp = gw.data_ptr<scalar_t>(),
                   *up = u.data_ptr<scalar_t>(), *vp = v.data_ptr<scalar_t>(),
                   *cp = c.data_ptr<scalar_t>(), *c1p = c1.data_ptr<scalar_t>(),
                   *c2p = c2.data_ptr<scalar_t>(), *rp = r1.data_ptr<scalar_t>();
    scalar_t *dgwp = dgw.data_ptr<scalar_t>(), *dup = du.data_ptr<scalar_t>(),
             *ddp = dd.data_ptr<scalar_t>();
    for (int64_t e = 0; e < e_count; ++e) {
      const scalar_t vc1 = vp[e] * c1p[e];
      scalar_t acc = 0;
      for (int64_t j = 0; j < f; ++j) {
        const int64_t i = e * f + j;
        dgwp[i] = ap[i] * cp[e] + vc1 * up[i];
        dup[i] = vc1 * gp[i];
        acc += ap[i] * gp[i];
      }
      ddp[e] = c1p[e] * acc + vp[e] * rp[e] * c2p[e];
    }
  });
  return {dgw, du, dd};
}

// ---- The values a derivative reuses, kept in a context's saved_data. ----

const char* const kSavedNames[] = {"gauss", "mu", "sig", "S", "U", "c", "c1", "c2"};

void put(AutogradContext* ctx, const std::string& name, const at::Tensor& t) {
  ctx->saved_data[name] = t;
}
at::Tensor get(AutogradContext* ctx, const std::string& name) {
  return ctx->saved_data.at(name).toTensor();
}

// Gradients of `outputs` (with `grad_outputs`, undefined ones skipped) with respect to those
// `inputs` whose flag is set, with create_graph: the any-order fallback (undefined where not
// asked or not reachable).
variable_list grads_of(const variable_list& outputs, const variable_list& grad_outputs,
                       const variable_list& inputs, const std::vector<bool>& wanted) {
  variable_list asked, outs, gouts;
  std::vector<size_t> where;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (wanted[i] && inputs[i].defined() && inputs[i].requires_grad()) {
      asked.push_back(inputs[i]);
      where.push_back(i);
    }
  for (size_t i = 0; i < outputs.size(); ++i)
    if (grad_outputs[i].defined() && outputs[i].requires_grad()) {
      outs.push_back(outputs[i]);
      gouts.push_back(grad_outputs[i]);
    }
  variable_list out(inputs.size());
  if (asked.empty() || outs.empty()) return out;
  const variable_list g = torch::autograd::grad(outs, asked, gouts, /*retain_graph=*/true,
                                                /*create_graph=*/true, /*allow_unused=*/true);
  for (size_t i = 0; i < where.size(); ++i) out[where[i]] = g[i];
  return out;
}

// The envelope as one integer for the autograd contexts: 0 cosine, p >= 1 the polynomial.
int64_t envelope_code(const Envelope& e) {
  return e.kind == Envelope::kCosine ? 0 : e.p;
}
Envelope envelope_of_code(int64_t code) {
  Envelope e;
  if (code > 0) {
    e.kind = Envelope::kPolynomial;
    e.p = code;
  }
  return e;
}

// W, U and P from plain differentiable ops (the reference and every fallback).
std::array<at::Tensor, 3> reference_parts(const at::Tensor& d, const FilterBasis& basis,
                                          const at::Tensor& a1, const at::Tensor& b1,
                                          const at::Tensor& a2, const at::Tensor& b2) {
  at::Tensor gauss = basis.gaussians;
  if (!gauss.defined()) {
    const at::Tensor x = d.unsqueeze(1) - basis.mu.unsqueeze(0);
    gauss = at::exp(at::clamp_min(basis.coeff * x * x, -80.0));
  }
  const at::Tensor p = at::addmm(b1, gauss, a1.t());
  const at::Tensor u = at::addmm(b2, apply_activation("ssp", p), a2.t());
  const at::Tensor c = basis.envelope_tensor.defined()
                           ? basis.envelope_tensor
                           : envelope_of(d / basis.cutoff, basis.envelope);
  return {u * c.unsqueeze(1), u, p};
}

// gd = dL/dd of the filter given gW = dL/dW: r1 c1 + sum_k gG G' with gU = gW c, r1 = sum_f gW U,
// gS = gU A2, gP = gS s(P), gG = gP A1. Inputs gW, d, A1, A2, U, P: U and P are the filter's own
// outputs (SchnetFilter returns them besides W), so that the force loss's gradients with
// respect to them reach SchnetFilter's backward and join its own there (one set of [E, nf]
// matmuls for both, as autograd would share them). The forward's values arrive in `fwd`.
struct SchnetFilterGrad : public torch::autograd::Function<SchnetFilterGrad> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& gw_in, const at::Tensor& d,
                            const at::Tensor& a1, const at::Tensor& a2, const at::Tensor& u,
                            const at::Tensor& p, c10::Dict<std::string, at::Tensor> fwd,
                            double coeff, double cutoff, int64_t envelope) {
    ctx->save_for_backward({gw_in, d, a1, a2, u, p});
    for (const char* name : kSavedNames) put(ctx, name, fwd.at(name));
    ctx->saved_data["coeff"] = coeff;
    ctx->saved_data["cutoff"] = cutoff;
    ctx->saved_data["envelope"] = envelope;
    const at::Tensor gw = gw_in.contiguous();
    auto [gu, r1] = grad_through_cutoff(gw, fwd.at("U"), fwd.at("c"));
    const at::Tensor gs = at::mm(gu, a2);
    const at::Tensor gp = gs * fwd.at("sig");
    const at::Tensor gg = at::mm(gp, a1);
    put(ctx, "gW", gw.detach());
    put(ctx, "gU", gu);
    put(ctx, "gS", gs);
    put(ctx, "gP", gp);
    put(ctx, "gG", gg);
    put(ctx, "r1", r1);
    return gauss_grad_dot(gg, fwd.at("gauss"), d, fwd.at("mu"), coeff, r1 * fwd.at("c1"));
  }

  // The backward below from differentiable ATen ops of the inputs (the fallback when a graph is
  // recorded, for third derivatives). Written out rather than taken by autograd::grad of the
  // forward formula: U and P are outputs of SchnetFilter, so a gradient taken with respect to
  // both them and d would also reach d through SchnetFilter and count that path twice.
  static variable_list backward_differentiable(const variable_list& in, const at::Tensor& v_in,
                                               AutogradContext* ctx) {
    const at::Tensor &gw = in[0], &d = in[1], &a1 = in[2], &a2 = in[3], &u = in[4], &p = in[5];
    const double coeff = ctx->saved_data.at("coeff").toDouble();
    const at::Tensor v = v_in.unsqueeze(1);
    const at::Tensor x = d.unsqueeze(1) - get(ctx, "mu").unsqueeze(0);
    const at::Tensor gauss = at::exp(at::clamp_min(coeff * x * x, -80.0));
    const at::Tensor dgauss = 2.0 * coeff * x * gauss;
    const at::Tensor ddgauss = (2.0 * coeff + 4.0 * coeff * coeff * x * x) * gauss;
    const auto terms = envelope_terms(d, ctx->saved_data.at("cutoff").toDouble(),
                                      envelope_of_code(ctx->saved_data.at("envelope").toInt()));
    const at::Tensor c = terms[0].unsqueeze(1), c1 = terms[1].unsqueeze(1),
                     c2 = terms[2].unsqueeze(1);
    const at::Tensor sig = at::sigmoid(p);
    const at::Tensor gu = gw * c, r1 = (gw * u).sum(1, true), gs = gu.mm(a2), gp = gs * sig;
    const at::Tensor gg = gp.mm(a1);
    const at::Tensor dgg = v * dgauss, dd1 = v * (gg * ddgauss).sum(1, true);
    const at::Tensor dgp = dgg.mm(a1.t()), da1 = gp.t().mm(dgg);
    const at::Tensor dgs = dgp * sig, dp = dgp * gs * sig * (1.0 - sig);
    const at::Tensor dgu = dgs.mm(a2.t()), da2 = gu.t().mm(dgs);
    const at::Tensor dgw = dgu * c + v * c1 * u, du = v * c1 * gw;
    const at::Tensor dd2 = c1 * (dgu * gw).sum(1, true) + v * r1 * c2;
    return {dgw, (dd1 + dd2).squeeze(1), da1, da2, du, dp};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const variable_list in = ctx->get_saved_variables();  // gW, d, a1, a2, U, P
    std::vector<bool> need(6);
    for (size_t i = 0; i < 6; ++i) need[i] = ctx->needs_input_grad(i);
    variable_list out(10);
    if (!grad[0].defined()) return out;
    if (at::GradMode::is_enabled()) {  // third order: differentiable ops
      const variable_list g = backward_differentiable(in, grad[0], ctx);
      for (size_t i = 0; i < 6; ++i)
        if (need[i]) out[i] = g[i];
      return out;
    }
    const at::Tensor v = grad[0].contiguous();
    const at::Tensor &d = in[1], &a1 = in[2], &a2 = in[3];
    const double coeff = ctx->saved_data.at("coeff").toDouble();
    // Through gd = r1 c1 + sum_k gG G': the direct term on d, and dL/dgG.
    auto [dgg, dd1] = gauss_second(v, get(ctx, "gG"), get(ctx, "gauss"), d, get(ctx, "mu"), coeff);
    // gG = gP A1.
    const at::Tensor dgp = at::mm(dgg, a1.t());
    if (need[2]) out[2] = at::mm(get(ctx, "gP").t(), dgg);
    // gP = gS s(P): dL/dgS, and dL/dP (to SchnetFilter's backward).
    auto [dgs, dp] = sigmoid_second(dgp, get(ctx, "gS"), get(ctx, "sig"));
    // gS = gU A2.
    const at::Tensor dgu = at::mm(dgs, a2.t());
    if (need[3]) out[3] = at::mm(get(ctx, "gU").t(), dgs);
    // gU = gW c and r1 = sum_f gW U: dL/dgW, dL/dU (to SchnetFilter's backward), the term on d.
    auto [dgw, du, dd2] = cutoff_second(dgu, get(ctx, "gW"), get(ctx, "U"), v, get(ctx, "c"),
                                        get(ctx, "c1"), get(ctx, "c2"), get(ctx, "r1"));
    if (need[0]) out[0] = dgw;
    if (need[1]) out[1] = dd1.add_(dd2);
    if (need[4]) out[4] = du;
    if (need[5]) out[5] = dp;
    return out;
  }
};

// W = U c(d) with U = ssp(G A1^T + b1) A2^T + b2; also returns U and P = G A1^T + b1 (for
// SchnetFilterGrad; nothing else reads them).
struct SchnetFilter : public torch::autograd::Function<SchnetFilter> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& d_in,
                               const at::Tensor& gauss_in, const at::Tensor& mu,
                               const at::Tensor& a1, const at::Tensor& b1, const at::Tensor& a2,
                               const at::Tensor& b2, const at::Tensor& c, const at::Tensor& c1,
                               const at::Tensor& c2, double coeff, double cutoff,
                               int64_t envelope) {
    const at::Tensor d = d_in.contiguous(), gauss = gauss_in.contiguous();
    const at::Tensor p = at::addmm(b1, gauss, a1.t());
    auto [s, sig] = ssp_and_sigmoid(p);
    const at::Tensor u = at::addmm(b2, s, a2.t());
    // U is also an output: the context keeps an alias without autograd metadata (the output
    // itself would hold this node through its grad_fn, a reference cycle).
    const at::Tensor values[] = {gauss, mu.contiguous(), sig, s, u.detach(), c, c1, c2};
    for (size_t i = 0; i < 8; ++i) put(ctx, kSavedNames[i], values[i]);
    ctx->saved_data["coeff"] = coeff;
    ctx->saved_data["cutoff"] = cutoff;
    ctx->saved_data["envelope"] = envelope;
    // Outputs saved this way are held without a cycle (SavedVariable knows they are outputs).
    ctx->save_for_backward({d_in, a1, b1, a2, b2, u, p});
    // Unused outputs (U and P, except in the force loss's backward) get undefined gradients,
    // not zero tensors: the backward tells the cases apart by that.
    ctx->set_materialize_grads(false);
    return {scale_rows(u, c), u, p};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const variable_list in = ctx->get_saved_variables();  // d, a1, b1, a2, b2, U, P
    // Input slots: d, gauss, mu, a1, b1, a2, b2, c, c1, c2 (the tensors: needs_input_grad counts
    // only these), coeff, cutoff, envelope.
    const bool need_d = ctx->needs_input_grad(0);
    const bool need_w[4] = {ctx->needs_input_grad(3), ctx->needs_input_grad(4),
                            ctx->needs_input_grad(5), ctx->needs_input_grad(6)};
    const bool need_weights = need_w[0] || need_w[1] || need_w[2] || need_w[3];
    const at::Tensor &gw = grad[0], &gu_extra = grad[1], &gp_extra = grad[2];
    variable_list out(13);
    if (!gw.defined() && !gu_extra.defined() && !gp_extra.defined()) return out;
    const double coeff = ctx->saved_data.at("coeff").toDouble();
    const double cutoff = ctx->saved_data.at("cutoff").toDouble();
    const int64_t envelope = ctx->saved_data.at("envelope").toInt();
    if (at::GradMode::is_enabled()) {
      if (!need_weights && gw.defined() && !gu_extra.defined() && !gp_extra.defined()) {
        // The force pass: a function with a hand-written derivative.
        if (!need_d) return out;
        c10::Dict<std::string, at::Tensor> fwd;
        for (const char* name : kSavedNames) fwd.insert(name, get(ctx, name));
        out[0] = SchnetFilterGrad::apply(gw, in[0], in[1], in[3], in[5], in[6], fwd, coeff, cutoff,
                                         envelope);
        return out;
      }
      // Anything else with create_graph (not a training step's): differentiable ops.
      const FilterBasis basis{
          get(ctx, "mu"), coeff, cutoff, {}, at::Tensor(), envelope_of_code(envelope),
          at::Tensor()};
      const auto parts = reference_parts(in[0], basis, in[1], in[2], in[3], in[4]);
      const variable_list g = grads_of({parts[0], parts[1], parts[2]}, {gw, gu_extra, gp_extra},
                                       {in[0], in[1], in[2], in[3], in[4]},
                                       {need_d, need_w[0], need_w[1], need_w[2], need_w[3]});
      out[0] = g[0];
      for (size_t i = 0; i < 4; ++i) out[3 + i] = g[1 + i];
      return out;
    }
    // dL/dU in total: through W = U c, plus what the force loss sent to U.
    const at::Tensor gauss = get(ctx, "gauss");
    at::Tensor gu, r1;
    if (gw.defined()) {
      std::tie(gu, r1) = grad_through_cutoff(gw.contiguous(), get(ctx, "U"), get(ctx, "c"));
      if (gu_extra.defined()) gu.add_(gu_extra);
    } else {
      gu = gu_extra.defined() ? gu_extra.contiguous() : at::zeros_like(get(ctx, "U"));
    }
    if (need_w[2]) out[5] = at::mm(gu.t(), get(ctx, "S"));
    if (need_w[3]) out[6] = gu.sum(0);
    if (!(need_d || need_w[0] || need_w[1])) return out;
    // dL/dP in total: through S = ssp(P), plus what the force loss sent to P.
    at::Tensor gp = at::mm(gu, in[3]).mul_(get(ctx, "sig"));
    if (gp_extra.defined()) gp.add_(gp_extra);
    if (need_w[0]) out[3] = at::mm(gp.t(), gauss);
    if (need_w[1]) out[4] = gp.sum(0);
    if (need_d)
      out[0] = gauss_grad_dot(at::mm(gp, in[1]), gauss, in[0].contiguous(), get(ctx, "mu"), coeff,
                              r1.defined() ? r1 * get(ctx, "c1") : at::Tensor());
    return out;
  }
};

void check_shapes(const at::Tensor& d, const at::Tensor& a1, const at::Tensor& b1,
                  const at::Tensor& a2, const at::Tensor& b2, int64_t ng) {
  const int64_t nf = a1.size(0);
  if (d.dim() != 1 || a1.dim() != 2 || a1.size(1) != ng || b1.sizes() != at::IntArrayRef{nf} ||
      a2.sizes() != at::IntArrayRef{nf, nf} || b2.sizes() != at::IntArrayRef{nf})
    throw Error("schnet_filter: expected d [E], A1 [nf, ng], b1 [nf], A2 [nf, nf], b2 [nf]");
}

}  // namespace

at::Tensor schnet_filter(const at::Tensor& d, const at::Tensor& gauss, const FilterBasis& basis,
                         const at::Tensor& a1, const at::Tensor& b1, const at::Tensor& a2,
                         const at::Tensor& b2) {
  check_shapes(d, a1, b1, a2, b2, basis.mu.numel());
  // Off the CPU and CUDA, with GenericKernels, or without the Gaussians: plain ATen ops.
  if ((!fused_kernels(d) && !cuda_kernels(d)) || !gauss.defined() ||
      basis.envelope_tensor.defined() ||
      gauss.sizes() != at::IntArrayRef{d.size(0), basis.mu.numel()})
    return schnet_filter_reference(d, basis, a1, b1, a2, b2);
  const std::array<at::Tensor, 3> cut = basis.cutoff_values[0].defined()
                                            ? basis.cutoff_values
                                            : envelope_values(d, basis.cutoff, basis.envelope);
  return SchnetFilter::apply(d, gauss.detach(), basis.mu, a1, b1, a2, b2, cut[0].detach(),
                             cut[1].detach(), cut[2].detach(), basis.coeff, basis.cutoff,
                             envelope_code(basis.envelope))[0];
}

at::Tensor schnet_filter_reference(const at::Tensor& d, const FilterBasis& basis,
                                   const at::Tensor& a1, const at::Tensor& b1, const at::Tensor& a2,
                                   const at::Tensor& b2) {
  check_shapes(d, a1, b1, a2, b2, basis.mu.numel());
  return reference_parts(d, basis, a1, b1, a2, b2)[0];
}

}  // namespace ddgnn
