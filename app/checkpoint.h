// Checkpoints of `ddgnn train`: one torch::serialize archive holding the model's parameters and
// buffers, the optimizer state and a JSON record (format, model spec, dtype, target
// normalisation, epoch, scheduler / early-stopping state, RNG state, data split). Written
// atomically (temporary file, fsync, rename). Loading checks the format, then every parameter's
// name, dtype and shape against the model before copying anything: LibTorch alone would load a
// float64 archive into a float32 module as garbage, silently.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "model/gnn.h"

namespace torch::optim {
class Optimizer;
}

namespace ddgnn {

constexpr const char* kCheckpointFormat = "ddgnn-checkpoint";
constexpr int kCheckpointVersion = 1;

// GnnSpec <-> JSON (every field that decides the model's shape or behaviour).
nlohmann::json spec_to_json(const GnnSpec& spec);
GnnSpec spec_from_json(const nlohmann::json& j);

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

// Differences between two model specs as "key: a vs b" lines (empty: the same model).
std::vector<std::string> spec_differences(const nlohmann::json& a, const nlohmann::json& b);

}  // namespace ddgnn
