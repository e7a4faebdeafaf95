// Data-parallel training on real MPI ranks (ctest: mpiexec -n 1, 2, 4 --oversubscribe): the
// summed gradient of P ranks with B/P graphs each (each loss scaled by its rank's share) equals the
// gradient of one rank with the B graphs, and 20 Adam steps that way end where 20 single-rank
// steps do (float64, to rounding); parameters stay identical across ranks, and a rank that
// diverges is caught. The gradients are views into the buckets, where backward accumulates them
// (float32 and float64, parameters without a gradient included), and DataParallel adds no ATen
// call to a step, whatever the number of parameters.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../common/aten_calls.h"
#include "../common/lj_dataset.h"
#include "../common/mpi_test.h"
#include "comm/mpi.h"
#include "core/error.h"
#include "loader/dataset.h"
#include "loader/sampler.h"
#include "model/flat_params.h"
#include "model/gnn.h"
#include "model/optim.h"
#include "model/predict.h"
#include "train/collate.h"
#include "train/ddp.h"

namespace ddgnn {
namespace {

using testing::world_rank;
using testing::world_size;

class DdpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    s_dir = testing::shared_temp_dir([](const std::string& dir) {
      testing::LjOptions o;
      o.n_frames = 32;
      o.n_atoms = 5;  // equal sizes: per-rank means weighted by graphs are the global mean
      testing::write_lj_dataset(dir + "/d.h5", o);
    });
    const Dataset ds(s_dir + "/d.h5");
    s_block = new GraphBlock(ds.read(0, ds.n_graphs()));
  }
  static void TearDownTestSuite() {
    delete s_block;
    testing::remove_shared_temp_dir(s_dir);
  }

  static std::shared_ptr<Gnn> model(uint64_t seed, at::ScalarType dtype = at::kDouble) {
    GnnSpec spec;
    spec.mpnn_type = "SchNet";
    spec.layer.hidden_dim = 8;
    spec.layer.num_gaussians = 6;
    spec.layer.num_filters = 8;
    spec.layer.radius = 5.0;
    spec.num_conv_layers = 2;
    spec.head.node_num_headlayers = 1;
    spec.head.node_dim_headlayers = {8};
    spec.heads = {{"energy", HeadSpec::kNode, 1}};
    spec.interatomic_potential = true;
    torch::manual_seed(seed);
    auto gnn = std::make_shared<Gnn>(spec);
    gnn->to(dtype);
    return gnn;
  }

  // Backward of `share` times the loss of the graphs `ids` (energy and forces, mean over graphs /
  // components). The batch lives until the backward is done (its graph refers to it).
  static void backward_of(Gnn& gnn, const std::vector<int64_t>& ids, double share = 1.0) {
    RadiusGraphOptions g;
    g.radius = 5.0;
    const auto dtype = gnn.parameters().front().scalar_type();
    const GraphBatch b = collate(*s_block, ids, g, dtype);
    TargetSpec targets;
    targets.heads.resize(1);
    targets.heads[0].name = "energy";
    targets.heads[0].kind = HeadSpec::kNode;
    targets.energy_head = 0;
    targets.conservative = true;
    const Prediction pred = predict(gnn, targets, b, /*create_graph=*/true);
    (share * energy_force_loss(pred, b, EnergyForceWeights{1.0, 0.0, 10.0}, LossSpec{})).backward();
  }

  static std::string s_dir;
  static GraphBlock* s_block;
};
std::string DdpTest::s_dir;
GraphBlock* DdpTest::s_block = nullptr;

double max_rel(const at::Tensor& a, const at::Tensor& b) {
  return ((a - b).abs().max() / (b.abs().max() + 1e-300)).item<double>();
}

