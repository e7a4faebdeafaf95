// Adam and AdamW with torch.optim's algorithm and state, whose step costs a few operations for all
// parameters together instead of torch's ~10 ATen operations per parameter. The parameters of a
// param group, device and dtype lie in flat buffers (model/flat_params.h, laid out by
// make_optimizer) and so do their moments; torch's state (AdamParamState: step, exp_avg,
// exp_avg_sq per parameter) holds views into those, its step counts kept on the host, so that
// save_optimizer/load_optimizer and torch's Adam read and write it alike. A step over such a
// segment is one loop over its elements on the CPU; elsewhere (and on the CPU inside a
// GenericKernels scope) about 20 ATen operations, 10 of them over the flat tensors, that read the
// step count and the learning rate from 0-dim tensors on the device (the bias corrections, step
// size and warm-up computed there): no host value that changes from step to step, no operation
// per parameter, so that a CUDA graph can capture it (torch's host state then needs bringing
// along: the step counts are advanced by the host code of each step). Parameters outside such a
// layout (a gradient reassigned or undefined, loaded state whose step counts differ): one loop per
// parameter on the CPU, ATen's multi-tensor _foreach_ operations elsewhere. Other dtypes, sparse
// gradients, amsgrad or a closure: torch's step. The zeroing of the gradients likewise: one memset
// or zero_ per flat buffer.
#include <ATen/ATen.h>
#include <c10/core/TensorImpl.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/serialize/archive.h>
#include <torch/types.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "model/adam_steps.h"
#include "model/device.h"
#include "model/flat_params.h"
#include "model/optim.h"

namespace ddgnn {

// What set_lr, the schedules and load_optimizer tell an optimizer whose step reads its rate from
// the device (model/optim.cpp calls it through write_device_lr).
class DeviceRate {
 public:
  virtual ~DeviceRate() = default;
  // Every param group's lr into the device tensors that hold a different one.
  virtual void write_lr() = 0;
  virtual void set_warmup_steps(int64_t warmup_steps) = 0;
  // The last step ran again on the device without the host (a replayed CUDA graph): the host's
  // counts advance as step() would have advanced them, and nothing is launched. False, and
  // nothing changed, unless that step was every parameter's flat device step.
  virtual bool replayed_step() = 0;
  virtual void set_gate(const at::Tensor& apply) = 0;  // set_step_gate
  virtual void sync_counts() = 0;                      // sync_step_counts
};

bool set_step_gate(torch::optim::Optimizer& optimizer, const at::Tensor& apply) {
  auto* d = dynamic_cast<DeviceRate*>(&optimizer);
  if (d) d->set_gate(apply);
  return d != nullptr;
}

void sync_step_counts(torch::optim::Optimizer& optimizer) {
  if (auto* d = dynamic_cast<DeviceRate*>(&optimizer)) d->sync_counts();
}

bool note_replayed_step(torch::optim::Optimizer& optimizer) {
  auto* d = dynamic_cast<DeviceRate*>(&optimizer);
  return d != nullptr && d->replayed_step();
}

void write_device_lr(torch::optim::Optimizer& optimizer) {
  if (auto* d = dynamic_cast<DeviceRate*>(&optimizer)) d->write_lr();
}

bool set_warmup(torch::optim::Optimizer& optimizer, int64_t warmup_steps) {
  auto* d = dynamic_cast<DeviceRate*>(&optimizer);
  if (d) d->set_warmup_steps(warmup_steps);
  return d != nullptr;
}

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

bool is_at(const at::Tensor& t, const at::Tensor& flat, int64_t offset) {
  return t.defined() && t.data_ptr() == static_cast<const char*>(flat.data_ptr()) +
                                            offset * int64_t(flat.element_size());
}

template <typename Base, typename Options, typename State, bool kDecoupled>
class FusedAdam : public Base, public DeviceRate {
 public:
  using Base::Base;

