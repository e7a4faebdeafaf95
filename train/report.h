// What a training run reports besides its epochs: the run_start (or resume) event and the header
// line, the model-free baseline that gives "learned" a scale (per-element reference energies, zero
// forces), and the closing line on the best epoch.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>

#include "config/config.h"
#include "config/train_settings.h"
#include "train/loader.h"
#include "train/model_setup.h"
#include "train/run_log.h"
#include "train/split_metrics.h"

namespace ddgnn {

// The run_start / resume event: versions, config, data and its splits, parameters, threads, the
// loader's figures, normalisation and the model spec.
nlohmann::json start_event(const Config& config, const TrainSettings& settings,
                           const Loader& loader, const ModelSetup& setup, int64_t n_params,
                           int threads);
// "SchNet: 24065 parameters, fp32, 1 thread(s) x 2 ranks; 96/12/12 graphs train/validate/test of
// cu_eam (data/cu_eam.h5); run_dir runs/x".
std::string start_line(const TrainSettings& settings, const Loader& loader, int64_t n_params,
                       int threads, int world);
// Model-free baselines of every split (collective over the data's ranks): energies from the
// per-element reference energies fitted on the training split (setup.norm: E = sum_i E0(Z_i) +
// n * mean residual per atom) with zero forces, and, for comparison, the training split's mean
// energy per atom times n. With `report`, the "baseline" event and one log line. Returns the
// metrics.csv columns baseline_<split>_energy_mae_mev_atom / _force_mae_mev_a (per-element
// baseline).
nlohmann::json report_baseline(const TrainData& data, const ModelSetup& setup, bool forces,
                               RunLog& log, bool report);
// When max_neighbours cut any atom's neighbour list in the epoch's splits (reduced metrics), one
// warning with the counts (an info line when the cap is smooth) and a "max_neighbours_cut"
// event; returns whether it reported.
bool report_cut_neighbours(const RadiusGraphOptions& graph, int64_t epoch,
                           std::initializer_list<const SplitMetrics*> splits, RunLog& log);
// "best epoch 12 (step 480): test energy MAE 0.03 meV/atom, force MAE 2.8 meV/Å (per element: C
// 3.1, H 2.2) (<run_dir>/metrics.csv)",
// or "" before any epoch.
std::string best_line(const nlohmann::json& best_row, int64_t best_epoch,
                      const std::string& run_dir);
// A warning when the best epoch's test errors are no better than the model-free baseline's (the
// energy within 5% of the per-element reference energies', the forces within 5% of zero forces'):
// the model learned nothing of that target, which the errors alone do not say. "" otherwise, or
// when the row has no test split.
std::string unlearned_warning(const nlohmann::json& best_row);

}  // namespace ddgnn
