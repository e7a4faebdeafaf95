// Data-parallel training on real MPI ranks (ctest: mpiexec -n 1, 2, 4 --oversubscribe): the
// averaged gradient of P ranks with B/P graphs each equals the gradient of one rank with the B
// graphs, and 20 Adam steps that way end where 20 single-rank steps do (float64, to rounding);
// parameters stay identical across ranks, and a rank that diverges is caught.
#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../common/lj_dataset.h"
#include "../common/mpi_test.h"
#include "comm/mpi.h"
#include "core/error.h"
#include "loader/dataset.h"
#include "loader/sampler.h"
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

  static std::shared_ptr<Gnn> model(uint64_t seed) {
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
    gnn->to(at::kDouble);
    return gnn;
  }

  // Backward of the loss of the graphs `ids` (energy and forces, mean over graphs /
  // components). The batch lives until the backward is done (its graph refers to it).
  static void backward_of(Gnn& gnn, const std::vector<int64_t>& ids) {
    RadiusGraphOptions g;
    g.radius = 5.0;
    const GraphBatch b = collate(*s_block, ids, g, at::kDouble);
    TargetSpec targets;
    targets.heads = {HeadTarget{"energy", HeadSpec::kNode, 1}};
    targets.energy_head = 0;
    targets.conservative = true;
    const Prediction pred = predict(gnn, targets, b, /*create_graph=*/true);
    energy_force_loss(pred, b, EnergyForceWeights{1.0, 0.0, 10.0}, LossSpec{}).backward();
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
      ddp.begin_step(double(my_batches[s].size()) / double(ref_batches[s].size()));
      backward_of(*distributed, my_batches[s]);
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

}  // namespace
}  // namespace ddgnn

int main(int argc, char** argv) {
  at::set_num_threads(1);
  return ddgnn::testing::run_mpi_tests(argc, argv);
}
