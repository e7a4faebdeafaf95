// Checkpoint archive: "record" (JSON string), "model" (p.<name> parameters, b.<name> buffers with
// '.' in names written as '/'), "optimizer" (model/optim.h's archive); the run's checkpoint files
// and the CPU generator's state.
#include "train/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <regex>
#include <tuple>

#include "core/checksum.h"
#include "core/error.h"
#include "core/files.h"
#include "model/optim.h"
#include "model/precision.h"
#include "train/spikes.h"

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

// The bytes of an archive, serialised in memory (a failed write is then our own checked write, not
// an exception from the destructor of LibTorch's file writer, which ends in std::terminate).
std::string archive_bytes(torch::serialize::OutputArchive& archive) {
  std::string bytes;
  archive.save_to([&bytes](const void* data, size_t n) {
    bytes.append(static_cast<const char*>(data), n);
    return n;
  });
  return bytes;
}

// Writes `bytes` to `path` through a temporary (core/files.h); every write checked.
void write_bytes_atomic(const std::string& path, const std::string& bytes) {
  const std::string tmp = temporary_name(path);
  FILE* f = std::fopen(tmp.c_str(), "wb");
  bool ok = f != nullptr;
  if (ok) ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  if (ok) ok = std::fflush(f) == 0;
  const int err = errno;
  if (f && std::fclose(f) != 0) ok = false;
  if (!ok) {
    std::remove(tmp.c_str());
    throw Error(path + ": cannot write the checkpoint (" + std::strerror(err ? err : errno) + ")",
                "the disk may be full or the run directory not writable; the previous checkpoint "
                "is intact: free space, then resume with --set Training.continue=1");
  }
  commit_file(tmp, path);
}

}  // namespace

void save_checkpoint(const std::string& path, const Gnn& gnn,
                     const torch::optim::Optimizer* optimizer, nlohmann::json record,
                     const std::vector<at::Tensor>* train_weights) {
  record["format"] = kCheckpointFormat;
  record["format_version"] = kCheckpointVersion;
  // The tensors go into an inner archive whose bytes the record's CRC-32 covers; LibTorch's own
  // reader does not check the zip CRCs, so a flipped bit would otherwise load silently.
  torch::serialize::OutputArchive archive;
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
  const std::string payload = archive_bytes(archive);
  record["payload_crc32"] = crc32(payload.data(), payload.size());
  record["payload_bytes"] = payload.size();
  torch::serialize::OutputArchive outer;
  const std::string record_text = record.dump();
  outer.write("record", c10::IValue(record_text));
  // The record too (the energy scale, the reference energies, the split): an edited digit there
  // would otherwise change every prediction without a word.
  outer.write("record_crc32", c10::IValue(int64_t(crc32(record_text.data(), record_text.size()))));
  outer.write("payload", c10::IValue(payload));
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec)
    throw Error(path + ": cannot write the checkpoint: cannot create " + parent.string() + " (" +
                    ec.message() + ")",
                "choose an Output.run_dir where you may write");
  write_bytes_atomic(path, archive_bytes(outer));
}

namespace {

// Tensors are read onto `device`: the CPU, whence they are copied into the model; the optimizer's
// state straight onto its parameters' device.
std::string first_line(const std::string& text) {
  return text.substr(0, std::min<size_t>(text.find('\n'), 160));
}

torch::serialize::InputArchive open_outer(const std::string& path) {
  if (!std::filesystem::exists(path))
    throw DataError(path + ": no such checkpoint",
                    "check the path (checkpoints are in <run_dir>/checkpoints)");
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(path, c10::Device(c10::kCPU));
  } catch (const std::exception& e) {
    throw DataError(path + ": not a checkpoint archive (" + first_line(e.what()) + ")",
                    "give a file written by ddgnn train (<run_dir>/checkpoints/*.pt)");
  }
  return archive;
}

nlohmann::json read_record(torch::serialize::InputArchive& archive, const std::string& path);

// The archive of the tensors, its CRC-32 checked against the record.
torch::serialize::InputArchive open_archive(const std::string& path,
                                            c10::Device device = c10::Device(c10::kCPU)) {
  torch::serialize::InputArchive outer = open_outer(path);
  const nlohmann::json record = read_record(outer, path);
  c10::IValue payload;
  if (!outer.try_read("payload", payload) || !payload.isString())
    throw DataError(path + ": the checkpoint has no payload", "give a file written by ddgnn train");
  const std::string& bytes = payload.toStringRef();
  if (bytes.size() != record.value("payload_bytes", uint64_t(0)) ||
      crc32(bytes.data(), bytes.size()) != record.value("payload_crc32", uint64_t(0)))
    throw DataError(path + ": checksum mismatch in the checkpoint's tensors",
                    "the file is damaged; use an earlier checkpoint of the run directory "
                    "(<run_dir>/checkpoints), or train again");
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(bytes.data(), bytes.size(), device);
  } catch (const std::exception& e) {
    throw DataError(path + ": damaged checkpoint (" + first_line(e.what()) + ")",
                    "use an earlier checkpoint of the run directory, or train again");
  }
  return archive;
}

}  // namespace

