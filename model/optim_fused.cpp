// Adam and AdamW with torch.optim's algorithm and state, whose step costs less than torch's ~10
// ATen operations per parameter (for a model of small tensors, e.g. DimeNet's ~120 on ethanol at
// batch 8, those operations cost more than the arithmetic): on the CPU one loop over each
// parameter's elements; on a GPU (and for non-contiguous CPU parameters) ATen's multi-tensor
// _foreach_ operations, ~10 kernels for all parameters together. The zeroing of the gradients
// likewise: plain memory writes on the CPU, one _foreach_zero_ elsewhere. The state (step,
// exp_avg, exp_avg_sq per parameter) is torch's own, so that save_optimizer/load_optimizer and
// torch's Adam read it alike. Other dtypes, sparse gradients, amsgrad or a closure: torch's step.
#include <ATen/Functions.h>
#include <c10/core/TensorImpl.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/types.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "model/optim.h"

namespace ddgnn {

namespace {

// The key of a parameter's state in Optimizer::state_: its TensorImpl's address, as a string on
// LibTorch 1.13 (c10::guts::to_string, i.e. operator<<) and as the pointer where the map is keyed
// by pointers.
template <typename Key>
Key state_key(c10::TensorImpl* impl) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream s;
    s << impl;
    return s.str();
  } else {
    return Key(impl);
  }
}

// The key type of Optimizer::state_ (std::string on LibTorch 1.13), named where it is accessible.
struct OptimizerStateKey : torch::optim::Optimizer {
  using type = std::decay_t<decltype(state_)>::key_type;
};

bool plain_cpu(const at::Tensor& t, c10::ScalarType dtype) {
  return t.defined() && t.device().is_cpu() && t.layout() == c10::kStrided &&
         t.scalar_type() == dtype && t.is_contiguous();
}

// A dense tensor of `like`'s dtype, device and shape.
bool dense_like(const at::Tensor& t, const at::Tensor& like) {
  return t.defined() && t.layout() == c10::kStrided && t.scalar_type() == like.scalar_type() &&
         t.device() == like.device() && t.sizes() == like.sizes();
}

// One Adam step over n elements, in the order of operations of torch's (1.13) Adam and AdamW:
//   AdamW: p *= 1 - lr wd;  Adam: g += wd p;
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g²;
//   p -= (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps)
template <typename T>
void adam_elements(T* p, const T* g, T* m, T* v, int64_t n, double lr, double wd, bool decoupled,
                   double beta1, double beta2, double eps, int64_t step) {
  const T bc1 = T(1.0 - std::pow(beta1, double(step)));
  const T sqrt_bc2 = T(std::sqrt(1.0 - std::pow(beta2, double(step))));
  const T step_size = T(lr) / bc1, decay = T(1.0 - lr * wd), l2 = T(decoupled ? 0.0 : wd);
  const T b1 = T(beta1), b2 = T(beta2), c1 = T(1.0 - beta1), c2 = T(1.0 - beta2), e = T(eps);
  for (int64_t i = 0; i < n; ++i) {
    T w = p[i];
    if (decoupled) w *= decay;
    const T gi = g[i] + l2 * w;
    const T mi = b1 * m[i] + c1 * gi;
    const T vi = b2 * v[i] + c2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = w - step_size * mi / (std::sqrt(vi) / sqrt_bc2 + e);
  }
}

// The parameters of one group, step count, device and dtype, stepped together by ATen's
// multi-tensor operations in the order of operations of torch's (1.13) Adam and AdamW (as
// adam_elements).
template <typename Options>
struct AdamBatch {
  const Options* options;
  int64_t step;
  c10::Device device;
  c10::ScalarType dtype;
  std::vector<at::Tensor> p, g, m, v;

  void add(const at::Tensor& param, const at::Tensor& grad, const at::Tensor& exp_avg,
           const at::Tensor& exp_avg_sq) {
    p.push_back(param);
    g.push_back(grad);
    m.push_back(exp_avg);
    v.push_back(exp_avg_sq);
  }

  void run(bool decoupled) {
    const Options& o = *options;
    const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
    const double lr = o.lr(), wd = o.weight_decay();
    const double bc1 = 1.0 - std::pow(beta1, double(step));
    const double bc2 = 1.0 - std::pow(beta2, double(step));
    using S = c10::Scalar;
    std::vector<at::Tensor> grads = g;
    if (wd != 0.0) {
      if (decoupled)
        at::_foreach_mul_(p, S(1.0 - lr * wd));
      else
        grads = at::_foreach_add(g, p, S(wd));
    }
    at::_foreach_mul_(m, S(beta1));
    at::_foreach_add_(m, grads, S(1.0 - beta1));
    at::_foreach_mul_(v, S(beta2));
    at::_foreach_addcmul_(v, grads, grads, S(1.0 - beta2));
    std::vector<at::Tensor> denom = at::_foreach_sqrt(v);
    at::_foreach_div_(denom, S(std::sqrt(bc2)));
    at::_foreach_add_(denom, S(o.eps()));
    at::_foreach_addcdiv_(p, m, denom, S(-lr / bc1));
  }
};

// The batch of `options`, `step` and `param`'s device and dtype in `batches`, made when absent.
template <typename Options>
AdamBatch<Options>& batch_for(std::vector<AdamBatch<Options>>& batches, const Options& options,
                              int64_t step, const at::Tensor& param) {
  for (auto& b : batches)
    if (b.options == &options && b.step == step && b.device == param.device() &&
        b.dtype == param.scalar_type())
      return b;
  batches.push_back({&options, step, param.device(), param.scalar_type(), {}, {}, {}, {}});
  return batches.back();
}

