// Everything `ddgnn train` needs from a resolved run config, read once and checked, in plain types
// and enums (no torch): the model (GnnSpec), what each head learns (TargetSpec), loss, optimizer,
// schedule, data, loader, tuner, communication, runtime and outputs. train_settings() is the one
// place that reads the config's keys for training. HydraGNN's keys are mapped as DESIGN.md says.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "config/hydragnn_compat.h"
#include "core/backend.h"
#include "core/energy_meter.h"
#include "core/split_by.h"
#include "model/spec.h"
#include "tuner/cost_model.h"

namespace ddgnn {

// Training.Scheduler.type.
enum class Schedule {
  kNone,             // constant learning rate
  kPlateau,          // ReduceLROnPlateau on the validation loss
  kExponential,      // ExponentialLR: lr × gamma after every epoch
  kTimeExponential,  // learning_rate → min_lr geometrically over time_limit_s
};
// Comm.grad_sync: how gradients are summed (auto: nccl when training on GPUs, else mpi; resolved
// with the device, train/device.h).
enum class GradSync { kAuto, kMpi, kNccl };
// Runtime.device: auto (a GPU build with a GPU visible: cuda, else cpu), cpu, or cuda with an
// index (-1: the GPU of the rank's node-local rank). Resolved at start-up (train/device.h).
enum class Device { kAuto, kCpu, kCuda };
// Output.progress: the redrawn progress line on a terminal (auto), always (bar), or never (lines).
enum class Progress { kAuto, kBar, kLines };

// The per-structure key (`ddgnn convert --info-keys dataset_name`, or a file's place in a
// Dataset.path list) that names the branch of multi-branch heads each structure goes through
// (HydraGNN's dataset_name: 0, 1, ...).
inline constexpr const char* kBranchKey = "dataset_name";

// Dataset.path: one file split by perc_train and seed, or three files, or a list of files each
// split on its own and trained as one dataset (each structure's dataset_name: its file's place).
struct DatasetPaths {
  struct File {
    std::string path, name;  // name: as given, else the file's stem
  };
  std::string single;
  std::string train, validate, test;
  std::vector<File> files;
  bool explicit_split() const { return single.empty() && files.empty(); }
  bool many() const { return !files.empty(); }
};

struct TrainSettings {
  GnnSpec gnn;
  Precision precision = Precision::kFloat32;
  TargetSpec targets;  // one per gnn.heads entry, same order; sources bound to the data later
  // Variables_of_interest.input_node_features after the positions (columns >= 4, as given): the
  // model's per-atom inputs beside the atomic number. bind_targets maps each to the data:
  // (source, component), source -1 the forces, else an index into Dataset::extra_columns().
  std::vector<int64_t> input_columns;
  std::vector<std::pair<int, int>> input_sources;
  std::vector<std::string> input_names;  // per input: "forces" or the extra column's name
  // Dataset.node_features (empty: absent): HydraGNN's description of the per-atom columns, which
  // bind_targets holds input_columns to (each must be the column ddgnn numbers it).
  std::vector<FeatureEntry> node_features;
  // Multi-branch heads: the per-structure column (kBranchKey) that names each graph's branch, an
  // index into Dataset::graph_columns(); -1: none, every graph goes through branch 0.
  int branch_column = -1;
  // Graph-attribute conditioning: the per-structure column kGraphAttrKey (an index into
  // Dataset::graph_columns(); bind_targets also sets gnn.graph_attr_dim), -1: none.
  int graph_attr_column = -1;
  EnergyForceWeights weights;
  // Training.stage_two (MACE's second stage): from epoch stage_two_start on, the loss weights are
  // stage_two_weights (each one it does not name kept from `weights`); 0: one stage.
  int64_t stage_two_start = 0;
  EnergyForceWeights stage_two_weights;
  // The larger stress weight of the two stages (what the data must allow), and its full key.
  double max_stress_weight() const;
  std::string max_stress_weight_key() const;
  LossSpec loss;
  RadiusGraphOptions graph;
  bool periodic = false;  // Architecture.periodic_boundary_conditions

