// Spherical Bessel functions: on the host (bessel_series below x = 1, the upward recurrence
// above), over ATen columns (the reference), and DimeNet's radial columns as one autograd function
// per derivative order k: RadialDerivative(d, k) = d^k rad / dd^k, whose backward is
// sum_c g[:, c] RadialDerivative(d, k + 1)[:, c]. The derivatives of j_l: termwise from the series
// below y = 1; above it j' = (l/y) j_l - j_(l+1) and, from the ODE
//   y^2 j'' + 2y j' + (y^2 - L) j = 0 (L = l(l+1)):
//   j'' = -(2/y) j' - (1 - L/y^2) j,
//   j''' = (2/y^2) j' - (2/y) j'' - (1 - L/y^2) j' - (2L/y^3) j.
// The envelope's are those of its four power terms; the product's by Leibniz.
#include "model/spherical_bessel.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <array>
#include <cmath>
#include <string>

#include "core/error.h"
#include "model/device.h"

namespace ddgnn {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Below x = 1 the power series of j_l (eight terms: each is below x^2 / (2k (2l + 2k + 1)) times
// the one before, so the eighth is under 1e-17 of the first), above it the upward recurrence from
// j_0 and j_1, which loses about l digits at x = 1 (relative error 1e-7 at l = 6, and the basis
// sees x = 1 only for atoms closer than rc / z_l1, 0.1 rc at l = 6).
constexpr double kSeriesLimit = 1.0;
constexpr int kSeriesTerms = 8;
constexpr int kMaxDerivative = 3;

// (2l+1)!!
double double_factorial(int l) {
  double f = 1.0;
  for (int k = 1; k <= 2 * l + 1; k += 2) f *= k;
  return f;
}

// j_l(x) = x^l / (2l+1)!! sum_k (-x^2/2)^k / (k! (2l+3)(2l+5)...(2l+2k+1)).
double bessel_series(int l, double x) {
  const double x2 = -0.5 * x * x;
  double term = 1.0, sum = 1.0;
  for (int k = 1; k <= kSeriesTerms; ++k) {
    term *= x2 / (k * (2.0 * l + 2 * k + 1));
    sum += term;
  }
  return std::pow(x, l) * sum / double_factorial(l);
}

// j_l(x) and j_(l+1)(x) by the upward recurrence j_(k+1) = (2k+1)/x j_k - j_(k-1).
std::array<double, 2> bessel_recurrence(int l, double x) {
  const double s = std::sin(x), inv = 1.0 / x;
  double jm = s * inv, j = (jm - std::cos(x)) * inv;
  for (int k = 1; k <= l; ++k) {
    const double next = (2.0 * k + 1) * inv * j - jm;
    jm = j;
    j = next;
  }
  return {jm, j};
}

// m (m - 1) ... (m - i + 1): the i-th derivative's coefficient of x^m.
double falling(double m, int i) {
  double f = 1.0;
  for (int q = 0; q < i; ++q) f *= m - q;
  return f;
}

// j_l^(i)(y) for i = 0..k.
std::array<double, kMaxDerivative + 2> bessel_derivatives(int l, double y, int k) {
  std::array<double, kMaxDerivative + 2> jd{};
  if (y < kSeriesLimit) {
    double a = 1.0 / double_factorial(l);
    for (int m = 0; m <= kSeriesTerms; ++m) {
      if (m > 0) a *= -0.5 / (m * (2.0 * l + 2 * m + 1));
      const int n = l + 2 * m;
      for (int i = 0; i <= k && i <= n; ++i)
        jd[size_t(i)] += a * falling(n, i) * std::pow(y, n - i);
    }
    return jd;
  }
  const auto [j, jp1] = bessel_recurrence(l, y);
  const double inv = 1.0 / y, big_l = double(l) * (l + 1), q = 1.0 - big_l * inv * inv;
  jd[0] = j;
  if (k >= 1) jd[1] = l * inv * j - jp1;
  if (k >= 2) jd[2] = -2.0 * inv * jd[1] - q * j;
  if (k >= 3)
    jd[3] =
        2.0 * inv * inv * jd[1] - 2.0 * inv * jd[2] - q * jd[1] - 2.0 * big_l * inv * inv * inv * j;
  return jd;
}

double binomial(int k, int i) {
  double b = 1.0;
  for (int q = 1; q <= i; ++q) b = b * (k - i + q) / q;
  return b;
}

// d^k rad / dd^k [E, C] in `dtype`, from d [E] (any floating dtype), on the CPU.
at::Tensor radial_derivative_fused(const at::Tensor& d_in, const SphericalBesselColumns& cols,
                                   int k, c10::ScalarType dtype) {
  const at::Tensor d = d_in.to(at::kDouble).contiguous();
  const int64_t e_count = d.numel(), c_count = int64_t(cols.zero.size());
  at::Tensor out = at::empty({e_count, c_count}, d.options());
  const double* dp = d.data_ptr<double>();
  double* op = out.data_ptr<double>();
  const double p = double(cols.p), rc = cols.cutoff;
  // u(x) = sum of coef x^power.
  const std::array<double, 4> coef = {1.0, -(p + 1) * (p + 2) / 2, p * (p + 2), -p * (p + 1) / 2};
  const std::array<double, 4> power = {-1.0, p - 1, p, p + 1};
  const double scale = std::pow(rc, -double(k));
  for (int64_t e = 0; e < e_count; ++e) {
    const double x = dp[e] / rc;
    std::array<double, kMaxDerivative + 1> u{};
    for (int i = 0; i <= k; ++i)
      for (size_t t = 0; t < coef.size(); ++t) {
        const double f = falling(power[t], i);
        if (f != 0.0) u[size_t(i)] += coef[t] * f * std::pow(x, power[t] - i);
      }
    for (int64_t c = 0; c < c_count; ++c) {
      const double z = cols.zero[size_t(c)];
      const auto jd = bessel_derivatives(int(cols.order[size_t(c)]), z * x, k);
      double acc = 0.0, zi = 1.0;
      for (int i = 0; i <= k; ++i, zi *= z)
        acc += binomial(k, i) * zi * jd[size_t(i)] * u[size_t(k - i)];
      op[e * c_count + c] = cols.norm[size_t(c)] * scale * acc;
    }
  }
  return out.to(dtype);
}

void save_columns(AutogradContext* ctx, const SphericalBesselColumns& cols) {
  ctx->saved_data["order"] = cols.order;
  ctx->saved_data["zero"] = cols.zero;
  ctx->saved_data["norm"] = cols.norm;
  ctx->saved_data["cutoff"] = cols.cutoff;
  ctx->saved_data["p"] = cols.p;
}

SphericalBesselColumns saved_columns(AutogradContext* ctx) {
  SphericalBesselColumns cols;
  cols.order = ctx->saved_data["order"].toIntVector();
  cols.zero = ctx->saved_data["zero"].toDoubleVector();
  cols.norm = ctx->saved_data["norm"].toDoubleVector();
  cols.cutoff = ctx->saved_data["cutoff"].toDouble();
  cols.p = ctx->saved_data["p"].toInt();
  return cols;
}

struct RadialDerivative : public torch::autograd::Function<RadialDerivative> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& d,
                            const SphericalBesselColumns* cols, int64_t k, int64_t dtype) {
    ctx->save_for_backward({d});
    save_columns(ctx, *cols);
    ctx->saved_data["k"] = k;
    return radial_derivative_fused(d, *cols, int(k), c10::ScalarType(dtype));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const int64_t k = ctx->saved_data["k"].toInt();
    if (!ctx->needs_input_grad(0)) return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    if (k >= kMaxDerivative)
      throw Error("DimeNet's spherical basis is differentiable " + std::to_string(kMaxDerivative) +
                  " times in the edge lengths; a derivative of order " + std::to_string(k + 1) +
                  " was asked for");
    const at::Tensor& g = grad[0];
    const SphericalBesselColumns cols = saved_columns(ctx);
    const at::Tensor next = RadialDerivative::apply(ctx->get_saved_variables()[0], &cols, k + 1,
                                                    int64_t(g.scalar_type()));
    return {(g * next).sum(1), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// j_(l_c)(x[:, c]) for every column c at once, l_c = order[c] (a [C] float64 tensor of integers
// 0..lmax): one pass of the recurrence and one of the series over all columns, joined by where;
// each branch on its own clamped arguments (neither evaluated where it is inaccurate or
// infinite). Float64, differentiable to any order.
at::Tensor spherical_bessel_columns(const at::Tensor& x, const at::Tensor& order, int64_t lmax) {
  const double limit = kSeriesLimit;
  const at::Tensor xr = at::clamp_min(x, limit), inv = 1.0 / xr, sn = at::sin(xr);
  at::Tensor jm = sn * inv, j = (jm - at::cos(xr)) * inv;
  at::Tensor rec = at::where(order == 0.0, jm, j);
  for (int64_t k = 1; k < lmax; ++k) {
    at::Tensor next = j * inv * (2.0 * double(k) + 1.0) - jm;
    rec = at::where(order == double(k + 1), next, rec);
    jm = j;
    j = next;
  }
  // Series: x^l / (2l+1)!! sum_k prod_(q<=k) (-x^2/2) / (q (2l + 2q + 1)).
  const at::Tensor xs = at::clamp_max(x, limit), x2 = xs * xs * (-0.5);
  at::Tensor term = at::ones_like(xs), sum = at::ones_like(xs);
  for (int q = 1; q <= kSeriesTerms; ++q) {
    term = term * x2 / ((2.0 * order + (2.0 * q + 1.0)) * double(q));
    sum = sum + term;
  }
  at::Tensor dfact = at::ones_like(order);  // (2l+1)!!
  for (int64_t k = 1; k <= lmax; ++k)
    dfact = at::where(order >= double(k), dfact * (2.0 * double(k) + 1.0), dfact);
  const at::Tensor series = at::pow(xs, order) * sum / dfact;
  return at::where(x < limit, series, rec);
}

}  // namespace

double spherical_bessel(int l, double x) {
  return x < kSeriesLimit ? bessel_series(l, x) : bessel_recurrence(l, x)[0];
}

std::vector<double> spherical_bessel_zeros(int l, int n) {
  // Zeros of j_0 are k pi; those of j_l interlace those of j_(l-1): the k-th lies between its
  // k-th and (k+1)-th. Bisection in each bracket.
  std::vector<double> z(size_t(n + l));
  for (int k = 0; k < n + l; ++k) z[size_t(k)] = (k + 1) * M_PI;
  for (int order = 1; order <= l; ++order) {
    std::vector<double> next(size_t(n + l - order));
    for (size_t k = 0; k < next.size(); ++k) {
      double a = z[k], b = z[k + 1];
      double fa = spherical_bessel(order, a);
      for (int it = 0; it < 200 && b - a > 1e-15 * b; ++it) {
        const double m = 0.5 * (a + b), fm = spherical_bessel(order, m);
        if ((fm < 0) == (fa < 0)) {
          a = m;
          fa = fm;
        } else {
          b = m;
        }
      }
      next[k] = 0.5 * (a + b);
    }
    z = std::move(next);
  }
  z.resize(size_t(n));
  return z;
}

SphericalBesselColumns dimenet_columns(int64_t num_spherical, int64_t num_radial, double cutoff,
                                       int64_t p) {
  SphericalBesselColumns cols;
  cols.cutoff = cutoff;
  cols.p = p;
  for (int l = 0; l < int(num_spherical); ++l)
    for (double z : spherical_bessel_zeros(l, int(num_radial))) {
      cols.order.push_back(l);
      cols.zero.push_back(z);
      cols.norm.push_back(std::sqrt(2.0) / std::abs(spherical_bessel(l + 1, z)));
    }
  return cols;
}

at::Tensor dimenet_envelope(const at::Tensor& x, int64_t p_order) {
  const double p = double(p_order), a = -(p + 1) * (p + 2) / 2, b = p * (p + 2),
               c = -p * (p + 1) / 2;
  const at::Tensor xp = at::pow(x, p);
  return (1.0 + a * xp + b * xp * x + c * xp * x * x) / x;
}

at::Tensor spherical_bessel_radial(const at::Tensor& d, const SphericalBesselColumns& cols,
                                   c10::ScalarType dtype) {
  if (d.dim() != 1) throw Error("spherical_bessel_radial: expected edge lengths [E]");
  if (!fused_kernels(d)) return spherical_bessel_radial_reference(d, cols, dtype);
  return RadialDerivative::apply(d, &cols, int64_t(0), int64_t(dtype));
}

at::Tensor spherical_bessel_radial_reference(const at::Tensor& d,
                                             const SphericalBesselColumns& cols,
                                             c10::ScalarType dtype) {
  const at::Tensor x = d.to(at::kDouble) * (1.0 / cols.cutoff);  // [E] in (0, 1)
  const at::Tensor u = dimenet_envelope(x, cols.p);              // [E]
  const auto table = [&](int slot, const auto& values) -> const at::Tensor& {
    return cols.tables->get(slot, d.device(), at::kDouble,
                            [&] { return at::tensor(values, at::kDouble); });
  };
  const at::Tensor& order = table(0, std::vector<double>(cols.order.begin(), cols.order.end()));
  int64_t lmax = 0;
  for (int64_t l : cols.order) lmax = std::max(lmax, l);
  const at::Tensor arg = x.unsqueeze(1) * table(1, cols.zero).unsqueeze(0);
  return (spherical_bessel_columns(arg, order, lmax) * table(2, cols.norm).unsqueeze(0) *
          u.unsqueeze(1))
      .to(dtype);
}

}  // namespace ddgnn
