// Fetch throughput of the loader backends on real MPI ranks (the grid of comm/bench_loader.h;
// `ddgnn bench-loader` runs the same).
// usage: mpiexec -n P bench_loader [out.csv] [width=0] [MiB per rank=64]
// The CSV (appended; header when new) is what `ddgnn tune` fits the backends' cost models to.
#include <cstdio>
#include <cstdlib>

#include "comm/bench_loader.h"
#include "comm/mpi.h"

int main(int argc, char** argv) {
  if (argc > 1 && argv[1][0] == '-') {  // an option, not a CSV path: say how to call it
    std::fprintf(stderr,
                 "usage: mpiexec -n P bench_loader [out.csv] [width=0] [MiB per rank=64]\n"
                 "(options: ddgnn bench-loader --help)\n");
    return 2;
  }
  ddgnn::MpiEnvironment env(&argc, &argv);
  ddgnn::LoaderBenchOptions o;
  if (argc > 1) o.csv = argv[1];
  if (argc > 2) o.width = std::atoi(argv[2]);
  if (argc > 3) o.mib_per_rank = std::atoll(argv[3]);
  ddgnn::run_loader_bench(o);
  return 0;
}
