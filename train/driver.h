// `ddgnn driver`: a trained model as the force field of a molecular dynamics code that speaks the
// i-PI socket protocol (i-PI itself, ASE's SocketIOCalculator): the server integrates the motion
// and sends positions and the cell; the driver answers with the energy, the forces and the virial
// from the same prediction path as training and `evaluate` (model/predict.h), the radius graph
// built anew each call.
#pragma once

#include <string>

namespace ddgnn {

struct DriverOptions {
  std::string run_dir;              // a run directory; its checkpoint by `checkpoint`
  std::string checkpoint = "best";  // best | last | a checkpoint file
  std::string structure;            // extxyz: the species, order and periodicity of the atoms
  std::string unix_name;            // the socket /tmp/ipi_NAME (or a path holding '/'); or
  std::string inet;                 // HOST:PORT
  double connect_timeout_s = 60.0;  // how long to retry a server that is not there yet
  int threads = 0;                  // 0: the run's Runtime.intra_op_threads (its 0: 1)
  std::string device = "auto";      // auto | cpu | cuda
};

// Connects and answers until the server ends (EXIT, or it closes the connection): 0. A stop
// signal (SIGTERM, SIGINT) ends it between messages: 128 + the signal, after one line. Bad input
// or a broken protocol: an Error naming what, at which call.
int run_driver(const DriverOptions& options);

// The checkpoint `which` of a run directory: "best" (checkpoints/best.pt), "last" (the newest
// epoch checkpoint), or a file as given. A ConfigError naming the folder when there is none.
std::string driver_checkpoint(const std::string& run_dir, const std::string& which);

}  // namespace ddgnn
