// End-to-end helpers for tests that run the `ddgnn` binary: run a command line and capture its
// output, a small SchNet config on a dataset, checkpoint parameters, metrics.csv values.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "../common/temp_dir.h"
#include "core/text.h"
#include "model/precision.h"
#include "train/checkpoint.h"
#include "train/model_setup.h"

namespace ddgnn::testing {

struct Result {
  int code = -1;
  bool killed = false;
  std::string out;
};

inline Result run(const std::string& args, const std::string& env = "") {
  Result r;
  const std::string cmd = env + " " + std::string(DDGNN_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    r.out = "popen failed: " + std::string(std::strerror(errno));
    return r;
  }
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  // popen runs through sh: a child killed by a signal shows as exit 128 + signal.
  r.killed = (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) || r.code == 128 + SIGKILL;
  return r;
}

// `ddgnn <args>` on np ranks. Open MPI refuses root unless told (CI containers); `timeout` turns
// a hang into a failure instead of a stuck suite.
inline Result mpirun(int np, const std::string& args, const std::string& env = "") {
  return run(args, "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " + env +
                       " timeout 120 " + DDGNN_MPIEXEC + " -n " + std::to_string(np) +
                       " --oversubscribe");
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string l; std::getline(ss, l);) out.push_back(l);
  return out;
}

// The last event named `name` in <run_dir>/events.jsonl (null when there is none).
inline nlohmann::json last_event(const std::string& run_dir, const std::string& name) {
  nlohmann::json found;
  for (const auto& l : lines(read_text(run_dir + "/events.jsonl"))) {
    nlohmann::json e = nlohmann::json::parse(l);
    if (e.at("event") == name) found = std::move(e);
  }
  return found;
}

// Bad input: exit status 1 and one line naming it, with a hint.
inline void expect_error(const Result& r, const std::string& needle) {
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find(needle), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hint:"), std::string::npos) << r.out;
}

// A small SchNet interatomic potential on `data`, writing to `run_dir`.
inline nlohmann::json small_config(const std::string& data, const std::string& run_dir) {
  return nlohmann::json::parse(R"({
    "Dataset": {"path": ")" + data +
                               R"("},
    "NeuralNetwork": {
      "Architecture": {
        "mpnn_type": "SchNet", "hidden_dim": 8, "num_conv_layers": 2, "radius": 5.0,
        "num_gaussians": 8, "num_filters": 8, "activation_function": "ssp",
        "enable_interatomic_potential": true, "force_weight": 10.0,
        "output_heads": {"node": {"num_headlayers": 1, "dim_headlayers": [8]}}
      },
      "Variables_of_interest": {
        "output_names": ["energy"], "output_index": [0], "type": ["node"], "output_dim": [1]
      },
      "Training": {
        "num_epoch": 4, "batch_size": 4, "perc_train": 0.6, "seed": 3,
        "Optimizer": {"type": "Adam", "learning_rate": 0.003},
        "Scheduler": {"type": "ReduceLROnPlateau", "patience": 0, "factor": 0.5}
      }
    },
    "Runtime": {"intra_op_threads": 1},
    "Output": {"run_dir": ")" + run_dir +
                               R"(", "trace_steps": 5, "keep_checkpoints": 10}
  })");
}

inline std::string write_config(const TempDir& dir, const std::string& name,
                                const nlohmann::json& c) {
  const std::string path = dir.file(name);
  std::ofstream(path) << c.dump(2);
  return path;
}

// Parameters of a checkpoint, loaded into a model built from its own record.
inline std::vector<at::Tensor> checkpoint_parameters(const std::string& path) {
  const ModelSetup setup = model_setup_from_json(read_checkpoint_record(path).at("model"));
  Gnn gnn(setup.spec);
  gnn.to(to_dtype(setup.precision));
  load_checkpoint_model(path, gnn);
  std::vector<at::Tensor> out;
  for (const auto& p : gnn.parameters()) out.push_back(p.detach().clone());
  return out;
}

// Every row's value of a metrics.csv column as written, epoch by epoch (a test failure, and no
// values, when there is no such column).
inline std::vector<std::string> metric_column(const std::string& csv, const std::string& name) {
  const std::vector<std::string> rows = lines(read_text(csv));
  const std::vector<std::string> header = split_csv_line(rows.at(0));
  const auto col = std::find(header.begin(), header.end(), name);
  EXPECT_NE(col, header.end()) << "no column " << name << " in " << rows[0];
  std::vector<std::string> out;
  if (col == header.end()) return out;
  for (size_t r = 1; r < rows.size(); ++r)
    out.push_back(split_csv_line(rows[r]).at(size_t(col - header.begin())));
  return out;
}

// The same as numbers.
inline std::vector<double> metric_numbers(const std::string& csv, const std::string& name) {
  std::vector<double> out;
  for (const std::string& v : metric_column(csv, name)) out.push_back(std::stod(v));
  return out;
}

// The last row's value of a metrics.csv column (a test failure, and 0, when there is no such
// column).
inline double last_metric(const std::string& csv, const std::string& name) {
  const std::vector<double> v = metric_numbers(csv, name);
  return v.empty() ? 0.0 : v.back();
}

// metrics.csv without the timing columns (they differ between runs).
inline std::vector<std::string> metric_values(const std::string& csv) {
  const auto rows = lines(read_text(csv));
  const std::vector<std::string> header = split_csv_line(rows.at(0));
  std::vector<std::string> out;
  for (size_t r = 1; r < rows.size(); ++r) {
    std::stringstream ss(rows[r]);
    size_t k = 0;
    std::string kept;
    for (std::string c; std::getline(ss, c, ','); ++k)
      if (k < header.size() && (header[k].find("loss") != std::string::npos ||
                                header[k].find("mev") != std::string::npos || header[k] == "lr"))
        kept += c + ",";
    out.push_back(kept);
  }
  return out;
}

}  // namespace ddgnn::testing
