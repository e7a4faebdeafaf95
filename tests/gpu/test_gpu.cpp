// GPU tests (ctest label gpu): the radius graph built on the device, the CUDA kernels of the
// segment family and SchNet's filter against their generic ATen versions (to second derivatives,
// deterministic, fewer calls), every model's energies, forces and gradients on a CUDA device
// against the CPU in float64, bf16 autocast against float32, Adam's multi-tensor step against
// torch's, and `ddgnn train` on the GPU, one rank and two ranks sharing it. The only tests that
// skip: with a message, where no GPU is visible (a CPU build, or a machine without one).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "../common/aten_calls.h"
#include "../common/derivatives.h"
#include "../common/lj_dataset.h"
#include "../common/small_spec.h"
#include "../common/structures.h"
#include "../common/temp_dir.h"
#include "../common/torch_adam.h"
#include "../common/train_run.h"
#include "model/batch.h"
#include "model/device.h"
#include "model/device_graph.h"
#include "model/gnn.h"
#include "model/layer.h"
#include "model/optim.h"
#include "model/predict.h"
#include "model/radius_graph.h"
#include "model/schnet_filter.h"
#include "model/segment.h"

namespace ddgnn {
namespace {

using testing::Structure;

#define REQUIRE_GPU()                                                                      \
  if (!torch::cuda::is_available())                                                        \
  GTEST_SKIP() << "no GPU visible to this process: the GPU tests run where one is (build " \
                  "with jobs/build.sh --gpu)"

const c10::Device kGpu(c10::kCUDA, 0);

std::vector<Structure> structures() {
  std::vector<Structure> ss;
  for (unsigned seed = 1; seed <= 3; ++seed)
    ss.push_back(testing::triclinic_cell({6, 8, 1, 1, 6, 8, 1, 1}, seed, 0.08));
  ss.push_back(testing::methanol());
  return ss;
}

GnnSpec spec_of(const std::string& type) {
  return testing::small_spec(type, 3.5);
}

double rel_error(const at::Tensor& a, const at::Tensor& ref) {
  const at::Tensor r = ref.to(at::kCPU, at::kDouble);
  return (a.to(at::kCPU, at::kDouble) - r).abs().max().item<double>() /
         (1e-12 + r.abs().max().item<double>());
}

TEST(Gpu, RadiusGraphOnTheDeviceEqualsTheCellLists) {
  REQUIRE_GPU();
  const std::vector<Structure> ss = structures();
  for (int64_t max_nb : {0, 5}) {
    const GraphBatch cpu = testing::batch_of(ss, 3.5, at::kDouble, c10::Device(c10::kCPU), max_nb);
    const GraphBatch gpu = testing::batch_of(ss, 3.5, at::kDouble, kGpu, max_nb);
    ASSERT_TRUE(gpu.edge_index.is_cuda());
    EXPECT_TRUE(at::equal(gpu.edge_index.cpu(), cpu.edge_index)) << "max_neighbours " << max_nb;
    EXPECT_LT(rel_error(gpu.edge_shift, cpu.edge_shift), 1e-12);
    EXPECT_EQ(gpu.cut_atoms, cpu.cut_atoms);
    EXPECT_EQ(gpu.most_neighbours, cpu.most_neighbours);
  }
}

// Segment maps on the GPU over n rows: receivers sorted, senders not, rows drawn from all but the
// last three (so those and whichever the draw misses have no edge).
struct GpuMaps {
  int64_t n, e;
  SegmentIndex r, s;
};

GpuMaps gpu_maps(int64_t n, int64_t e, int seed) {
  at::manual_seed(seed);
  const auto opt = at::TensorOptions().dtype(at::kLong).device(kGpu);
  const at::Tensor recv = std::get<0>(at::randint(0, n - 3, {e}, opt).sort());
  return {n, e, make_segment_index(recv, n),
          make_segment_index(at::randint(0, n - 3, {e}, opt), n)};
}

// One segment op of model/segment.h on the GPU: a name, the op, its inputs, and those it is
// differentiated in.
struct GpuOp {
  std::string name;
  testing::Fn op;
  std::vector<at::Tensor> inputs;
  std::vector<size_t> first;
};

std::vector<GpuOp> segment_ops(const GpuMaps& m) {
  at::manual_seed(12);
  const auto opt = at::TensorOptions().dtype(at::kDouble).device(kGpu);
  const int64_t n = m.n, e = m.e;
  const at::Tensor y3 = at::randn({n, 3, 4}, opt), y2 = at::randn({n, 6}, opt);
  const at::Tensor yk = at::randn({n, 3, 6}, opt), qk = at::randn({n, 3, 6}, opt);
  const at::Tensor x = at::randn({e, 5}, opt), w = at::randn({e, 6}, opt);
  const at::Tensor u = at::randn({e, 3}, opt), q2 = at::randn({n, 6}, opt);
  // The maps by value: the ops outlive this function.
  const SegmentIndex r = m.r, s = m.s;
  return {
      {"gather_rows", [=](const auto& in) { return gather_rows(in[0], s); }, {y3}, {0}},
      {"scatter_sum (unsorted)", [=](const auto& in) { return scatter_sum(in[0], s); }, {x}, {0}},
      {"scatter_sum (sorted)", [=](const auto& in) { return scatter_sum(in[0], r); }, {x}, {0}},
      {"gather_mul_sum [N, F]",
       [=](const auto& in) { return gather_mul_sum(in[0], in[1], s, r); },
       {y2, w},
       {0, 1}},
      {"gather_mul_sum [N, K, F]",
       [=](const auto& in) { return gather_mul_sum(in[0], in[1], r, s); },
       {yk, w},
       {0, 1}},
      {"gather_gather_dot [N, F]",
       [=](const auto& in) { return gather_gather_dot(in[0], in[1], r, s); },
       {y2, q2},
       {0, 1}},
      {"gather_gather_dot [N, K, F]",
       [=](const auto& in) { return gather_gather_dot(in[0], in[1], s, r); },
       {yk, qk},
       {0, 1}},
      {"outer_sum", [=](const auto& in) { return outer_sum(in[0], in[1], r); }, {w, u}, {0, 1}},
      {"outer_sum (unsorted)",
       [=](const auto& in) { return outer_sum(in[0], in[1], s); },
       {w, u},
       {0, 1}},
      {"edge_difference", [=](const auto& in) { return edge_difference(in[0], s, r); }, {y3}, {0}},
  };
}

// The CUDA kernels (model/cuda/) run for float32 and float64 CUDA tensors, and step aside for
// GenericKernels, bfloat16 and autocast.
TEST(Gpu, CudaKernelsRunWhereTheyShould) {
  REQUIRE_GPU();
  const at::Tensor x = at::zeros({2, 3}, at::TensorOptions().device(kGpu));
  EXPECT_TRUE(cuda_kernels(x));
  EXPECT_TRUE(cuda_kernels(x.to(at::kDouble)));
  EXPECT_FALSE(cuda_kernels(x.to(at::kBFloat16)));
  EXPECT_FALSE(cuda_kernels(x.cpu()));
  EXPECT_FALSE(fused_kernels(x));
  {
    GenericKernels force;
    EXPECT_FALSE(cuda_kernels(x));
  }
  {
    Bf16Autocast autocast(c10::kCUDA, true);
    EXPECT_FALSE(cuda_kernels(x));
  }
  EXPECT_TRUE(cuda_kernels(x));
}

// Every segment op and SchNet's filter with the CUDA kernels against the generic ATen versions on
// the GPU, float64: value, first derivatives and second derivatives (the force loss's backward),
// random maps with empty rows; maps without edges; the Gaussians and cutoff values.
TEST(Gpu, CudaKernelsEqualTheGenericVersionsToSecondOrder) {
  REQUIRE_GPU();
  for (const GpuOp& op : segment_ops(gpu_maps(40, 300, 11)))
    testing::compare_op(op.name, op.op, op.inputs, op.first);
  // No edges: zero rows out, and gradients of the right shapes.
  for (const GpuOp& op : segment_ops(gpu_maps(7, 0, 13))) {
    SCOPED_TRACE(op.name + ", no edges");
    std::vector<at::Tensor> results[2];
    for (const bool generic : {false, true}) {
      std::unique_ptr<GenericKernels> force;
      if (generic) force = std::make_unique<GenericKernels>();
      std::vector<at::Tensor> in;
      for (const auto& t : op.inputs) in.push_back(t.detach().clone().requires_grad_(true));
      const at::Tensor out = op.op(in);
      results[generic].push_back(out.detach());
      const auto g = torch::autograd::grad({out.sum()}, in, {}, false, false, true);
      for (size_t k = 0; k < g.size(); ++k)
        results[generic].push_back(g[k].defined() ? g[k] : at::zeros_like(in[k]));
    }
    for (size_t k = 0; k < results[0].size(); ++k) {
      ASSERT_EQ(results[0][k].sizes(), results[1][k].sizes()) << k;
      EXPECT_EQ(testing::max_abs(results[0][k] - results[1][k]), 0.0) << k;
    }
  }
  // SchNet's filter: the force pass (in d) and every input, cosine and polynomial envelopes.
  const auto opt = at::TensorOptions().dtype(at::kDouble).device(kGpu);
  for (const Envelope envelope : {Envelope(), Envelope{Envelope::kPolynomial, 6}}) {
    const int64_t e = 150, ng = 12, nf = 40;
    const double rc = 3.0, spacing = rc / double(ng - 1);
    at::manual_seed(31);
    const at::Tensor d = 0.5 + (rc - 0.5) * at::rand({e}, opt);
    FilterBasis basis{at::linspace(0.0, rc, ng, opt),
                      -0.5 / (spacing * spacing),
                      rc,
                      {},
                      at::Tensor(),
                      envelope,
                      at::Tensor()};
    basis.cutoff_values = envelope_values(d, rc, envelope);
    const at::Tensor x = d.unsqueeze(1) - basis.mu.unsqueeze(0);
    const at::Tensor gauss = at::exp(at::clamp_min(basis.coeff * x * x, -80.0));
    const at::Tensor a1 = at::randn({nf, ng}, opt) / 3.0, b1 = at::randn({nf}, opt);
    const at::Tensor a2 = at::randn({nf, nf}, opt) / 4.0, b2 = at::randn({nf}, opt);
    const testing::Fn fn = [&](const std::vector<at::Tensor>& in) {
      const bool own = cuda_kernels(in[0]);
      FilterBasis b = basis;
      if (!own) b.cutoff_values = {};
      return schnet_filter(in[0], own ? gauss : at::Tensor(), b, in[1], in[2], in[3], in[4]);
    };
    const std::string name = envelope.kind == Envelope::kCosine ? "" : ", polynomial envelope";
    testing::compare_op("schnet_filter, d" + name, fn, {d, a1, b1, a2, b2}, {0});
    testing::compare_op("schnet_filter, all" + name, fn, {d, a1, b1, a2, b2}, {0, 1, 2, 3, 4});
  }
  // The memoised Gaussians and cutoff values of a batch's edges.
  const GraphBatch batch = testing::batch_of(structures(), 3.5, at::kDouble, kGpu);
  const EdgeGeometry own(batch, batch.pos, 3.5);
  const at::Tensor gauss = own.gaussian_values(12);
  const std::array<at::Tensor, 3> cut = own.cutoff_values();
  GenericKernels force;
  const EdgeGeometry generic(batch, batch.pos, 3.5);
  testing::expect_rel(gauss, generic.gaussian_values(12), 1e-14, "gaussian_values");
  for (size_t k = 0; k < 3; ++k)
    testing::expect_rel(cut[k], generic.cutoff_values()[k], 1e-14,
                        "cutoff value " + std::to_string(k));
}

// The CUDA segment sums add each row's edges in one order (CSR, increasing edge order): the same
// bits every run, and the same as the fused CPU kernels, which add in that order too.
TEST(Gpu, CudaSegmentSumsAreDeterministicAndEqualTheCpuBitForBit) {
  REQUIRE_GPU();
  const GpuMaps m = gpu_maps(500, 20000, 17);
  at::manual_seed(3);
  const at::Tensor x = at::randn({m.e, 3, 32}, at::TensorOptions().dtype(at::kFloat).device(kGpu));
  for (const SegmentIndex* map : {&m.r, &m.s}) {
    const at::Tensor first = scatter_sum(x, *map);
    EXPECT_TRUE(at::equal(first, scatter_sum(x, *map)));
    const SegmentIndex on_cpu = make_segment_index(map->index.cpu(), map->n_rows);
    EXPECT_TRUE(at::equal(first.cpu(), scatter_sum(x.cpu(), on_cpu)));
  }
  // edge_difference's adjoint: the sum over senders minus the sum over receivers, in one pass.
  const SegmentIndex s_cpu = make_segment_index(m.s.index.cpu(), m.n),
                     r_cpu = make_segment_index(m.r.index.cpu(), m.n);
  const at::Tensor y = at::randn({m.n, 3, 32}, x.options()).requires_grad_(true);
  const at::Tensor y_cpu = y.detach().cpu().requires_grad_(true);
  const at::Tensor gy = torch::autograd::grad({edge_difference(y, m.s, m.r)}, {y}, {x})[0];
  const at::Tensor gy_cpu =
      torch::autograd::grad({edge_difference(y_cpu, s_cpu, r_cpu)}, {y_cpu}, {x.cpu()})[0];
  EXPECT_TRUE(at::equal(gy.cpu(), gy_cpu));
}

// A forward and backward of every segment op makes fewer calls with the CUDA kernels than with
// the ATen ops (ATen calls, and the kernels' own launches, each a recorded "ddgnn::cuda::..."):
// each forward is one CUDA kernel, and no index_select or index_add runs.
TEST(Gpu, CudaKernelsMakeFewerCallsThanTheGenericVersions) {
  REQUIRE_GPU();
  for (const GpuOp& op : segment_ops(gpu_maps(40, 300, 19))) {
    SCOPED_TRACE(op.name);
    std::vector<std::string> calls[2], forward;
    for (const bool generic : {false, true}) {
      std::unique_ptr<GenericKernels> force;
      if (generic) force = std::make_unique<GenericKernels>();
      std::vector<at::Tensor> in;
      for (const auto& t : op.inputs) in.push_back(t.detach().clone().requires_grad_(true));
      at::Tensor out;
      if (!generic) forward = testing::aten_calls([&] { out = op.op(in); });
      const at::Tensor seed = at::ones_like(op.op(in));
      calls[generic] = testing::aten_calls([&] {
        out = op.op(in);
        torch::autograd::grad({out}, in, {seed});
      });
    }
    std::printf("%-28s forward and backward: %zu calls with the CUDA kernels, %zu generic\n",
                op.name.c_str(), calls[0].size(), calls[1].size());
    EXPECT_LT(calls[0].size(), calls[1].size());
    EXPECT_EQ(std::count_if(forward.begin(), forward.end(),
                            [](const std::string& c) { return c.rfind("ddgnn::cuda::", 0) == 0; }),
              1);
    for (const char* slow : {"aten::index_select", "aten::index_add", "aten::index_add_"})
      EXPECT_FALSE(testing::called(calls[0], slow)) << slow;
  }
}

TEST(Gpu, EveryModelPredictsOnTheGpuAsOnTheCpuInFloat64) {
  REQUIRE_GPU();
  const std::vector<Structure> ss = structures();
  const GraphBatch cpu = testing::batch_of(ss, 3.5, at::kDouble);
  const GraphBatch gpu = testing::batch_of(ss, 3.5, at::kDouble, kGpu);
  for (const std::string& type : known_layers()) {
    at::manual_seed(5);
    Gnn a(spec_of(type));
    a.to(at::kDouble);
    at::manual_seed(5);
    Gnn b(spec_of(type));
    b.to(kGpu, at::kDouble);
    const Prediction pa =
        predict(a, testing::targets_of(spec_of("SchNet"), true), cpu, /*create_graph=*/true);
    const Prediction pb =
        predict(b, testing::targets_of(spec_of("SchNet"), true), gpu, /*create_graph=*/true);
    ASSERT_TRUE(pb.forces.is_cuda()) << type;
    EXPECT_LT(rel_error(pb.energy, pa.energy), 1e-10) << type;
    EXPECT_LT(rel_error(pb.forces, pa.forces), 1e-10) << type;
    // The gradient of a loss with the forces in it (double backward), parameter by parameter.
    (pa.forces.pow(2).sum() + pa.energy.pow(2).sum()).backward();
    (pb.forces.pow(2).sum() + pb.energy.pow(2).sum()).backward();
    const auto qa = a.parameters(), qb = b.parameters();
    for (size_t k = 0; k < qa.size(); ++k) {
      if (!qa[k].grad().defined()) continue;
      EXPECT_LT(rel_error(qb[k].grad(), qa[k].grad()), 1e-9) << type << " parameter " << k;
    }
  }
}

// A bent chain of n atoms 1.5 Å apart: within a radius of 2 Å a path graph, whose Laplacian has
// distinct eigenvalues (so GPS's encodings do not depend on the eigensolver).
Structure chain(int n, const std::vector<uint8_t>& z) {
  Structure s;
  for (int i = 0; i < n; ++i) {
    s.z.push_back(z[size_t(i) % z.size()]);
    s.pos.insert(s.pos.end(), {1.5 * i, 0.3 * (i % 2), 0.05 * i * i});
  }
  s.cell = std::vector<double>(9, 0.0);
  s.pbc = {0, 0, 0};
  return s;
}

// GPS attention (batch norms in training mode, Laplacian encodings from the device's eigensolver)
// and multi-branch heads (rows of each branch gathered on the device) as on the CPU, in float64.
TEST(Gpu, GpsAndMultiBranchHeadsPredictOnTheGpuAsOnTheCpu) {
  REQUIRE_GPU();
  const std::vector<Structure> ss = {chain(7, {6, 8, 1}), chain(5, {1, 6}), chain(6, {8, 1})};
  for (const std::string c : {"gps", "branches"}) {
    GnnSpec spec = testing::small_spec(c == "gps" ? "SchNet" : "PAINN", 2.0);
    spec.heads.push_back({"gap", HeadSpec::kGraph, 2});
    if (c == "gps") {
      spec.gps_heads = 4;
      spec.pe_dim = 3;
    } else {
      HeadBranch other = spec.branch(0);
      other.dim_headlayers = {7};
      spec.more_branches = {other, other};
    }
    GraphBatch cpu = testing::batch_of(ss, 2.0, at::kDouble);
    GraphBatch gpu = testing::batch_of(ss, 2.0, at::kDouble, kGpu);
    ASSERT_EQ(cpu.n_edges(), 2 * (6 + 4 + 5)) << "path graphs";
    if (c == "branches") {
      cpu.branch = at::tensor(std::vector<int64_t>{2, 0, 2}, at::kLong);
      gpu.branch = cpu.branch.to(kGpu);
    }
    at::manual_seed(5);
    Gnn a(spec);
    a.to(at::kDouble);
    at::manual_seed(5);
    Gnn b(spec);
    b.to(kGpu, at::kDouble);
    const TargetSpec targets = testing::targets_of(spec, true);
    const Prediction pa = predict(a, targets, cpu, /*create_graph=*/true);
    const Prediction pb = predict(b, targets, gpu, /*create_graph=*/true);
    EXPECT_LT(rel_error(pb.energy, pa.energy), 1e-10) << c;
    EXPECT_LT(rel_error(pb.forces, pa.forces), 1e-10) << c;
    EXPECT_LT(rel_error(pb.outputs[1], pa.outputs[1]), 1e-10) << c << ": the graph head";
    (pa.forces.pow(2).sum() + pa.outputs[1].pow(2).sum()).backward();
    (pb.forces.pow(2).sum() + pb.outputs[1].pow(2).sum()).backward();
    // Against the largest gradient of the model: a bias just before a batch norm has a gradient
    // of zero but for rounding, so its own relative error means nothing.
    const auto qa = a.named_parameters(), qb = b.named_parameters();
    double scale = 0;
    for (const auto& item : qa)
      if (item.value().grad().defined())
        scale = std::max(scale, item.value().grad().abs().max().item<double>());
    for (const auto& item : qa) {
      const at::Tensor& ga = item.value().grad();
      const at::Tensor& gb = qb[item.key()].grad();
      ASSERT_EQ(ga.defined(), gb.defined()) << c << " " << item.key();
      if (ga.defined()) {
        EXPECT_LT((gb.cpu() - ga).abs().max().item<double>(), 1e-9 * scale)
            << c << " " << item.key();
      }
    }
  }
}

TEST(Gpu, Float32OnTheGpuIsWithinFloat32OfFloat64) {
  REQUIRE_GPU();
  const std::vector<Structure> ss = structures();
  const GraphBatch cpu = testing::batch_of(ss, 3.5, at::kDouble);
  const GraphBatch gpu = testing::batch_of(ss, 3.5, at::kFloat, kGpu);
  at::manual_seed(5);
  Gnn a(spec_of("SchNet"));
  a.to(at::kDouble);
  at::manual_seed(5);
  Gnn b(spec_of("SchNet"));
  b.to(kGpu, at::kFloat);
  const Prediction pa = predict(a, testing::targets_of(spec_of("SchNet"), true), cpu, false);
  const Prediction pb = predict(b, testing::targets_of(spec_of("SchNet"), true), gpu, false);
  EXPECT_LT(rel_error(pb.energy, pa.energy), 1e-5);
  EXPECT_LT(rel_error(pb.forces, pa.forces), 1e-4);
}

TEST(Gpu, Bf16AutocastOnTheGpuStaysNearFloat32) {
  REQUIRE_GPU();
  const GraphBatch gpu = testing::batch_of(structures(), 3.5, at::kFloat, kGpu);
  for (const std::string type : {"SchNet", "PAINN", "EGNN"}) {
    at::manual_seed(5);
    Gnn g(spec_of(type));
    g.to(kGpu, at::kFloat);
    const TargetSpec targets = testing::targets_of(spec_of(type), true);
    const Prediction fp32 = predict(g, targets, gpu, false);
    g.set_bf16_autocast(true);
    const Prediction bf16 = predict(g, targets, gpu, false);
    EXPECT_EQ(bf16.energy.scalar_type(), at::kFloat) << type;
    EXPECT_EQ(bf16.forces.scalar_type(), at::kFloat) << type;
    EXPECT_LT(rel_error(bf16.energy, fp32.energy), 0.05) << type;
    EXPECT_GT(rel_error(bf16.energy, fp32.energy), 1e-6) << type << ": not computed in bfloat16";
    const double force_error =
        ((bf16.forces - fp32.forces).norm() / fp32.forces.norm()).item<double>();
    EXPECT_LT(force_error, 0.1) << type;
  }
}

// Adam and AdamW on GPU parameters step the flat buffers that make_optimizer lays them out in
// (one addcdiv_ for all, the step count and rate as device tensors, no read on the host) and equal
// torch's optim::Adam and optim::AdamW on the same device; zero_gradients zeroes the flat gradient
// buffer in one call, in place.
TEST(Gpu, AdamStepsAllParametersTogetherAsTorchAdam) {
  REQUIRE_GPU();
  for (auto type : {OptimizerType::kAdam, OptimizerType::kAdamW})
    for (auto dtype : {at::kFloat, at::kDouble}) {
      SCOPED_TRACE(to_string(type) + (dtype == at::kFloat ? " float32" : " float64"));
      torch::manual_seed(5);
      std::vector<at::Tensor> mine, theirs;
      for (int k = 0; k < 30; ++k) {
        mine.push_back(
            at::randn({1 + k % 7, 1 + k % 5}, at::dtype(dtype).device(kGpu)).requires_grad_(true));
        theirs.push_back(mine.back().detach().clone().requires_grad_(true));
      }
      const double lr = 0.01, wd = 0.05;
      auto fused = make_optimizer(type, mine, lr, wd);
      const auto reference = testing::torch_adam(type, theirs, lr, wd);
      for (int step = 0; step < 8; ++step) {
        if (step > 0) {
          const void* before = mine[0].grad().data_ptr();
          const auto zeroing = testing::aten_calls([&] { zero_gradients(mine); });
          EXPECT_EQ(std::count(zeroing.begin(), zeroing.end(), "aten::zero_"), 1);
          EXPECT_FALSE(testing::called(zeroing, "aten::_foreach_zero_"));
          EXPECT_EQ(mine[0].grad().data_ptr(), before);
          EXPECT_EQ(mine[0].grad().abs().max().item<double>(), 0.0);
        }
        reference->zero_grad();
        for (size_t k = 0; k < mine.size(); ++k) {
          const at::Tensor g = at::randn_like(mine[k]) * double(step + 1);
          if (mine[k].grad().defined())
            mine[k].mutable_grad().copy_(g);
          else
            mine[k].mutable_grad() = g.clone();
          theirs[k].mutable_grad() = g.clone();
        }
        const auto ops = testing::aten_calls([&] { fused->step(); });
        reference->step();
        if (step > 0) {  // after the first step, which makes the state
          EXPECT_EQ(std::count(ops.begin(), ops.end(), "aten::addcdiv_"), 1);
          EXPECT_FALSE(testing::called(ops, "aten::_foreach_addcdiv_"));
          EXPECT_FALSE(testing::called(ops, "aten::_local_scalar_dense"));
        }
        double worst = 0;
        for (size_t k = 0; k < mine.size(); ++k)
          worst = std::max(worst, rel_error(mine[k], theirs[k]));
        EXPECT_LT(worst, dtype == at::kFloat ? 2e-6 : 1e-14) << "step " << step;
      }
    }
}

nlohmann::json gpu_config(const std::string& data, const std::string& run_dir, int batch) {
  nlohmann::json c = testing::small_config(data, run_dir);
  auto& t = c["NeuralNetwork"]["Training"];
  t["num_epoch"] = 3;
  t["batch_size"] = batch;
  t["perc_train"] = 0.8;
  t["Optimizer"] = {{"type", "Adam"}, {"learning_rate", 0.003}};
  t["Scheduler"] = {{"type", "none"}};
  c["Loader"] = {{"shuffle", false}};
  c["Runtime"]["device"] = "cuda";
  return c;
}

// Runs on every build, GPU or not: the training test's configs stay valid as the schema moves (a
// stale value here once failed only on the GPU machine).
TEST(Gpu, TrainingConfigsValidateOnAnyBuild) {
  testing::TempDir dir;
  for (const int batch : {8, 4}) {
    nlohmann::json c = gpu_config(dir.file("lj.h5"), dir.file("run"), batch);
    c["Runtime"]["device"] = "cpu";
    const std::string path = testing::write_config(dir, "c.json", c);
    const testing::Result r = testing::run("config -c " + path);
    EXPECT_EQ(r.code, 0) << r.out;
  }
}

TEST(Gpu, TrainingOnTheGpuLowersTheLossAndTwoRanksSharingItMatchOne) {
  REQUIRE_GPU();
  testing::TempDir dir;
  testing::LjOptions lj;
  lj.n_frames = 80;
  testing::write_lj_dataset(dir.file("lj.h5"), lj);
  const std::string one =
      testing::write_config(dir, "one.json", gpu_config(dir.file("lj.h5"), dir.file("one"), 8));
  const testing::Result r = testing::run("train -c " + one);
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json start = testing::last_event(dir.file("one"), "run_start");
  EXPECT_EQ(start.value("device", "").rfind("cuda:0", 0), 0u) << start.dump();
  const auto rows = testing::lines(testing::read_text(dir.file("one") + "/events.jsonl"));
  std::vector<double> losses;
  for (const auto& l : rows) {
    const nlohmann::json e = nlohmann::json::parse(l);
    if (e.at("event") == "epoch") losses.push_back(e.at("train_loss").get<double>());
  }
  ASSERT_EQ(losses.size(), 3u) << r.out;
  EXPECT_LT(losses.back(), losses.front());
  // Two ranks with 4 graphs each train like one rank with 8 (float32 on the GPU).
  nlohmann::json c2 = gpu_config(dir.file("lj.h5"), dir.file("two"), 4);
  c2["Runtime"]["allow_gpu_sharing"] = true;
  c2["Loader"]["backend"] = "replicated";
  const std::string two = testing::write_config(dir, "two.json", c2);
  const testing::Result r2 = testing::run(
      "train -c " + two,
      std::string("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 ") +
          DDGNN_MPIEXEC + " -n 2 --oversubscribe");
  ASSERT_EQ(r2.code, 0) << r2.out;
  // float32 sums of two half-batch gradients differ from one full-batch sum in the last bits;
  // Adam normalises each gradient element, so an element whose summands nearly cancel can take a
  // different step, and the difference grows with the steps taken. After the first epoch (eight
  // optimizer steps) the parameters agree to 1e-6; after the third, to 1e-5.
  const auto worst_after = [&](int epoch) {
    char name[32];
    std::snprintf(name, sizeof name, "/checkpoints/epoch_%05d.pt", epoch);
    const auto p1 = testing::checkpoint_parameters(dir.file("one") + name);
    const auto p2 = testing::checkpoint_parameters(dir.file("two") + name);
    EXPECT_EQ(p1.size(), p2.size());
    double worst = 0;
    for (size_t k = 0; k < std::min(p1.size(), p2.size()); ++k)
      worst = std::max(worst, rel_error(p2[k], p1[k]));
    std::printf(
        "two ranks sharing the GPU against one, after epoch %d: max relative parameter "
        "difference %.2e\n",
        epoch, worst);
    return worst;
  };
  EXPECT_LT(worst_after(1), 1e-6);
  EXPECT_LT(worst_after(3), 1e-5);
}

}  // namespace
}  // namespace ddgnn
