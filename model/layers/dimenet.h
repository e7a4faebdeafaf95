// DimeNet's building blocks that the tests check on their own, and its radial basis, which PNAPlus
// shares: the triplets of a batch's radius graph, the spherical Bessel functions of its basis, and
// PyG's BesselBasisLayer. The layer is make_layer("DimeNet", spec).
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "model/batch.h"
#include "model/spherical_bessel.h"

namespace ddgnn {

// The triplets k -> j -> i of the radius graph: every pair of edges (kj, ji) with kj's receiver
// ji's sender, except kj = ji's reverse (k the atom i in the same periodic image; another image
// of i is a neighbour like any other). kj, ji: [T] int64 edge indices. Built from the batch's
// receiver map on every call (never stored).
struct Triplets {
  at::Tensor kj, ji;
};
Triplets dimenet_triplets(const GraphBatch& batch);

// PyG's BesselBasisLayer: rbf [E, R] = u(x) sin(freq_n x), x = d / rc, with u the envelope of
// order p (dimenet_envelope, model/spherical_bessel.h) and freq [R] the (trainable) frequencies,
// n pi at the start. Evaluated in float64, returned in `dtype`. len: [E] edge lengths, Å.
at::Tensor bessel_radial(const at::Tensor& len, double rc, int64_t p, const at::Tensor& freq,
                         c10::ScalarType dtype);

}  // namespace ddgnn
