// Checkpoints of `ddgnn train`: one torch::serialize archive holding the model's parameters and
// buffers, the optimizer state and a JSON record (format, model spec, dtype, target
// normalisation, epoch, scheduler / early-stopping state, RNG state, data split). Written
// atomically (temporary file, fsync, rename). Loading checks the format, then every parameter's
// name, dtype and shape against the model before copying anything: LibTorch alone would load a
// float64 archive into a float32 module as garbage, silently. Also the run's checkpoint files
// (epoch_NNNNN.pt, rotation, Training.startfrom) and the CPU generator's state that resuming
// restores.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/files.h"
#include "model/gnn.h"
#include "model/optim.h"

namespace torch::optim {
class Optimizer;
}

namespace ddgnn {

class SpikeGuard;

constexpr const char* kCheckpointFormat = "ddgnn-checkpoint";
constexpr int kCheckpointVersion = 2;

// Writes `gnn` (and `optimizer` when not null) with `record` (format and version are added) to
// `path` atomically. With a weight average (Training.ema_decay) `gnn` holds the average, the
// model that evaluation uses, and `train_weights` the parameters being trained (in
// gnn.parameters() order), which resuming needs.
void save_checkpoint(const std::string& path, const Gnn& gnn,
                     const torch::optim::Optimizer* optimizer, nlohmann::json record,
                     const std::vector<at::Tensor>* train_weights = nullptr);

// The JSON record of a checkpoint. DataError when the file is missing, not a ddgnn checkpoint, or
// of another format version.
nlohmann::json read_checkpoint_record(const std::string& path);

// Copies the checkpoint's parameters and buffers into `gnn`. DataError naming the file and the
// first mismatch (missing or extra parameter, other dtype, other shape) before anything changes.
void load_checkpoint_model(const std::string& path, Gnn& gnn);

// The trained parameters a checkpoint with a weight average holds (see save_checkpoint), copied
// into `params`; false (nothing changed) when it has none. DataError on a count, shape or dtype
// mismatch.
bool load_checkpoint_train_weights(const std::string& path, const std::vector<at::Tensor>& params);

// Restores the optimizer's state (DataError if the checkpoint has none or of another type).
void load_checkpoint_optimizer(const std::string& path, torch::optim::Optimizer& optimizer);

// What a training run carries across epochs, in every checkpoint's record, restored on resume.
struct RunState {
  int64_t epoch = 0;        // the last finished epoch
  int64_t epoch_steps = 0;  // steps of epoch + 1 done (a checkpoint inside an epoch)
  int64_t step = 0;         // optimizer steps so far
  double best_validate_loss = INFINITY;
  int64_t best_epoch = 0;
  double lowest_train_loss = INFINITY;  // of an epoch, for Training.divergence_factor
  int64_t lowest_train_epoch = 0;
  nlohmann::json best_row;  // the metrics row of the best epoch
  nlohmann::json last_row;  // the metrics row of `epoch` (written again on resume if it was lost)
  double elapsed_s = 0.0;   // training seconds so far
};

// The trained objects that a run checkpoint holds; the pointers other than gnn and params may be
// null (no weight average, scheduler or early stopping).
struct TrainedObjects {
  Gnn* gnn = nullptr;
  const std::vector<at::Tensor>* params = nullptr;  // gnn's parameters, trained
  torch::optim::Optimizer* optimizer = nullptr;
  WeightAverage* average = nullptr;
  ReduceLROnPlateau* plateau = nullptr;
  EarlyStopping* early = nullptr;
  SpikeGuard* guard = nullptr;  // Training.spike_factor: its history
};

// A run checkpoint: `record` (what the run is: model, config, split) with the state, the
// scheduler and early stopping, the weight average's count and the CPU generator's state; the
// model (the weight average when there is one, the trained weights beside it) and, when
// `with_optimizer`, the optimizer.
void save_run_checkpoint(const std::string& path, const TrainedObjects& objects,
                         const RunState& state, nlohmann::json record, bool with_optimizer);
// Restores all of that from a run checkpoint whose record was read, and returns the state.
RunState restore_run_checkpoint(const std::string& path, const nlohmann::json& record,
                                const TrainedObjects& objects);

// The run's rolling checkpoints of a checkpoints folder, oldest first: those of whole epochs
// (epoch_NNNNN.pt) and those inside an epoch (epoch_NNNNN_step_SSSSSSS.pt: S steps of epoch N
// done, after epoch_<N-1>.pt and before epoch_NNNNN.pt).
std::vector<std::string> epoch_checkpoints(const std::string& dir);
// "epoch_00012.pt" (epoch 12 done); with steps > 0, "epoch_00013_step_0000345.pt" for 345 steps of
// epoch 13 (`epoch` the epoch in progress).
std::string checkpoint_name(int64_t epoch, int64_t steps = 0);
// The error that ends a run a signal stopped (`by`: "SIGTERM", ...) after `steps_done` steps of
// `epoch`, its weights in <checkpoint_dir>/interrupted.pt: where they and the latest rolling
// checkpoint are, and how to resume from either. Every rank throws it; rank 0 reports it for the
// job.
Error interrupted_error(const std::string& by, int64_t epoch, int64_t steps_done,
                        const std::string& checkpoint_dir);
// A resumed run must read the data and split its checkpoint (`path`) was trained on: `then` and
// `now` are split records ({"perc_train", "seed", "single", "train", "validate", "test",
// "n_graphs", "split_by", "split_block", "train_fraction"}; files compared as files, keys the
// older record lacks skipped). A difference is a ConfigError naming each (a changed split would
// test on graphs the model trained on).
void check_same_split(const nlohmann::json& then, const nlohmann::json& now,
                      const std::string& path);
// Removes the oldest epoch checkpoints of `dir` until `keep` are left.
void keep_latest_checkpoints(const std::string& dir, int64_t keep);
// Makes <run_dir>/checkpoints. A run directory that holds a run is a ConfigError unless the run
// resumes it, or `overwrite` (then its checkpoints, metrics.csv, events.jsonl and trace.json go);
// so is an empty run_dir, the file system's root, and one where this process cannot write.
// Removes the temporaries of killed writers (files "*.tmp.<pid>" of no running process).
// Returns the run directory's lock, held for the run: another run there is refused at once,
// naming it; so is a symbolic link in place of a file the run writes.
std::unique_ptr<FolderLock> prepare_run_dir(const std::string& run_dir, bool resume,
                                            bool overwrite);
// The checkpoint Training.startfrom names: "existing_model" (or empty) = the latest of
// <run_dir>/checkpoints; else a path as given, or a name in <run_dir>/checkpoints (".pt"
// optional). ConfigError when there is none.
std::string resolve_startfrom(const std::string& run_dir, const std::string& startfrom);

// The default CPU generator's state as JSON (bytes), and back: a resumed run draws the same
// numbers (dropout) as an uninterrupted one.
nlohmann::json generator_state();
void set_generator_state(const nlohmann::json& state);

}  // namespace ddgnn
