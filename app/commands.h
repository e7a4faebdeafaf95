// The `ddgnn` subcommands. Each adds itself to the CLI11 app and returns what to run when the
// user chose it; `main` parses, runs the chosen one, and turns any ddgnn::Error into one line.
#pragma once

#include <functional>

namespace CLI {
class App;
}

namespace ddgnn {

struct Command {
  CLI::App* sub = nullptr;
  std::function<int()> run;  // returns the process exit code
};

Command add_convert_command(CLI::App& app);       // ddgnn convert in.extxyz... out.h5
Command add_info_command(CLI::App& app);          // ddgnn info data.h5
Command add_config_command(CLI::App& app);        // ddgnn config --config c.json [--set k=v]...
Command add_bench_loader_command(CLI::App& app);  // mpiexec -n P ddgnn bench-loader
Command add_tune_command(CLI::App& app);          // ddgnn tune --measurements grid.csv
Command add_simulate_command(CLI::App& app);      // ddgnn simulate --models m.json --platform X
#ifdef DDGNN_WITH_TORCH
Command add_train_command(CLI::App& app);     // ddgnn train --config c.json [--set k=v]...
Command add_evaluate_command(CLI::App& app);  // ddgnn evaluate --run DIR | --checkpoint FILE
Command add_driver_command(CLI::App& app);    // ddgnn driver --run DIR --structure s.xyz --unix N
#endif

}  // namespace ddgnn
