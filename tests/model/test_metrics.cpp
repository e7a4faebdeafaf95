// Metrics: per-atom energy errors and force component errors in meV, accumulated over batches.
#include <gtest/gtest.h>

#include <cmath>

#include "model/metrics.h"

namespace ddgnn {

TEST(Metrics, EnergyPerAtomAndForceComponentsInMeV) {
  MetricsAccumulator acc;
  const double ep[2] = {-10.0, -20.0}, er[2] = {-10.1, -19.6};  // errors 0.1 eV / 2, 0.4 eV / 4
  const int64_t na[2] = {2, 4};
  acc.add_energies(ep, er, na, 2);
  const double fp[6] = {0.0, 0.0, 0.0, 1.0, 1.0, 1.0}, fr[6] = {0.0, 0.0, 0.0, 1.0, 1.0, 1.3};
  acc.add_forces(fp, fr, 2);
  // A second batch, to check accumulation: one graph with no error.
  const double e3 = -5.0;
  const int64_t n3 = 1;
  acc.add_energies(&e3, &e3, &n3, 1);
  const ErrorMetrics m = acc.result();
  EXPECT_EQ(m.n_graphs, 3);
  EXPECT_EQ(m.n_force_components, 6);
  EXPECT_NEAR(m.energy_mae_mev_per_atom, (50.0 + 100.0 + 0.0) / 3, 1e-9);
  EXPECT_NEAR(m.energy_rmse_mev_per_atom, std::sqrt((2500.0 + 10000.0) / 3), 1e-9);
  EXPECT_NEAR(m.force_mae_mev_per_a, 300.0 / 6, 1e-9);
  EXPECT_NEAR(m.force_rmse_mev_per_a, std::sqrt(90000.0 / 6), 1e-9);
  acc.reset();
  EXPECT_EQ(acc.result().n_graphs, 0);
  EXPECT_EQ(acc.result().energy_mae_mev_per_atom, 0.0);
}

}  // namespace ddgnn