TEST_F(DdpTest, AveragedGradientsAndTwentyStepsEqualOneRankWithTheWholeBatch) {
  const int p = world_size(), rank = world_rank();
  const int64_t batch = 8;  // B: the whole step's graphs; B / P on each rank
  auto reference = model(3);
  auto distributed = model(100 + uint64_t(rank));  // different on every rank until broadcast
  DataParallel ddp(distributed->parameters(), MPI_COMM_WORLD, /*bucket_bytes=*/1024);
  EXPECT_GT(ddp.bucket_bytes().size(), 1u) << "several buckets, started in order";
  // Rank 0's values everywhere; rank 0 starts from the reference's values.
  if (rank == 0) {
    torch::NoGradGuard no_grad;
    for (size_t k = 0; k < reference->parameters().size(); ++k)
      distributed->parameters()[k].copy_(reference->parameters()[k]);
  }
  ddp.broadcast_parameters();
  ddp.check_identical();
  for (size_t k = 0; k < reference->parameters().size(); ++k)
    EXPECT_TRUE(distributed->parameters()[k].equal(reference->parameters()[k]));

  auto opt_ref = make_optimizer(OptimizerType::kAdam, reference->parameters(), 1e-2, 0.0);
  auto opt_dist = make_optimizer(OptimizerType::kAdam, distributed->parameters(), 1e-2, 0.0);
  SamplerOptions one{32, batch, 0, 1, 7, true, false};
  SamplerOptions mine{32, batch / p, rank, p, 7, true, false};
  int step = 0;
  for (int64_t epoch = 1; step < 20; ++epoch) {
    const auto ref_batches = sampler_epoch(one, epoch), my_batches = sampler_epoch(mine, epoch);
    ASSERT_EQ(ref_batches.size(), my_batches.size());
    for (size_t s = 0; s < ref_batches.size() && step < 20; ++s, ++step) {
      opt_ref->zero_grad();
      backward_of(*reference, ref_batches[s]);
      opt_dist->zero_grad();
      ddp.begin_step();
      backward_of(*distributed, my_batches[s],
                  double(my_batches[s].size()) / double(ref_batches[s].size()));
      ddp.finish_step();
      if (step == 0) {
        for (size_t k = 0; k < reference->parameters().size(); ++k) {
          EXPECT_LE(max_rel(distributed->parameters()[k].grad(), reference->parameters()[k].grad()),
                    1e-10)
              << "gradient of parameter " << k;
        }
      }
      opt_ref->step();
      opt_dist->step();
    }
  }
  for (size_t k = 0; k < reference->parameters().size(); ++k)
    EXPECT_LE(max_rel(distributed->parameters()[k], reference->parameters()[k]), 1e-9)
        << "parameter " << k << " after 20 steps";
  ddp.check_identical();
  // A rank that steps differently is caught, on every rank.
  if (p > 1) {
    if (rank == p - 1) {
      torch::NoGradGuard no_grad;
      distributed->parameters()[0].add_(1e-12);
    }
    try {
      ddp.check_identical();
      ADD_FAILURE() << "no error";
    } catch (const CommError& e) {
      EXPECT_NE(std::string(e.what()).find("parameter 0 differs"), std::string::npos) << e.what();
    }
  }
}

