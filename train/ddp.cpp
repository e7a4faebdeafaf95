// Data-parallel gradient averaging with autograd hooks and bucketed non-blocking all-reduce.
#include "train/ddp.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cstring>
#include <string>

#include "comm/mpi.h"
#include "core/error.h"

namespace ddgnn {

DataParallel::DataParallel(std::vector<at::Tensor> params, MPI_Comm comm, int64_t bucket_bytes,
                           GradSync sync)
    : m_params(std::move(params)), m_comm(comm) {
  if (m_params.empty()) throw Error("DataParallel: no parameters");
  const auto dtype = m_params[0].scalar_type();
  if (dtype != at::kFloat && dtype != at::kDouble)
    throw Error("DataParallel: parameters must be float32 or float64");
  m_type = dtype == at::kFloat ? MPI_FLOAT : MPI_DOUBLE;
  const int64_t elem = dtype == at::kFloat ? 4 : 8;
  // Buckets over the parameters in reverse order, each up to bucket_bytes (at least one param).
  std::vector<int64_t> elems;
  m_bucket_of.assign(m_params.size(), 0);
  m_offset.assign(m_params.size(), 0);
  for (size_t k = m_params.size(); k-- > 0;) {
    if (m_params[k].scalar_type() != dtype || m_params[k].device() != m_params[0].device())
      throw Error("DataParallel: parameters of mixed dtypes or devices");
    const int64_t n = m_params[k].numel();
    if (elems.empty() || (elems.back() > 0 && (elems.back() + n) * elem > bucket_bytes))
      elems.push_back(0);
    m_bucket_of[k] = elems.size() - 1;
    m_offset[k] = elems.back();
    elems.back() += n;
  }
  m_buckets = make_grad_buckets(sync, comm, m_params[0].options().requires_grad(false), elems);
  m_pending_init.assign(elems.size(), 0);
  for (size_t k = 0; k < m_params.size(); ++k) ++m_pending_init[m_bucket_of[k]];
  m_pending = m_pending_init;
  m_filled.assign(m_params.size(), false);
  for (size_t k = 0; k < m_params.size(); ++k)
    m_params[k].register_hook([this, k](const at::Tensor& grad) {
      on_grad(k, grad);
      return at::Tensor();  // the local gradient is accumulated as usual; finish_step replaces it
    });
}

DataParallel::~DataParallel() = default;

void DataParallel::broadcast_parameters() {
  c10::NoGradGuard no_grad;
  for (auto& p : m_params) {
    at::Tensor c = p.contiguous().cpu();  // through the host: once per run
    MPI_CHECK(MPI_Bcast(c.data_ptr(), int(c.numel()), m_type, 0, m_comm));
    if (!c.is_same(p)) p.copy_(c);
  }
}

void DataParallel::average_buffers(const std::vector<at::Tensor>& buffers) {
  c10::NoGradGuard no_grad;
  int size = 1;
  MPI_CHECK(MPI_Comm_size(m_comm, &size));
  for (const auto& b : buffers) {
    if (!b.is_floating_point() || b.numel() == 0) continue;
    at::Tensor c = b.to(at::kCPU, at::kDouble).contiguous();
    MPI_CHECK(
        MPI_Allreduce(MPI_IN_PLACE, c.data_ptr(), int(c.numel()), MPI_DOUBLE, MPI_SUM, m_comm));
    b.copy_(c / double(size));
  }
}

void DataParallel::begin_step(double weight) {
  m_weight = weight;
  m_in_step = true;
  m_pending = m_pending_init;
  m_filled.assign(m_params.size(), false);
}

void DataParallel::on_grad(size_t k, const at::Tensor& grad) {
  if (!m_in_step || m_filled[k]) return;  // not a training step's backward (or already in)
  const size_t b = m_bucket_of[k];
  at::Tensor dst = slot(k);
  c10::NoGradGuard no_grad;
  if (grad.defined())  // the weight as a host scalar: no device copy
    at::mul_out(dst, grad, at::scalar_tensor(m_weight, at::TensorOptions().dtype(grad.dtype())));
  else  // autograd's "no gradient" (a zero)
    dst.zero_();
  m_filled[k] = true;
  if (--m_pending[b] == 0) m_buckets->ready(b);
}

at::Tensor DataParallel::slot(size_t k) {
  return m_buckets->bucket(m_bucket_of[k])
      .narrow(0, m_offset[k], m_params[k].numel())
      .view(m_params[k].sizes());
}

void DataParallel::finish_step() {
  // Parameters that got no gradient here contribute zeros.
  c10::NoGradGuard no_grad;
  for (size_t k = 0; k < m_params.size(); ++k)
    if (!m_filled[k]) {
      const size_t b = m_bucket_of[k];
      slot(k).zero_();
      m_filled[k] = true;
      if (--m_pending[b] == 0) m_buckets->ready(b);
    }
  m_buckets->wait_all();
  m_in_step = false;
  for (size_t k = 0; k < m_params.size(); ++k) {
    const at::Tensor avg = slot(k);
    at::Tensor& g = m_params[k].mutable_grad();
    if (g.defined())
      g.copy_(avg);
    else
      g = avg.clone();
  }
}

void DataParallel::check_identical() const {
  for (size_t k = 0; k < m_params.size(); ++k) {
    const at::Tensor c = m_params[k].detach().contiguous().cpu();
    std::vector<uint8_t> mine(size_t(c.numel() * c.element_size()));
    std::memcpy(mine.data(), c.data_ptr(), mine.size());
    std::vector<uint8_t> root = mine;
    MPI_CHECK(MPI_Bcast(root.data(), int(root.size()), MPI_BYTE, 0, m_comm));
    int differs = mine != root ? 1 : 0;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &differs, 1, MPI_INT, MPI_MAX, m_comm));
    if (differs)
      throw CommError("parameter " + std::to_string(k) + " differs between ranks",
                      "a rank stepped differently: check that every rank runs the same "
                      "config and binary");
  }
}

std::vector<int64_t> DataParallel::bucket_bytes() const {
  std::vector<int64_t> out;
  const int64_t elem = m_type == MPI_FLOAT ? 4 : 8;
  for (size_t b = 0; b < m_pending_init.size(); ++b)
    out.push_back(m_buckets->bucket(b).numel() * elem);
  return out;
}

}  // namespace ddgnn
