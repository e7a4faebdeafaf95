// Start-up checks of a training run (train/start_checks.h).
#include "train/start_checks.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "comm/mpi.h"
#include "comm/watchdog.h"
#include "core/error.h"
#include "loader/outliers.h"

namespace ddgnn {

void check_ranks_run_one_config(MPI_Comm comm, const Config& config) {
  TextAgreement a;
  {
    Waiting waiting("config check");
    a = compare_with_root(comm, config.resolved.dump());
  }
  if (a.differing.empty()) return;
  const nlohmann::json root = nlohmann::json::parse(a.root_text).flatten();
  const nlohmann::json other = nlohmann::json::parse(a.first_text).flatten();
  std::string keys;
  int shown = 0;
  auto note = [&](const std::string& pointer, const nlohmann::json& here,
                  const nlohmann::json& r0) {
    if (shown++ < 4) {
      std::string key = pointer.substr(1);
      std::replace(key.begin(), key.end(), '/', '.');
      keys += (keys.empty() ? "" : "; ") + key + " = " +
              (here.is_null() ? "(absent)" : here.dump()) + " there, " +
              (r0.is_null() ? "(absent)" : r0.dump()) + " on rank 0";
    }
  };
  for (auto it = other.begin(); it != other.end(); ++it)
    if (!root.contains(it.key()) || root.at(it.key()) != it.value())
      note(it.key(), it.value(), root.value(it.key(), nlohmann::json()));
  for (auto it = root.begin(); it != root.end(); ++it)
    if (!other.contains(it.key())) note(it.key(), nlohmann::json(), it.value());
  std::string ranks;
  for (int r : a.differing) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  throw ConfigError("rank(s) " + ranks + " run another config than rank 0; rank " +
                        std::to_string(a.differing[0]) + ": " + keys,
                    "start every rank with the same config file and --set options (one srun / "
                    "mpiexec command line), and the same Dataset.path");
}

void check_outliers(const TrainData& data, bool allow, bool root) {
  std::set<std::string> seen;
  std::vector<const Dataset*> files;
  for (int k : {kTrain, kValidate, kTest}) files.push_back(&data.dataset(k));
  for (size_t f = 0; f < data.list_files(); ++f) files.push_back(&data.list_file(f));
  for (const Dataset* file : files) {
    const Dataset& ds = *file;
    if (!seen.insert(ds.path()).second) continue;
    const auto& outliers = ds.outliers();
    if (!outliers) {
      if (root)
        spdlog::warn(
            "{}: converted before ddgnn looked for outlier frames; `ddgnn info {}` "
            "lists them, and converting it again stores them",
            ds.path(), ds.path());
      continue;
    }
    if (outliers->empty()) continue;
    const std::string what = ds.path() + ": " + std::to_string(outliers->size()) +
                             " outlier frame(s), flagged by convert:\n" +
                             outlier_lines(*outliers, 5);
    if (!allow)
      throw DataError(what.substr(0, what.size() - 1),
                      "fix or drop these frames and convert again, or set "
                      "Dataset.allow_outliers true to train on them");
    if (root) spdlog::warn("{}  (trained on: Dataset.allow_outliers is true)", what);
  }
}

}  // namespace ddgnn
