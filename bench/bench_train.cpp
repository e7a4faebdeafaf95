// Training throughput (graphs/s) of every mpnn_type: forward, forces by double backward, loss
// backward and an Adam step, one thread, float32, batches built beforehand (batch building is
// timed separately). Shapes: (a) 27-atom simple-cubic cells (a = 3.8 Å, displacements
// up to 0.19 Å), radius 5 Å, max_neighbours 5, hidden 32, 4 layers, SchNet 10 Gaussians and 8
// filters, node head 32→60→20→1, batch 64; (b) 108-atom fcc Cu (a = 3.615 Å, 0.1 Å
// displacements), radius 5 Å (≈ 43 neighbours), hidden 64, 3 layers, 64 filters, batch 16;
// (c) ethanol (0.1 Å displacements, 72 edges a molecule), batch 8, hidden 64, 2 layers, node head
// 64→32→1, MACE's settings those of configs/ethanol_mace.json (max_ell 2, node_max_ell 1,
// correlation 3, 8 Bessel functions, envelope order 5, avg_num_neighbors 8), four times the steps.
//
// usage: bench_train [steps=30] [types=all] [shapes=ab, of abc] [trace_prefix|-] [device=cpu]
// [options], e.g. bench_train 30 SchNet,PAINN a /tmp/t (a trace prefix writes the timed steps of
// each run as a Chrome trace of LibTorch's autograd profiler, <prefix>.<type>.<shape>.json;
// timings then include its overhead). device cuda: the model and batches on the GPU (graphs built
// there), TF32 matmuls; graphs/s then from a loop without synchronisation (the phases are timed in
// another, synchronised after each phase), and the peak GPU memory. options, comma-separated:
// `generic`: the device-agnostic versions of the fused kernels, on any device (model/device.h);
// `bf16`: Training.precision bf16 (matrix products in bfloat16 by autocast); `max_ell=N`,
// `node_max_ell=N`, `correlation=N`: MACE's settings (LayerSpec's defaults, or shape (c)'s,
// otherwise); `ops`: the 40 costliest ATen ops of the timed steps by input shapes; `all_elements`:
// element-indexed weights for every atomic number, not only for the shape's (GnnSpec::elements, as
// `train` sets them); `kernels=wide|avx2|none`: the CPU loops of that level (model/kernels.h)
// instead of the CPU's own; `step=train|static|graphs`: the training step itself (run_train_step
// below), eager, on padded batches, or replayed as CUDA graphs.
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <sys/resource.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/cuda.h>
#include <torch/torch.h>
#ifdef DDGNN_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>

#include "core/alloc.h"
#include "core/energy_meter.h"
#include "core/error.h"
#include "core/text.h"
#include "core/threads.h"
#include "model/device.h"
#include "model/gnn.h"
#include "model/kernels.h"
#include "model/layer.h"
#include "model/optim.h"
#include "model/pad_batch.h"
#include "model/precision.h"
#include "model/predict.h"
#include "model/small_mm.h"
#include "train/model_setup.h"
#include "train/static_shapes.h"
#include "train/step.h"
#include "train/step_graphs.h"
#include "train/upload.h"

