// `ddgnn simulate --models models.json --platform perlmutter`: predicted step and epoch times of
// every loader backend and of `auto` at P = 1 ... 16,384 ranks (tuner/simulate.h), from the cost
// models of `ddgnn tune --out` plus a platform preset whose figures may be overridden; writes a
// CSV, prints the epoch times and the joules per epoch, and with --plot draws the epoch times
// (jobs/simulate_plot.py). With --global-batch B: the time-energy plan at that fixed global batch
// instead (tuner/plan.h; its figure by jobs/plan_plot.py).
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "app/commands.h"
#include "core/error.h"
#include "core/files.h"
#include "tuner/energy_fit.h"
#include "tuner/plan.h"
#include "tuner/selection.h"
#include "tuner/simulate.h"

#ifndef DDGNN_SIMULATE_PLOT_SCRIPT
#define DDGNN_SIMULATE_PLOT_SCRIPT "jobs/simulate_plot.py"
#endif
#ifndef DDGNN_PLAN_PLOT_SCRIPT
#define DDGNN_PLAN_PLOT_SCRIPT "jobs/plan_plot.py"
#endif

namespace ddgnn {

namespace {

// Platform figures given on the command line; `given` holds the options' names.
struct Overrides {
  int64_t nodes = 0, ranks_per_node = 0, cores_per_node = 0, gpus_per_node = 0;
  double latency_us = 0, bandwidth_gbs = 0, memory_gb = 0, pfs_gbs = 0, pfs_iops = 0,
         pfs_latency_us = 0, get_overhead_us = 0, peer_overhead_us = 0, node_idle_w = 0,
         node_busy_w = 0, gpu_idle_w = 0, gpu_busy_w = 0, network_w = 0;
};

void apply(const Overrides& o, const CLI::App& sub, Platform& p) {
  bool changed = false;
  auto set = [&](const char* option, auto value, auto& field) {
    if (sub.count(option) == 0) return;
    field = value;
    changed = true;
  };
  set("--nodes", o.nodes, p.nodes);
  set("--ranks-per-node", o.ranks_per_node, p.ranks_per_node);
  set("--cores-per-node", o.cores_per_node, p.cores_per_node);
  set("--latency-us", o.latency_us, p.latency_us);
  set("--bandwidth-gbs", o.bandwidth_gbs, p.injection_gbs);
  set("--memory-gb", o.memory_gb, p.memory_gb);
  set("--pfs-gbs", o.pfs_gbs, p.pfs_gbs);
  set("--pfs-iops", o.pfs_iops, p.pfs_iops);
  set("--pfs-latency-us", o.pfs_latency_us, p.pfs_latency_us);
  set("--get-overhead-us", o.get_overhead_us, p.get_overhead_us);
  set("--peer-overhead-us", o.peer_overhead_us, p.peer_overhead_us);
  set("--node-idle-w", o.node_idle_w, p.node_idle_w);
  set("--node-busy-w", o.node_busy_w, p.node_busy_w);
  set("--gpus-per-node", o.gpus_per_node, p.gpus_per_node);
  set("--gpu-idle-w", o.gpu_idle_w, p.gpu_idle_w);
  set("--gpu-busy-w", o.gpu_busy_w, p.gpu_busy_w);
  set("--network-w", o.network_w, p.network_w);
  if (changed) p.source += " Some figures overridden on the command line (see above).";
  for (const char* power :
       {"--node-idle-w", "--node-busy-w", "--gpu-idle-w", "--gpu-busy-w", "--network-w"})
    if (sub.count(power) > 0 && !p.power_estimated.empty()) {
      p.power_estimated += " (except what the command line gives)";
      break;
    }
}

void print_settings(const std::string& models, const std::string& method, const Platform& p,
                    const Workload& w) {
  std::printf("%-22s %s (%s)\n", "models", models.c_str(), method.c_str());
  std::printf("%-22s %s: %lld nodes x %lld ranks, %lld cores, %.3g us, %.4g GB/s, %.4g GB\n",
              "platform", p.name.c_str(), (long long)p.nodes, (long long)p.ranks_per_node,
              (long long)p.cores_per_node, p.latency_us, p.injection_gbs, p.memory_gb);
  std::printf("%-22s %.4g GB/s, %.3g IOPS, %.4g us a read\n", "file system", p.pfs_gbs, p.pfs_iops,
              p.pfs_latency_us);
  std::printf("%-22s get %.3g us, per peer %.3g us\n", "overheads", p.get_overhead_us,
              p.peer_overhead_us);
  if (p.node_busy_w > 0)
    std::printf(
        "%-22s node %.4g W idle, %.4g W busy; %lld accelerators of %.4g W idle, %.4g W busy; "
        "network %.4g W a node\n",
        "power", p.node_idle_w, p.node_busy_w, (long long)p.gpus_per_node, p.gpu_idle_w,
        p.gpu_busy_w, p.network_w);
  if (p.node_busy_w > 0 && !p.power_estimated.empty())
    std::printf("%-22s %s (calibrate them from a run's measured joules: --calibrate RUN)\n",
                "power estimated", p.power_estimated.c_str());
  if (!(p.node_busy_w > 0))
    std::printf("%-22s not known: no energy (give --node-busy-w and the other power options)\n",
                "power");
  std::printf("%-22s %s\n", "source", p.source.c_str());
  std::printf(
      "%-22s N %.0f graphs, S %.0f B (sd %.0f), B %.0f per rank, compute %.4g s, collate %.4g "
      "s, gradients %.0f B, width %lld, memory share %.2f\n\n",
      "workload", w.graphs, w.bytes_mean, w.bytes_spread, w.batch, w.compute_s, w.collate_s,
      w.gradient_bytes, (long long)w.width, w.memory_fraction);
}

// One table of a figure per backend and for auto: `what` says which (epoch_s or energy_j).
void print_table(const std::vector<ScalePoint>& points, const char* title,
                 double BackendPoint::*what) {
  if (points.empty()) return;
  std::printf("%s (- = does not fit memory; * = more nodes than the platform has)\n", title);
  std::printf("%7s %6s", "ranks", "nodes");
  for (const auto& bp : points[0].backends) std::printf(" %11s", bp.backend.c_str());
  std::printf(" %11s %s\n", "auto", "pick");
  for (const auto& pt : points) {
    std::printf("%7lld %5lld%s", (long long)pt.ranks, (long long)pt.nodes,
                pt.within_platform ? " " : "*");
    double best = NAN;
    for (const auto& bp : pt.backends) {
      if (bp.feasible)
        std::printf(" %11.4g", bp.*what);
      else
        std::printf(" %11s", "-");
      if (bp.backend == pt.auto_pick) best = bp.*what;
    }
    std::printf(" %11.4g %s\n", best, pt.auto_pick.c_str());
  }
}

// Runs `python3 SCRIPT CSV --out PNG` and returns its exit status.
int run_plot(const std::string& script, const std::string& csv, const std::string& png) {
  std::fflush(stdout);
  const pid_t pid = ::fork();
  if (pid < 0) throw Error("simulate --plot: cannot start python3 (fork failed)");
  if (pid == 0) {
    const char* argv[] = {"python3", script.c_str(), csv.c_str(), "--out", png.c_str(), nullptr};
    ::execvp("python3", const_cast<char* const*>(argv));
    std::fprintf(stderr, "simulate --plot: cannot run python3\n");
    ::_exit(127);
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) < 0) throw Error("simulate --plot: lost the python3 process");
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

std::string fmt_g(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// The plan's Pareto front and its choice (tuner/plan.h).
void print_plan(const Plan& plan, double compute_fixed_s, const Workload& w) {
  std::printf(
      "time-energy plan at a global batch of %.0f graphs (B = %.0f/P a rank; a step's compute "
      "%.4g s + %.4g s a graph, so every P trains the same model)\n",
      plan.global_batch, plan.global_batch, compute_fixed_s,
      (w.compute_s - compute_fixed_s) / w.batch);
  std::printf("Pareto front of (epoch seconds, epoch joules), all nodes:\n");
  std::printf("%7s %6s %8s %11s %11s %11s\n", "ranks", "nodes", "B/rank", "backend", "epoch s",
              "energy kJ");
  for (size_t i = 0; i < plan.points.size(); ++i) {
    const PlanPoint& q = plan.points[i];
    if (!q.pareto) continue;
    std::printf("%7lld %6lld %8.4g %11s %11.4g %11.4g%s\n", (long long)q.ranks, (long long)q.nodes,
                q.batch_per_rank, q.backend.c_str(), q.epoch_s, q.energy_j / 1e3,
                int(i) == plan.choice ? "  <- least energy within the bound" : "");
  }
  const auto name = [&](int k) {
    const PlanPoint& q = plan.points[size_t(k)];
    char buf[200];
    std::snprintf(buf, sizeof buf, "%lld ranks, %s: %.4g s and %.4g kJ an epoch",
                  (long long)q.ranks, q.backend.c_str(), q.epoch_s, q.energy_j / 1e3);
    return std::string(buf);
  };
  const std::string bound =
      plan.time_bound_s > 0 ? "within " + fmt_g(plan.time_bound_s) + " s" : "overall";
  if (plan.choice >= 0)
    std::printf("least energy %s: %s\n", bound.c_str(), name(plan.choice).c_str());
  else
    std::printf("no rank count and backend meets an epoch %s; the fastest is %s\n", bound.c_str(),
                plan.fastest >= 0 ? name(plan.fastest).c_str() : "none");
  if (plan.fastest >= 0) std::printf("fastest: %s\n", name(plan.fastest).c_str());
}

}  // namespace

Command add_simulate_command(CLI::App& app) {
  struct Options {
    std::string models, method = "tpe", platform, out, plot,
                        plot_script = DDGNN_SIMULATE_PLOT_SCRIPT;
    std::vector<int64_t> ranks = default_rank_counts();
    Overrides over;
    Workload work;
    double parameters = 34241;
    double global_batch = 0, time_bound_s = 0, compute_fixed_s = 0;
    std::string calibrate;
    int64_t run_nodes = 0;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "simulate",
      "predict step and epoch time of every loader backend and of auto at P = 1 ... 16384 ranks "
      "from calibrated cost models (ddgnn tune --out) and a platform");
  sub->add_option("--models", o->models, "cost models written by ddgnn tune --out")
      ->required()
      ->type_name("FILE.json");
  sub->add_option("--method", o->method, "which fit of the models file: tpe or lsq")
      ->capture_default_str()
      ->check(CLI::IsMember(fit_method_names()));
  sub->add_option("--platform", o->platform, "preset: perlmutter, frontier, summit or local")
      ->required();
  sub->add_option("--ranks", o->ranks, "rank counts, comma-separated (default 1,2,4,...,16384)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  sub->add_option("--out", o->out, "write the table (CSV, columns in tuner/simulate.h)")
      ->required()
      ->type_name("FILE.csv");
  sub->add_option("--plot", o->plot, "also draw it: python3 jobs/simulate_plot.py CSV --out PNG")
      ->type_name("FILE.png");
  sub->add_option("--plot-script", o->plot_script, "the plotting script")->capture_default_str();
  sub->add_option("--calibrate", o->calibrate,
                  "fit the platform's idle and busy powers to a training run's measured joules "
                  "(its metrics.csv's energy columns) and simulate with them")
      ->type_name("RUN_DIR");
  sub->add_option("--run-nodes", o->run_nodes,
                  "--calibrate: the nodes that run used (default: its ranks over the platform's "
                  "ranks per node)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--global-batch", o->global_batch,
                  "time-energy plan: graphs of one step over all ranks, fixed (each P with B/P a "
                  "rank trains the same model); --out then gets the plan's CSV and --plot its "
                  "Pareto front (jobs/plan_plot.py)")
      ->type_name("B");
  sub->add_option("--time-bound", o->time_bound_s,
                  "time-energy plan: the least-energy choice among epochs this fast (seconds)")
      ->type_name("S");
  sub->add_option("--compute-fixed-s", o->compute_fixed_s,
                  "time-energy plan: the part of --compute-s that does not grow with the batch "
                  "(kernel launches on a GPU; 0 on the CPU)")
      ->capture_default_str();
  auto& v = o->over;
  sub->add_option("--nodes", v.nodes, "platform: compute nodes")->check(CLI::PositiveNumber);
  sub->add_option("--ranks-per-node", v.ranks_per_node, "platform: ranks per node")
      ->check(CLI::PositiveNumber);
  sub->add_option("--cores-per-node", v.cores_per_node, "platform: CPU cores per node")
      ->check(CLI::PositiveNumber);
  sub->add_option("--latency-us", v.latency_us, "platform: inter-node MPI latency (us)");
  sub->add_option("--bandwidth-gbs", v.bandwidth_gbs, "platform: injection bandwidth per node");
  sub->add_option("--memory-gb", v.memory_gb, "platform: host memory per node (GB)");
  sub->add_option("--pfs-gbs", v.pfs_gbs, "platform: file system bandwidth (GB/s; 0 = none)");
  sub->add_option("--pfs-iops", v.pfs_iops, "platform: file system random reads per second");
  sub->add_option("--pfs-latency-us", v.pfs_latency_us, "platform: one sample read (us)");
  sub->add_option("--get-overhead-us", v.get_overhead_us, "platform: one get or message (us)");
  sub->add_option("--peer-overhead-us", v.peer_overhead_us,
                  "platform: per peer of a collective fetch (us)");
  sub->add_option("--node-idle-w", v.node_idle_w,
                  "platform: watts of a node's CPUs, memory and board with its cores idle");
  sub->add_option("--node-busy-w", v.node_busy_w,
                  "platform: the same with every core busy (0 = power not known: no energy)");
  sub->add_option("--gpus-per-node", v.gpus_per_node,
                  "platform: accelerators per node (0 = compute runs on the cores)");
  sub->add_option("--gpu-idle-w", v.gpu_idle_w, "platform: watts of one idle accelerator");
  sub->add_option("--gpu-busy-w", v.gpu_busy_w, "platform: watts of one computing accelerator");
  sub->add_option("--network-w", v.network_w,
                  "platform: watts per node of its NICs and share of the switches");
  auto& w = o->work;
  sub->add_option("--graphs", w.graphs, "workload: graphs per epoch (N)")->capture_default_str();
  sub->add_option("--sample-bytes", w.bytes_mean, "workload: mean packed bytes per graph (S)")
      ->capture_default_str();
  sub->add_option("--sample-bytes-spread", w.bytes_spread, "workload: their standard deviation")
      ->capture_default_str();
  sub->add_option("--batch", w.batch, "workload: graphs per rank per step (B)")
      ->capture_default_str();
  sub->add_option("--compute-s", w.compute_s,
                  "workload: forward + forces + backward + optimizer seconds per step")
      ->capture_default_str();
  sub->add_option("--collate-s", w.collate_s, "workload: collate + radius graph seconds per step")
      ->capture_default_str();
  sub->add_option("--parameters", o->parameters,
                  "workload: model parameters (their float32 gradients are all-reduced)")
      ->capture_default_str();
  sub->add_option("--width", w.width, "workload: Loader.width (0 = one group of all ranks)")
      ->capture_default_str();
  sub->add_option("--memory-fraction", w.memory_fraction,
                  "share of a node's memory the stores may take")
      ->capture_default_str();
  return {
      sub, [o, sub] {
        const auto& presets = platform_presets();  // a bad name before a bad models file
        if (std::find(presets.begin(), presets.end(), o->platform) == presets.end())
          platform_preset(o->platform, {});
        const auto models = read_cost_models(o->models, parse_fit_method(o->method));
        Platform platform = platform_preset(o->platform, models);
        apply(o->over, *sub, platform);
        o->work.gradient_bytes = 4 * o->parameters;
        if (!o->calibrate.empty()) {
          const MeasuredRun run = read_measured_run(o->calibrate);
          const int64_t nodes = o->run_nodes > 0 ? o->run_nodes
                                                 : (run.ranks + platform.ranks_per_node - 1) /
                                                       platform.ranks_per_node;
          const PowerFit fit = fit_power(platform, run, nodes);
          std::printf("%s\n", describe(fit, platform, run).c_str());
          const Platform fitted = with_fitted_power(platform, fit);
          if (fitted.node_idle_w != platform.node_idle_w ||
              fitted.gpu_idle_w != platform.gpu_idle_w) {
            platform = fitted;
            platform.power_estimated.clear();
            platform.source += " Power fitted to the measured joules of " + run.path + ".";
          }
        } else if (sub->count("--run-nodes") > 0) {
          throw ConfigError("--run-nodes belongs to --calibrate", "give --calibrate RUN_DIR too");
        }
        print_settings(o->models, o->method, platform, o->work);
        if (sub->count("--global-batch") > 0) {
          if (o->plot_script == DDGNN_SIMULATE_PLOT_SCRIPT) o->plot_script = DDGNN_PLAN_PLOT_SCRIPT;
          const Plan plan = time_energy_plan(models, platform, o->work, o->ranks, o->global_batch,
                                             o->compute_fixed_s, o->time_bound_s);
          write_file_atomic(o->out, plan_csv(platform, plan));
          print_plan(plan, o->compute_fixed_s, o->work);
          std::printf("wrote %s\n", o->out.c_str());
          if (!o->plot.empty() && run_plot(o->plot_script, o->out, o->plot) != 0)
            throw Error(
                "simulate --plot: " + o->plot_script + " failed",
                "run it yourself: python3 " + o->plot_script + " " + o->out + " --out " + o->plot);
          return 0;
        }
        if (sub->count("--time-bound") > 0 || sub->count("--compute-fixed-s") > 0)
          throw ConfigError("--time-bound and --compute-fixed-s belong to the time-energy plan",
                            "give --global-batch B as well");
        const auto points = simulate(models, platform, o->work, o->ranks);
        write_file_atomic(o->out, simulation_csv(platform, points));
        print_table(points, "epoch seconds", &BackendPoint::epoch_s);
        if (platform.node_busy_w > 0) {
          std::printf("\n");
          print_table(points, "joules per epoch (all nodes)", &BackendPoint::energy_j);
        }
        std::printf("wrote %s\n", o->out.c_str());
        if (!o->plot.empty()) {
          const int rc = run_plot(o->plot_script, o->out, o->plot);
          if (rc != 0)
            throw Error(
                "simulate --plot: " + o->plot_script + " exited with status " + std::to_string(rc),
                "run it yourself: python3 jobs/simulate_plot.py " + o->out + " --out " + o->plot);
        }
        return 0;
      }};
}

}  // namespace ddgnn
