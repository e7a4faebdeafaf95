// The SO(3) mathematics of the equivariant layers (model/so3.h), in double precision: the sphere
// quadrature against closed-form monomial means; the harmonics orthonormal (component
// normalisation), their gradients against finite differences; Y_l(R x) = D_l(R) Y_l(x) with D_l
// orthogonal, a homomorphism and D_1(R) = R; every real coupling tensor (l <= 3) equivariant,
// orthonormal and reproducing the product of two harmonics; and the Clebsch-Gordan coefficients,
// real harmonics and real coupling tensors against an independent sympy computation
// (tests/model/so3_reference.py, run by Debian's python3).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/so3.h"

namespace ddgnn::so3 {
namespace {

using Matrix = std::vector<double>;  // n x n row-major

Mat3 random_rotation(std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  double q[4], n = 0.0;
  for (double& v : q) {
    v = normal(rng);
    n += v * v;
  }
  n = std::sqrt(n);
  const double w = q[0] / n, x = q[1] / n, y = q[2] / n, z = q[3] / n;
  return Mat3{{{1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)},
               {2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)},
               {2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)}}};
}

Vec3 random_vector(std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  return {normal(rng), normal(rng), normal(rng)};
}

Vec3 rotate(const Mat3& R, const Vec3& x) {
  Vec3 y{};
  for (int i = 0; i < 3; ++i) y[i] = R[i][0] * x[0] + R[i][1] * x[1] + R[i][2] * x[2];
  return y;
}

std::vector<double> mat_vec(const Matrix& d, const std::vector<double>& v) {
  const std::size_t n = v.size();
  std::vector<double> out(n, 0.0);
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = 0; b < n; ++b) out[a] += d[a * n + b] * v[b];
  }
  return out;
}

// out_c = sum_ab C_abc u_a v_b
std::vector<double> couple(const std::vector<double>& c, const std::vector<double>& u,
                           const std::vector<double>& v, int n3) {
  std::vector<double> out(n3, 0.0);
  const std::size_t n2 = v.size();
  for (std::size_t a = 0; a < u.size(); ++a) {
    for (std::size_t b = 0; b < n2; ++b) {
      for (int k = 0; k < n3; ++k) out[k] += c[(a * n2 + b) * n3 + k] * u[a] * v[b];
    }
  }
  return out;
}

double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0.0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    m = std::max(m, std::abs(a[i] - b[i]));
  }
  return m;
}

double double_factorial(int n) {
  double f = 1.0;
  for (int k = n; k > 1; k -= 2) f *= k;
  return f;
}

TEST(So3, SphereQuadratureGivesTheMeanOfEveryMonomialUpToItsDegree) {
  for (int degree = 0; degree <= 8; ++degree) {
    const SphereQuadrature q = sphere_quadrature(degree);
    double total = 0.0;
    for (double w : q.weights) total += w;
    EXPECT_NEAR(total, 1.0, 1e-14);
    for (int a = 0; a <= degree; ++a) {
      for (int b = 0; a + b <= degree; ++b) {
        for (int c = 0; a + b + c <= degree; ++c) {
          double mean = 0.0;
          for (std::size_t p = 0; p < q.points.size(); ++p) {
            const Vec3& x = q.points[p];
            mean += q.weights[p] * std::pow(x[0], a) * std::pow(x[1], b) * std::pow(x[2], c);
          }
          // Mean of x^a y^b z^c over the unit sphere: (a-1)!! (b-1)!! (c-1)!! / (a+b+c+1)!!.
          const bool even = a % 2 == 0 && b % 2 == 0 && c % 2 == 0;
          const double exact = even ? double_factorial(a - 1) * double_factorial(b - 1) *
                                          double_factorial(c - 1) / double_factorial(a + b + c + 1)
                                    : 0.0;
          EXPECT_NEAR(mean, exact, 1e-14)
              << "degree " << degree << " x^" << a << " y^" << b << " z^" << c;
        }
      }
    }
  }
}

