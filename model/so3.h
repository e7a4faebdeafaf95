// SO(3) mathematics of the equivariant (MACE) layers, free of torch and computed at start-up: real
// spherical harmonics Y_l (l <= 3) and their gradients, complex Clebsch-Gordan coefficients
// (Racah's formula), the complex-to-real change of basis, real coupling tensors and real Wigner-D
// matrices. Plain doubles; the layers make tensors of them.
//
// Conventions (those of e3nn, which MACE uses, so that a layer's irreps mean what MACE's mean):
// - Components of an irrep l are ordered m = -l..l; a block of several l is concatenated.
// - "Component" normalisation: sum_m Y_lm(r)^2 = 2l+1 on the unit sphere, i.e. the mean of
//   Y_la Y_lb over the sphere is delta_ab (sqrt(4 pi) times the orthonormal harmonics). e3nn's
//   default for features, so that every component of a feature is of order one.
// - The real basis: Y_l(x, y, z) = S_l(z, x, y), where S_l are the textbook real harmonics of
//   polar axis z (no extra Condon-Shortley sign: S_1 = sqrt(3) (y, z, x)). The cyclic permutation
//   puts the polar axis on y, as e3nn does, so that Y_1(r) = sqrt(3) (x, y, z) and D_1(R) = R: an
//   l = 1 feature is a Cartesian vector.
// - complex_to_real(l) is the unitary U with S_l = U Y_l^complex, Y_l^m the complex harmonics with
//   the Condon-Shortley phase (sympy's Ynm), of the polar angles of (z, x, y):
//     m > 0: (Y^-m + (-1)^m Y^m) / sqrt(2),  m = 0: Y^0,  m < 0: i (Y^m - (-1)^m Y^-m) / sqrt(2).
// - real_coupling(l1, l2, l3) = phase * sum conj(U1) conj(U2) U3 <l1 m1 l2 m2 | l3 m3>, which
//   maps real l1 x l2 components to real l3 components equivariantly. The sum is real when
//   l1 + l2 + l3 is even and imaginary when it is odd; the phase is 1 or -i accordingly, so the
//   tensor is real. Its norm is that of the CG coefficients (sum over m1, m2 of C_abc C_abc' =
//   delta_cc'); e3nn's wigner_3j is the same map divided by sqrt(2 l3 + 1), possibly of the other
//   sign. Parity is not part of these tensors: the layers keep the paths whose parities agree.
#pragma once

#include <array>
#include <complex>
#include <vector>

namespace ddgnn::so3 {

// Highest degree of the spherical harmonics and Wigner-D matrices here.
constexpr int kMaxL = 3;
// Highest degree of the Clebsch-Gordan coefficients and coupling tensors (exact factorials).
constexpr int kMaxCouplingL = 6;

using Vec3 = std::array<double, 3>;
// A 3x3 matrix by rows: R[i][j].
using Mat3 = std::array<std::array<double, 3>, 3>;

// Y_l(r / |r|): 2l+1 values, m = -l..l, component normalisation. 0 <= l <= kMaxL, r != 0.
std::vector<double> spherical_harmonics(int l, const Vec3& r);

// Y_l(r / |r|) and its gradient with respect to r (not the unit vector): grad[3 * i + k] =
// dY_i / dr_k, perpendicular to r.
struct HarmonicsWithGrad {
  std::vector<double> values;  // 2l+1
  std::vector<double> grad;    // (2l+1) x 3, row-major
};
HarmonicsWithGrad spherical_harmonics_with_grad(int l, const Vec3& r);

// Whether |l1 - l2| <= l3 <= l1 + l2 (all non-negative).
bool triangle(int l1, int l2, int l3);

// <l1 m1 l2 m2 | l3 m3> (Condon-Shortley convention), by Racah's formula with exact factorials.
// Zero outside the triangle rule, for |m| > l or m1 + m2 != m3. l1, l2, l3 <= kMaxCouplingL.
double clebsch_gordan(int l1, int m1, int l2, int m2, int l3, int m3);

// The unitary U of the header comment, (2l+1) x (2l+1) row-major: U[(l + m) * (2l+1) + (l + m')],
// row the real index m, column the complex m'. 0 <= l <= kMaxCouplingL.
std::vector<std::complex<double>> complex_to_real(int l);

// The real coupling tensor of the header comment, (2l1+1) x (2l2+1) x (2l3+1) row-major:
// C[((l1 + m1) * (2l2+1) + (l2 + m2)) * (2l3+1) + (l3 + m3)]. Throws ddgnn::Error outside the
// triangle rule or above kMaxCouplingL.
std::vector<double> real_coupling(int l1, int l2, int l3);

// The real Wigner-D matrix of Y_l: Y_l(R r) = D_l(R) Y_l(r) for every r, (2l+1) x (2l+1)
// row-major. Computed exactly (to rounding) as the projection D_ab = mean over the sphere of
// Y_a(R r) Y_b(r), by a quadrature exact for degree 2l. R orthogonal (checked to 1e-9); for det R =
// -1 it is (-1)^l D_l(-R), the parity of Y_l. 0 <= l <= kMaxL.
std::vector<double> wigner_d(int l, const Mat3& R);

// A product quadrature on the unit sphere (Gauss-Legendre in cos(theta), equispaced in phi),
// exact for polynomials in x, y, z of total degree <= `degree`; weights sum to 1 (the mean).
struct SphereQuadrature {
  std::vector<Vec3> points;
  std::vector<double> weights;
};
SphereQuadrature sphere_quadrature(int degree);

}  // namespace ddgnn::so3