nlohmann::json read_checkpoint_record(const std::string& path) {
  torch::serialize::InputArchive archive = open_outer(path);
  return read_record(archive, path);
}

namespace {

nlohmann::json read_record(torch::serialize::InputArchive& archive, const std::string& path) {
  c10::IValue value;
  if (!archive.try_read("record", value) || !value.isString())
    throw DataError(path + ": not a ddgnn checkpoint (no record)",
                    "give a file written by ddgnn train");
  c10::IValue crc;
  if (archive.try_read("record_crc32", crc)) {  // checkpoints written before it have none
    const std::string& text = value.toStringRef();
    if (!crc.isInt() || crc.toInt() != int64_t(crc32(text.data(), text.size())))
      throw DataError(path + ": checksum mismatch in the checkpoint's record",
                      "the file is damaged or was edited; use an earlier checkpoint of the run "
                      "directory (<run_dir>/checkpoints), or train again");
  }
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

}  // namespace

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
                          to_string(precision_of(stored.scalar_type())) +
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
  c10::NoGradGuard no_grad;
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
  c10::NoGradGuard no_grad;
  for (size_t k = 0; k < params.size(); ++k) params[k].detach().copy_(stored[k]);
  return true;
}

void load_checkpoint_optimizer(const std::string& path, torch::optim::Optimizer& optimizer) {
  const auto& groups = optimizer.param_groups();
  const c10::Device device = groups.empty() || groups[0].params().empty()
                                 ? c10::Device(c10::kCPU)
                                 : groups[0].params()[0].device();
  torch::serialize::InputArchive archive = open_archive(path, device);
  torch::serialize::InputArchive opt;
  if (!archive.try_read("optimizer", opt))
    throw DataError(path + ": the checkpoint has no optimizer state",
                    "resume from a checkpoint written during training (not best.pt)");
  load_optimizer(optimizer, opt, path);
}

// ---- run checkpoints ----

void save_run_checkpoint(const std::string& path, const TrainedObjects& o, const RunState& state,
                         nlohmann::json r, bool with_optimizer) {
  r["epoch"] = state.epoch;
  r["epoch_steps"] = state.epoch_steps;
  r["step"] = state.step;
  if (o.guard) r["spike_guard"] = o.guard->state();
  if (o.plateau) r["scheduler"] = o.plateau->state();
  if (o.early) r["early_stopping"] = o.early->state();
  r["best_validate_loss"] = std::isfinite(state.best_validate_loss)
                                ? nlohmann::json(state.best_validate_loss)
                                : nlohmann::json();
  r["best_epoch"] = state.best_epoch;
  r["lowest_train_loss"] = std::isfinite(state.lowest_train_loss)
                               ? nlohmann::json(state.lowest_train_loss)
                               : nlohmann::json();
  r["lowest_train_epoch"] = state.lowest_train_epoch;
  r["best_row"] = state.best_row;
  r["row"] = state.last_row;
  r["elapsed_s"] = state.elapsed_s;
  r["rng"] = generator_state();
  // With a weight average the model saved is the average (what evaluate uses), and the trained
  // weights ride along for resuming.
  if (o.average) r["ema_updates"] = o.average->updates();
  AverageSwapped average(o.average);
  save_checkpoint(path, *o.gnn, with_optimizer ? o.optimizer : nullptr, std::move(r),
                  o.average ? &o.average->shadows() : nullptr);
}

