// Checkpoint archive: "record" (JSON string), "model" (p.<name> parameters, b.<name> buffers with
// '.' in names written as '/'), "optimizer" (model/optim.h's archive).
#include "app/checkpoint.h"

#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <filesystem>
#include <set>

#include "core/error.h"
#include "core/files.h"
#include "model/optim.h"

namespace ddgnn {

namespace {

std::string archive_key(const std::string& prefix, std::string name) {
  for (char& ch : name)
    if (ch == '.') ch = '/';
  return prefix + name;
}

std::string dtype_name(c10::ScalarType t) {
  return t == c10::kFloat ? "float32" : t == c10::kDouble ? "float64" : c10::toString(t);
}

}  // namespace

nlohmann::json spec_to_json(const GnnSpec& s) {
  nlohmann::json heads = nlohmann::json::array();
  for (const auto& h : s.heads)
    heads.push_back({{"name", h.name},
                     {"type", h.kind == HeadSpec::kNode ? "node" : "graph"},
                     {"output_dim", h.output_dim}});
  return {{"mpnn_type", s.mpnn_type},
          {"hidden_dim", s.layer.hidden_dim},
          {"radius", s.layer.radius},
          {"activation_function", s.layer.activation},
          {"num_gaussians", s.layer.num_gaussians},
          {"num_filters", s.layer.num_filters},
          {"num_radial", s.layer.num_radial},
          {"equivariance", s.layer.equivariance},
          {"pna_deg", s.layer.pna_deg},
          {"num_conv_layers", s.num_conv_layers},
          {"max_z", s.max_z},
          {"graph_pooling", s.graph_pooling},
          {"num_sharedlayers", s.num_sharedlayers},
          {"dim_sharedlayers", s.dim_sharedlayers},
          {"num_headlayers", s.num_headlayers},
          {"dim_headlayers", s.dim_headlayers},
          {"node_num_headlayers", s.node_num_headlayers},
          {"node_dim_headlayers", s.node_dim_headlayers},
          {"node_head_type", s.node_head_type},
          {"heads", heads},
          {"dropout", s.dropout},
          {"interatomic_potential", s.interatomic_potential}};
}

GnnSpec spec_from_json(const nlohmann::json& j) {
  GnnSpec s;
  try {
    s.mpnn_type = j.at("mpnn_type");
    s.layer.hidden_dim = j.at("hidden_dim");
    s.layer.radius = j.at("radius");
    s.layer.activation = j.at("activation_function");
    s.layer.num_gaussians = j.at("num_gaussians");
    s.layer.num_filters = j.at("num_filters");
    s.layer.num_radial = j.at("num_radial");
    s.layer.equivariance = j.at("equivariance");
    s.layer.pna_deg = j.at("pna_deg").get<std::vector<int64_t>>();
    s.num_conv_layers = j.at("num_conv_layers");
    s.max_z = j.at("max_z");
    s.graph_pooling = j.at("graph_pooling");
    s.num_sharedlayers = j.at("num_sharedlayers");
    s.dim_sharedlayers = j.at("dim_sharedlayers");
    s.num_headlayers = j.at("num_headlayers");
    s.dim_headlayers = j.at("dim_headlayers").get<std::vector<int64_t>>();
    s.node_num_headlayers = j.at("node_num_headlayers");
    s.node_dim_headlayers = j.at("node_dim_headlayers").get<std::vector<int64_t>>();
    s.node_head_type = j.at("node_head_type");
    for (const auto& h : j.at("heads"))
      s.heads.push_back({h.at("name"), h.at("type") == "node" ? HeadSpec::kNode : HeadSpec::kGraph,
                         h.at("output_dim")});
    s.dropout = j.at("dropout");
    s.interatomic_potential = j.at("interatomic_potential");
  } catch (const nlohmann::json::exception& e) {
    throw DataError(std::string("checkpoint model record: ") + e.what(),
                    "the checkpoint was not written by this version of ddgnn");
  }
  return s;
}

std::vector<std::string> spec_differences(const nlohmann::json& a, const nlohmann::json& b) {
  std::vector<std::string> out;
  std::set<std::string> keys;
  for (auto it = a.begin(); it != a.end(); ++it) keys.insert(it.key());
  for (auto it = b.begin(); it != b.end(); ++it) keys.insert(it.key());
  for (const auto& k : keys) {
    const nlohmann::json va = a.contains(k) ? a.at(k) : nlohmann::json();
    const nlohmann::json vb = b.contains(k) ? b.at(k) : nlohmann::json();
    if (va != vb) out.push_back(k + ": " + va.dump() + " vs " + vb.dump());
  }
  return out;
}

void save_checkpoint(const std::string& path, const Gnn& gnn,
                     const torch::optim::Optimizer* optimizer, nlohmann::json record,
                     const std::vector<at::Tensor>* train_weights) {
  record["format"] = kCheckpointFormat;
  record["format_version"] = kCheckpointVersion;
  torch::serialize::OutputArchive archive;
  archive.write("record", c10::IValue(record.dump()));
  torch::serialize::OutputArchive model;
  for (const auto& p : gnn.named_parameters(true))
    model.write(archive_key("p.", p.key()), p.value());
  for (const auto& b : gnn.named_buffers(true))
    model.write(archive_key("b.", b.key()), b.value(), /*is_buffer=*/true);
  archive.write("model", model);
  if (train_weights) {
    torch::serialize::OutputArchive train;
    for (size_t k = 0; k < train_weights->size(); ++k)
      train.write(std::to_string(k), (*train_weights)[k]);
    archive.write("train_weights", train);
  }
  if (optimizer) {
    torch::serialize::OutputArchive opt;
    save_optimizer(*optimizer, opt);
    archive.write("optimizer", opt);
  }
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  const std::string tmp = temporary_name(path);
  try {
    archive.save_to(tmp);
  } catch (const std::exception& e) {
    std::remove(tmp.c_str());
    throw Error(path + ": cannot write the checkpoint: " + e.what(),
                "check that the run directory is writable and has free space");
  }
  commit_file(tmp, path);
}

namespace {

torch::serialize::InputArchive open_archive(const std::string& path) {
  if (!std::filesystem::exists(path))
    throw DataError(path + ": no such checkpoint",
                    "check the path (checkpoints are in <run_dir>/checkpoints)");
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(path);
  } catch (const std::exception& e) {
    throw DataError(
        path + ": not a checkpoint archive (" + std::string(e.what()).substr(0, 120) + ")",
        "give a file written by ddgnn train (<run_dir>/checkpoints/*.pt)");
  }
  return archive;
}

}  // namespace

