// Runtime.device and Comm.grad_sync resolved for this rank (train/device.h).
#include "train/device.h"

#include <c10/core/Device.h>
#include <torch/cuda.h>

#include <cstdlib>
#include <map>

#include "comm/communicator.h"
#include "comm/mpi.h"
#include "core/error.h"
#ifdef DDGNN_TORCH_CUDA
#include "train/cuda_glue.h"
#endif

namespace ddgnn {

std::optional<int> launcher_local_rank() {
  for (const char* name : {"SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK",
                           "JSM_NAMESPACE_LOCAL_RANK", "MPI_LOCALRANKID", "PALS_LOCAL_RANKID"}) {
    const char* v = std::getenv(name);
    if (!v || !*v) continue;
    char* end = nullptr;
    const long r = std::strtol(v, &end, 10);
    if (*end == '\0' && r >= 0 && r < (1 << 20)) return int(r);
  }
  return std::nullopt;
}

int choose_gpu(Device requested, int64_t index, bool cuda_built, int gpus, int local_rank) {
  if (requested == Device::kCpu || (requested == Device::kAuto && (!cuda_built || gpus == 0)))
    return -1;
  if (!cuda_built)
    throw ConfigError("Runtime.device: \"cuda\", but this ddgnn was built without CUDA",
                      "build the GPU binary with `jobs/build.sh --gpu` (a PyTorch with CUDA), or "
                      "set Runtime.device to \"cpu\"");
  if (gpus == 0)
    throw ConfigError(
        "Runtime.device: \"cuda\", but this rank sees no GPU",
        "run on a GPU node (check CUDA_VISIBLE_DEVICES and the job's GPU request), or "
        "set Runtime.device to \"cpu\"");
  if (index >= gpus)
    throw ConfigError("Runtime.device: \"cuda:" + std::to_string(index) +
                          "\", but this rank sees " + std::to_string(gpus) +
                          " GPU(s) (cuda:0 to cuda:" + std::to_string(gpus - 1) + ")",
                      "use \"cuda\" (each rank the GPU of its node-local rank) or an index below " +
                          std::to_string(gpus));
  return index >= 0 ? int(index) : local_rank % gpus;
}

bool check_gpu_sharing(const std::vector<std::string>& ids, bool allow, const std::string& host) {
  std::map<std::string, std::vector<int>> ranks_of;
  for (size_t r = 0; r < ids.size(); ++r)
    if (!ids[r].empty()) ranks_of[ids[r]].push_back(int(r));
  for (const auto& [gpu, ranks] : ranks_of) {
    if (ranks.size() < 2) continue;
    if (allow) return true;
    throw ConfigError(std::to_string(ranks.size()) + " ranks of node " + host +
                          " (node-local ranks " + std::to_string(ranks[0]) + " and " +
                          std::to_string(ranks[1]) + ") would share the GPU " + gpu,
                      "start at most one rank per GPU (e.g. srun --ntasks-per-node equal to the "
                      "GPUs per node), or set Runtime.allow_gpu_sharing to true");
  }
  return false;
}

GradSync choose_grad_sync(GradSync requested, bool on_gpu, bool nccl_built, bool gpus_shared,
                          int world) {
  if (requested == GradSync::kAuto)
    return on_gpu && nccl_built && !gpus_shared && world > 1 ? GradSync::kNccl : GradSync::kMpi;
  if (requested == GradSync::kNccl) {
    if (!nccl_built)
      throw ConfigError("Comm.grad_sync: \"nccl\", but this ddgnn was built without NCCL",
                        "build the GPU binary with `jobs/build.sh --gpu`, or set Comm.grad_sync "
                        "to \"mpi\"");
    if (!on_gpu)
      throw ConfigError("Comm.grad_sync: \"nccl\" needs the model on a GPU (Runtime.device cuda)",
                        "set Runtime.device to \"cuda\", or Comm.grad_sync to \"mpi\"");
    if (gpus_shared)
      throw ConfigError("Comm.grad_sync: \"nccl\" with ranks sharing a GPU (NCCL refuses that)",
                        "set Comm.grad_sync to \"mpi\", or start one rank per GPU");
  }
  return requested;
}

Placement place_rank(TrainSettings& s, MPI_Comm world) {
#ifdef DDGNN_TORCH_CUDA
  const bool cuda_built = true;
#else
  const bool cuda_built = false;
#endif
#if defined(DDGNN_TORCH_CUDA) && defined(DDGNN_HAVE_NCCL)
  const bool nccl_built = true;
#else
  const bool nccl_built = false;
#endif
  const int gpus = cuda_built ? int(torch::cuda::device_count()) : 0;
  // Node-local rank and the node's ranks (the launcher's numbering where it gives one).
  Communicator node = Communicator::split_node(world, comm_rank(world));
  const int local_rank = launcher_local_rank().value_or(comm_rank(node.get()));
  Placement p;
  p.gpu = choose_gpu(s.device, s.device_index, cuda_built, gpus, local_rank);
  std::string id;
#ifdef DDGNN_TORCH_CUDA
  if (p.gpu >= 0) {
    id = set_cuda_device(p.gpu);
    p.description = "cuda:" + std::to_string(p.gpu) + " (" + gpu_name(p.gpu) + ", " + id + ")";
  }
#endif
  if (p.gpu < 0) p.description = "cpu";
  // Every rank's GPU on this node, to find ranks that share one.
  const int n_local = comm_size(node.get());
  char mine[64] = {0};
  id.copy(mine, sizeof mine - 1);
  std::vector<char> all(size_t(64 * n_local));
  MPI_CHECK(MPI_Allgather(mine, 64, MPI_CHAR, all.data(), 64, MPI_CHAR, node.get()));
  std::vector<std::string> ids;
  for (int r = 0; r < n_local; ++r) ids.emplace_back(&all[size_t(64 * r)]);
  char host[MPI_MAX_PROCESSOR_NAME] = {0};
  int host_len = 0;
  MPI_CHECK(MPI_Get_processor_name(host, &host_len));
  int shared = check_gpu_sharing(ids, s.allow_gpu_sharing, host) ? 1 : 0;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &shared, 1, MPI_INT, MPI_MAX, world));
  p.gpus_shared = shared != 0;
  s.device = p.gpu >= 0 ? Device::kCuda : Device::kCpu;
  s.device_index = p.gpu;
  s.grad_sync =
      choose_grad_sync(s.grad_sync, p.gpu >= 0, nccl_built, p.gpus_shared, comm_size(world));
  return p;
}

}  // namespace ddgnn
