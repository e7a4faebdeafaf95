// Data-parallel gradient sums: gradients as views into bucketed flat buffers, buckets all-reduced
// as backward finishes them (train/ddp.h).
#include "train/ddp.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <cstring>
#include <functional>
#include <string>

#include "comm/mpi.h"
#include "core/error.h"

namespace ddgnn {

struct DataParallel::Owner {
  DataParallel* ddp = nullptr;
};

namespace {

// Runs after autograd has accumulated a parameter's gradient: tells DataParallel, on the host.
class Accumulated : public torch::autograd::FunctionPostHook {
 public:
  explicit Accumulated(std::function<void()> notify) : m_notify(std::move(notify)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    m_notify();
    return outputs;
  }

 private:
  std::function<void()> m_notify;
};

}  // namespace

DataParallel::DataParallel(std::vector<at::Tensor> params, MPI_Comm comm, int64_t bucket_bytes,
                           GradSync sync)
    : m_params(std::move(params)), m_comm(comm) {
  if (m_params.empty()) throw Error("DataParallel: no parameters");
  const auto dtype = m_params[0].scalar_type();
  if (dtype != at::kFloat && dtype != at::kDouble)
    throw Error("DataParallel: parameters must be float32 or float64");
  size_t n_summed = 0;  // parameters with a gradient and an element
  for (const auto& p : m_params) {
    if (p.scalar_type() != dtype || p.device() != m_params[0].device())
      throw Error("DataParallel: parameters of mixed dtypes or devices");
    if (!p.requires_grad())
      throw Error("DataParallel: a parameter that takes no gradient",
                  "pass only the trained parameters");
    n_summed += p.numel() > 0;
  }
  m_type = dtype == at::kFloat ? MPI_FLOAT : MPI_DOUBLE;
  const int64_t elem = dtype == at::kFloat ? 4 : 8;
  auto flats = flatten_parameters(m_params);  // (those without an element stay out)
  if (n_summed == 0) throw Error("DataParallel: no parameter has an element");
  if (flats.size() != 1 || flats[0].params.size() != n_summed)
    throw Error("DataParallel: the parameters could not be laid out in one flat buffer",
                "pass each parameter once");
  m_flat = std::move(flats[0]);
  // Buckets: runs of the buffer's parameters, up to bucket_bytes each (at least one parameter).
  std::vector<int64_t> elems;
  m_bucket_of.assign(m_params.size(), 0);
  m_offset.assign(m_params.size(), 0);
  for (size_t i = 0; i < m_flat.params.size(); ++i) {
    const size_t k = m_flat.params[i];
    const int64_t n = m_params[k].numel();
    if (elems.empty() || (elems.back() > 0 && (elems.back() + n) * elem > bucket_bytes))
      elems.push_back(0);
    m_bucket_of[k] = elems.size() - 1;
    m_offset[k] = m_flat.offsets[i];
    elems.back() += n;
  }
  m_buckets = make_grad_buckets(sync, comm, m_flat.grads, elems);
  m_pending_init.assign(elems.size(), 0);
  for (size_t k : m_flat.params) ++m_pending_init[m_bucket_of[k]];
  m_pending = m_pending_init;
  m_filled.assign(m_params.size(), false);
  // A post hook on each gradient accumulator, which this object keeps alive (else a later
  // backward would make a new one, without the hook).
  m_owner = std::make_shared<Owner>();
  m_owner->ddp = this;
  for (size_t k : m_flat.params) {
    std::shared_ptr<torch::autograd::Node> accumulator =
        torch::autograd::impl::grad_accumulator(m_params[k]);
    std::shared_ptr<Owner> owner = m_owner;
    m_hooks.push_back(accumulator->add_post_hook(std::make_unique<Accumulated>([owner, k] {
      if (owner->ddp) owner->ddp->on_grad(k);
    })));
    m_accumulators.push_back(std::move(accumulator));
  }
}

DataParallel::~DataParallel() {
  m_owner->ddp = nullptr;
  for (size_t k = 0; k < m_accumulators.size(); ++k) m_accumulators[k]->del_post_hook(m_hooks[k]);
}

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

bool DataParallel::grads_in_place() const {
  const char* base = static_cast<const char*>(m_flat.grads.data_ptr());
  const int64_t elem = int64_t(m_flat.grads.element_size());
  for (size_t k : m_flat.params) {
    const at::Tensor& g = m_params[k].grad();
    if (!g.defined() || g.data_ptr() != base + m_offset[k] * elem || !g.is_contiguous())
      return false;
  }
  return true;
}

void DataParallel::begin_step() {
  m_in_step = true;
  m_filled_in_backward = 0;
  m_pending = m_pending_init;
  m_filled.assign(m_params.size(), false);
  if (grads_in_place()) return;
  c10::NoGradGuard no_grad;
  const char* base = static_cast<const char*>(m_flat.grads.data_ptr());
  const int64_t elem = int64_t(m_flat.grads.element_size());
  for (size_t k : m_flat.params) {
    const at::Tensor& p = m_params[k];
    const at::Tensor& g = p.grad();
    if (g.defined() && g.data_ptr() == base + m_offset[k] * elem && g.is_contiguous()) continue;
    at::Tensor slot = alias_of(m_flat.grads, m_offset[k], p.sizes());
    if (g.defined())
      slot.copy_(g);
    else
      slot.zero_();
    p.mutable_grad() = slot;
  }
}

void DataParallel::on_grad(size_t k) {
  if (!m_in_step || m_filled[k]) return;  // not a training step's backward (or already in)
  m_filled[k] = true;
  const size_t b = m_bucket_of[k];
  if (--m_pending[b] == 0) {
    ++m_filled_in_backward;
    m_buckets->ready(b);
  }
}

void DataParallel::finish_step() {
  // Buckets with a parameter that got no gradient here (a zero) start now, in order.
  m_buckets->wait_all();
  m_in_step = false;
  if (!grads_in_place())
    throw Error(
        "DataParallel: a parameter's gradient was replaced during backward instead of being "
        "accumulated into its bucket",
        "run one backward per step with create_graph false, and zero the gradients in place "
        "(zero_gradients) rather than setting them to none");
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