template <typename Base, typename Options, typename State, bool kDecoupled>
class FusedAdam : public Base {
 public:
  using Base::Base;

  torch::Tensor step(torch::optim::Optimizer::LossClosure closure = nullptr) override {
    std::vector<Item> items;
    if (closure || !collect(items)) return Base::step(closure);
    c10::NoGradGuard no_grad;
    std::vector<Batch> batches;
    for (Item& it : items) {
      if (!it.state) {  // the parameter's first step: torch's initial state
        auto s = std::make_unique<State>();
        s->step(0);
        s->exp_avg(torch::zeros_like(*it.p, c10::MemoryFormat::Preserve));
        s->exp_avg_sq(torch::zeros_like(*it.p, c10::MemoryFormat::Preserve));
        it.state = s.get();
        this->state_.emplace(std::move(it.key), std::move(s));
      }
      State& s = *it.state;
      s.step(s.step() + 1);
      const Options& o = *it.options;
      const at::Tensor &p = *it.p, &g = p.grad(), &m = s.exp_avg(), &v = s.exp_avg_sq();
      const auto dtype = p.scalar_type();
      if (!(plain_cpu(p, dtype) && plain_cpu(g, dtype) && plain_cpu(m, dtype) &&
            plain_cpu(v, dtype))) {
        batch_for(batches, o, s.step(), p).add(p, g, m, v);
        continue;
      }
      const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
      if (dtype == at::kFloat)
        adam_elements(p.data_ptr<float>(), g.data_ptr<float>(), m.data_ptr<float>(),
                      v.data_ptr<float>(), p.numel(), o.lr(), o.weight_decay(), kDecoupled, beta1,
                      beta2, o.eps(), s.step());
      else
        adam_elements(p.data_ptr<double>(), g.data_ptr<double>(), m.data_ptr<double>(),
                      v.data_ptr<double>(), p.numel(), o.lr(), o.weight_decay(), kDecoupled, beta1,
                      beta2, o.eps(), s.step());
    }
    for (Batch& b : batches) b.run(kDecoupled);
    return {};
  }

 private:
  using Key = OptimizerStateKey::type;
  using Batch = AdamBatch<Options>;

  // A parameter with a gradient, its group's options, and its state (null before its first step)
  // under `key`.
  struct Item {
    const at::Tensor* p;
    const Options* options;
    State* state;
    Key key;
  };

  // The parameters with a gradient, each looked up once; false (torch's step) unless every one is
  // dense, float32 or float64, with its gradient and state of its dtype, device and shape, and no
  // group uses amsgrad.
  bool collect(std::vector<Item>& items) {
    for (const auto& group : this->param_groups_) {
      const auto& o = static_cast<const Options&>(group.options());
      if (o.amsgrad()) return false;
      for (const auto& p : group.params()) {
        if (!p.grad().defined()) continue;
        const auto dtype = p.scalar_type();
        if ((dtype != at::kFloat && dtype != at::kDouble) || p.layout() != c10::kStrided ||
            !dense_like(p.grad(), p))
          return false;
        Key key = state_key<Key>(p.unsafeGetTensorImpl());
        const auto found = this->state_.find(key);
        State* s = found == this->state_.end() ? nullptr : static_cast<State*>(found->second.get());
        if (s && (!dense_like(s->exp_avg(), p) || !dense_like(s->exp_avg_sq(), p))) return false;
        items.push_back({&p, &o, s, std::move(key)});
      }
    }
    return true;
  }
};

// The options torch's Adam and AdamW get from make_optimizer.
template <typename Options>
Options adam_options(double learning_rate, double weight_decay) {
  return Options(learning_rate)
      .betas(std::make_tuple(0.9, 0.999))
      .eps(1e-8)
      .amsgrad(false)
      .weight_decay(weight_decay);
}

}  // namespace

std::unique_ptr<torch::optim::Optimizer> make_fused_adam(
    bool decoupled, const std::vector<torch::Tensor>& parameters, double learning_rate,
    double weight_decay) {
  namespace optim = torch::optim;
  if (decoupled)
    return std::make_unique<
        FusedAdam<optim::AdamW, optim::AdamWOptions, optim::AdamWParamState, true>>(
        parameters, adam_options<optim::AdamWOptions>(learning_rate, weight_decay));
  return std::make_unique<FusedAdam<optim::Adam, optim::AdamOptions, optim::AdamParamState, false>>(
      parameters, adam_options<optim::AdamOptions>(learning_rate, weight_decay));
}

void zero_gradients(const std::vector<torch::Tensor>& parameters) {
  c10::NoGradGuard no_grad;
  std::vector<at::Tensor> elsewhere;  // zeroed by one multi-tensor operation
  for (const auto& p : parameters) {
    const at::Tensor& g = p.grad();
    if (!g.defined()) continue;
    if (g.device().is_cpu() && g.layout() == c10::kStrided && g.is_contiguous() &&
        !g.requires_grad()) {
      std::memset(g.data_ptr(), 0, size_t(g.numel()) * g.element_size());
      continue;
    }
    if (g.requires_grad()) g.detach_();
    if (g.layout() == c10::kStrided)
      elsewhere.push_back(g);
    else
      g.zero_();
  }
  if (!elsewhere.empty()) at::_foreach_zero_(elsewhere);
}

}  // namespace ddgnn
