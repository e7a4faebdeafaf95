// Where a rank trains: Runtime.device resolved against the build (CUDA or not), the GPUs the rank
// sees and the node-local rank its launcher gave it (Slurm, Open MPI, LSF/jsrun, MPICH/PALS), so
// that each rank of a node takes its own GPU without a user variable. Comm.grad_sync auto is
// resolved here too (NCCL when every rank has a GPU of its own, else MPI).
#pragma once

#include <mpi.h>

#include <optional>
#include <string>
#include <vector>

#include "config/train_settings.h"

namespace ddgnn {

// The node-local rank set by the launcher: SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK,
// JSM_NAMESPACE_LOCAL_RANK, MPI_LOCALRANKID, PALS_LOCAL_RANKID (first found), or none.
std::optional<int> launcher_local_rank();

// The device a rank asks for. `cuda_built`: this binary trains on CUDA; `gpus`: the GPUs the rank
// sees (after CUDA_VISIBLE_DEVICES); `local_rank`: its node-local rank. index -1 = cpu.
// ConfigError (one line and a hint): cuda in a CPU build, cuda without a visible GPU, cuda:N with
// N >= gpus.
int choose_gpu(Device requested, int64_t index, bool cuda_built, int gpus, int local_rank);

// ids[r] = the GPU (PCI bus id) of node-local rank r, "" for a rank on the CPU. True when two
// ranks of the node share a GPU; a ConfigError then unless sharing is allowed.
bool check_gpu_sharing(const std::vector<std::string>& ids, bool allow, const std::string& host);

// The grad_sync to use: auto is nccl on GPUs of their own when NCCL is built, else mpi.
// ConfigError: nccl without the GPU path, or on GPUs shared by ranks (NCCL refuses that).
GradSync choose_grad_sync(GradSync requested, bool on_gpu, bool nccl_built, bool gpus_shared,
                          int world);

struct Placement {
  int gpu = -1;              // CUDA device index, -1 = cpu
  bool gpus_shared = false;  // some GPU of some node serves several ranks
  std::string description;   // "cpu" or "cuda:0 (NVIDIA H100 80GB HBM3, 00000000:19:00.0)"
};

// Resolves settings.device and settings.grad_sync (collective over `world`); sets the rank's
// current CUDA device.
Placement place_rank(TrainSettings& settings, MPI_Comm world);

}  // namespace ddgnn