nlohmann::json read_checkpoint_record(const std::string& path) {
  torch::serialize::InputArchive archive = open_archive(path);
  c10::IValue value;
  if (!archive.try_read("record", value) || !value.isString())
    throw DataError(path + ": not a ddgnn checkpoint (no record)",
                    "give a file written by ddgnn train");
  nlohmann::json record;
  try {
    record = nlohmann::json::parse(value.toStringRef());
  } catch (const nlohmann::json::exception& e) {
    throw DataError(path + ": damaged checkpoint record: " + e.what());
  }
  if (record.value("format", "") != kCheckpointFormat)
    throw DataError(path + ": not a ddgnn checkpoint", "give a file written by ddgnn train");
  if (record.value("format_version", 0) != kCheckpointVersion)
    throw DataError(path + ": checkpoint format version " +
                        record.value("format_version", nlohmann::json(0)).dump() +
                        ", this ddgnn reads version " + std::to_string(kCheckpointVersion),
                    "use the ddgnn version that wrote it");
  return record;
}

void load_checkpoint_model(const std::string& path, Gnn& gnn) {
  torch::serialize::InputArchive archive = open_archive(path);
  torch::serialize::InputArchive model;
  if (!archive.try_read("model", model))
    throw DataError(path + ": checkpoint has no model", "give a file written by ddgnn train");
  struct Entry {
    std::string name;
    at::Tensor target, stored;
  };
  std::vector<Entry> entries;
  auto collect = [&](const std::string& prefix, const std::string& name, const at::Tensor& t,
                     bool buffer) {
    at::Tensor stored;
    if (!model.try_read(archive_key(prefix, name), stored, buffer))
      throw DataError(path + ": the checkpoint has no " + (buffer ? "buffer " : "parameter ") +
                          name + ": it was written by another model",
                      "resume with the config that wrote it, or start a new run_dir");
    if (stored.scalar_type() != t.scalar_type())
      throw DataError(path + ": " + name + " is " + dtype_name(stored.scalar_type()) +
                          " in the checkpoint but " + dtype_name(t.scalar_type()) + " in the model",
                      "set NeuralNetwork.Training.precision to \"" +
                          std::string(stored.scalar_type() == c10::kDouble ? "fp64" : "fp32") +
                          "\" to match the checkpoint");
    if (stored.sizes() != t.sizes())
      throw DataError(path + ": " + name + " has shape " + c10::str(stored.sizes()) +
                          " in the checkpoint but " + c10::str(t.sizes()) + " in the model",
                      "the checkpoint is of another model shape: resume with the config that "
                      "wrote it");
    entries.push_back({name, t, stored});
  };
  for (const auto& p : gnn.named_parameters(true)) collect("p.", p.key(), p.value(), false);
  for (const auto& b : gnn.named_buffers(true)) collect("b.", b.key(), b.value(), true);
  at::NoGradGuard no_grad;
  for (auto& e : entries) e.target.copy_(e.stored);
}

bool load_checkpoint_train_weights(const std::string& path, const std::vector<at::Tensor>& params) {
  torch::serialize::InputArchive archive = open_archive(path);
  torch::serialize::InputArchive train;
  if (!archive.try_read("train_weights", train)) return false;
  std::vector<at::Tensor> stored(params.size());
  for (size_t k = 0; k < params.size(); ++k)
    if (!train.try_read(std::to_string(k), stored[k]) || stored[k].sizes() != params[k].sizes() ||
        stored[k].scalar_type() != params[k].scalar_type())
      throw DataError(
          path + ": the trained weights (tensor " + std::to_string(k) + ") do not match the model",
          "resume with the config that wrote the checkpoint");
  at::NoGradGuard no_grad;
  for (size_t k = 0; k < params.size(); ++k) params[k].detach().copy_(stored[k]);
  return true;
}

void load_checkpoint_optimizer(const std::string& path, torch::optim::Optimizer& optimizer) {
  torch::serialize::InputArchive archive = open_archive(path);
  torch::serialize::InputArchive opt;
  if (!archive.try_read("optimizer", opt))
    throw DataError(path + ": the checkpoint has no optimizer state",
                    "resume from a checkpoint written during training (not best.pt)");
  load_optimizer(optimizer, opt, path);
}

}  // namespace ddgnn
