// DimeNet's building blocks that the tests check on their own: the triplets of a batch's radius
// graph and the spherical Bessel functions of its basis. The layer is make_layer("DimeNet", spec).
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "model/batch.h"

namespace ddgnn {

// The triplets k -> j -> i of the radius graph: every pair of edges (kj, ji) with kj's receiver
// ji's sender, except kj = ji's reverse (k the atom i in the same periodic image; another image
// of i is a neighbour like any other). kj, ji: [T] int64 edge indices. Built from the batch's
// receiver map on every call (never stored).
struct Triplets {
  at::Tensor kj, ji;
};
Triplets dimenet_triplets(const GraphBatch& batch);

// The spherical Bessel function j_l(x), x > 0, in double precision.
double spherical_bessel(int l, double x);
// The first n positive zeros of j_l, ascending.
std::vector<double> spherical_bessel_zeros(int l, int n);

}  // namespace ddgnn