TEST(So3, HarmonicsAreOrthonormalInComponentNormalisation) {
  const SphereQuadrature q = sphere_quadrature(2 * kMaxL);
  double worst = 0.0;
  for (int l1 = 0; l1 <= kMaxL; ++l1) {
    for (int l2 = 0; l2 <= kMaxL; ++l2) {
      const int n1 = 2 * l1 + 1, n2 = 2 * l2 + 1;
      std::vector<double> gram(n1 * n2, 0.0);
      for (std::size_t p = 0; p < q.points.size(); ++p) {
        const auto y1 = spherical_harmonics(l1, q.points[p]);
        const auto y2 = spherical_harmonics(l2, q.points[p]);
        for (int a = 0; a < n1; ++a) {
          for (int b = 0; b < n2; ++b) gram[a * n2 + b] += q.weights[p] * y1[a] * y2[b];
        }
      }
      for (int a = 0; a < n1; ++a) {
        for (int b = 0; b < n2; ++b) {
          const double expected = (l1 == l2 && a == b) ? 1.0 : 0.0;
          worst = std::max(worst, std::abs(gram[a * n2 + b] - expected));
        }
      }
    }
  }
  EXPECT_LT(worst, 1e-13);
  std::cout << "orthonormality: max |mean(Y Y^T) - I| = " << worst << "\n";
  // sum_m Y_lm^2 = 2l+1 at any point, of any length; Y_1(r) = sqrt(3) r / |r| (e3nn's basis).
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    const Vec3 r = random_vector(rng);
    for (int l = 0; l <= kMaxL; ++l) {
      double s = 0.0;
      for (double y : spherical_harmonics(l, r)) s += y * y;
      EXPECT_NEAR(s, 2 * l + 1, 1e-13);
    }
    const double n = std::sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
    const auto y1 = spherical_harmonics(1, r);
    for (int k = 0; k < 3; ++k) EXPECT_NEAR(y1[k], std::sqrt(3.0) * r[k] / n, 1e-14);
  }
}

TEST(So3, GradientsMatchFiniteDifferencesAndAreTangent) {
  std::mt19937_64 rng(11);
  const double h = 1e-5;
  for (int trial = 0; trial < 10; ++trial) {
    const Vec3 r = random_vector(rng);
    for (int l = 0; l <= kMaxL; ++l) {
      const HarmonicsWithGrad g = spherical_harmonics_with_grad(l, r);
      EXPECT_LT(max_diff(g.values, spherical_harmonics(l, r)), 1e-15);
      for (int i = 0; i < 2 * l + 1; ++i) {
        double radial = 0.0;
        for (int k = 0; k < 3; ++k) {
          Vec3 up = r, down = r;
          up[k] += h;
          down[k] -= h;
          const double fd =
              (spherical_harmonics(l, up)[i] - spherical_harmonics(l, down)[i]) / (2 * h);
          EXPECT_NEAR(g.grad[3 * i + k], fd, 1e-7) << "l " << l << " component " << i;
          radial += g.grad[3 * i + k] * r[k];
        }
        EXPECT_NEAR(radial, 0.0, 1e-13);
      }
    }
  }
}

TEST(So3, WignerDRotatesTheHarmonicsAndIsAnOrthogonalRepresentation) {
  std::mt19937_64 rng(3);
  double worst_equivariance = 0.0, worst_orthogonality = 0.0, worst_product = 0.0;
  for (int trial = 0; trial < 20; ++trial) {
    const Mat3 R = random_rotation(rng), S = random_rotation(rng);
    Mat3 RS{};
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) {
        for (int k = 0; k < 3; ++k) RS[i][j] += R[i][k] * S[k][j];
      }
    }
    for (int l = 0; l <= kMaxL; ++l) {
      const int n = 2 * l + 1;
      const Matrix d = wigner_d(l, R), ds = wigner_d(l, S), drs = wigner_d(l, RS);
      for (int p = 0; p < 5; ++p) {
        const Vec3 x = random_vector(rng);
        worst_equivariance = std::max(
            worst_equivariance,
            max_diff(spherical_harmonics(l, rotate(R, x)), mat_vec(d, spherical_harmonics(l, x))));
      }
      for (int a = 0; a < n; ++a) {
        for (int b = 0; b < n; ++b) {
          double dtd = 0.0, prod = 0.0;
          for (int k = 0; k < n; ++k) {
            dtd += d[k * n + a] * d[k * n + b];
            prod += d[a * n + k] * ds[k * n + b];
          }
          worst_orthogonality = std::max(worst_orthogonality, std::abs(dtd - (a == b ? 1.0 : 0.0)));
          worst_product = std::max(worst_product, std::abs(prod - drs[a * n + b]));
        }
      }
      // Inversion: Y_l(-x) = (-1)^l Y_l(x).
      Mat3 minus_r = R;
      for (auto& row : minus_r) {
        for (double& v : row) v = -v;
      }
      const Matrix dm = wigner_d(l, minus_r);
      for (int k = 0; k < n * n; ++k) EXPECT_NEAR(dm[k], (l % 2 ? -1.0 : 1.0) * d[k], 1e-12);
    }
    const Matrix d1 = wigner_d(1, R);
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) EXPECT_NEAR(d1[i * 3 + j], R[i][j], 1e-13);
    }
  }
  EXPECT_LT(worst_equivariance, 1e-12);
  EXPECT_LT(worst_orthogonality, 1e-12);
  EXPECT_LT(worst_product, 1e-12);
  std::cout << "Wigner-D: max |Y(Rx) - D Y(x)| = " << worst_equivariance
            << ", max |D^T D - I| = " << worst_orthogonality
            << ", max |D(R) D(S) - D(RS)| = " << worst_product << "\n";
}

