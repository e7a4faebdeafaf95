// Target statistics over a training split: reference energies recovered by least squares, the
// residual spread and force RMS, computed over the chosen graphs only.
#include <gtest/gtest.h>

#include <cmath>

#include "../common/temp_dir.h"
#include "core/error.h"
#include "loader/targets.h"

namespace ddgnn {
namespace {

TEST(Targets, ReferenceEnergiesResidualAndForces) {
  testing::TempDir dir;
  {
    DatasetWriter w(dir.file("d.h5"), {});
    for (int g = 0; g < 6; ++g) {
      Frame f;
      const int n_h = 1 + g % 3, n_o = 1 + g / 3;
      for (int i = 0; i < n_h + n_o; ++i) {
        f.z.push_back(i < n_h ? 1 : 8);
        f.pos.insert(f.pos.end(), {1.0 * i, 0.0, 0.0});
        f.forces.insert(f.forces.end(), {g == 5 ? 100.0 : 1.0, 0.0, 0.0});  // graph 5 not used
      }
      f.has_energy = true;
      // Exactly linear in composition plus a +-0.01 eV/atom alternating residual.
      f.energy = -13.6 * n_h - 432.0 * n_o + (g % 2 ? 0.01 : -0.01) * (n_h + n_o);
      w.add(f, "g" + std::to_string(g));
    }
    w.commit();
  }
  const GraphBlock b = Dataset(dir.file("d.h5")).read(0, 6);
  const TargetStats st = compute_target_stats(b, {0, 1, 2, 3, 4});
  EXPECT_EQ(st.n_graphs, 5);
  EXPECT_EQ(st.composition_rank, 2);
  EXPECT_NEAR(st.reference_energy[1], -13.6, 0.02);
  EXPECT_NEAR(st.reference_energy[8], -432.0, 0.05);
  EXPECT_EQ(st.reference_energy[6], 0.0);
  EXPECT_NEAR(st.residual_std_per_atom, 0.01, 0.003);
  // Forces: components 1, 0, 0 per atom on the chosen graphs -> RMS 1/sqrt(3).
  EXPECT_NEAR(st.force_rms, 1.0 / std::sqrt(3.0), 1e-12);
  const uint8_t water[3] = {8, 1, 1};
  EXPECT_NEAR(st.residual(water, 3, -459.2),
              -459.2 - st.reference_energy[8] - 2 * st.reference_energy[1], 1e-12);
  EXPECT_THROW(compute_target_stats(b, {}), DataError);
}

}  // namespace
}  // namespace ddgnn
