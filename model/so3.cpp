// SO(3) mathematics of the equivariant layers (model/so3.h): real spherical harmonics as
// polynomials (values and gradients by forward-mode dual numbers), Racah's formula, the
// complex-to-real change of basis, real coupling tensors and Wigner-D matrices by exact quadrature.
#include "model/so3.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"

namespace ddgnn::so3 {
namespace {

// A value and its derivatives with respect to the three components of r.
struct Dual {
  double v = 0.0;
  std::array<double, 3> d{};
};
Dual operator+(const Dual& a, const Dual& b) {
  return {a.v + b.v, {a.d[0] + b.d[0], a.d[1] + b.d[1], a.d[2] + b.d[2]}};
}
Dual operator-(const Dual& a, const Dual& b) {
  return {a.v - b.v, {a.d[0] - b.d[0], a.d[1] - b.d[1], a.d[2] - b.d[2]}};
}
Dual operator*(const Dual& a, const Dual& b) {
  Dual r{a.v * b.v, {}};
  for (int k = 0; k < 3; ++k) r.d[k] = a.d[k] * b.v + a.v * b.d[k];
  return r;
}
Dual operator*(double s, const Dual& a) {
  return {s * a.v, {s * a.d[0], s * a.d[1], s * a.d[2]}};
}
Dual operator-(const Dual& a, double s) {
  return {a.v - s, a.d};
}
Dual operator/(const Dual& a, const Dual& b) {
  Dual r{a.v / b.v, {}};
  for (int k = 0; k < 3; ++k) r.d[k] = (a.d[k] * b.v - a.v * b.d[k]) / (b.v * b.v);
  return r;
}
Dual sqrt(const Dual& a) {
  const double s = std::sqrt(a.v);
  return {s, {a.d[0] / (2 * s), a.d[1] / (2 * s), a.d[2] / (2 * s)}};
}
using std::sqrt;
// The constant c as a T, for the templates below.
double constant_of(double c, double /*like*/) {
  return c;
}
Dual constant_of(double c, const Dual& /*like*/) {
  return {c, {}};
}

// S_l(x, y, z), the textbook real harmonics of polar axis z on the unit vector (x, y, z), in
// component normalisation (sqrt(4 pi) times the orthonormal ones), m = -l..l.
template <class T>
void textbook_harmonics(int l, const T& x, const T& y, const T& z, T* out) {
  switch (l) {
    case 0:
      out[0] = constant_of(1.0, x);
      return;
    case 1: {
      const double c = std::sqrt(3.0);
      out[0] = c * y;
      out[1] = c * z;
      out[2] = c * x;
      return;
    }
    case 2: {
      const double c = std::sqrt(15.0);
      out[0] = c * (x * y);
      out[1] = c * (y * z);
      out[2] = (std::sqrt(5.0) / 2) * (3.0 * (z * z) - 1.0);
      out[3] = c * (x * z);
      out[4] = (c / 2) * (x * x - y * y);
      return;
    }
    case 3: {
      const double c3 = std::sqrt(70.0) / 4, c2 = std::sqrt(105.0), c1 = std::sqrt(42.0) / 4;
      const T x2 = x * x, y2 = y * y, z2 = z * z;
      out[0] = c3 * (y * (3.0 * x2 - y2));
      out[1] = c2 * (x * y * z);
      out[2] = c1 * (y * (5.0 * z2 - 1.0));
      out[3] = (std::sqrt(7.0) / 2) * (z * (5.0 * z2 - 3.0));
      out[4] = c1 * (x * (5.0 * z2 - 1.0));
      out[5] = (c2 / 2) * ((x2 - y2) * z);
      out[6] = c3 * (x * (x2 - 3.0 * y2));
      return;
    }
    default:
      throw Error("so3: spherical harmonics of degree " + std::to_string(l) +
                  " requested; degrees 0.." + std::to_string(kMaxL) + " are implemented");
  }
}

// Y_l(r / |r|) = S_l of the unit vector's cyclic permutation (z, x, y) (model/so3.h).
template <class T>
void harmonics(int l, const T& x, const T& y, const T& z, T* out) {
  const T norm = sqrt(x * x + y * y + z * z);
  textbook_harmonics(l, z / norm, x / norm, y / norm, out);
}

void check_harmonics(int l, const Vec3& r) {
  if (l < 0 || l > kMaxL) {
    throw Error("so3: spherical harmonics of degree " + std::to_string(l) +
                " requested; degrees 0.." + std::to_string(kMaxL) + " are implemented");
  }
  const double n2 = r[0] * r[0] + r[1] * r[1] + r[2] * r[2];
  if (!(n2 > 0.0) || !std::isfinite(n2)) {
    throw Error("so3: spherical harmonics of a zero or non-finite vector (" + std::to_string(r[0]) +
                ", " + std::to_string(r[1]) + ", " + std::to_string(r[2]) + ")");
  }
}

// n! exactly for n <= 22 (every factor of n! is an exactly representable double product).
double factorial(int n) {
  double f = 1.0;
  for (int k = 2; k <= n; ++k) f *= k;
  return f;
}

void check_coupling_degree(int l) {
  if (l < 0 || l > kMaxCouplingL) {
    throw Error("so3: degree " + std::to_string(l) + " outside 0.." +
                std::to_string(kMaxCouplingL) + " of the Clebsch-Gordan coefficients");
  }
}

// Legendre polynomial P_n(t) and its derivative.
void legendre(int n, double t, double& p, double& dp) {
  double p0 = 1.0, p1 = t;
  if (n == 0) {
    p = 1.0;
    dp = 0.0;
    return;
  }
  for (int k = 2; k <= n; ++k) {
    const double p2 = ((2 * k - 1) * t * p1 - (k - 1) * p0) / k;
    p0 = p1;
    p1 = p2;
  }
  p = p1;
  dp = n * (t * p1 - p0) / (t * t - 1.0);
}

}  // namespace

std::vector<double> spherical_harmonics(int l, const Vec3& r) {
  check_harmonics(l, r);
  std::vector<double> out(2 * l + 1);
  harmonics(l, r[0], r[1], r[2], out.data());
  return out;
}

HarmonicsWithGrad spherical_harmonics_with_grad(int l, const Vec3& r) {
  check_harmonics(l, r);
  std::array<Dual, 3> v;
  for (int k = 0; k < 3; ++k) {
    v[k].v = r[k];
    v[k].d[k] = 1.0;
  }
  std::vector<Dual> out(2 * l + 1);
  harmonics(l, v[0], v[1], v[2], out.data());
  HarmonicsWithGrad result;
  result.values.resize(out.size());
  result.grad.resize(3 * out.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    result.values[i] = out[i].v;
    for (int k = 0; k < 3; ++k) result.grad[3 * i + k] = out[i].d[k];
  }
  return result;
}

bool triangle(int l1, int l2, int l3) {
  return l1 >= 0 && l2 >= 0 && l3 >= 0 && l3 >= std::abs(l1 - l2) && l3 <= l1 + l2;
}

double clebsch_gordan(int l1, int m1, int l2, int m2, int l3, int m3) {
  check_coupling_degree(l1);
  check_coupling_degree(l2);
  check_coupling_degree(l3);
  if (!triangle(l1, l2, l3) || m1 + m2 != m3) return 0.0;
  if (std::abs(m1) > l1 || std::abs(m2) > l2 || std::abs(m3) > l3) return 0.0;
  // Racah's formula.
  const double pre = std::sqrt((2 * l3 + 1) * factorial(l3 + l1 - l2) * factorial(l3 - l1 + l2) *
                               factorial(l1 + l2 - l3) / factorial(l1 + l2 + l3 + 1)) *
                     std::sqrt(factorial(l3 + m3) * factorial(l3 - m3) * factorial(l1 - m1) *
                               factorial(l1 + m1) * factorial(l2 - m2) * factorial(l2 + m2));
  const int k_min = std::max({0, l2 - l3 - m1, l1 - l3 + m2});
  const int k_max = std::min({l1 + l2 - l3, l1 - m1, l2 + m2});
  double sum = 0.0;
  for (int k = k_min; k <= k_max; ++k) {
    const double term =
        1.0 / (factorial(k) * factorial(l1 + l2 - l3 - k) * factorial(l1 - m1 - k) *
               factorial(l2 + m2 - k) * factorial(l3 - l2 + m1 + k) * factorial(l3 - l1 - m2 + k));
    sum += (k % 2 == 0) ? term : -term;
  }
  return pre * sum;
}

std::vector<std::complex<double>> complex_to_real(int l) {
  check_coupling_degree(l);
  const int n = 2 * l + 1;
  const double h = 1.0 / std::sqrt(2.0);
  const std::complex<double> i(0.0, 1.0);
  std::vector<std::complex<double>> u(n * n);
  auto at = [&](int m, int mc) -> std::complex<double>& { return u[(l + m) * n + (l + mc)]; };
  at(0, 0) = 1.0;
  for (int m = 1; m <= l; ++m) {
    const double sign = (m % 2 == 0) ? 1.0 : -1.0;
    at(m, -m) = h;  // m > 0: (Y^-m + (-1)^m Y^m) / sqrt(2)
    at(m, m) = sign * h;
    at(-m, -m) = i * h;  // -m < 0: i (Y^-m - (-1)^m Y^m) / sqrt(2)
    at(-m, m) = -sign * i * h;
  }
  return u;
}

std::vector<double> real_coupling(int l1, int l2, int l3) {
  check_coupling_degree(l1);
  check_coupling_degree(l2);
  check_coupling_degree(l3);
  if (!triangle(l1, l2, l3)) {
    throw Error("so3: no coupling of degrees " + std::to_string(l1) + " and " + std::to_string(l2) +
                " to " + std::to_string(l3) + " (triangle rule)");
  }
  const int n1 = 2 * l1 + 1, n2 = 2 * l2 + 1, n3 = 2 * l3 + 1;
  const auto u1 = complex_to_real(l1), u2 = complex_to_real(l2), u3 = complex_to_real(l3);
  // The real rows a, b, c mix the complex m = +-|a|..., so only m1 = +-a, m2 = +-b, m3 = +-c count.
  std::vector<std::complex<double>> sum(n1 * n2 * n3);
  for (int a = 0; a < n1; ++a) {
    for (int b = 0; b < n2; ++b) {
      for (int c = 0; c < n3; ++c) {
        std::complex<double> s = 0.0;
        for (int m1 = -l1; m1 <= l1; ++m1) {
          const auto x1 = std::conj(u1[a * n1 + (l1 + m1)]);
          if (x1 == 0.0) continue;
          for (int m2 = -l2; m2 <= l2; ++m2) {
            const auto x2 = std::conj(u2[b * n2 + (l2 + m2)]);
            const int m3 = m1 + m2;
            if (x2 == 0.0 || std::abs(m3) > l3) continue;
            const auto x3 = u3[c * n3 + (l3 + m3)];
            if (x3 == 0.0) continue;
            s += x1 * x2 * x3 * clebsch_gordan(l1, m1, l2, m2, l3, m3);
          }
        }
        sum[(a * n2 + b) * n3 + c] = s;
      }
    }
  }
  // Phase 1 (even l1 + l2 + l3) or -i (odd): the other part must vanish.
  const bool odd = (l1 + l2 + l3) % 2 == 1;
  std::vector<double> out(sum.size());
  double rest = 0.0;
  for (std::size_t k = 0; k < sum.size(); ++k) {
    out[k] = odd ? sum[k].imag() : sum[k].real();
    rest = std::max(rest, std::abs(odd ? sum[k].real() : sum[k].imag()));
  }
  if (rest > 1e-12) {
    throw Error("so3: the coupling tensor of (" + std::to_string(l1) + ", " + std::to_string(l2) +
                ", " + std::to_string(l3) + ") is not real after its phase (residue " +
                std::to_string(rest) + ")");
  }
  return out;
}

SphereQuadrature sphere_quadrature(int degree) {
  if (degree < 0) throw Error("so3: negative quadrature degree " + std::to_string(degree));
  const int n_theta = degree / 2 + 1;  // Gauss-Legendre: exact to degree 2 n - 1 in cos(theta)
  const int n_phi = degree + 1;        // equispaced: exact for e^{i k phi}, |k| <= degree
  const double pi = std::acos(-1.0);
  SphereQuadrature q;
  for (int i = 0; i < n_theta; ++i) {
    // Newton on P_n from the usual guess; converges in a few steps for these small n.
    double t = std::cos(pi * (i + 0.75) / (n_theta + 0.5)), p = 0.0, dp = 0.0;
    for (int it = 0; it < 100; ++it) {
      legendre(n_theta, t, p, dp);
      const double step = p / dp;
      t -= step;
      if (std::abs(step) < 1e-16) break;
    }
    legendre(n_theta, t, p, dp);
    // Gauss-Legendre weight 2 / ((1 - t^2) P'^2), halved (mean over cos(theta) in [-1, 1]).
    const double w_theta = 1.0 / ((1.0 - t * t) * dp * dp);
    const double s = std::sqrt(std::max(0.0, 1.0 - t * t));
    for (int j = 0; j < n_phi; ++j) {
      const double phi = 2.0 * pi * j / n_phi;
      q.points.push_back({s * std::cos(phi), s * std::sin(phi), t});
      q.weights.push_back(w_theta / n_phi);
    }
  }
  return q;
}

std::vector<double> wigner_d(int l, const Mat3& R) {
  if (l < 0 || l > kMaxL) {
    throw Error("so3: Wigner-D of degree " + std::to_string(l) + " requested; degrees 0.." +
                std::to_string(kMaxL) + " are implemented");
  }
  double off = 0.0;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      double dot = 0.0;
      for (int k = 0; k < 3; ++k) dot += R[k][i] * R[k][j];
      off = std::max(off, std::abs(dot - (i == j ? 1.0 : 0.0)));
    }
  }
  if (!(off < 1e-9)) {
    throw Error("so3: Wigner-D of a matrix that is not orthogonal (|R^T R - I| = " +
                std::to_string(off) + ")");
  }
  const int n = 2 * l + 1;
  std::vector<double> d(n * n, 0.0);
  const SphereQuadrature q = sphere_quadrature(2 * l);
  for (std::size_t p = 0; p < q.points.size(); ++p) {
    const Vec3& x = q.points[p];
    Vec3 rx{};
    for (int i = 0; i < 3; ++i) rx[i] = R[i][0] * x[0] + R[i][1] * x[1] + R[i][2] * x[2];
    const auto y = spherical_harmonics(l, x), ry = spherical_harmonics(l, rx);
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) d[a * n + b] += q.weights[p] * ry[a] * y[b];
    }
  }
  return d;
}

}  // namespace ddgnn::so3