RunState restore_run_checkpoint(const std::string& path, const nlohmann::json& r,
                                const TrainedObjects& o) {
  load_checkpoint_model(path, *o.gnn);  // the average, when the run kept one
  std::vector<at::Tensor> saved_model;
  for (const auto& p : *o.params) saved_model.push_back(p.detach().clone());
  const bool averaged = load_checkpoint_train_weights(path, *o.params);
  if (o.average) o.average->load(saved_model, averaged ? r.value("ema_updates", int64_t(0)) : 0);
  load_checkpoint_optimizer(path, *o.optimizer);
  if (o.plateau && r.contains("scheduler"))
    o.plateau->load_state(r["scheduler"].get<PlateauState>());
  if (o.early && r.contains("early_stopping"))
    o.early->load_state(r["early_stopping"].get<EarlyStoppingState>());
  RunState state;
  if (!r["best_validate_loss"].is_null()) state.best_validate_loss = r["best_validate_loss"];
  state.best_epoch = r.value("best_epoch", int64_t(0));
  if (r.contains("lowest_train_loss") && !r["lowest_train_loss"].is_null())
    state.lowest_train_loss = r["lowest_train_loss"];
  state.lowest_train_epoch = r.value("lowest_train_epoch", int64_t(0));
  state.best_row = r.value("best_row", nlohmann::json());
  state.last_row = r.value("row", nlohmann::json());
  state.step = r.value("step", int64_t(0));
  state.elapsed_s = r.value("elapsed_s", 0.0);
  state.epoch = r.at("epoch").get<int64_t>();
  state.epoch_steps = r.value("epoch_steps", int64_t(0));
  if (o.guard && r.contains("spike_guard")) o.guard->load_state(r["spike_guard"]);
  set_generator_state(r.at("rng"));
  return state;
}

// ---- the run's checkpoint files ----

std::vector<std::string> epoch_checkpoints(const std::string& dir) {
  if (!std::filesystem::is_directory(dir)) return {};
  static const std::regex pattern(R"(epoch_(\d{5,})(_step_(\d{7,}))?\.pt)");
  // Ordered by (epochs done, steps of the next): epoch_00013_step_... lies inside epoch 13.
  std::vector<std::tuple<int64_t, int64_t, std::string>> found;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    std::smatch m;
    if (!std::regex_match(name, m, pattern)) continue;
    const int64_t epoch = std::stoll(m[1].str());
    if (m[3].matched)
      found.emplace_back(epoch - 1, std::stoll(m[3].str()), e.path().string());
    else
      found.emplace_back(epoch, 0, e.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(std::get<2>(f)));
  return out;
}

std::string checkpoint_name(int64_t epoch, int64_t steps) {
  char buf[64];
  if (steps > 0)
    std::snprintf(buf, sizeof buf, "epoch_%05lld_step_%07lld.pt", (long long)epoch,
                  (long long)steps);
  else
    std::snprintf(buf, sizeof buf, "epoch_%05lld.pt", (long long)epoch);
  return buf;
}

Error interrupted_error(const std::string& by, int64_t epoch, int64_t steps_done,
                        const std::string& checkpoint_dir) {
  const auto last = epoch_checkpoints(checkpoint_dir);
  Error e("stopped by " + by + " in epoch " + std::to_string(epoch) + " after " +
              std::to_string(steps_done) +
              " step(s): the weights and optimizer of that step are in " + checkpoint_dir +
              "/interrupted.pt" +
              (last.empty() ? std::string("; no earlier checkpoint was written")
                            : "; the latest checkpoint before it is " + last.back()),
          "resume at the interrupted step (the run goes on as if never stopped) with --set "
          "Training.continue=1 --set Training.startfrom=interrupted.pt, or from the latest "
          "checkpoint with --set Training.continue=1");
  e.set_reported_by(0);  // every rank stops at the same step
  return e;
}

void keep_latest_checkpoints(const std::string& dir, int64_t keep) {
  auto all = epoch_checkpoints(dir);
  while (int64_t(all.size()) > keep) {
    std::filesystem::remove(all.front());
    all.erase(all.begin());
  }
}

void check_same_split(const nlohmann::json& then, const nlohmann::json& now,
                      const std::string& path) {
  namespace fs = std::filesystem;
  std::string differences;
  for (const auto& [key, value] : now.items()) {
    if (!then.is_object() || !then.contains(key)) continue;
    const nlohmann::json& old = then.at(key);
    bool same = old == value;
    if (!same && old.is_string() && value.is_string()) {
      std::error_code ec;
      same = fs::equivalent(old.get<std::string>(), value.get<std::string>(), ec) && !ec;
    }
    if (!same && old.is_number() && value.is_number())
      same = old.get<double>() == value.get<double>();
    if (!same)
      differences += (differences.empty() ? "" : "; ") + key + " " + old.dump() +
                     " in the checkpoint, " + value.dump() + " now" +
                     (key == "content_crc32" ? " (a data file was written again since)" : "");
  }
  if (!differences.empty())
    throw ConfigError("Training.continue: this run's data or split is not the one " + path +
                          " was trained on (" + differences + ")",
                      "resume with the data and split settings it was trained on (another split "
                      "would test on graphs the model trained on), or start a new run in another "
                      "Output.run_dir");
}