TEST(So3, EveryCouplingTensorIsEquivariantOrthonormalAndCouplesHarmonics) {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal;
  double worst_equivariance = 0.0, worst_norm = 0.0, worst_product = 0.0;
  int n_triples = 0;
  for (int l1 = 0; l1 <= kMaxL; ++l1) {
    for (int l2 = 0; l2 <= kMaxL; ++l2) {
      for (int l3 = 0; l3 <= kMaxL; ++l3) {
        if (!triangle(l1, l2, l3)) {
          EXPECT_THROW(real_coupling(l1, l2, l3), Error);
          continue;
        }
        ++n_triples;
        const int n1 = 2 * l1 + 1, n2 = 2 * l2 + 1, n3 = 2 * l3 + 1;
        const auto c = real_coupling(l1, l2, l3);
        ASSERT_EQ(c.size(), static_cast<std::size_t>(n1 * n2 * n3));
        for (int trial = 0; trial < 5; ++trial) {
          const Mat3 R = random_rotation(rng);
          std::vector<double> u(n1), v(n2);
          for (double& x : u) x = normal(rng);
          for (double& x : v) x = normal(rng);
          const auto lhs = mat_vec(wigner_d(l3, R), couple(c, u, v, n3));
          const auto rhs = couple(c, mat_vec(wigner_d(l1, R), u), mat_vec(wigner_d(l2, R), v), n3);
          worst_equivariance = std::max(worst_equivariance, max_diff(lhs, rhs));
          // The product of two harmonics at one point, coupled, is a multiple of Y_l3 there:
          // sqrt((2l1+1)(2l2+1)/(2l3+1)) <l1 0 l2 0 | l3 0> (zero for odd l1 + l2 + l3).
          const Vec3 x = random_vector(rng);
          const double k = std::sqrt(double(n1) * n2 / n3) * clebsch_gordan(l1, 0, l2, 0, l3, 0);
          auto expected = spherical_harmonics(l3, x);
          for (double& e : expected) e *= k;
          worst_product = std::max(worst_product, max_diff(couple(c, spherical_harmonics(l1, x),
                                                                  spherical_harmonics(l2, x), n3),
                                                           expected));
        }
        for (int a = 0; a < n3; ++a) {
          for (int b = 0; b < n3; ++b) {
            double s = 0.0;
            for (int ij = 0; ij < n1 * n2; ++ij) s += c[ij * n3 + a] * c[ij * n3 + b];
            worst_norm = std::max(worst_norm, std::abs(s - (a == b ? 1.0 : 0.0)));
          }
        }
      }
    }
  }
  EXPECT_EQ(n_triples, 34);
  EXPECT_LT(worst_equivariance, 1e-12);
  EXPECT_LT(worst_norm, 1e-13);
  EXPECT_LT(worst_product, 1e-12);
  std::cout << "coupling over " << n_triples
            << " triples: max |D3 C(u,v) - C(D1 u, D2 v)| = " << worst_equivariance
            << ", max |C^T C - I| = " << worst_norm
            << ", max |C(Y1, Y2) - k Y3| = " << worst_product << "\n";
}

