// TPE against random search with the same budget (tuner/tpe.h) on the standard functions of
// tests/common/opt_functions.h: over many seeds, the true value at the best point found, as
// median, mean and quartiles, for several budgets. Prints a table (a benchmark: figures only).
// usage: bench_tpe [seeds=50]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../tests/common/opt_functions.h"

int main(int argc, char** argv) {
  const int seeds = argc > 1 ? std::atoi(argv[1]) : 50;
  std::printf("%-16s %6s  %-8s %10s %10s %10s %10s   wins\n", "problem", "trials", "method",
              "median", "mean", "q25", "q75");
  for (const auto& p : ddgnn::testing::opt_problems())
    for (int trials : {30, 60, 100}) {
      std::vector<double> r[2];
      for (int s = 1; s <= seeds; ++s)
        for (int random = 0; random < 2; ++random)
          r[random].push_back(ddgnn::testing::optimise(p, trials, uint64_t(s), random != 0));
      int wins = 0;
      for (int s = 0; s < seeds; ++s) wins += r[0][size_t(s)] < r[1][size_t(s)];
      for (int random = 0; random < 2; ++random) {
        std::vector<double> v = r[random];
        double mean = 0;
        for (double x : v) mean += x / double(v.size());
        std::sort(v.begin(), v.end());
        const auto q = [&](double f) { return v[size_t(f * double(v.size() - 1))]; };
        std::printf("%-16s %6d  %-8s %10.4g %10.4g %10.4g %10.4g", p.name.c_str(), trials,
                    random ? "random" : "tpe", q(0.5), mean, q(0.25), q(0.75));
        if (!random) std::printf("   %d/%d", wins, seeds);
        std::printf("\n");
      }
    }
  return 0;
}