namespace {

bool g_bf16 = false;          // options: bf16
bool g_all_elements = false;  // options: all_elements
// options key=value: MACE's max_ell, node_max_ell and correlation (the defaults of LayerSpec
// otherwise), e.g. the settings of a config under study.
std::map<std::string, int64_t> g_layer;

void set_layer_options(ddgnn::LayerSpec& l) {
  for (const auto& [key, value] : g_layer) {
    if (key == "max_ell")
      l.max_ell = value;
    else if (key == "node_max_ell")
      l.node_max_ell = value;
    else if (key == "correlation")
      l.correlation = value;
    else
      throw std::runtime_error("bench_train: unknown option " + key +
                               " (max_ell, node_max_ell, correlation)");
  }
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// options `ops`: the timed steps' ATen ops by name and input shapes (time including the ops they
// call), the 40 largest printed after each run.
bool g_ops = false;
struct OpTime : at::ObserverContext {
  std::string key;
  Clock::time_point t0;
};
std::map<std::string, std::pair<double, int64_t>> g_op_times;

std::unique_ptr<at::ObserverContext> op_start(const at::RecordFunction& fn) {
  auto c = std::make_unique<OpTime>();
  c->key = std::string(fn.name()) + "(";
  for (const c10::IValue& v : fn.inputs())
    if (v.isTensor()) {
      c->key += c10::str(v.toTensor().sizes()) + " ";
    } else if (v.isTensorList()) {  // cat's inputs: every shape
      c->key += "{";
      for (const at::Tensor& t : v.toTensorList().vec()) c->key += c10::str(t.sizes());
      c->key += "} ";
    } else {
      c->key += "_ ";
    }
  c->key += ")";
  c->t0 = Clock::now();
  return c;
}

void op_end(const at::RecordFunction&, at::ObserverContext* ctx) {
  auto* c = static_cast<OpTime*>(ctx);
  auto& slot = g_op_times[c->key];
  slot.first += seconds_since(c->t0);
  ++slot.second;
}

void print_op_times(int steps) {
  std::vector<std::pair<double, std::string>> rows;
  for (const auto& [key, v] : g_op_times) rows.push_back({v.first, key});
  std::sort(rows.rbegin(), rows.rend());
  std::printf("  ms/step  calls/step  op(input shapes)\n");
  for (size_t i = 0; i < std::min<size_t>(40, rows.size()); ++i)
    std::printf("  %7.2f  %10.1f  %s\n", 1e3 * rows[i].first / steps,
                double(g_op_times[rows[i].second].second) / steps, rows[i].second.c_str());
  g_op_times.clear();
}

struct Shape {
  const char* name;
  int n_rep;    // cells per axis
  int basis;    // atoms per cell (1: simple cubic, 4: fcc)
  double a;     // Å
  double disp;  // Å, max displacement
  int64_t batch, max_neighbours, hidden, layers, gaussians, filters;
  bool ethanol = false;  // ethanol molecules instead of cells (n_rep, basis and a unused)
};

// Ethanol near its equilibrium geometry (Å): C, C, O, then the hydroxyl H and five H.
constexpr uint8_t kEthanolZ[9] = {6, 6, 8, 1, 1, 1, 1, 1, 1};
constexpr double kEthanol[9][3] = {
    {1.1879, -0.3829, 0.0},     {0.0, 0.5526, 0.0},       {-1.1867, -0.2472, 0.0},
    {-1.9237, 0.3850, 0.0},     {2.0985, 0.2306, 0.0},    {1.1184, -1.0093, 0.8869},
    {1.1184, -1.0093, -0.8869}, {0.0710, 1.1908, 0.8846}, {0.0710, 1.1908, -0.8846}};

ddgnn::GraphBatch random_batch(const Shape& s, std::mt19937& rng, c10::Device device) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  const double fcc[4][3] = {{0, 0, 0}, {0.5, 0.5, 0}, {0.5, 0, 0.5}, {0, 0.5, 0.5}};
  std::vector<uint8_t> z, pbc;
  std::vector<double> pos, cells, energy, forces;
  std::vector<int64_t> offsets = {0};
  for (int64_t g = 0; g < s.batch; ++g) {
    if (s.ethanol) {  // a molecule in a box with no periodicity
      for (int i = 0; i < 9; ++i) {
        z.push_back(kEthanolZ[i]);
        for (int c = 0; c < 3; ++c) {
          pos.push_back(kEthanol[i][c] + s.disp * u(rng));
          forces.push_back(u(rng));
        }
      }
      cells.insert(cells.end(), {20, 0, 0, 0, 20, 0, 0, 0, 20});
      pbc.insert(pbc.end(), {0, 0, 0});
      offsets.push_back(int64_t(z.size()));
      energy.push_back(u(rng));
      continue;
    }
    for (int i = 0; i < s.n_rep; ++i)
      for (int j = 0; j < s.n_rep; ++j)
        for (int k = 0; k < s.n_rep; ++k)
          for (int b = 0; b < s.basis; ++b) {
            z.push_back(29);
            pos.push_back((i + fcc[b][0]) * s.a + s.disp * u(rng));
            pos.push_back((j + fcc[b][1]) * s.a + s.disp * u(rng));
            pos.push_back((k + fcc[b][2]) * s.a + s.disp * u(rng));
            for (int c = 0; c < 3; ++c) forces.push_back(u(rng));
          }
    const double l = s.n_rep * s.a;
    cells.insert(cells.end(), {l, 0, 0, 0, l, 0, 0, 0, l});
    pbc.insert(pbc.end(), {1, 1, 1});
    offsets.push_back(int64_t(z.size()));
    energy.push_back(u(rng));
  }
  ddgnn::RadiusGraphOptions opt;
  opt.radius = 5.0;
  opt.max_neighbours = s.max_neighbours;
  return ddgnn::make_batch(z.data(), pos.data(), offsets.data(), s.batch, cells.data(), pbc.data(),
                           energy.data(), forces.data(), opt, at::kFloat, device);
}

void sync(c10::Device device) {
  if (device.is_cuda()) torch::cuda::synchronize();
}

// The model of `type` at shape `s` (its elements those of the shape's data, as `train` sets them).
ddgnn::GnnSpec bench_spec(const Shape& s, const std::string& type) {
  ddgnn::GnnSpec spec;
  spec.mpnn_type = type;
  spec.layer.hidden_dim = s.hidden;
  spec.layer.radius = 5.0;
  spec.layer.num_gaussians = s.gaussians;
  spec.layer.num_filters = s.filters;
  spec.layer.activation = "ssp";
  if (s.ethanol) {  // configs/ethanol_mace.json's settings
    spec.layer.activation = "silu";
    spec.layer.num_radial = 8;
    spec.layer.envelope = {ddgnn::Envelope::kPolynomial, 5};
    spec.layer.max_ell = 2;
    spec.layer.node_max_ell = 1;
    spec.layer.correlation = 3;
    spec.layer.avg_num_neighbors = 8;
  }
  set_layer_options(spec.layer);
  spec.num_conv_layers = s.layers;
  spec.head.node_num_headlayers = 2;
  spec.head.node_dim_headlayers =
      s.ethanol ? std::vector<int64_t>{64, 32} : std::vector<int64_t>{60, 20};
  spec.heads = {{"energy", ddgnn::HeadSpec::kNode, 1}};
  spec.interatomic_potential = true;
  // The data's elements, as `train` sets them.
  if (!g_all_elements)
    spec.elements = s.ethanol ? std::vector<int64_t>{1, 6, 8} : std::vector<int64_t>{29};
  return spec;
}

// One per-atom energy head whose sum is the energy, forces its negative gradient: what training
// predicts with a conservative potential.
ddgnn::TargetSpec conservative_energy_targets() {
  ddgnn::HeadTarget energy;
  energy.name = "energy";
  energy.kind = ddgnn::HeadSpec::kNode;
  energy.dim = 1;
  ddgnn::TargetSpec targets;
  targets.heads = {energy};
  targets.energy_head = 0;
  targets.conservative = true;
  return targets;
}

void run(const Shape& s, const std::string& type, int steps, const std::string& trace_prefix,
         c10::Device device) {
  const ddgnn::GnnSpec spec = bench_spec(s, type);
  torch::manual_seed(0);
  auto gnn = std::make_shared<ddgnn::Gnn>(spec);
  gnn->to(device, at::kFloat);
  gnn->set_bf16_autocast(g_bf16);
  const std::vector<at::Tensor> params = gnn->parameters();
  auto opt = ddgnn::make_optimizer(ddgnn::OptimizerType::kAdam, params, 1e-3, 0.0);
  const ddgnn::TargetSpec targets = conservative_energy_targets();
  std::mt19937 rng(1);
  const auto t_build = Clock::now();
  std::vector<ddgnn::GraphBatch> batches;
  for (int i = 0; i < 4; ++i) batches.push_back(random_batch(s, rng, device));
  sync(device);
  const double build_ms = 1e3 * seconds_since(t_build) / 4;
  auto step_fn = [&](const ddgnn::GraphBatch& b, Clock::time_point* forward_done) {
    const ddgnn::Prediction p =
        ddgnn::predict(*gnn, targets, b, /*create_graph=*/true, forward_done);
    at::Tensor loss = at::mse_loss(p.energy, b.energy) + at::mse_loss(p.forces, b.forces);
    ddgnn::zero_gradients(params);  // in place, as training does
    ddgnn::backward_to_parameters(loss, params);
    opt->step();
  };
  double t_fwd = 0, t_force = 0, t_bwd = 0, t_opt = 0;
  int64_t graphs = 0;
  std::unique_ptr<torch::autograd::profiler::RecordProfile> profile;
  std::optional<at::CallbackHandle> op_timer;
  for (int step = -3; step < steps; ++step) {  // 3 warm-up steps
    if (step == 0 && g_ops)
      op_timer = at::addThreadLocalCallback(at::RecordFunctionCallback(op_start, op_end)
                                                .needsInputs(true)
                                                .scopes({at::RecordScope::FUNCTION}));
    if (step == 0 && !trace_prefix.empty())
      profile = std::make_unique<torch::autograd::profiler::RecordProfile>(
          trace_prefix + "." + type + "." + std::string(1, s.name[1]) + ".json");
    const ddgnn::GraphBatch& b = batches[size_t((step + 3) % 4)];
    auto t0 = Clock::now();
    Clock::time_point forward_done;
    const ddgnn::Prediction p =
        ddgnn::predict(*gnn, targets, b, /*create_graph=*/true, &forward_done);
    sync(device);
    const double f0 = std::chrono::duration<double>(forward_done - t0).count();
    const double f1 = seconds_since(forward_done);
    t0 = Clock::now();
    at::Tensor loss = at::mse_loss(p.energy, b.energy) + at::mse_loss(p.forces, b.forces);
    ddgnn::zero_gradients(params);  // in place, as training does
    ddgnn::backward_to_parameters(loss, params);
    sync(device);
    const double f2 = seconds_since(t0);
    t0 = Clock::now();
    opt->step();
    sync(device);
    const double f3 = seconds_since(t0);
    if (step >= 0) {
      t_fwd += f0, t_force += f1, t_bwd += f2, t_opt += f3;
      graphs += b.n_graphs;
    }
  }
  profile.reset();
  if (op_timer) at::removeCallback(*op_timer);
  double total = t_fwd + t_force + t_bwd + t_opt;
  if (device.is_cuda()) {  // throughput without the phases' synchronisations
    const auto t0 = Clock::now();
    for (int step = 0; step < steps; ++step) step_fn(batches[size_t(step % 4)], nullptr);
    sync(device);
    total = seconds_since(t0);
  }
  std::printf("%-10s %-6s %9.0f %8.2f %8.2f %8.2f %8.2f %8.2f %9.2f %9lld\n", s.name, type.c_str(),
              graphs / total, 1e3 * total / steps, 1e3 * t_fwd / steps, 1e3 * t_force / steps,
              1e3 * t_bwd / steps, 1e3 * t_opt / steps, build_ms, (long long)batches[0].n_edges());
  if (g_ops) print_op_times(steps);
}

// options `step=train|static|graphs`: the training step itself (TrainStep, train/step.h) instead
// of the loop above, with Adam, the loss of train's energy and force weights (1, 10): `train` its
// batches as they are, `static` padded to one fixed shape (model/pad_batch.h), `graphs` that and
// the step replayed as CUDA graphs (train/step_graphs.h; a GPU only). Batches are built on the
// host and moved to the device as the loader moves them (train/upload.h); graphs/s from a loop
// without synchronisation.
std::string g_step_mode;

void run_train_step(const Shape& s, const std::string& type, int steps, c10::Device device) {
  ddgnn::ModelSetup setup;
  setup.spec = bench_spec(s, type);
  setup.targets = conservative_energy_targets();
  setup.graph.radius = 5.0;
  setup.graph.max_neighbours = s.max_neighbours;
  setup.device = device;
  if (!device.is_cpu()) setup.uploader = std::make_shared<const ddgnn::BatchUploader>(device);
  ddgnn::TrainSettings ts;
  ts.weights = {1.0, 0.0, 10.0, 0.0};
  ts.cuda_graphs = g_step_mode == "graphs";
  std::mt19937 rng(1);
  std::vector<ddgnn::PreparedBatch> batches(4);
  for (auto& p : batches) {
    p.batch = random_batch(s, rng, c10::Device(c10::kCPU));
    p.columns.resize(1);
    ddgnn::add_graph_inputs(p.batch, setup.spec);
  }
  if (g_step_mode != "train") {  // one shape for the four batches, with room for the padding
    ddgnn::BatchSizes most;
    int64_t degree = 1;
    for (const auto& p : batches) {
      const ddgnn::BatchSizes b = ddgnn::sizes_of(p.batch);
      most.graphs = std::max(most.graphs, b.graphs);
      most.atoms = std::max(most.atoms, b.atoms);
      most.edges = std::max(most.edges, b.edges);
      most.triplets = std::max(most.triplets, b.triplets);
      most.graph_atoms = std::max(most.graph_atoms, b.graph_atoms);
      const at::Tensor& ptr = p.batch.receivers->ptr;
      degree = std::max(
          degree, (ptr.narrow(0, 1, b.atoms) - ptr.narrow(0, 0, b.atoms)).max().item<int64_t>());
    }
    auto shapes = std::make_shared<ddgnn::StaticShapes>();
    const int64_t pad_atoms = 8, pad_edges = pad_atoms * degree / 2;
    shapes->buckets = {ddgnn::ShapeBucket{most.graphs + 1 + pad_atoms / most.graph_atoms,
                                          most.atoms + pad_atoms, most.edges + pad_edges,
                                          most.triplets > 0 ? most.triplets + pad_edges : 0,
                                          most.graph_atoms, std::max<int64_t>(degree, 8)}};
    shapes->pad.radius = setup.graph.radius;
    shapes->pad.pad_z = setup.spec.elements.empty() ? 1 : setup.spec.elements.front();
    setup.static_shapes = shapes;
    for (auto& p : batches) ddgnn::pad_to_static_shape(p, setup, ddgnn::StepShare{});
  }
  for (auto& p : batches) {
    if (setup.uploader) {
      setup.uploader->upload(p);
    } else {
      p.batch = ddgnn::to_device(p.batch, device);
      if (p.share.defined()) p.share = p.share.to(device);
    }
  }
  torch::manual_seed(0);
  ddgnn::Gnn gnn(setup.spec);
  gnn.to(device, at::kFloat);
  const std::vector<at::Tensor> params = gnn.parameters();
  auto opt = ddgnn::make_optimizer(ddgnn::OptimizerType::kAdam, params, 1e-3, 0.0);
  ddgnn::TrainStep step(gnn, params, *opt, nullptr, nullptr, setup, ts);
  const auto one = [&](int k) {
    ddgnn::StepBatch sb;
    sb.prepared = batches[size_t(k % 4)];
    sb.empty = false;
    sb.graphs_all = sb.prepared.batch.real_graphs();
    sb.atoms_all = sb.prepared.batch.real_atoms();
    ddgnn::StepPlace place;
    place.step = k + 1;
    (void)step.run(sb, place);
    return sb.graphs_all;
  };
  int k = 0;
  for (; k < 3 + 2 * int(ddgnn::StepGraphs::kWarmupSteps); ++k) one(k);  // warm-up, captures
  sync(device);
  const auto t0 = Clock::now();
  int64_t graphs = 0;
  for (int i = 0; i < steps; ++i) graphs += one(k++);
  sync(device);
  const double total = seconds_since(t0);
  std::printf("%-10s %-6s %9.0f %8.2f %8s %8s %8s %8s %9s %9lld  step=%s%s\n", s.name, type.c_str(),
              double(graphs) / total, 1e3 * total / steps, "-", "-", "-", "-", "-",
              (long long)batches[0].batch.n_edges(), g_step_mode.c_str(),
              step.graphs()
                  ? (" (" + std::to_string(step.graphs()->replayed()) + " replayed)").c_str()
                  : "");
}

constexpr const char* kUsage =
    "usage: bench_train [steps=30] [types=all] [shapes=ab, of abc] [trace_prefix|-] [device=cpu]\n"
    "                   [options: generic,bf16,ops,all_elements,kernels=wide|avx2|none,\n"
    "                    max_ell=N,node_max_ell=N,correlation=N,step=train|static|graphs]\n"
    "e.g. bench_train 30 SchNet,PAINN a; bench_train 30 MACE c - cpu kernels=avx2\n";

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(stderr, "bench_train: %s\n%s", what.c_str(), kUsage);
  std::exit(2);
}

