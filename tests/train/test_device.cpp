// Runtime.device and Comm.grad_sync: the device each rank takes (the launcher's node-local rank,
// cuda:N), ranks sharing a GPU, the gradient sum chosen for the device, and the one-line errors
// of a device the build or the machine does not have, end to end through `ddgnn train`.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "../common/lj_dataset.h"
#include "../common/temp_dir.h"
#include "../common/train_run.h"
#include "core/error.h"
#include "train/device.h"

namespace ddgnn {
namespace {

using testing::TempDir;

template <class F>
std::string config_error(F f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return std::string(e.what()) + " | hint: " + e.hint();
  }
  return "no error";
}

TEST(Device, CpuAndAutoWithoutGpuStayOnTheCpu) {
  EXPECT_EQ(choose_gpu(Device::kCpu, -1, true, 4, 0), -1);
  EXPECT_EQ(choose_gpu(Device::kAuto, -1, false, 0, 0), -1);
  EXPECT_EQ(choose_gpu(Device::kAuto, -1, true, 0, 0), -1);
  EXPECT_EQ(choose_gpu(Device::kAuto, -1, true, 4, 3), 3);
}

TEST(Device, EachRankTakesTheGpuOfItsNodeLocalRank) {
  EXPECT_EQ(choose_gpu(Device::kCuda, -1, true, 4, 0), 0);
  EXPECT_EQ(choose_gpu(Device::kCuda, -1, true, 4, 2), 2);
  // A launcher that binds one GPU per rank: each rank sees one, index 0.
  EXPECT_EQ(choose_gpu(Device::kCuda, -1, true, 1, 3), 0);
  EXPECT_EQ(choose_gpu(Device::kCuda, 1, true, 2, 0), 1);
}

TEST(Device, CudaThatTheBuildOrTheMachineLacksIsAOneLineErrorWithAHint) {
  const std::string cpu_build = config_error([] { choose_gpu(Device::kCuda, -1, false, 0, 0); });
  EXPECT_NE(cpu_build.find("built without CUDA"), std::string::npos) << cpu_build;
  EXPECT_NE(cpu_build.find("jobs/build.sh --gpu"), std::string::npos) << cpu_build;
  const std::string none = config_error([] { choose_gpu(Device::kCuda, -1, true, 0, 0); });
  EXPECT_NE(none.find("sees no GPU"), std::string::npos) << none;
  const std::string seven = config_error([] { choose_gpu(Device::kCuda, 7, true, 1, 0); });
  EXPECT_NE(seven.find("\"cuda:7\", but this rank sees 1 GPU(s) (cuda:0 to cuda:0)"),
            std::string::npos)
      << seven;
  for (const std::string& e : {cpu_build, none, seven})
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

TEST(Device, RanksSharingAGpuAreRefusedUnlessAllowed) {
  EXPECT_FALSE(check_gpu_sharing({"0000:19:00.0", "0000:3b:00.0"}, false, "node1"));
  EXPECT_FALSE(check_gpu_sharing({"", ""}, false, "node1"));  // ranks on the CPU
  const std::string shared = config_error([] {
    check_gpu_sharing({"0000:19:00.0", "0000:3b:00.0", "0000:19:00.0"}, false, "nid01");
  });
  EXPECT_NE(shared.find("2 ranks of node nid01 (node-local ranks 0 and 2) would share the GPU "
                        "0000:19:00.0"),
            std::string::npos)
      << shared;
  EXPECT_NE(shared.find("Runtime.allow_gpu_sharing"), std::string::npos) << shared;
  EXPECT_TRUE(check_gpu_sharing({"0000:19:00.0", "0000:19:00.0"}, true, "nid01"));
  EXPECT_FALSE(check_gpu_sharing({"0000:19:00.0", "0000:3b:00.0"}, true, "nid01"));
}

TEST(Device, GradSyncAutoIsNcclOnGpusOfTheirOwnElseMpi) {
  EXPECT_EQ(choose_grad_sync(GradSync::kAuto, false, true, false, 4), GradSync::kMpi);
  EXPECT_EQ(choose_grad_sync(GradSync::kAuto, true, true, false, 4), GradSync::kNccl);
  EXPECT_EQ(choose_grad_sync(GradSync::kAuto, true, true, true, 4), GradSync::kMpi);
  EXPECT_EQ(choose_grad_sync(GradSync::kAuto, true, false, false, 4), GradSync::kMpi);
  EXPECT_EQ(choose_grad_sync(GradSync::kAuto, true, true, false, 1), GradSync::kMpi);
  EXPECT_EQ(choose_grad_sync(GradSync::kMpi, true, true, false, 4), GradSync::kMpi);
  const std::string unbuilt =
      config_error([] { choose_grad_sync(GradSync::kNccl, true, false, false, 2); });
  EXPECT_NE(unbuilt.find("built without NCCL"), std::string::npos) << unbuilt;
  const std::string cpu =
      config_error([] { choose_grad_sync(GradSync::kNccl, false, true, false, 2); });
  EXPECT_NE(cpu.find("needs the model on a GPU"), std::string::npos) << cpu;
  const std::string shared =
      config_error([] { choose_grad_sync(GradSync::kNccl, true, true, true, 2); });
  EXPECT_NE(shared.find("sharing a GPU"), std::string::npos) << shared;
}

TEST(Device, LauncherLocalRankComesFromTheLaunchersVariable) {
  const char* names[] = {"SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "JSM_NAMESPACE_LOCAL_RANK",
                         "MPI_LOCALRANKID", "PALS_LOCAL_RANKID"};
  std::vector<std::string> saved;
  for (const char* n : names) {
    saved.push_back(std::getenv(n) ? std::getenv(n) : "\x01");
    unsetenv(n);
  }
  EXPECT_FALSE(launcher_local_rank().has_value());
  setenv("JSM_NAMESPACE_LOCAL_RANK", "5", 1);
  EXPECT_EQ(launcher_local_rank().value_or(-1), 5);
  setenv("SLURM_LOCALID", "2", 1);  // Slurm's wins (srun inside an allocation)
  EXPECT_EQ(launcher_local_rank().value_or(-1), 2);
  setenv("SLURM_LOCALID", "x", 1);  // not a number: the next launcher's
  EXPECT_EQ(launcher_local_rank().value_or(-1), 5);
  for (size_t k = 0; k < saved.size(); ++k)
    if (saved[k] == "\x01")
      unsetenv(names[k]);
    else
      setenv(names[k], saved[k].c_str(), 1);
}

TEST(Device, TrainRefusesADeviceItCannotUseInOneLine) {
  TempDir dir;
  testing::LjOptions lj;
  lj.n_frames = 12;
  testing::write_lj_dataset(dir.file("lj.h5"), lj);
  const std::string cfg = testing::write_config(
      dir, "c.json", testing::small_config(dir.file("lj.h5"), dir.file("run")));
  auto expect_error = [&](const std::string& set, const std::string& needle) {
    const testing::Result r = testing::run("train -c " + cfg + " --set " + set);
    EXPECT_NE(r.code, 0) << r.out;
    EXPECT_NE(r.out.find(needle), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("hint:"), std::string::npos) << r.out;
  };
  expect_error("Runtime.device=gpu", "Runtime.device: \"gpu\" is not a device");
  expect_error("Runtime.device=cuda:x", "Runtime.device: \"cuda:x\" is not a device");
#ifdef DDGNN_TORCH_CUDA
  expect_error("Runtime.device=cuda:99", "\"cuda:99\", but this rank sees");
#else
  expect_error("Runtime.device=cuda",
               "Runtime.device: \"cuda\", but this ddgnn was built without CUDA");
  expect_error("Comm.grad_sync=nccl", "Comm.grad_sync: \"nccl\"");
#endif
}

}  // namespace
}  // namespace ddgnn
