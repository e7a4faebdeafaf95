// Everything `ddgnn train` needs from a resolved run config, read once and checked: the model
// (GnnSpec), what each head learns (HeadTarget), loss, optimizer, schedule, checkpoints, outputs.
// The mapping of HydraGNN's keys is documented in DESIGN.md ("Training").
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

#include "app/config.h"
#include "model/gnn.h"
#include "model/optim.h"
#include "model/radius_graph.h"

namespace ddgnn {

class Dataset;

// What a head is trained on.
enum class TargetSource {
  kEnergy,  // total energy (graph head of dim 1, or per-atom node head summed with
            // enable_interatomic_potential)
  kForces,  // forces, a node head of dim 3 (direct forces)
  kColumn,  // an extra per-atom column of the dataset, by name
};

struct HeadTarget {
  std::string name;  // output_names[k]
  HeadSpec::Kind kind = HeadSpec::kGraph;
  int64_t dim = 1;
  TargetSource source = TargetSource::kEnergy;
  int column = -1;      // kColumn: index into Dataset::extra_columns()
  double weight = 1.0;  // task_weights[k]
};

// Dataset.path: one file split by perc_train and seed, or three files.
struct DatasetPaths {
  std::string single;
  std::string train, validate, test;
  bool explicit_split() const { return single.empty(); }
};

struct TrainSettings {
  GnnSpec gnn;
  c10::ScalarType dtype = c10::kFloat;
  std::vector<HeadTarget> targets;  // one per gnn.heads entry, same order
  int energy_head = -1;             // index of the kEnergy head, -1 when none
  bool conservative = false;  // forces = -dE/dx (interatomic potential or compute_grad_energy)
  EnergyForceWeights weights;
  LossSpec loss;
  RadiusGraphOptions graph;
  bool periodic = false;  // Architecture.periodic_boundary_conditions

  DatasetPaths data;
  std::string dataset_name;
  int64_t num_epoch = 1, batch_size = 1, eval_batch_size = 1;
  double perc_train = 0.7;
  uint64_t seed = 0;

  std::string optimizer = "AdamW";
  double learning_rate = 1e-3, weight_decay = 0.0, grad_clip = 0.0;
  double ema_decay = 0.0;          // exponential moving average of the weights (0 = off)
  bool scheduler = true;           // ReduceLROnPlateau
  double exponential_gamma = 0.0;  // ExponentialLR: lr × gamma after every epoch (0 = off)
  bool time_exponential = false;   // TimeExponential: learning_rate → min_lr over time_limit_s
  PlateauOptions plateau;
  bool early_stopping = false;
  int patience = 10;
  double time_limit_s = 0.0;

  bool checkpoint = true;
  int64_t checkpoint_warmup = 0, checkpoint_every = 1, keep_checkpoints = 2;
  bool resume = false;
  std::string startfrom = "existing_model";

  std::string run_dir = "runs/ddgnn";
  int64_t trace_steps = 50;
  int verbosity = 2;

  bool shuffle = true, drop_remainder = false;
  int64_t atom_budget = 0, prefetch_depth = 2;
  std::string backend = "auto";    // Loader.backend (app/train_data.h resolves "auto")
  int64_t width = 0;               // Loader.width: ranks per replica group (0 = all)
  double memory_budget_gb = 16.0;  // Loader.memory_budget_gb, per node
  struct Tuner {                   // the online backend switcher (Loader.backend "auto")
    bool enabled = true;
    std::vector<std::string> candidates;  // empty: all the store allows
    int64_t explore_batches = 5, check_every = 50, recheck_every_epochs = 10;
    double drift = 0.25;
    std::string models;  // cost models from `ddgnn tune --out` (empty: none)
    std::string method = "tpe";
  } tuner;
  double bucket_mb = 25.0;         // Comm.bucket_mb
  std::string grad_sync = "auto";  // Comm.grad_sync
  int64_t check_parameters_every = 0;
  int64_t threads = 0;
  bool deterministic = false;
  std::string device = "auto";

  // Whether the loss or the metrics need force labels.
  bool needs_forces() const;
};

// Reads and checks the training settings of a resolved config. ConfigError names the key.
TrainSettings train_settings(const Config& config);

// Resolves every head against what `dataset` holds (energy, forces, extra columns), fills
// HeadTarget::source/column, and checks that the data has what the loss needs: a ConfigError
// naming the head, the file and what it does have otherwise.
void bind_targets(TrainSettings& settings, const Dataset& dataset);

}  // namespace ddgnn