  torch::Tensor step(torch::optim::Optimizer::LossClosure closure = nullptr) override {
    if (closure || any_amsgrad()) return rejected_on_host() ? torch::Tensor() : torch_step(closure);
    c10::NoGradGuard no_grad;
    if (!m_laid_out || m_n_groups != this->param_groups_.size() ||
        m_n_states != this->state_.size())
      lay_out();
    std::vector<Segment*> flat;
    bool all_flat = m_all_in_segments;
    for (Segment& s : m_segments) {
      if (ready(s)) {
        flat.push_back(&s);
      } else {
        all_flat = false;
        m_laid_out = false;  // the layout may have changed: looked up again next step
      }
    }
    // The gate inside the device operations when the whole step is flat device steps; else read
    // on the host here, a rejected step changing nothing.
    bool gate_on_device = m_gate.defined() && all_flat && !flat.empty();
    for (const Segment* s : flat) gate_on_device = gate_on_device && !fused_kernels(s->flat.values);
    if (!gate_on_device && rejected_on_host()) return {};
    std::vector<Item> items;
    if (!all_flat) {
      std::unordered_set<const c10::TensorImpl*> done;
      for (const Segment* s : flat)
        for (size_t i : s->flat.params) done.insert(params_of(*s)[i].unsafeGetTensorImpl());
      if (!collect(items, done)) return torch_step(closure);
    }
    const at::Tensor gate = gate_on_device ? m_gate : at::Tensor();
    for (Segment* s : flat) step_segment(*s, gate);
    step_items(items);
    // State the segments made is theirs already; state made for other parameters is looked up
    // by the next step's layout.
    if (items.empty()) m_n_states = this->state_.size();
    return {};
  }

  void load(torch::serialize::InputArchive& archive) override {
    Base::load(archive);
    m_laid_out = false;  // new state tensors: copied into the flat moments by the next step
  }

  void write_lr() override {
    for (Segment& s : m_segments)
      if (s.lr.defined()) write_lr(s);
  }

  void set_warmup_steps(int64_t warmup_steps) override { m_warmup = warmup_steps; }

  void set_gate(const at::Tensor& apply) override { m_gate = apply; }

  void sync_counts() override {
    if (!m_gated_on_device) return;
    m_gated_on_device = false;
    std::vector<at::Tensor> counts;
    std::vector<Segment*> of;
    for (Segment& s : m_segments)
      if (s.step.defined() && !s.states.empty() && s.states[0] != nullptr &&
          s.step_on_device == s.states[0]->step()) {
        counts.push_back(s.step.to(at::kCPU, at::kDouble));
        of.push_back(&s);
      }
    for (size_t k = 0; k < of.size(); ++k) {
      const int64_t step = int64_t(counts[k].item<double>());
      for (State* st : of[k]->states) st->step(step);
      of[k]->step_on_device = step;
    }
  }

  bool replayed_step() override {
    if (!m_all_in_segments || m_segments.empty()) return false;
    for (const Segment& s : m_segments)
      if (!s.step.defined() || s.states.empty() || s.states[0] == nullptr ||
          s.step_on_device != s.states[0]->step())
        return false;
    for (Segment& s : m_segments) {
      const int64_t step = s.states[0]->step() + 1;
      for (State* st : s.states) st->step(step);
      s.step_on_device = step;
      m_gated_on_device = m_gated_on_device || s.gated;
    }
    return true;
  }

 private:
  using Key = OptimizerStateKey::type;
  using Batch = AdamBatch<Options>;

  // The parameters of one param group, device and dtype in flat buffers, with their state.
  struct Segment {
    size_t group = 0;
    FlatParameters flat;             // indices into the group's params
    std::vector<State*> states;      // [flat.params]: null before the first step
    at::Tensor exp_avg, exp_avg_sq;  // [n]: the moments, made with the state
    at::Tensor step, lr;             // 0-dim float64 on the device, made by its first step
    int64_t step_on_device = -1;     // what `step` holds (the host's count: see sync_counts)
    bool gated = false;              // its last device step was gated (set_gate)
    double lr_on_device = std::numeric_limits<double>::quiet_NaN();  // what `lr` holds
  };

  // A parameter with a gradient outside the segments, its group's options, and its state (null
  // before its first step) under `key`.
  struct Item {
    const at::Tensor* p;
    const Options* options;
    State* state;
    Key key;
  };

  bool any_amsgrad() const {
    for (const auto& group : this->param_groups_)
      if (static_cast<const Options&>(group.options()).amsgrad()) return true;
    return false;
  }

