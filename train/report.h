// What a training run reports besides its epochs: the run_start (or resume) event and the header
// line, the trivial baseline that gives "learned" a scale (mean energy per atom, zero forces), and
// the closing line on the best epoch.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "config/config.h"
#include "config/train_settings.h"
#include "train/loader.h"
#include "train/model_setup.h"
#include "train/run_log.h"

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
// The baseline of every split, as the "baseline" event and one log line (collective over the
// data's ranks).
void report_baseline(const TrainData& data, bool forces, RunLog& log);
// "best epoch 12: test energy MAE 0.03 meV/atom, force MAE 2.8 meV/Å (<run_dir>/metrics.csv)",
// or "" before any epoch.
std::string best_line(const nlohmann::json& best_row, int64_t best_epoch,
                      const std::string& run_dir);

}  // namespace ddgnn