// Every gradient is a view into the buckets' buffer, set once: backward accumulates into it and the
// all-reduce sums it in place, so after a step each .grad() is the same tensor at the same address,
// holding the sum over ranks (float32 and float64; a parameter that no loss reaches keeps a zero).
TEST_F(DdpTest, GradientsAreViewsIntoTheBucketsAfterBackward) {
  const int p = world_size(), rank = world_rank();
  for (auto dtype : {at::kFloat, at::kDouble}) {
    SCOPED_TRACE(dtype == at::kFloat ? "float32" : "float64");
    auto reference = model(4, dtype);
    auto distributed = model(4, dtype);
    std::vector<at::Tensor> params = distributed->parameters();
    const at::Tensor unused = torch::zeros({5}, dtype).requires_grad_(true);
    params.push_back(unused);
    DataParallel ddp(params, MPI_COMM_WORLD, /*bucket_bytes=*/512);
    ASSERT_GT(ddp.bucket_bytes().size(), 2u);
    std::vector<const void*> starts;
    for (const auto& t : params) {
      ASSERT_TRUE(t.grad().defined());
      EXPECT_TRUE(t.grad().is_alias_of(ddp.gradients()));
      starts.push_back(t.grad().data_ptr());
    }
    const std::vector<int64_t> all = {0, 1, 2, 3, 4, 5, 6, 7};
    std::vector<int64_t> mine;
    for (size_t i = size_t(rank); i < all.size(); i += size_t(p)) mine.push_back(all[i]);
    backward_of(*reference, all);
    for (int step = 0; step < 2; ++step) {  // the second: zeroed in place, accumulated again
      zero_gradients(params);
      ddp.begin_step();
      backward_of(*distributed, mine, double(mine.size()) / double(all.size()));
      ddp.finish_step();
      // Buckets whose parameters all got their gradient started during backward; the one with
      // the unused parameter waited for finish_step.
      EXPECT_GT(ddp.filled_in_backward(), 0);
      EXPECT_LT(ddp.filled_in_backward(), int64_t(ddp.bucket_bytes().size()));
      for (size_t k = 0; k < params.size(); ++k) {
        EXPECT_EQ(params[k].grad().data_ptr(), starts[k]) << "gradient " << k << " moved";
        EXPECT_TRUE(params[k].grad().is_alias_of(ddp.gradients())) << k;
      }
      const double tol = dtype == at::kFloat ? 1e-4 : 1e-10;
      for (size_t k = 0; k < reference->parameters().size(); ++k)
        EXPECT_LE(max_rel(params[k].grad(), reference->parameters()[k].grad()), tol)
            << "gradient " << k << " step " << step;
      EXPECT_EQ(unused.grad().abs().max().item<double>(), 0.0);
    }
  }
}

// DataParallel launches no ATen operation per parameter: a backward with it makes the calls of the
// same backward without it (the hooks are bookkeeping on the host), and finish_step makes as many
// for 60 parameters as for a model's few (none on the CPU: MPI sums the buffer in place).
TEST_F(DdpTest, NoOperationPerParameter) {
  const int p = world_size(), rank = world_rank();
  std::vector<int64_t> mine;
  for (int64_t i = rank; i < 8; i += p) mine.push_back(i);
  auto plain = model(6);
  flatten_parameters(plain->parameters());  // the same layout, without DataParallel
  auto distributed = model(6);
  DataParallel ddp(distributed->parameters(), MPI_COMM_WORLD, /*bucket_bytes=*/1024);
  const auto without = testing::aten_calls([&] { backward_of(*plain, mine); });
  zero_gradients(distributed->parameters());
  ddp.begin_step();
  const auto with = testing::aten_calls([&] { backward_of(*distributed, mine); });
  const auto finish_model = testing::aten_calls([&] { ddp.finish_step(); });
  EXPECT_EQ(with, without);

  std::vector<at::Tensor> many;
  for (int k = 0; k < 60; ++k) many.push_back(torch::randn({3 + k % 4}).requires_grad_(true));
  DataParallel ddp_many(many, MPI_COMM_WORLD, /*bucket_bytes=*/256);
  ddp_many.broadcast_parameters();
  zero_gradients(many);
  ddp_many.begin_step();
  at::Tensor loss = torch::zeros({});
  for (const auto& t : many) loss = loss + (t * t).sum();
  loss.backward();
  const auto finish_many = testing::aten_calls([&] { ddp_many.finish_step(); });
  EXPECT_EQ(finish_many.size(), finish_model.size());
  EXPECT_TRUE(finish_many.empty()) << finish_many.size() << " calls, first " << finish_many[0];
  for (const auto& t : many)
    EXPECT_LE(max_rel(t.grad(), 2.0 * double(p) * t.detach()), 1e-6);  // every rank's the same
}

}  // namespace
}  // namespace ddgnn

int main(int argc, char** argv) {
  at::set_num_threads(1);
  return ddgnn::testing::run_mpi_tests(argc, argv);
}