  const std::vector<at::Tensor>& params_of(const Segment& s) const {
    return this->param_groups_[s.group].params();
  }
  const Options& options_of(const Segment& s) const {
    return static_cast<const Options&>(this->param_groups_[s.group].options());
  }

  State* find_state(const at::Tensor& p) {
    const auto found = this->state_.find(state_key<Key>(p.unsafeGetTensorImpl()));
    return found == this->state_.end() ? nullptr : static_cast<State*>(found->second.get());
  }

  // The segments of the parameters' current layout, their state looked up.
  void lay_out() {
    std::vector<Segment> kept;
    kept.swap(m_segments);
    m_all_in_segments = true;
    for (size_t g = 0; g < this->param_groups_.size(); ++g) {
      const auto& params = this->param_groups_[g].params();
      for (const auto& set : by_device_and_dtype(params)) {
        const auto dtype = params[set[0]].scalar_type();
        std::vector<at::Tensor> members;
        for (size_t k : set) members.push_back(params[k]);
        FlatParameters f =
            (dtype == at::kFloat || dtype == at::kDouble) ? find_flat(members) : FlatParameters();
        if (!f.values.defined()) {
          m_all_in_segments = false;
          continue;
        }
        for (size_t& i : f.params) i = set[i];  // indices into the group's params
        Segment s;
        // The same buffers as before keep their moments and device scalars.
        for (Segment& old : kept)
          if (old.group == g && old.flat.values.data_ptr() == f.values.data_ptr() &&
              old.flat.grads.data_ptr() == f.grads.data_ptr() && old.flat.params == f.params &&
              old.flat.offsets == f.offsets) {
            s = std::move(old);
            break;
          }
        s.group = g;
        s.flat = std::move(f);
        s.states.clear();
        for (size_t i : s.flat.params) s.states.push_back(find_state(params[i]));
        m_segments.push_back(std::move(s));
      }
    }
    m_laid_out = true;
    m_n_groups = this->param_groups_.size();
    m_n_states = this->state_.size();
  }

  // Whether the segment can take a flat step now: its parameters and gradients in place, and its
  // state absent (made here) or every parameter's, of one step count (copied into the flat
  // moments here when it is not theirs yet, as after load_optimizer).
  bool ready(Segment& s) {
    const auto& params = params_of(s);
    if (!still_flat(s.flat, params)) return false;
    size_t n_states = 0;
    for (State* st : s.states) n_states += st != nullptr;
    const at::Tensor& values = s.flat.values;
    if (n_states == 0) {
      s.exp_avg = at::zeros_like(values);
      s.exp_avg_sq = at::zeros_like(values);
      for (size_t j = 0; j < s.flat.params.size(); ++j) {
        const at::Tensor& p = params[s.flat.params[j]];
        auto state = std::make_unique<State>();
        state->step(0);
        state->exp_avg(alias_of(s.exp_avg, s.flat.offsets[j], p.sizes()));
        state->exp_avg_sq(alias_of(s.exp_avg_sq, s.flat.offsets[j], p.sizes()));
        s.states[j] = state.get();
        this->state_[state_key<Key>(p.unsafeGetTensorImpl())] = std::move(state);
      }
      return true;
    }
    if (n_states != s.states.size()) return false;
    bool ours = s.exp_avg.defined();
    for (size_t j = 0; j < s.states.size(); ++j) {
      const State& st = *s.states[j];
      const at::Tensor& p = params[s.flat.params[j]];
      if (st.step() != s.states[0]->step() || !dense_like(st.exp_avg(), p) ||
          !dense_like(st.exp_avg_sq(), p))
        return false;
      ours = ours && is_at(st.exp_avg(), s.exp_avg, s.flat.offsets[j]) &&
             is_at(st.exp_avg_sq(), s.exp_avg_sq, s.flat.offsets[j]) &&
             st.exp_avg().is_contiguous() && st.exp_avg_sq().is_contiguous();
    }
    if (ours) return true;
    if (!s.exp_avg.defined()) {
      s.exp_avg = at::empty_like(values);
      s.exp_avg_sq = at::empty_like(values);
    }
    for (size_t j = 0; j < s.states.size(); ++j) {
      State& st = *s.states[j];
      const at::Tensor& p = params[s.flat.params[j]];
      at::Tensor m = alias_of(s.exp_avg, s.flat.offsets[j], p.sizes());
      at::Tensor v = alias_of(s.exp_avg_sq, s.flat.offsets[j], p.sizes());
      m.copy_(st.exp_avg());
      v.copy_(st.exp_avg_sq());
      st.exp_avg(m);
      st.exp_avg_sq(v);
    }
    return true;
  }

