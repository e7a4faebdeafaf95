// `ddgnn train --config c.json [--set KEY=VALUE]...` and `ddgnn evaluate`.
#include <CLI/CLI.hpp>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "app/commands.h"
#include "comm/mpi.h"
#include "config/config.h"
#include "core/error.h"
#include "train/driver.h"
#include "train/evaluate.h"
#include "train/trainer.h"

namespace ddgnn {

Command add_train_command(CLI::App& app) {
  struct Options {
    std::string config;
    std::vector<std::string> overrides;
    bool allow_unimplemented = false;
    bool overwrite = false;
  };
  auto options = std::make_shared<Options>();
  CLI::App* sub =
      app.add_subcommand("train", "Train a model as a run config says (outputs in Output.run_dir)");
  sub->add_option("--config,-c", options->config, "the run config (JSON)")
      ->type_name("FILE")
      ->required();
  sub->add_option("--set", options->overrides,
                  "KEY=VALUE override, repeatable (e.g. --set Training.num_epoch=5)")
      ->type_name("KEY=VALUE")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_flag("--allow-unimplemented", options->allow_unimplemented,
                "HydraGNN keys that ddgnn does not implement become warnings instead of errors");
  sub->add_flag("--overwrite", options->overwrite,
                "start afresh in an Output.run_dir that already holds a run (its checkpoints, "
                "metrics.csv, events.jsonl and trace.json are removed)");
  auto run = [options]() -> int {
    ConfigOptions co;
    co.allow_unimplemented = options->allow_unimplemented;
    TrainOptions to;
    to.overwrite = options->overwrite;
    // Every run is an MPI job (a world of one without mpiexec): errors stop all ranks. The config
    // is read under MPI, so that an error every rank meets in it is reported once, by rank 0.
    return run_under_mpi([&](const MpiEnvironment&) {
      Config config;
      std::exception_ptr failed;
      try {
        config = load_config(options->config, options->overrides, co);
      } catch (...) {
        failed = std::current_exception();
      }
      throw_if_any_failed(MPI_COMM_WORLD, failed);
      train(config, to);
    });
  };
  return {sub, run};
}

Command add_evaluate_command(CLI::App& app) {
  auto o = std::make_shared<EvaluateOptions>();
  CLI::App* sub = app.add_subcommand(
      "evaluate", "Predict with a trained model: extxyz and CSV predictions and the error table");
  sub->add_option("--checkpoint", o->checkpoint, "a checkpoint file (*.pt)")->type_name("FILE");
  sub->add_option("--run", o->run_dir,
                  "a run directory: uses its checkpoints/best.pt (else the latest)")
      ->type_name("DIR");
  sub->add_option("--data", o->data, "dataset (default: the one the run trained on)")
      ->type_name("FILE.h5");
  sub->add_option("--split", o->split, "test, validate, train, or all graphs of the file")
      ->capture_default_str();
  sub->add_option("--out", o->out, "output folder (default: <run>/eval_<split>)")->type_name("DIR");
  sub->add_option("--batch-size", o->batch_size, "graphs per batch (default: the run's)");
  sub->add_option("--threads", o->threads,
                  "intra-op threads (default: the run's Runtime.intra_op_threads; 0 there: the "
                  "cores available)")
      ->check(CLI::NonNegativeNumber);
  auto run = [o]() -> int {
    if (o->checkpoint.empty() == o->run_dir.empty())
      throw ConfigError("ddgnn evaluate: give exactly one of --checkpoint FILE and --run DIR",
                        "e.g. ddgnn evaluate --run runs/cu_eam_schnet");
    evaluate(*o);
    return 0;
  };
  return {sub, run};
}

Command add_driver_command(CLI::App& app) {
  auto o = std::make_shared<DriverOptions>();
  CLI::App* sub = app.add_subcommand(
      "driver",
      "Run molecular dynamics with a trained model: answer an i-PI server (i-PI, ASE's "
      "SocketIOCalculator) with energy, forces and virial");
  sub->add_option("--run", o->run_dir, "the run directory of the model")->type_name("DIR");
  sub->add_option("--checkpoint", o->checkpoint, "best, last, or a checkpoint file")
      ->capture_default_str();
  sub->add_option("--structure", o->structure,
                  "extended XYZ file the server starts from: the species, their order and the "
                  "periodic axes")
      ->type_name("START.extxyz")
      ->required();
  sub->add_option("--unix", o->unix_name,
                  "the Unix socket /tmp/ipi_NAME (as i-PI and ASE name it; a path if NAME holds /)")
      ->type_name("NAME");
  sub->add_option("--inet", o->inet, "an internet socket")->type_name("HOST:PORT");
  sub->add_option("--connect-timeout", o->connect_timeout_s,
                  "seconds to retry a server that is not there yet")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--threads", o->threads,
                  "intra-op threads (default: the run's Runtime.intra_op_threads; 0 there: 1)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--device", o->device, "auto, cpu or cuda")->capture_default_str();
  auto run = [o]() -> int { return run_driver(*o); };
  return {sub, run};
}

}  // namespace ddgnn