// An integer in [least, most], the whole string (atoi would read "--help" or "3x" as a number).
long long parse_integer(const std::string& text, const std::string& what, long long least,
                        long long most) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < least || v > most)
    usage_error(what + " must be an integer from " + std::to_string(least) + " to " +
                std::to_string(most) + ", got '" + text + "'");
  return v;
}

}  // namespace

int bench_main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "-h" || std::string(argv[i]) == "--help") {
      std::printf("%s", kUsage);
      return 0;
    }
  ddgnn::tune_allocator();  // before the first tensor: freed buffers stay in the heap
  // As training does: one thread (OpenBLAS's pool too: its idle workers otherwise spin in
  // sched_yield, ~15% of a SchNet step on 2 cores), subnormals flushed, OpenBLAS's kernels matched
  // to the CPU (OPENBLAS_CORETYPE=Prescott measures what Debian 12's OpenBLAS picks on a CPU it
  // does not know).
  const std::string blas = ddgnn::set_up_cpu_compute(1);
  const std::string kernels = ddgnn::blas_kernels() + (blas.empty() ? "" : " (" + blas + ")");
  if (argc > 7) usage_error("at most six arguments, got " + std::to_string(argc - 1));
  // At most 2^20: shape (c) runs four times the steps, in an int.
  const int steps = argc > 1 ? int(parse_integer(argv[1], "steps", 1, 1 << 20)) : 30;
  const std::vector<std::string> known = ddgnn::known_layers();
  std::vector<std::string> types = known;
  if (argc > 2 && std::string(argv[2]) != "all") {
    types.clear();
    std::stringstream ss(argv[2]);
    for (std::string t; std::getline(ss, t, ',');) {
      if (std::find(known.begin(), known.end(), t) == known.end())
        usage_error("unknown type '" + t + "'; known: all or a comma-separated subset of " +
                    ddgnn::join_names(known, ","));
      types.push_back(t);
    }
  }
  const Shape a{"(a) sc27", 3, 1, 3.8, 0.19, 64, 5, 32, 4, 10, 8};
  const Shape b{"(b) Cu108", 3, 4, 3.615, 0.1, 16, 0, 64, 3, 50, 64};
  const Shape c{"(c) eth9", 0, 0, 0, 0.1, 8, 32, 64, 2, 50, 64, /*ethanol=*/true};
  const std::string shapes = argc > 3 ? argv[3] : "ab";
  if (shapes.empty() || shapes.find_first_not_of("abc") != std::string::npos)
    usage_error("shapes must be letters of abc, got '" + shapes + "'");
  const std::string trace = argc > 4 && std::string(argv[4]) != "-" ? argv[4] : "";
  const c10::Device device(argc > 5 ? argv[5] : "cpu");
  const std::string options = argc > 6 ? argv[6] : "";
  std::unique_ptr<ddgnn::GenericKernels> generic;
  std::unique_ptr<ddgnn::kernels::CpuKernelsScope> kernel_level;
  {
    std::stringstream ss(options);
    std::string token;
    while (std::getline(ss, token, ','))
      if (const size_t eq = token.find('='); eq == std::string::npos) {
        if (token == "generic")
          generic = std::make_unique<ddgnn::GenericKernels>();
        else if (token == "bf16")
          g_bf16 = true;
        else if (token == "ops")
          g_ops = true;
        else if (token == "all_elements")
          g_all_elements = true;
        else
          usage_error("unknown option '" + token + "'");
      } else {
        const std::string key = token.substr(0, eq), value = token.substr(eq + 1);
        if (key == "kernels") {
          using ddgnn::kernels::CpuKernels;
          std::optional<CpuKernels> level;  // by the names the kernels report themselves
          for (const CpuKernels l : {CpuKernels::kWide, CpuKernels::kAvx2, CpuKernels::kNone})
            if (value == ddgnn::kernels::to_string(l)) level = l;
          if (!level) usage_error("kernels must be wide, avx2 or none, got '" + value + "'");
          kernel_level = std::make_unique<ddgnn::kernels::CpuKernelsScope>(*level);
        } else if (key == "step") {
          if (value != "train" && value != "static" && value != "graphs")
            usage_error("step must be train, static or graphs, got '" + value + "'");
          g_step_mode = value;
        } else if (key == "max_ell" || key == "node_max_ell" || key == "correlation") {
          g_layer[key] = parse_integer(value, key, 0, INT_MAX);  // the layer checks its range
        } else {
          usage_error("unknown option '" + key + "'");
        }
      }
  }
  std::printf("BLAS kernels: %s; small products: %s\n", kernels.c_str(),
              ddgnn::small_mm_kernels().c_str());
  if (device.is_cuda()) at::globalContext().setFloat32MatmulPrecision("high");  // TF32
  std::printf(
      "one thread, %s, device %s%s, %d timed steps after 3 warm-up; ms per step by "
      "phase\n",
      g_bf16 ? "bf16 autocast" : "float32", device.str().c_str(),
      generic ? " (generic kernels)" : "", steps);
  std::printf("%-10s %-6s %9s %8s %8s %8s %8s %8s %9s %9s\n", "shape", "type", "graphs/s", "step",
              "forward", "forces", "backward", "adam", "build ms", "edges");
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (g_step_mode == "graphs" && !device.is_cuda())
    usage_error("step=graphs needs a CUDA device (the fifth argument)");
  // The machine's energy counters (core/energy_meter.h; DDGNN_ENERGY_ROOT points them at a
  // test's tree): each row's joules and mean power, or the notice that there are none.
  ddgnn::EnergyMeter meter(ddgnn::EnergySource::kAuto);
  if (meter.active())
    std::printf("energy measured by %s: each row's joules below it\n", meter.description().c_str());
  else
    std::printf("%s\n", meter.notice().c_str());
  const auto run_one = [&](const Shape& s, const std::string& t, int n) {
    const double j0 = meter.active() ? meter.joules() : 0.0;
    const auto t0 = std::chrono::steady_clock::now();
    if (g_step_mode.empty())
      run(s, t, n, trace, device);
    else
      run_train_step(s, t, n, device);
    if (meter.active()) {
      const double j = meter.joules() - j0;
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("%-10s %-6s energy %.4g J over %.3g s (%.4g W)\n", "", "", j, secs,
                  secs > 0 ? j / secs : 0.0);
    }
  };
  if (shapes.find('a') != std::string::npos)
    for (const auto& t : types) run_one(a, t, steps);
  if (shapes.find('b') != std::string::npos)
    for (const auto& t : types) run_one(b, t, std::max(3, steps / 5));
  if (shapes.find('c') != std::string::npos)
    for (const auto& t : types) run_one(c, t, steps * 4);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  std::printf("peak RSS %.0f MB\n", ru.ru_maxrss / 1024.0);
#ifdef DDGNN_TORCH_CUDA
  if (device.is_cuda()) {
    const auto stats =
        c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
    std::printf("peak GPU memory %.0f MiB\n", double(stats.allocated_bytes[0].peak) / (1 << 20));
  }
#endif
  return 0;
}

int main(int argc, char** argv) {
  try {
    return bench_main(argc, argv);
  } catch (const std::exception& e) {  // a layer's ConfigError for its settings, among others
    std::fprintf(stderr, "%s\n", ddgnn::error_line(e, -1).c_str());  // with the hint
    return 1;
  }
}
