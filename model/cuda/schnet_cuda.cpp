// ATen glue of the CUDA kernels of SchNet's filter (model/cuda/schnet_cuda.h): shapes, outputs,
// the device guard and the current stream; GPU build only. Every launch is named in the profiler
// (RECORD_FUNCTION "ddgnn::cuda::...").
#include "model/cuda/schnet_cuda.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/record_function.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <string>

#include "core/error.h"
#include "model/cuda/launch_check.h"
#include "model/cuda/schnet_kernels.h"

namespace ddgnn::cuda {

namespace {

cudaStream_t stream_of(const at::Tensor& t) {
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
}

// Every operand contiguous, of the first one's dtype and on its device (the kernels read them
// as one type); undefined ones (optional operands) stay undefined.
template <size_t N>
std::array<at::Tensor, N> operands(const char* op, const std::array<at::Tensor, N>& in) {
  std::array<at::Tensor, N> out;
  for (size_t k = 0; k < N; ++k) {
    if (!in[k].defined()) continue;
    if (in[k].scalar_type() != in[0].scalar_type() || in[k].device() != in[0].device())
      throw Error(std::string("schnet_filter (") + op + "): operand " + std::to_string(k) + " is " +
                      c10::toString(in[k].scalar_type()) + " on " + in[k].device().str() +
                      ", operand 0 " + c10::toString(in[0].scalar_type()) + " on " +
                      in[0].device().str(),
                  "give the filter's weights and edge lengths one dtype and device");
    out[k] = in[k].contiguous();
  }
  return out;
}

template <typename T>
const T* ptr_or_null(const at::Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

const c10::ArrayRef<const c10::IValue> kNoInputs{};

}  // namespace

at::Tensor gaussians(const at::Tensor& d_in, const at::Tensor& mu_in, double coeff) {
  RECORD_FUNCTION("ddgnn::cuda::gaussians", kNoInputs);
  const auto t = operands<2>("gaussians", {d_in, mu_in});
  const at::Tensor &d = t[0], &mu = t[1];
  const c10::cuda::CUDAGuard device_guard(d.device());
  const int64_t e_count = d.size(0), n = mu.size(0);
  at::Tensor out = at::empty({e_count, n}, d.options());
  AT_DISPATCH_FLOATING_TYPES(d.scalar_type(), "gaussians", [&] {
    CUDA_LAUNCH_CHECK(launch_gaussians(d.data_ptr<scalar_t>(), mu.data_ptr<scalar_t>(), e_count, n,
                                       scalar_t(coeff), out.data_ptr<scalar_t>(), stream_of(d)));
  });
  return out;
}

std::array<at::Tensor, 3> cosine_cutoff(const at::Tensor& d_in, double rc) {
  RECORD_FUNCTION("ddgnn::cuda::cosine_cutoff", kNoInputs);
  const at::Tensor d = d_in.contiguous();
  const c10::cuda::CUDAGuard device_guard(d.device());
  at::Tensor c = at::empty_like(d), c1 = at::empty_like(d), c2 = at::empty_like(d);
  AT_DISPATCH_FLOATING_TYPES(d.scalar_type(), "cosine_cutoff", [&] {
    CUDA_LAUNCH_CHECK(launch_cosine_cutoff(d.data_ptr<scalar_t>(), d.numel(), rc,
                                           c.data_ptr<scalar_t>(), c1.data_ptr<scalar_t>(),
                                           c2.data_ptr<scalar_t>(), stream_of(d)));
  });
  return {c, c1, c2};
}

std::pair<at::Tensor, at::Tensor> ssp_and_sigmoid(const at::Tensor& p_in) {
  RECORD_FUNCTION("ddgnn::cuda::ssp_sigmoid", kNoInputs);
  const at::Tensor p = p_in.contiguous();
  const c10::cuda::CUDAGuard device_guard(p.device());
  at::Tensor s = at::empty_like(p), sig = at::empty_like(p);
  AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "ssp_sigmoid", [&] {
    CUDA_LAUNCH_CHECK(launch_ssp_sigmoid(p.data_ptr<scalar_t>(), p.numel(), s.data_ptr<scalar_t>(),
                                         sig.data_ptr<scalar_t>(), stream_of(p)));
  });
  return {s, sig};
}

at::Tensor scale_rows(const at::Tensor& u_in, const at::Tensor& c_in) {
  RECORD_FUNCTION("ddgnn::cuda::scale_rows", kNoInputs);
  const auto t = operands<2>("scale_rows", {u_in, c_in});
  const at::Tensor &u = t[0], &c = t[1];
  const c10::cuda::CUDAGuard device_guard(u.device());
  at::Tensor w = at::empty_like(u);
  AT_DISPATCH_FLOATING_TYPES(u.scalar_type(), "scale_rows", [&] {
    CUDA_LAUNCH_CHECK(launch_scale_rows(u.data_ptr<scalar_t>(), c.data_ptr<scalar_t>(), u.size(0),
                                        u.size(1), w.data_ptr<scalar_t>(), stream_of(u)));
  });
  return w;
}

std::pair<at::Tensor, at::Tensor> grad_through_cutoff(const at::Tensor& gw_in,
                                                      const at::Tensor& u_in,
                                                      const at::Tensor& c_in) {
  RECORD_FUNCTION("ddgnn::cuda::grad_through_cutoff", kNoInputs);
  const auto t = operands<3>("grad_through_cutoff", {gw_in, u_in, c_in});
  const at::Tensor &gw = t[0], &u = t[1], &c = t[2];
  const c10::cuda::CUDAGuard device_guard(u.device());
  at::Tensor gu = at::empty_like(u), r1 = at::empty({u.size(0)}, u.options());
  AT_DISPATCH_FLOATING_TYPES(u.scalar_type(), "grad_through_cutoff", [&] {
    CUDA_LAUNCH_CHECK(launch_grad_through_cutoff(
        gw.data_ptr<scalar_t>(), u.data_ptr<scalar_t>(), c.data_ptr<scalar_t>(), u.size(0),
        u.size(1), gu.data_ptr<scalar_t>(), r1.data_ptr<scalar_t>(), stream_of(u)));
  });
  return {gu, r1};
}

at::Tensor gauss_grad_dot(const at::Tensor& g_in, const at::Tensor& gauss_in,
                          const at::Tensor& d_in, const at::Tensor& mu_in, double coeff,
                          const at::Tensor& base_in) {
  RECORD_FUNCTION("ddgnn::cuda::gauss_grad_dot", kNoInputs);
  const auto t = operands<5>("gauss_grad_dot", {g_in, gauss_in, d_in, mu_in, base_in});
  const at::Tensor &g = t[0], &gauss = t[1], &d = t[2], &mu = t[3], &base = t[4];
  const c10::cuda::CUDAGuard device_guard(d.device());
  at::Tensor out = at::empty({gauss.size(0)}, d.options());
  AT_DISPATCH_FLOATING_TYPES(d.scalar_type(), "gauss_grad_dot", [&] {
    CUDA_LAUNCH_CHECK(launch_gauss_grad_dot(
        g.data_ptr<scalar_t>(), gauss.data_ptr<scalar_t>(), d.data_ptr<scalar_t>(),
        mu.data_ptr<scalar_t>(), ptr_or_null<scalar_t>(base), gauss.size(0), gauss.size(1),
        scalar_t(coeff), out.data_ptr<scalar_t>(), stream_of(d)));
  });
  return out;
}

std::pair<at::Tensor, at::Tensor> gauss_second(const at::Tensor& v_in, const at::Tensor& gg_in,
                                               const at::Tensor& gauss_in, const at::Tensor& d_in,
                                               const at::Tensor& mu_in, double coeff) {
  RECORD_FUNCTION("ddgnn::cuda::gauss_second", kNoInputs);
  const auto t = operands<5>("gauss_second", {v_in, gg_in, gauss_in, d_in, mu_in});
  const at::Tensor &v = t[0], &gg = t[1], &gauss = t[2], &d = t[3], &mu = t[4];
  const c10::cuda::CUDAGuard device_guard(d.device());
  at::Tensor dgg = at::empty_like(gauss), dd = at::empty({gauss.size(0)}, d.options());
  AT_DISPATCH_FLOATING_TYPES(d.scalar_type(), "gauss_second", [&] {
    CUDA_LAUNCH_CHECK(launch_gauss_second(
        v.data_ptr<scalar_t>(), gg.data_ptr<scalar_t>(), gauss.data_ptr<scalar_t>(),
        d.data_ptr<scalar_t>(), mu.data_ptr<scalar_t>(), gauss.size(0), gauss.size(1),
        scalar_t(coeff), dgg.data_ptr<scalar_t>(), dd.data_ptr<scalar_t>(), stream_of(d)));
  });
  return {dgg, dd};
}

std::pair<at::Tensor, at::Tensor> sigmoid_second(const at::Tensor& dgp_in, const at::Tensor& gs_in,
                                                 const at::Tensor& sig_in) {
  RECORD_FUNCTION("ddgnn::cuda::sigmoid_second", kNoInputs);
  const auto t = operands<3>("sigmoid_second", {dgp_in, gs_in, sig_in});
  const at::Tensor &dgp = t[0], &gs = t[1], &sig = t[2];
  const c10::cuda::CUDAGuard device_guard(dgp.device());
  at::Tensor dgs = at::empty_like(dgp), dp = at::empty_like(dgp);
  AT_DISPATCH_FLOATING_TYPES(dgp.scalar_type(), "sigmoid_second", [&] {
    CUDA_LAUNCH_CHECK(launch_sigmoid_second(
        dgp.data_ptr<scalar_t>(), gs.data_ptr<scalar_t>(), sig.data_ptr<scalar_t>(), dgp.numel(),
        dgs.data_ptr<scalar_t>(), dp.data_ptr<scalar_t>(), stream_of(dgp)));
  });
  return {dgs, dp};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> cutoff_second(
    const at::Tensor& dgu_in, const at::Tensor& gw_in, const at::Tensor& u_in,
    const at::Tensor& v_in, const at::Tensor& c_in, const at::Tensor& c1_in,
    const at::Tensor& c2_in, const at::Tensor& r1_in) {
  RECORD_FUNCTION("ddgnn::cuda::cutoff_second", kNoInputs);
  const auto t =
      operands<8>("cutoff_second", {dgu_in, gw_in, u_in, v_in, c_in, c1_in, c2_in, r1_in});
  const at::Tensor &dgu = t[0], &gw = t[1], &u = t[2], &v = t[3], &c = t[4], &c1 = t[5], &c2 = t[6],
                   &r1 = t[7];
  const c10::cuda::CUDAGuard device_guard(u.device());
  at::Tensor dgw = at::empty_like(u), du = at::empty_like(u),
             dd = at::empty({u.size(0)}, u.options());
  AT_DISPATCH_FLOATING_TYPES(u.scalar_type(), "cutoff_second", [&] {
    CUDA_LAUNCH_CHECK(launch_cutoff_second(
        dgu.data_ptr<scalar_t>(), gw.data_ptr<scalar_t>(), u.data_ptr<scalar_t>(),
        v.data_ptr<scalar_t>(), c.data_ptr<scalar_t>(), c1.data_ptr<scalar_t>(),
        c2.data_ptr<scalar_t>(), r1.data_ptr<scalar_t>(), u.size(0), u.size(1),
        dgw.data_ptr<scalar_t>(), du.data_ptr<scalar_t>(), dd.data_ptr<scalar_t>(), stream_of(u)));
  });
  return {dgw, du, dd};
}

}  // namespace ddgnn::cuda
