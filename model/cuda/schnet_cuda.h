// The elementwise passes of SchNet's filter (model/schnet_filter.cpp) and its inputs (the
// Gaussians and cosine cutoff of model/batch.cpp) on CUDA tensors, without autograd: one kernel
// each (model/cuda/schnet_kernels.cu) on the current stream, outputs allocated with ATen, no
// host synchronisation; the matrix products between them stay ATen's (cuBLAS). float32 or
// float64, one dtype and device for all operands. Notation of model/cuda/schnet_rows.h. In the
// CPU build, stand-ins that throw (model/cuda/no_cuda.cpp), never reached.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <tuple>
#include <utility>

namespace ddgnn::cuda {

// d [E] (Å), mu [n] (Å), coeff (1/Å², < 0) -> G [E, n].
at::Tensor gaussians(const at::Tensor& d, const at::Tensor& mu, double coeff);
// d [E] (Å) -> the cosine cutoff 0.5 (cos(pi d / rc) + 1) and its first two derivatives, [E] each.
std::array<at::Tensor, 3> cosine_cutoff(const at::Tensor& d, double rc);
// P [...] -> S = ssp(P), s = sigmoid(P).
std::pair<at::Tensor, at::Tensor> ssp_and_sigmoid(const at::Tensor& p);
// U [E, F], c [E] -> W = U c [E, F].
at::Tensor scale_rows(const at::Tensor& u, const at::Tensor& c);
// gW, U [E, F], c [E] -> gU = gW c [E, F], r1 = sum_f gW U [E].
std::pair<at::Tensor, at::Tensor> grad_through_cutoff(const at::Tensor& gw, const at::Tensor& u,
                                                      const at::Tensor& c);
// g, G [E, n], d [E], mu [n], base [E] or undefined -> 2 coeff sum_k g G x + base [E].
at::Tensor gauss_grad_dot(const at::Tensor& g, const at::Tensor& gauss, const at::Tensor& d,
                          const at::Tensor& mu, double coeff, const at::Tensor& base);
// v [E], gG, G [E, n], d [E], mu [n] -> dL/dgG = v G' [E, n], v sum_k gG G'' [E].
std::pair<at::Tensor, at::Tensor> gauss_second(const at::Tensor& v, const at::Tensor& gg,
                                               const at::Tensor& gauss, const at::Tensor& d,
                                               const at::Tensor& mu, double coeff);
// dL/dgP, gS, s [E, F] -> dL/dgS = dL/dgP s, dL/dP = dL/dgP gS s (1 - s).
std::pair<at::Tensor, at::Tensor> sigmoid_second(const at::Tensor& dgp, const at::Tensor& gs,
                                                 const at::Tensor& sig);
// dL/dgU, gW, U [E, F], v, c, c1, c2, r1 [E] -> dL/dgW, dL/dU [E, F] and the direct term on d [E].
std::tuple<at::Tensor, at::Tensor, at::Tensor> cutoff_second(
    const at::Tensor& dgu, const at::Tensor& gw, const at::Tensor& u, const at::Tensor& v,
    const at::Tensor& c, const at::Tensor& c1, const at::Tensor& c2, const at::Tensor& r1);

}  // namespace ddgnn::cuda
