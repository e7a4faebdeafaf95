// `ddgnn driver` (train/driver.h): the i-PI client loop around one model.
#include "train/driver.h"

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/log.h"
#include "core/signals.h"
#include "core/threads.h"
#include "loader/cell.h"
#include "loader/dataset.h"
#include "loader/extxyz.h"
#include "model/precision.h"
#include "model/predict.h"
#include "train/checkpoint.h"
#include "train/device.h"
#include "train/ipi_client.h"
#include "train/model_setup.h"

namespace ddgnn {

namespace fs = std::filesystem;

namespace {

// What the model gives for one configuration, in eV, eV/Å and eV (the virial -σV).
struct Answer {
  double energy = 0.0;
  std::vector<double> forces;
  std::array<double, 9> virial{};
};

// The model and the structure it drives: species, order and periodic axes from the start file,
// positions and the cell from each call.
class DrivenModel {
 public:
  DrivenModel(ModelSetup setup, const std::string& checkpoint, Frame start, c10::Device device)
      : m_setup(std::move(setup)), m_gnn(m_setup.spec), m_start(std::move(start)) {
    m_setup.device = device;
    m_gnn.to(device);
    m_gnn.to(to_dtype(m_setup.precision));
    m_gnn.set_bf16_autocast(m_setup.precision == Precision::kBFloat16);
    load_checkpoint_model(checkpoint, m_gnn);
    m_gnn.eval();
    const auto n = m_start.n_atoms();
    m_block.first = 0;
    m_block.atom_start = {0};
    m_block.n_atoms = {int32_t(n)};
    m_block.energy = {0.0};
    m_block.stress.assign(9, std::nan(""));
    m_block.config_type = {0};
    m_block.z = m_start.z;
    m_block.pos = m_start.pos;
    m_block.pbc = {uint8_t(m_start.pbc[0]), uint8_t(m_start.pbc[1]), uint8_t(m_start.pbc[2])};
    m_block.cell.assign(m_start.cell.begin(), m_start.cell.end());
  }

  bool periodic() const { return m_start.pbc[0] || m_start.pbc[1] || m_start.pbc[2]; }
  const ModelSetup& setup() const { return m_setup; }

  // Positions [n, 3] and the cell (rows, Å; used on the structure's periodic axes).
  Answer compute(const std::vector<double>& pos, const std::array<double, 9>& cell) {
    m_block.pos = pos;
    if (periodic()) {
      const bool pbc[3] = {m_start.pbc[0], m_start.pbc[1], m_start.pbc[2]};
      if (const std::string problem = cell_problem(cell.data(), pbc); !problem.empty())
        throw DataError("the cell it sends cannot be used: " + problem,
                        "a periodic structure needs the server to send its cell (ASE: "
                        "atoms.cell and atoms.pbc set)");
      m_block.cell.assign(cell.begin(), cell.end());
    }
    const PreparedBatch b = prepare_batch(m_block, {0}, m_setup);
    const Prediction p = predict(m_gnn, m_setup.targets, b.batch, /*create_graph=*/false);
    Answer a;
    if (p.energy.defined()) a.energy = energies_ev(p.energy, b, m_setup.norm).at(0);
    a.forces = to_doubles(p.forces, m_setup.norm.scale);
    if (p.stress.defined()) {
      const std::vector<double> s = to_doubles(p.stress, m_setup.norm.scale);
      const double volume = m_block.volume(0);
      for (size_t k = 0; k < 9; ++k) a.virial[k] = -s[k] * volume;
    }
    return a;
  }