  void write_lr(Segment& s) {
    const double lr = options_of(s).lr();
    if (std::memcmp(&lr, &s.lr_on_device, sizeof lr) == 0) return;
    s.lr.fill_(lr);
    s.lr_on_device = lr;
  }

  // A gate set and read on the host: true when it rejects this step.
  bool rejected_on_host() const { return m_gate.defined() && !m_gate.item<bool>(); }

  // `gate`: undefined, or set_gate's tensor (a flat device step, gated inside its operations).
  void step_segment(Segment& s, const at::Tensor& gate) {
    const int64_t step = s.states[0]->step() + 1;
    for (State* st : s.states) st->step(step);  // torch's state, on the host
    const Options& o = options_of(s);
    const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
    const FlatParameters& f = s.flat;
    if (fused_kernels(f.values)) {  // the CPU's loop: host values cost no synchronisation
      adam_elements(f.values, f.grads, s.exp_avg, s.exp_avg_sq,
                    o.lr() * warmup_factor(step, m_warmup), o.weight_decay(), kDecoupled, beta1,
                    beta2, o.eps(), step);
      return;
    }
    // The step count and the rate on the device: written when the host's differ (the first
    // step there, after load_optimizer or CPU steps), else the count advances on the device.
    if (!s.step.defined()) {
      const auto scalar = f.values.options().dtype(at::kDouble);
      s.step = at::zeros({}, scalar);
      s.lr = at::zeros({}, scalar);
      s.step_on_device = 0;
    }
    if (s.step_on_device != step - 1) s.step.fill_(double(step - 1));
    at::Tensor on;  // the gate as 0-dim float64 (1 applies the step, 0 changes nothing)
    s.gated = gate.defined();
    if (gate.defined()) {
      on = gate.to(at::kDouble);
      s.step.add_(on);  // the host's count runs ahead until sync_counts
      m_gated_on_device = true;
    } else {
      s.step.add_(1);
    }
    s.step_on_device = step;
    write_lr(s);
    const double wd = o.weight_decay();
    // 0-dim float64: warm-up, rate, -bias correction 1, sqrt(bias correction 2), -step size. A
    // rejected first step leaves the count at 0: the corrections read at least 1 (its rate is 0).
    const at::Tensor t = on.defined() ? at::clamp_min(s.step, 1.0) : s.step;
    at::Tensor lr = m_warmup > 0 ? s.lr * at::clamp_max(t / double(m_warmup), 1.0) : s.lr;
    if (on.defined()) lr = lr * on;
    const at::Tensor neg_bc1 = at::pow(beta1, t).sub_(1.0);
    const at::Tensor sqrt_bc2 = at::rsub(at::pow(beta2, t), 1.0).sqrt_();
    const at::Tensor neg_step_size = lr / neg_bc1;
    // [n] of the parameters' dtype: the update over the flat buffers.
    const at::Tensor &p = f.values, &m = s.exp_avg, &v = s.exp_avg_sq;
    at::Tensor g = f.grads;
    if (on.defined()) g.masked_fill_(gate.logical_not(), 0.0);  // a rejected gradient may be nan
    if (wd != 0.0) {
      if (kDecoupled) {
        p.mul_(at::rsub(lr * wd, 1.0));
      } else {
        g = at::add(g, p, wd);
        if (on.defined()) g.mul_(on.to(g.scalar_type()));
      }
    }
    if (on.defined()) {  // the moments' decay 1 when rejected
      const at::Tensor off = at::rsub(on, 1.0);
      m.mul_((off * (1.0 - beta1)).add_(beta1).to(m.scalar_type())).add_(g, 1.0 - beta1);
      v.mul_((off * (1.0 - beta2)).add_(beta2).to(v.scalar_type())).addcmul_(g, g, 1.0 - beta2);
    } else {
      m.mul_(beta1).add_(g, 1.0 - beta1);
      v.mul_(beta2).addcmul_(g, g, 1.0 - beta2);
    }
    const at::Tensor denom = v.sqrt().div_(sqrt_bc2).add_(o.eps());
    p.addcdiv_(m * neg_step_size, denom);
  }

