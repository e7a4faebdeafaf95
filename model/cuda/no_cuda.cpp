// The CPU build's stand-ins for the CUDA glue (model/cuda/segment_cuda.h, schnet_cuda.h): the
// callers compile and link the same in both builds, and these are never reached, because
// cuda_kernels() (model/device.h) is false in a build without CUDA. Each throws.
#include "core/error.h"
#include "model/cuda/schnet_cuda.h"
#include "model/cuda/segment_cuda.h"

namespace ddgnn::cuda {

namespace {

[[noreturn]] void no_cuda(const char* op) {
  throw Error(std::string("ddgnn::cuda::") + op + ": this ddgnn was built without its CUDA kernels",
              "build the GPU binary with jobs/build.sh --gpu");
}

}  // namespace

at::Tensor segment_sum(const at::Tensor&, const SegmentIndex&) {
  no_cuda("segment_sum");
}
at::Tensor difference_sum(const at::Tensor&, const SegmentIndex&, const SegmentIndex&) {
  no_cuda("difference_sum");
}
at::Tensor gather_rows(const at::Tensor&, const SegmentIndex&) {
  no_cuda("gather_rows");
}
at::Tensor edge_difference(const at::Tensor&, const SegmentIndex&, const SegmentIndex&) {
  no_cuda("edge_difference");
}
at::Tensor gather_mul_sum(const at::Tensor&, const at::Tensor&, const SegmentIndex&,
                          const SegmentIndex&) {
  no_cuda("gather_mul_sum");
}
at::Tensor gather_gather_dot(const at::Tensor&, const at::Tensor&, const SegmentIndex&,
                             const SegmentIndex&) {
  no_cuda("gather_gather_dot");
}
at::Tensor outer_sum(const at::Tensor&, const at::Tensor&, const SegmentIndex&) {
  no_cuda("outer_sum");
}
at::Tensor gather_contract(const at::Tensor&, const at::Tensor&, const SegmentIndex&, bool) {
  no_cuda("gather_contract");
}

at::Tensor gaussians(const at::Tensor&, const at::Tensor&, double) {
  no_cuda("gaussians");
}
std::array<at::Tensor, 3> cosine_cutoff(const at::Tensor&, double) {
  no_cuda("cosine_cutoff");
}
std::pair<at::Tensor, at::Tensor> ssp_and_sigmoid(const at::Tensor&) {
  no_cuda("ssp_and_sigmoid");
}
at::Tensor scale_rows(const at::Tensor&, const at::Tensor&) {
  no_cuda("scale_rows");
}
std::pair<at::Tensor, at::Tensor> grad_through_cutoff(const at::Tensor&, const at::Tensor&,
                                                      const at::Tensor&) {
  no_cuda("grad_through_cutoff");
}
at::Tensor gauss_grad_dot(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                          const at::Tensor&, double, const at::Tensor&) {
  no_cuda("gauss_grad_dot");
}
std::pair<at::Tensor, at::Tensor> gauss_second(const at::Tensor&, const at::Tensor&,
                                               const at::Tensor&, const at::Tensor&,
                                               const at::Tensor&, double) {
  no_cuda("gauss_second");
}
std::pair<at::Tensor, at::Tensor> sigmoid_second(const at::Tensor&, const at::Tensor&,
                                                 const at::Tensor&) {
  no_cuda("sigmoid_second");
}
std::tuple<at::Tensor, at::Tensor, at::Tensor> cutoff_second(const at::Tensor&, const at::Tensor&,
                                                             const at::Tensor&, const at::Tensor&,
                                                             const at::Tensor&, const at::Tensor&,
                                                             const at::Tensor&, const at::Tensor&) {
  no_cuda("cutoff_second");
}

}  // namespace ddgnn::cuda
