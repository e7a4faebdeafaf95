// The loader backends, by name: how a rank gets the samples of its batch (DESIGN.md, "The data
// path"). One spelling for the config (Loader.backend, Tuner.candidates), bench-loader's CSV, the
// cost models and the logs.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ddgnn {

enum class Backend {
  kRma,         // MPI one-sided gets from the owners' windows
  kCollective,  // MPI_Alltoallv exchange, every rank of the group together
  kShm,         // node shared memory by pointer; other nodes through rma
  kReplicated,  // a full copy on every rank (the local store)
  kFile,        // every batch read from the HDF5 file
  kNccl,        // GPU-resident partitions (not in this build)
};

// Names in the enum's order: rma, collective, shm, replicated, file, nccl.
const std::vector<std::string>& backend_names();
std::string to_string(Backend b);
// The backend of that name, or none.
std::optional<Backend> find_backend(const std::string& name);
// `what` names the setting in the message: "<what>: unknown backend 'x'" (ConfigError, the hint
// lists the names).
Backend parse_backend(const std::string& name, const std::string& what = "backend");
// Several names (a config list), in their order.
std::vector<Backend> parse_backends(const std::vector<std::string>& names,
                                    const std::string& what = "backend");
std::vector<std::string> to_strings(const std::vector<Backend>& backends);

}  // namespace ddgnn