 private:
  ModelSetup m_setup;
  Gnn m_gnn;
  Frame m_start;
  GraphBlock m_block;
};

c10::Device choose_device(const std::string& name) {
  Device requested = Device::kAuto;
  if (name == "cpu")
    requested = Device::kCpu;
  else if (name == "cuda")
    requested = Device::kCuda;
  else if (name != "auto")
    throw ConfigError("driver --device: unknown '" + name + "'", "use auto, cpu or cuda");
#ifdef DDGNN_TORCH_CUDA
  const bool cuda_built = true;
#else
  const bool cuda_built = false;
#endif
  const int gpus = cuda_built ? int(torch::cuda::device_count()) : 0;
  const int gpu = choose_gpu(requested, -1, cuda_built, gpus, 0);
  return gpu < 0 ? c10::Device(c10::kCPU) : c10::Device(c10::kCUDA, c10::DeviceIndex(gpu));
}

// The start structure: its first frame (energy and forces not needed).
Frame read_structure(const std::string& path) {
  if (!fs::exists(path))
    throw ConfigError("driver --structure: " + path + " not found",
                      "give the extended XYZ file the server starts from");
  ExtxyzKeys keys;
  keys.require_energy = false;
  ExtxyzReader reader(path, keys);
  Frame f;
  reader.next(f);
  return f;
}

}  // namespace

std::string driver_checkpoint(const std::string& run_dir, const std::string& which) {
  if (which != "best" && which != "last") {
    if (!fs::is_regular_file(which))
      throw ConfigError("driver --checkpoint: " + which + " is not a file",
                        "give best, last, or a checkpoint file (*.pt)");
    return which;
  }
  if (run_dir.empty())
    throw ConfigError("driver --checkpoint " + which + " needs --run RUN_DIR",
                      "or give a checkpoint file to --checkpoint");
  const std::string dir = run_dir + "/checkpoints";
  if (which == "best" && fs::is_regular_file(dir + "/best.pt")) return dir + "/best.pt";
  const std::vector<std::string> epochs =
      fs::is_directory(dir) ? epoch_checkpoints(dir) : std::vector<std::string>{};
  if (which == "last" && !epochs.empty()) return epochs.back();
  throw ConfigError("driver: " + dir + " holds no " +
                        (which == "best" ? std::string("best.pt") : "epoch checkpoint"),
                    which == "best" ? "train with a validation split, or pass --checkpoint last"
                                    : "train first (checkpoints are written each epoch)");
}

int run_driver(const DriverOptions& o) {
  if (o.unix_name.empty() == o.inet.empty())
    throw ConfigError("ddgnn driver: give exactly one of --unix NAME and --inet HOST:PORT",
                      "e.g. --unix ddgnn for ASE's SocketIOCalculator(unixsocket='ddgnn')");
  const std::string ckpt = driver_checkpoint(o.run_dir, o.checkpoint);
  const nlohmann::json record = read_checkpoint_record(ckpt);
  ModelSetup setup = model_setup_from_json(record.at("model"));
  if (!setup.inputs.sources.empty() || !setup.spec.graph_attr_mode.empty())
    throw ConfigError("driver: " + ckpt +
                          " is a model that reads per-atom inputs or graph attributes from its "
                          "data, which an i-PI server does not send",
                      "drive a model that reads the atoms alone (species and positions)");
  if (!setup.targets.predicts_forces())
    throw ConfigError("driver: " + ckpt + " predicts no forces, which molecular dynamics needs",
                      "train with enable_interatomic_potential (conservative forces)");
  Frame start = read_structure(o.structure);
  check_elements_known(setup.spec, start.z, o.structure);
  const bool periodic = start.pbc[0] || start.pbc[1] || start.pbc[2];
  if (periodic) {
    const bool pbc[3] = {start.pbc[0], start.pbc[1], start.pbc[2]};
    if (const std::string problem = cell_problem(start.cell.data(), pbc); !problem.empty())
      throw DataError(o.structure + ": " + problem, "give the structure a usable cell");
    if (!setup.periodic)
      spdlog::warn(
          "{} is periodic, but the model was trained without "
          "Architecture.periodic_boundary_conditions: its cell is ignored (no edges "
          "across the boundary)",
          o.structure);
  }
  // The virial from the stress: the energy's derivative under strain, whenever the forces are.
  setup.targets.stress =
      setup.targets.conservative && setup.periodic && start.pbc[0] && start.pbc[1] && start.pbc[2];
  if (!setup.targets.conservative)
    spdlog::warn(
        "driver: the model predicts forces directly, not as -dE/dx: the energy is not "
        "conserved in NVE and the virial is zero");

  int64_t threads = o.threads;
  if (threads <= 0)
    threads = record.at("config").value("/Runtime/intra_op_threads"_json_pointer, int64_t(0));
  threads = threads <= 0 ? 1 : cap_threads(threads, cores_available(), "--threads");
  const std::string blas = set_up_cpu_compute(int(threads));
  if (!blas.empty()) spdlog::info("{}", blas);
  const c10::Device device = choose_device(o.device);
  const size_t n_atoms = start.n_atoms();
  const bool start_periodic = periodic;
  DrivenModel model(std::move(setup), ckpt, std::move(start), device);

  install_stop_handlers();
  int64_t calls = 0;
  double model_s = 0.0;
  try {
    IpiClient client(o.unix_name, o.inet, o.connect_timeout_s);
    spdlog::info("driver: {} ({} atoms{}) on {} with {} thread(s), model {}; connected to {}",
                 o.structure, n_atoms, start_periodic ? ", periodic" : "", device.str(), threads,
                 ckpt, client.address());
    bool initialised = false, have_data = false;
    Answer answer;
    for (;;) {
      const std::string header = client.read_header();
      if (header.empty() || header == "EXIT") break;  // ASE closes; i-PI sends EXIT
      if (header == "STATUS") {
        client.send_header(!initialised ? "NEEDINIT" : have_data ? "HAVEDATA" : "READY");
      } else if (header == "INIT") {
        client.read_int("INIT");  // the bead index
        const int32_t bytes = client.read_int("INIT");
        if (bytes < 0 || bytes > (1 << 24))
          throw Error("the i-PI server at " + client.address() + " sends an INIT string of " +
                          std::to_string(bytes) + " bytes",
                      "is the server an i-PI server?");
        client.skip(size_t(bytes), "INIT");
        initialised = true;
      } else if (header == "POSDATA") {
        IpiPositions p = client.read_positions(int64_t(n_atoms));
        for (double& x : p.positions) x *= kBohrInAngstrom;
        for (double& x : p.cell) x *= kBohrInAngstrom;
        for (double x : p.positions)
          if (!std::isfinite(x))
            throw Error("call " + std::to_string(calls + 1) +
                            ": the server sends a position that "
                            "is not a number",
                        "the simulation blew up before this call; see the server's output");
        const auto t0 = std::chrono::steady_clock::now();
        try {
          answer = model.compute(p.positions, p.cell);
        } catch (const DataError& e) {
          throw DataError(
              "call " + std::to_string(calls + 1) + " (the server's structure): " + e.what(),
              e.hint());
        }
        model_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        ++calls;
        initialised = have_data = true;
      } else if (header == "GETFORCE") {
        if (!have_data)
          throw Error("the i-PI server at " + client.address() +
                          " asks for forces (GETFORCE) "
                          "before it sent positions (POSDATA)",
                      "is the server an i-PI server?");
        std::vector<double> f = answer.forces;
        for (double& x : f) x *= kBohrInAngstrom / kHartreeInEv;
        std::array<double, 9> w = answer.virial;
        for (double& x : w) x /= kHartreeInEv;
        client.send_forces(answer.energy / kHartreeInEv, f, w);
        have_data = false;
      } else {
        throw Error("the i-PI server at " + client.address() + " sends '" +
                        printable_header(header) + "', a message the i-PI protocol does not know",
                    "connect to an i-PI server (i-PI, ASE's SocketIOCalculator)");
      }
    }
  } catch (const IpiStopped& s) {
    std::fprintf(stderr, "ddgnn driver: stopped by %s after %lld calls\n", signal_name(s.signal),
                 static_cast<long long>(calls));
    return 128 + s.signal;
  }
  spdlog::info("driver: {} calls, {:.3f} ms per call in the model", calls,
               calls ? 1e3 * model_s / double(calls) : 0.0);
  return 0;
}

}  // namespace ddgnn
