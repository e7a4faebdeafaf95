// The keys of how a run executes rather than what it trains (Loader, Comm, Tuner, Runtime,
// Output), part of the table of config/config_schema.cpp.
#include "config/schema_run.h"

#include <nlohmann/json.hpp>
#include <string>

#include "core/backend.h"
#include "tuner/cost_model.h"

namespace ddgnn {

void add_run_keys(std::vector<KeySpec>& s) {
  using json = nlohmann::json;
  using T = KeyType;
  auto add = [&s](KeySpec spec) { s.push_back(std::move(spec)); };
  auto key = [](std::string dotted, KeyType type, std::string description) {
    return make_key_spec(std::move(dotted), type, std::move(description));
  };
  auto section = [&key](std::string dotted, std::string description) {
    return key(std::move(dotted), T::kSection, std::move(description));
  };
  add(section("Loader", "The distributed in-memory data loader.").ddgnn_only());
  std::vector<std::string> backends = {"auto"};
  backends.insert(backends.end(), backend_names().begin(), backend_names().end());
  add(key("Loader.backend", T::kEnum,
          "how samples move between ranks (auto: replicated on one rank; on several, the tuner "
          "chooses among Tuner.candidates, or shm without the tuner); nccl needs the GPU "
          "training path, which this build lacks")
          .def("auto")
          .one_of(backends)
          .ddgnn_only());
  add(key("Loader.width", T::kInt,
          "ranks per loader group (0 = all ranks one group; HydraGNN's ddstore_width)")
          .def(0)
          .ge(0)
          .ddgnn_only());
  add(key("Loader.prefetch_depth", T::kInt, "batches fetched ahead of the step (0 = none)")
          .def(2)
          .ge(0)
          .ddgnn_only());
  add(key("Loader.compact_records", T::kBool,
          "the store holds, and the backends move, each record's arrays in their exact compact "
          "encodings (false: as float64, about twice the bytes; to measure what decoding costs)")
          .def(true)
          .ddgnn_only());
  add(key("Loader.memory_budget_gb", T::kNumber, "memory the loader may use per node, GB")
          .def(16.0)
          .gt(0)
          .ddgnn_only());
  add(key("Loader.atom_budget", T::kInt, "cap on atoms per batch (0 = off: batch_size graphs)")
          .def(0)
          .ge(0)
          .ddgnn_only());
  add(key("Loader.static_shapes", T::kBool,
          "pad every training batch into one of a few fixed shapes (graphs, atoms, edges and "
          "DimeNet's triplets) chosen from the training set at start, so that every step of a "
          "shape runs the same operators on tensors of the same sizes (what a CUDA graph "
          "replays); padding is masked out of the loss, the metrics and batch statistics, and a "
          "batch that fits no shape runs as it is")
          .def(false)
          .ddgnn_only());
  add(key("Loader.static_buckets", T::kInt,
          "how many fixed shapes Loader.static_shapes chooses (more: less padding, more shapes)")
          .def(3)
          .ge(1)
          .le(16)
          .ddgnn_only());
  add(key("Loader.shuffle", T::kBool, "shuffle the training samples every epoch")
          .def(true)
          .ddgnn_only());
  add(key("Loader.drop_remainder", T::kBool, "drop the last, incomplete batch of an epoch")
          .def(false)
          .ddgnn_only());

  add(section("Comm", "Gradient synchronisation and collective safety.").ddgnn_only());
  add(key("Comm.grad_sync", T::kEnum,
          "all-reduce of the gradients (auto: mpi; nccl needs the GPU training path, which this "
          "build lacks)")
          .def("auto")
          .one_of({"auto", "mpi", "nccl"})
          .ddgnn_only());
  add(key("Comm.bucket_mb", T::kNumber, "gradient bucket size, MB").def(25.0).gt(0).ddgnn_only());
  add(key("Comm.check_parameters_every", T::kInt,
          "check that all ranks hold the same weights every N steps (0 = off)")
          .def(0)
          .ge(0)
          .ddgnn_only());
  add(key("Comm.timeout_s", T::kNumber,
          "a rank that waits this long in a collective or a fetch without progress stops every "
          "rank, naming the operation and the ranks that do not answer, s")
          .def(600.0)
          .gt(0)
          .ddgnn_only());

  add(section("Tuner", "Online choice of the loader backend from measured fetch times.")
          .ddgnn_only());
  add(key("Tuner.enabled", T::kBool,
          "with Loader.backend auto on several ranks: time the candidate backends on real "
          "batches, choose, and re-check while training (false: shm)")
          .def(true)
          .ddgnn_only());
  add(key("Tuner.candidates", T::kEnumArray,
          "backends the tuner may choose ([] = shm, rma, collective and file)")
          .def(json::array())
          .one_of(to_strings({Backend::kRma, Backend::kCollective, Backend::kShm, Backend::kFile}))
          .ddgnn_only());
  add(key("Tuner.explore_batches", T::kInt,
          "steps of an exploration; in each, every candidate fetches the step's batch")
          .def(5)
          .ge(1)
          .ddgnn_only());
  add(key("Tuner.drift_threshold", T::kNumber,
          "re-explore when the measured fetch time drifts this fraction from the prediction")
          .def(0.25)
          .gt(0)
          .ddgnn_only());
  add(key("Tuner.check_every_steps", T::kInt, "steps between drift checks")
          .def(50)
          .ge(1)
          .ddgnn_only());
  add(key("Tuner.recheck_every_epochs", T::kInt, "re-explore every N epochs (0 = only on drift)")
          .def(10)
          .ge(0)
          .ddgnn_only());
  add(key("Tuner.models", T::kString,
          "cost models written by `ddgnn tune --out` (prune and predict; empty = none)")
          .def("")
          .ddgnn_only());
  add(key("Tuner.models_fit", T::kEnum, "which fit of Tuner.models to use")
          .def("tpe")
          .one_of(fit_method_names())
          .ddgnn_only());

  add(section("Runtime", "Device and threads.").ddgnn_only());
  add(key("Runtime.device", T::kString,
          "where the model runs: auto (a GPU build with a GPU: cuda, else cpu), cpu, cuda (the "
          "GPU of the rank's node-local rank, from the launcher), cuda:N")
          .def("auto")
          .ddgnn_only());
  add(key("Runtime.allow_gpu_sharing", T::kBool,
          "let several ranks of a node share a GPU (more ranks per node than GPUs)")
          .def(false)
          .ddgnn_only());
  add(key("Runtime.cuda_graphs", T::kBool,
          "on a GPU, replay each fixed batch shape's training step as CUDA graphs (captured after "
          "a few eager steps of the shape: forward, forces, loss and backward in one, clipping, "
          "Adam or AdamW and the weight average in another; gradients summed over the ranks "
          "between them); turns Loader.static_shapes on; needs Adam or AdamW")
          .def(false)
          .ddgnn_only());
  add(key("Runtime.intra_op_threads", T::kInt,
          "threads per rank (0 = auto: 1 per rank when ranks >= cores)")
          .def(0)
          .ge(0)
          .ddgnn_only());
  add(key("Runtime.deterministic", T::kBool, "deterministic kernels (slower)")
          .def(false)
          .ddgnn_only());

  add(section("Output", "Run directory, logs, trace, checkpoints.").ddgnn_only());
  add(key("Output.run_dir", T::kString, "directory of the run's outputs")
          .def("runs/ddgnn")
          .ddgnn_only());
  add(key("Output.log_level", T::kEnum, "logger threshold")
          .def("info")
          .one_of({"trace", "debug", "info", "warn", "error"})
          .ddgnn_only());
  add(key("Output.log_all_ranks", T::kBool, "every rank logs (lines prefixed with the rank)")
          .def(false)
          .ddgnn_only());
  add(key("Output.trace_steps", T::kInt, "steps recorded in trace.json (0 = no trace)")
          .def(50)
          .ge(0)
          .ddgnn_only());
  add(key("Output.read_every_steps", T::kInt,
          "steps between the host's reads of the training loss (progress, the non-finite loss "
          "check, debug lines); each read waits for the GPU (0 = every step on the CPU, every "
          "25 on a GPU)")
          .def(0)
          .ge(0)
          .ddgnn_only());
  add(key("Output.checkpoint_every_epochs", T::kInt, "epochs between checkpoints")
          .def(1)
          .ge(1)
          .ddgnn_only());
  add(key("Output.checkpoint_every_steps", T::kInt,
          "optimizer steps between checkpoints inside epochs, each resuming at its step "
          "(epoch_NNNNN_step_SSSSSSS.pt; 0 = only at the ends of epochs)")
          .def(0)
          .ge(0)
          .ddgnn_only());
  add(key("Output.keep_checkpoints", T::kInt, "most recent checkpoints kept (epoch and step)")
          .def(2)
          .ge(1)
          .ddgnn_only());
  add(key("Output.print_test_every_epoch", T::kBool,
          "the epoch line shows the test split's errors too (metrics.csv always has them); off, "
          "so that choices are made on the validation split and the test split is read at the "
          "end (the best epoch's line)")
          .def(false)
          .ddgnn_only());
  add(key("Output.progress", T::kEnum, "progress display (auto: bar on a terminal, else lines)")
          .def("auto")
          .one_of({"auto", "bar", "lines"})
          .ddgnn_only());
  add(key("Output.energy_meter", T::kEnum,
          "energy from the machine's counters into metrics.csv (energy_j per epoch): auto (HPE "
          "Cray pm_counters where there are some, else RAPL for CPUs and memory, NVML and ROCm "
          "SMI for GPUs), none, or one of cray, rapl, nvml, rocm; read by each node's first "
          "rank and summed over the job; counters that cannot be read are one notice at start, "
          "never an error")
          .def("auto")
          .one_of({"auto", "none", "cray", "rapl", "nvml", "rocm"})
          .ddgnn_only());
}

}  // namespace ddgnn
