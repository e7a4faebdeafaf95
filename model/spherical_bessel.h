// The spherical Bessel functions of DimeNet's spherical basis: j_l and its zeros on the host, and
// the radial part of the basis over every edge, rad[e, c] = norm_c j_(l_c)(z_c x_e) u(x_e) with
// x = d / rc and u DimeNet's envelope, as one fused function of the edge lengths (its first three
// derivatives in d by the Leibniz rule; as a chain of ATen ops the basis, its derivative and that
// derivative's backward cost a few hundred [E, C] float64 tensors a step), and the same function
// from plain differentiable ATen ops (other devices, and the tests' reference).
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "model/device_table.h"

namespace ddgnn {

// The spherical Bessel function j_l(x), x > 0, in double precision.
double spherical_bessel(int l, double x);
// The first n positive zeros of j_l, ascending.
std::vector<double> spherical_bessel_zeros(int l, int n);

// The columns of the radial part: column c is norm[c] j_(order[c])(zero[c] x) u(x), with u(x) =
// 1/x + a x^(p-1) + b x^p + c x^(p+1) the envelope of order p (PyG's, zero with its first two
// derivatives at x = 1) and x = d / cutoff.
struct SphericalBesselColumns {
  std::vector<int64_t> order;
  std::vector<double> zero, norm;
  double cutoff = 0.0;
  int64_t p = 0;
  // order, zero and norm as float64 tensors on each device the reference ran on.
  SharedDeviceTables tables = std::make_shared<DeviceTables>();
};

// DimeNet's envelope u(x) = 1/x + a x^(p-1) + b x^p + c x^(p+1) (PyG's, zero with its first two
// derivatives at x = 1) of x [E], by ATen ops (differentiable to any order).
at::Tensor dimenet_envelope(const at::Tensor& x, int64_t p);

// DimeNet's columns: num_spherical blocks l = 0..S-1 of num_radial columns each, the n-th zero z_ln
// of j_l and norm sqrt(2) / |j_(l+1)(z_ln)| (unit norm with weight x^2 on [0, 1]).
SphericalBesselColumns dimenet_columns(int64_t num_spherical, int64_t num_radial, double cutoff,
                                       int64_t p);

// d [E] edge lengths (Å, differentiable) -> [E, C] in `dtype`, evaluated in float64.
// Differentiable in d three times (the forces, the Hessian, and one more); asked a fourth
// derivative it throws. Where fused_kernels(d) is false (model/device.h) it is the reference.
at::Tensor spherical_bessel_radial(const at::Tensor& d, const SphericalBesselColumns& cols,
                                   c10::ScalarType dtype);
// The same from plain ATen ops (differentiable to any order).
at::Tensor spherical_bessel_radial_reference(const at::Tensor& d,
                                             const SphericalBesselColumns& cols,
                                             c10::ScalarType dtype);

}  // namespace ddgnn