  DatasetPaths data;
  std::string dataset_name;  // Dataset.name: how logs and the run_start event name the data
  int64_t num_epoch = 1, batch_size = 1, eval_batch_size = 1;
  double perc_train = 0.7;
  uint64_t seed = 0;
  SplitBy split_by = SplitBy::kFrame;  // Dataset.split_by (one Dataset.path file)
  int64_t split_block = 100;           // Dataset.split_block
  double train_fraction = 1.0;         // Dataset.train_fraction
  uint64_t split_seed = 0;             // Dataset.split_seed (default: seed)
  // Dataset.e0s: element (symbol or atomic number, as written) -> eV; empty: fitted.
  std::map<std::string, double> e0s;
  bool allow_outliers = false;  // Dataset.allow_outliers

  OptimizerType optimizer = OptimizerType::kAdamW;
  double learning_rate = 1e-3, weight_decay = 0.0, grad_clip = 0.0;
  double ema_decay = 0.0;    // exponential moving average of the weights (0 = off)
  int64_t warmup_steps = 0;  // the lr rises linearly over the run's first steps (0 = off)
  // Stop with an error when the median of an epoch's batch losses exceeds this many times the
  // lowest so far (0 = never).
  double divergence_factor = 1000.0;
  // Skip a step whose loss or gradient norm is non-finite or more than this many times the median
  // of the last steps' (train/spikes.h; 0 = off: a non-finite one stops the run).
  double spike_factor = 20.0;
  Schedule schedule = Schedule::kPlateau;
  double exponential_gamma = 0.0;  // kExponential
  PlateauOptions plateau;  // kPlateau; min_lr also bounds kExponential, ends kTimeExponential
  bool early_stopping = false;
  int patience = 10;
  double time_limit_s = 0.0;
  int64_t eval_every_steps = 0;  // 0: evaluate at the end of each epoch

  bool checkpoint = true;
  int64_t checkpoint_warmup = 0, checkpoint_every = 1, keep_checkpoints = 2;
  int64_t checkpoint_every_steps = 0;  // 0: checkpoints at the ends of epochs only
  bool resume = false;
  std::string startfrom = "existing_model";

  std::string run_dir = "runs/ddgnn";
  int64_t trace_steps = 50;
  int64_t read_every_steps = 0;  // 0: every step on the CPU, every 25 on a GPU
  int verbosity = 2;
  std::optional<std::string> log_level;  // Output.log_level when given (else the command line's)
  bool log_all_ranks = false;
  bool print_test_every_epoch =
      false;  // the epoch line shows train/validate/test, not train/validate
  Progress progress = Progress::kAuto;
  EnergySource energy_meter = EnergySource::kAuto;  // Output.energy_meter

  bool shuffle = true, drop_remainder = false;
  int64_t atom_budget = 0, prefetch_depth = 2;
  bool compact_records = true;  // Loader.compact_records
  // Loader.static_shapes: training batches padded into static_buckets fixed shapes.
  bool static_shapes = false;
  int64_t static_buckets = 3;
  std::optional<Backend> backend;  // Loader.backend; empty: auto (train/train_data.h)
  int64_t width = 0;               // Loader.width: ranks per replica group (0 = all)
  double memory_budget_gb = 16.0;  // Loader.memory_budget_gb, per node
  struct Tuner {                   // the online backend switcher (Loader.backend auto)
    bool enabled = true;
    std::vector<Backend> candidates;  // empty: all the store allows
    int64_t explore_batches = 5, check_every = 50, recheck_every_epochs = 10;
    double drift = 0.25;
    std::string models;  // cost models from `ddgnn tune --out` (empty: none)
    FitMethod method = FitMethod::kTpe;
  } tuner;
  double bucket_mb = 25.0;  // Comm.bucket_mb
  GradSync grad_sync = GradSync::kAuto;
  int64_t check_parameters_every = 0;
  double timeout_s = 600.0;  // Comm.timeout_s: the watchdog's limit on a wait without progress
  int64_t threads = 0;
  bool deterministic = false;
  Device device = Device::kAuto;
  int64_t device_index = -1;       // cuda:N; -1 = by node-local rank
  bool allow_gpu_sharing = false;  // Runtime.allow_gpu_sharing
  bool cuda_graphs = false;        // Runtime.cuda_graphs (with it, static_shapes is on)

  // Whether the loss or the metrics need force labels.
  bool needs_forces() const;
};

// Reads and checks the training settings of a resolved config. ConfigError names the key.
TrainSettings train_settings(const Config& config);

}  // namespace ddgnn