TEST(So3, ChangeOfBasisIsUnitary) {
  for (int l = 0; l <= kMaxCouplingL; ++l) {
    const int n = 2 * l + 1;
    const auto u = complex_to_real(l);
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) {
        std::complex<double> s = 0.0;
        for (int k = 0; k < n; ++k) s += u[a * n + k] * std::conj(u[b * n + k]);
        EXPECT_NEAR(std::abs(s - (a == b ? 1.0 : 0.0)), 0.0, 1e-15);
      }
    }
  }
}

TEST(So3, BadArgumentsAreErrors) {
  EXPECT_THROW(spherical_harmonics(kMaxL + 1, {1.0, 0.0, 0.0}), Error);
  EXPECT_THROW(spherical_harmonics(-1, {1.0, 0.0, 0.0}), Error);
  EXPECT_THROW(spherical_harmonics_with_grad(kMaxL + 1, {1.0, 0.0, 0.0}), Error);
  EXPECT_THROW(spherical_harmonics(1, {0.0, 0.0, 0.0}), Error);
  EXPECT_THROW(real_coupling(1, 1, 3), Error);
  EXPECT_THROW(wigner_d(1, Mat3{{{1, 0, 0}, {0, 2, 0}, {0, 0, 1}}}), Error);
  EXPECT_THROW(wigner_d(kMaxL + 1, Mat3{{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}}), Error);
  EXPECT_THROW(clebsch_gordan(kMaxCouplingL + 1, 0, 1, 0, kMaxCouplingL, 0), Error);
  EXPECT_EQ(clebsch_gordan(1, 0, 1, 0, 3, 0), 0.0);  // outside the triangle
  EXPECT_EQ(clebsch_gordan(1, 1, 1, 0, 2, 0), 0.0);  // m1 + m2 != m3
}

// Runs tests/model/so3_reference.py and parses its JSON.
nlohmann::json sympy_reference() {
  const std::string command =
      std::string(DDGNN_SYSTEM_PYTHON3) + " " + DDGNN_SOURCE_DIR + "/tests/model/so3_reference.py";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) throw Error("cannot run " + command);
  std::string text;
  char buffer[65536];
  std::size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) text.append(buffer, got);
  const int status = pclose(pipe);
  if (status != 0) {
    throw Error(command + " failed (status " + std::to_string(status) + ")",
                "it needs Debian's python3 with python3-sympy (jobs/install_deps.sh)");
  }
  return nlohmann::json::parse(text);
}

TEST(So3, AgreesWithSympy) {
  const nlohmann::json ref = sympy_reference();

  double worst_cg = 0.0;
  int n_cg = 0;
  for (const auto& row : ref.at("clebsch_gordan")) {
    const double mine = clebsch_gordan(row[0], row[1], row[2], row[3], row[4], row[5]);
    worst_cg = std::max(worst_cg, std::abs(mine - row[6].get<double>()));
    ++n_cg;
  }
  EXPECT_GT(n_cg, 700);
  EXPECT_LT(worst_cg, 1e-12);

  double worst_coupling = 0.0;
  int n_coupling = 0;
  for (const auto& entry : ref.at("coupling")) {
    const auto& l = entry.at("l");
    worst_coupling = std::max(
        worst_coupling,
        max_diff(real_coupling(l[0], l[1], l[2]), entry.at("values").get<std::vector<double>>()));
    ++n_coupling;
  }
  EXPECT_EQ(n_coupling, 34);
  EXPECT_LT(worst_coupling, 1e-12);

  double worst_harmonics = 0.0;
  int n_harmonics = 0;
  for (const auto& entry : ref.at("harmonics")) {
    const auto r = entry.at("r").get<std::vector<double>>();
    worst_harmonics =
        std::max(worst_harmonics, max_diff(spherical_harmonics(entry.at("l"), {r[0], r[1], r[2]}),
                                           entry.at("values").get<std::vector<double>>()));
    ++n_harmonics;
  }
  EXPECT_EQ(n_harmonics, 28);
  EXPECT_LT(worst_harmonics, 1e-12);
  std::cout << "against sympy: max |CG| deviation " << worst_cg << " over " << n_cg
            << " coefficients, real coupling " << worst_coupling << " over " << n_coupling
            << " tensors, real harmonics " << worst_harmonics << " over " << n_harmonics
            << " (point, l)\n";
}

}  // namespace
}  // namespace ddgnn::so3
