// The closing report's judgement of a run against the model-free baseline (train/report.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "train/report.h"

namespace ddgnn {
namespace {

using testing::HasSubstr;
using testing::Not;

nlohmann::json row(double energy, double forces) {
  return {{"epoch", 3},
          {"test_energy_mae_mev_atom", energy},
          {"test_force_mae_mev_a", forces},
          {"baseline_test_energy_mae_mev_atom", 6.7},
          {"baseline_test_force_mae_mev_a", 583.0}};
}

TEST(UnlearnedWarning, ForcesAtTheZeroForceBaselineAreCalledUnlearned) {
  const std::string w = unlearned_warning(row(6.69, 583.0));
  EXPECT_THAT(w, HasSubstr("energy MAE 6.69 meV/atom against 6.7"));
  EXPECT_THAT(w, HasSubstr("force MAE 583 meV/Å against 583 for zero forces"));
  EXPECT_THAT(w, HasSubstr("energy_peratom_weight"));
}

TEST(UnlearnedWarning, OnlyTheTargetThatWasNotLearnedIsNamed) {
  const std::string w = unlearned_warning(row(7.5, 12.0));
  EXPECT_THAT(w, HasSubstr("energy MAE 7.5"));
  EXPECT_THAT(w, Not(HasSubstr("force MAE")));
  EXPECT_THAT(unlearned_warning(row(0.2, 600.0)), Not(HasSubstr("energy MAE")));
}

TEST(UnlearnedWarning, ARunThatBeatsTheBaselineIsNotWarnedAbout) {
  EXPECT_EQ(unlearned_warning(row(0.2, 12.0)), "");
  EXPECT_EQ(unlearned_warning(row(6.3, 550.0)), "");  // 6% and 5.7% below: learned a little
  EXPECT_EQ(unlearned_warning(nlohmann::json()), "");
  nlohmann::json no_forces = row(0.2, 0.0);
  no_forces.erase("test_force_mae_mev_a");
  EXPECT_EQ(unlearned_warning(no_forces), "");
}

}  // namespace
}  // namespace ddgnn