std::unique_ptr<FolderLock> prepare_run_dir(const std::string& run_dir, bool resume,
                                            bool overwrite) {
  namespace fs = std::filesystem;
  const std::string hint = "set Output.run_dir to a folder of its own, e.g. runs/my_run";
  if (run_dir.empty()) throw ConfigError("Output.run_dir is empty", hint);
  std::error_code ec;
  const fs::path absolute = fs::weakly_canonical(fs::absolute(run_dir), ec);
  if (!ec && absolute == absolute.root_path())
    throw ConfigError("Output.run_dir is the root of the file system ('" + run_dir + "')", hint);
  fs::create_directories(run_dir, ec);
  if (ec)
    throw ConfigError("Output.run_dir: cannot create " + run_dir + " (" + ec.message() + ")",
                      "choose an Output.run_dir where you may write, or fix the permissions");
  // Owned by this run from here, before anything in it is removed: a second run into the same
  // folder is refused at once, naming the first (a lock the kernel releases when it ends).
  auto lock = std::make_unique<FolderLock>(run_dir, "Output.run_dir", /*wait_s=*/0);
  // Files are written by name in the run directory: a symbolic link there would send a write
  // (a truncation) to wherever it points.
  for (const char* f : {"metrics.csv", "events.jsonl", "trace.json", "config.resolved.json",
                        "tuner.csv", "checkpoints"})
    if (fs::is_symlink(run_dir + "/" + f))
      throw ConfigError("Output.run_dir: " + run_dir + "/" + f +
                            " is a symbolic link; ddgnn writes only files of its own there",
                        "remove the link, or choose another Output.run_dir");
  const std::string ckdir = run_dir + "/checkpoints";
  if (!resume && !epoch_checkpoints(ckdir).empty()) {
    if (!overwrite)
      throw ConfigError("Output.run_dir: " + run_dir + " already holds a run (" +
                            epoch_checkpoints(ckdir).back() + ")",
                        "resume it with --set Training.continue=1, choose another Output.run_dir, "
                        "or pass --overwrite to start afresh there");
    for (const auto& f : epoch_checkpoints(ckdir)) std::filesystem::remove(f);
    std::filesystem::remove(ckdir + "/best.pt");
    for (const char* f : {"metrics.csv", "events.jsonl", "trace.json"})
      std::filesystem::remove(run_dir + "/" + f);
  }
  fs::create_directories(ckdir, ec);
  if (ec)
    throw ConfigError("Output.run_dir: cannot create " + ckdir + " (" + ec.message() + ")",
                      "choose an Output.run_dir where you may write, or fix the permissions");
  // Writable now, not at the end of the first epoch.
  const std::string probe = temporary_name(ckdir + "/.write_probe");
  if (FILE* f = std::fopen(probe.c_str(), "w")) {
    std::fclose(f);
    std::remove(probe.c_str());
  } else {
    throw ConfigError(
        "Output.run_dir: cannot write in " + ckdir + " (" + std::strerror(errno) + ")",
        "choose an Output.run_dir where you may write, or fix the permissions");
  }
  const int stale = remove_stale_temporaries(run_dir) + remove_stale_temporaries(ckdir);
  if (stale > 0)
    spdlog::info("{}: removed {} temporary file(s) that interrupted writes left", run_dir, stale);
  return lock;
}

std::string resolve_startfrom(const std::string& run_dir, const std::string& startfrom) {
  const std::string dir = run_dir + "/checkpoints";
  if (startfrom.empty() || startfrom == "existing_model") {
    const auto all = epoch_checkpoints(dir);
    if (all.empty())
      throw ConfigError("Training.continue: no checkpoint to resume from in " + dir,
                        "train once without continue, or set Training.startfrom to a checkpoint "
                        "file");
    return all.back();
  }
  for (const std::string& p : {startfrom, dir + "/" + startfrom, dir + "/" + startfrom + ".pt"})
    if (std::filesystem::is_regular_file(p)) return p;
  throw ConfigError(
      "Training.startfrom: checkpoint '" + startfrom + "' not found (looked in " + dir + " too)",
      "give a checkpoint file, or \"existing_model\" for the latest of the run");
}

// ---- the CPU generator ----

nlohmann::json generator_state() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  const at::Tensor st = gen.get_state().contiguous();
  const uint8_t* p = st.data_ptr<uint8_t>();
  return std::vector<int>(p, p + st.numel());
}

void set_generator_state(const nlohmann::json& j) {
  const std::vector<int> v = j.get<std::vector<int>>();
  at::Tensor st = at::empty({int64_t(v.size())}, at::kByte);
  for (size_t i = 0; i < v.size(); ++i) st.data_ptr<uint8_t>()[i] = uint8_t(v[i]);
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(st);
}

}  // namespace ddgnn
