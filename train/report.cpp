// Start, baseline and end reports of a training run (train/report.h).
#include "train/report.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "core/log.h"
#include "core/units.h"
#include "core/version.h"
#include "train/split_metrics.h"

namespace ddgnn {

namespace {

// ", split by block of 50 frames: 32/4/4 blocks" (nothing for three files or by frame).
std::string split_text(const TrainData& data) {
  const TrainData::SplitReport& r = data.split_report();
  const std::string dropped = r.train_dropped > 0
                                  ? ", " + std::to_string(r.train_dropped) +
                                        " training graphs left out (Dataset.train_fraction)"
                                  : std::string();
  if (r.n_units == 0 || r.by == SplitBy::kFrame) return dropped;
  if (r.by == SplitBy::kComposition) return ", split by frame, stratified by composition" + dropped;
  const std::string unit = r.by == SplitBy::kBlock ? "blocks" : "groups";
  return std::string(", split by ") +
         (r.by == SplitBy::kBlock ? "blocks of " + std::to_string(r.block) + " frames"
                                  : "group (config_type)") +
         ": " + std::to_string(r.units[0]) + "/" + std::to_string(r.units[1]) + "/" +
         std::to_string(r.units[2]) + " " + unit + dropped;
}

}  // namespace

nlohmann::json start_event(const Config& config, const TrainSettings& s, const Loader& loader,
                           const ModelSetup& setup, int64_t n_params, int threads) {
  const TrainData& data = loader.data();
  return {{"ddgnn_version", DDGNN_VERSION},
          {"git", DDGNN_GIT_DESCRIBE},
          {"config", config.source},
          {"dataset", data.describe()},
          {"dataset_name", s.dataset_name},
          {"graphs",
           {{"train", data.size(kTrain)},
            {"validate", data.size(kValidate)},
            {"test", data.size(kTest)}}},
          {"split",
           {{"by", to_string(data.split_report().by)},
            {"block", data.split_report().block},
            {"units", data.split_report().units},
            {"n_units", data.split_report().n_units},
            {"train_dropped", data.split_report().train_dropped}}},
          {"parameters", n_params},
          {"threads", threads},
          {"loader", loader.figures()},
          {"scale", setup.norm.scale},
          {"mean_residual_per_atom", setup.norm.mean_residual_per_atom},
          {"model", to_json(setup)["spec"]}};
}

std::string start_line(const TrainSettings& s, const Loader& loader, int64_t n_params, int threads,
                       int world) {
  const TrainData& data = loader.data();
  return s.gnn.mpnn_type + ": " + std::to_string(n_params) + " parameters, " +
         to_string(s.precision) + ", " + std::to_string(threads) + " thread(s)" +
         (world > 1 ? " x " + std::to_string(world) + " ranks" : "") + "; " +
         std::to_string(data.size(kTrain)) + "/" + std::to_string(data.size(kValidate)) + "/" +
         std::to_string(data.size(kTest)) + " graphs train/validate/test of " + s.dataset_name +
         " (" + data.describe() + ")" + split_text(data) + "; run_dir " + s.run_dir;
}

nlohmann::json report_baseline(const TrainData& data, const ModelSetup& setup, bool forces,
                               RunLog& log, bool report) {
  // One walk over the train split for the means the baselines predict: energy per atom, and
  // the stress tensor of the graphs with a stress (GraphBlock::has_stress, as training uses them).
  std::array<long double, 12> sums{};  // energy per atom, graphs; 9 stress sums, graphs
  data.visit_local_light(kTrain, [&](const GraphBlock& b, const std::vector<int64_t>& ids) {
    for (int64_t id : ids) {
      const size_t g = size_t(id);
      sums[0] += b.energy[g] / double(b.n_atoms[g]);
      sums[1] += 1;
      if (setup.targets.stress && b.has_stress(g)) {
        for (size_t k = 0; k < 9; ++k) sums[2 + k] += b.stress[9 * g + k];
        sums[11] += 1;
      }
    }
  });
  data.sum_stats(sums.data(), int64_t(sums.size()));
  const double mean_epa = double(sums[0] / std::max(sums[1], 1.0L));
  std::array<double, 9> stress_mean{};
  for (size_t k = 0; k < 9; ++k) stress_mean[k] = double(sums[2 + k] / std::max(sums[11], 1.0L));
  const BaselineEnergy per_element = [&](const GraphBlock& b, size_t g) {
    return setup.norm.energy_offset(b.z.data() + b.atom_start[g], b.n_atoms[g]);
  };
  const BaselineEnergy mean = [&](const GraphBlock& b, size_t g) {
    return mean_epa * double(b.n_atoms[g]);
  };
  const bool energy = setup.targets.energy_head >= 0;
  nlohmann::json ev, columns = nlohmann::json::object();  // empty: no energy, forces, stress
  std::string line = setup.norm.e0s_given
                         ? "baseline (Dataset.e0s plus the train split's mean remainder per "
                           "atom, zero forces):"
                         : "baseline (per-element reference energies fitted on the train split, "
                           "zero forces):";
  if (setup.targets.stress) line.replace(line.size() - 2, 2, ", the train split's mean stress):");
  std::string mean_line;
  for (int split : {kTrain, kValidate, kTest}) {
    const Baselines b = baseline_metrics(data, split, {per_element, mean}, forces,
                                         setup.targets.stress ? &stress_mean : nullptr);
    const ErrorMetrics& m = b.energy[0];
    const ErrorMetrics& m_mean = b.energy[1];
    const std::string name = split_name(split);
    ev[name] = {{"energy_mae_mev_atom", m.energy_mae_mev_per_atom},
                {"energy_rmse_mev_atom", m.energy_rmse_mev_per_atom},
                {"mean_energy_per_atom_mae_mev_atom", m_mean.energy_mae_mev_per_atom}};
    line += " " + name + " E " + fmt("%.3g", m.energy_mae_mev_per_atom) + " meV/atom";
    mean_line += (mean_line.empty() ? "" : "/") + fmt("%.3g", m_mean.energy_mae_mev_per_atom);
    if (energy) columns["baseline_" + name + "_energy_mae_mev_atom"] = m.energy_mae_mev_per_atom;
    if (forces) {
      ev[name]["force_mae_mev_a"] = m.force_mae_mev_per_a;
      ev[name]["force_rmse_mev_a"] = m.force_rmse_mev_per_a;
      line += ", F " + fmt("%.3g", m.force_mae_mev_per_a) + " meV/Å";
      columns["baseline_" + name + "_force_mae_mev_a"] = m.force_mae_mev_per_a;
    }
    if (setup.targets.stress) {
      const double stress = b.stress_mae_mev_a3;
      ev[name]["stress_mae_mev_a3"] = stress;
      line += ", S " + fmt("%.3g", stress) + " meV/Å³";
      columns["baseline_" + name + "_stress_mae_mev_a3"] = stress;
    }
    line += ";";
  }
  line.pop_back();
  if (report) {
    log.event("baseline", ev);
    log.line(line + " (MAE); the train split's mean energy per atom alone: E " + mean_line +
             " meV/atom (train/validate/test)");
  }
  return columns;
}

bool report_cut_neighbours(const RadiusGraphOptions& graph, int64_t epoch,
                           std::initializer_list<const SplitMetrics*> splits, RunLog& log) {
  int64_t atoms = 0, cut = 0, most = 0;
  for (const SplitMetrics* m : splits) {
    atoms += m->atoms;
    cut += m->cut_atoms;
    most = std::max(most, m->most_neighbours);
  }
  if (cut == 0) return false;
  log.event("max_neighbours_cut", {{"epoch", epoch},
                                   {"max_neighbours", graph.max_neighbours},
                                   {"smooth", graph.smooth_cap},
                                   {"radius", graph.radius},
                                   {"atoms_cut", cut},
                                   {"atoms", atoms},
                                   {"most_neighbours", most}});
  const std::string what =
      "NeuralNetwork.Architecture.max_neighbours = " + std::to_string(graph.max_neighbours) +
      " cut the neighbour lists of " + std::to_string(cut) + " of " + std::to_string(atoms) +
      " atoms in epoch " + std::to_string(epoch) + " (train, validate and test; up to " +
      std::to_string(most) + " neighbours within " + fmt("%g", graph.radius) + " Å)";
  if (graph.smooth_cap) {
    log.line(what + ", smoothly (smooth_neighbour_cap): the envelope of each ends at its " +
             std::to_string(graph.max_neighbours + 1) +
             " nearest neighbours' farthest, so the energy stays continuous but sees less than "
             "the radius around them");
  } else {
    log.warn(what + ": the energy jumps where a neighbour enters or leaves the nearest " +
             std::to_string(graph.max_neighbours) + "; raise max_neighbours to " +
             std::to_string(most) +
             " or more, lower the radius, or (SchNet, PAINN) set smooth_neighbour_cap true");
  }
  return true;
}

std::string best_line(const nlohmann::json& best, int64_t best_epoch, const std::string& run_dir) {
  if (best.is_null()) return "";
  std::string line = "best epoch " + std::to_string(best_epoch);
  if (best.contains("step"))  // the run's step of that evaluation
    line += " (step " + std::to_string(best["step"].get<int64_t>()) + ")";
  line += ": test";
  if (best.contains("test_energy_mae_mev_atom"))
    line +=
        " energy MAE " + fmt("%.3g", best["test_energy_mae_mev_atom"].get<double>()) + " meV/atom";
  if (best.contains("test_force_mae_mev_a"))
    line += ", force MAE " + fmt("%.3g", best["test_force_mae_mev_a"].get<double>()) + " meV/Å";
  if (best.contains("test_stress_mae_mev_a3"))
    line +=
        ", stress MAE " + fmt("%.3g", best["test_stress_mae_mev_a3"].get<double>()) + " meV/Å³ (" +
        fmt("%.3g", best["test_stress_mae_mev_a3"].get<double>() * 1e-3 * kGpaPerEvA3) + " GPa)";
  if (best.contains("test_force_by_element")) {
    line += " (per element: ";
    for (const auto& [element, e] : best["test_force_by_element"].items())
      line += element + " " + fmt("%.3g", e.at("mae_mev_a").get<double>()) + ", ";
    line.resize(line.size() - 2);
    line += ")";
  }
  return line + " (" + run_dir + "/metrics.csv)";
}

std::string unlearned_warning(const nlohmann::json& best) {
  if (best.is_null()) return "";
  std::string what;
  auto check = [&](const char* column, const char* name, const char* baseline, const char* unit) {
    const std::string b = std::string("baseline_") + column;
    if (!best.contains(std::string(column)) || !best.contains(b)) return;
    const double model = best[std::string(column)].get<double>();
    const double trivial = best[b].get<double>();
    if (!(trivial > 0.0) || model < 0.95 * trivial) return;
    what += std::string(what.empty() ? "" : "; ") + name + " " + fmt("%.3g", model) + " " + unit +
            " against " + fmt("%.3g", trivial) + " for " + baseline;
  };
  check("test_energy_mae_mev_atom", "energy MAE", "the per-element reference energies", "meV/atom");
  check("test_force_mae_mev_a", "force MAE", "zero forces", "meV/Å");
  if (what.empty()) return "";
  return "the model predicts no better than the model-free baseline on the test split (" + what +
         "): it has not learned that target. Check the loss weights (the total energy of n atoms "
         "weighs each per-atom error n^2 times: energy_peratom_weight instead of energy_weight), "
         "the learning rate, and max_neighbours, or train longer";
}

}  // namespace ddgnn