  // The parameters with a gradient outside `done`, each looked up once; false (torch's step)
  // unless every one is dense, float32 or float64, with its gradient and state of its dtype,
  // device and shape.
  bool collect(std::vector<Item>& items, const std::unordered_set<const c10::TensorImpl*>& done) {
    for (const auto& group : this->param_groups_) {
      const auto& o = static_cast<const Options&>(group.options());
      for (const auto& p : group.params()) {
        if (!p.grad().defined() || done.count(p.unsafeGetTensorImpl())) continue;
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

  // One parameter at a time: the CPU's loop, or multi-tensor operations with host scalars.
  void step_items(std::vector<Item>& items) {
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
      if (!(fused_kernels(p) && plain_cpu(p, dtype) && plain_cpu(g, dtype) && plain_cpu(m, dtype) &&
            plain_cpu(v, dtype))) {
        batch_for(batches, o, s.step(), p).add(p, g, m, v);
        continue;
      }
      adam_elements(p, g, m, v, o.lr() * warmup_factor(s.step(), m_warmup), o.weight_decay(),
                    kDecoupled, std::get<0>(o.betas()), std::get<1>(o.betas()), o.eps(), s.step());
    }
    for (Batch& b : batches) b.run(kDecoupled, b.options->lr() * warmup_factor(b.step, m_warmup));
  }

  // torch's own step, the warm-up applied to its rates for the step.
  torch::Tensor torch_step(torch::optim::Optimizer::LossClosure closure) {
    int64_t step = 1;
    for (const auto& entry : this->state_)
      step = std::max(step, static_cast<const State&>(*entry.second).step() + 1);
    m_laid_out = false;
    const ScaledLr warm(*this, warmup_factor(step, m_warmup));
    return Base::step(closure);
  }

  std::vector<Segment> m_segments;
  at::Tensor m_gate;               // set_gate's (undefined: every step applies)
  bool m_gated_on_device = false;  // a gated device step since sync_counts
  bool m_laid_out = false;
  bool m_all_in_segments = false;  // every parameter lies in a segment
  size_t m_n_groups = 0, m_n_states = 0;
  int64_t m_warmup = 0;  // Training.warmup_steps (≤ 0: none)
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
  // The gradients by storage: those that cover a range of it exactly are zeroed as one.
  std::unordered_map<const c10::StorageImpl*, std::vector<at::Tensor>> by_storage;
  std::vector<const c10::StorageImpl*> storages;  // in order of first appearance
  std::vector<at::Tensor> elsewhere;              // zeroed by one multi-tensor operation
  for (const auto& p : parameters) {
    const at::Tensor& g = p.grad();
    if (!g.defined()) continue;
    if (g.requires_grad()) g.detach_();
    if (g.layout() != c10::kStrided || !g.has_storage()) {
      g.zero_();
      continue;
    }
    auto& list = by_storage[g.storage().unsafeGetStorageImpl()];
    if (list.empty()) storages.push_back(g.storage().unsafeGetStorageImpl());
    list.push_back(g);
  }
  const auto zero = [&](const at::Tensor& g) {
    if (g.device().is_cpu() && g.is_contiguous())
      std::memset(g.data_ptr(), 0, size_t(g.numel()) * g.element_size());
    else
      elsewhere.push_back(g);
  };
  for (const c10::StorageImpl* storage : storages) {
    const auto& list = by_storage[storage];
    const at::Tensor range = list.size() > 1 ? covered_range(list) : at::Tensor();
    if (range.defined()) {
      zero(range);
    } else {
      for (const auto& g : list) zero(g);
    }
  }
  if (elsewhere.size() == 1)
    elsewhere.front().zero_();
  else if (!elsewhere.empty())
    at::_foreach_zero_(elsewhere);
}

}  // namespace ddgnn
