// `ddgnn tune --measurements grid.csv`: fits the loader backends' cost models (tuner/) to a
// bench-loader grid with TPE and with least squares, and reports how well each predicts held-out
// configurations and picks the fastest backend (leave one configuration out).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "app/commands.h"
#include "core/backend.h"
#include "core/error.h"
#include "core/files.h"
#include "tuner/cost_model.h"
#include "tuner/online.h"
#include "tuner/selection.h"

namespace ddgnn {

namespace {

// `--per-configuration`: one CSV row per configuration of a leave-one-configuration-out run.
std::string per_configuration_rows(const std::string& method, const SelectionReport& rep,
                                   const std::set<std::string>& backends, bool header) {
  std::string out;
  char buf[256];
  if (header) {
    out =
        "method,ranks,ranks_per_node,cores_per_node,sample_bytes,batch,fraction_remote,best,"
        "picked,online,lost";
    for (const auto& b : backends) out += ",measured_" + b + ",predicted_" + b;
    out += "\n";
  }
  for (const ConfigOutcome& c : rep.outcomes) {
    const FetchFeatures& f = c.features;
    std::snprintf(buf, sizeof buf, "%s,%g,%g,%g,%g,%g,%.4f,%s,%s,%s,%.4f", method.c_str(), f.ranks,
                  f.ranks_per_node, f.cores_per_node, f.bytes_mean, f.batch, f.remote,
                  c.best.c_str(), c.picked.c_str(), c.online.c_str(), c.lost);
    out += buf;
    for (const auto& b : backends) {
      const auto m = c.measured.find(b);
      const auto p = c.predicted.find(b);
      if (m == c.measured.end())
        out += ",,";
      else {
        std::snprintf(buf, sizeof buf, ",%.4e,%.4e", m->second, p->second);
        out += buf;
      }
    }
    out += "\n";
  }
  return out;
}

// The configurations where `auto` has a choice to make (SelectionReport::exchanging), reported
// apart when the grid also has some where it has none (one rank).
constexpr const char* kExchanging =
    "exchanging samples (fraction remote > 0; on one rank auto resolves to replicated)";

bool some_not_exchanging(int exchanging, int configurations) {
  return exchanging > 0 && exchanging < configurations;
}

}  // namespace

Command add_tune_command(CLI::App& app) {
  struct Options {
    std::string measurements, out, method = "both", remeasured, per_configuration;
    std::vector<std::string> backends;
    int trials = 60;
    uint64_t seed = 0;
    double cores = double(std::max(1u, std::thread::hardware_concurrency()));
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "tune",
      "fit the loader backends' cost models to measured fetch times (ddgnn bench-loader "
      "CSV) and report held-out prediction error and backend-selection accuracy");
  sub->add_option("--measurements,-m", o->measurements, "CSV written by ddgnn bench-loader --out")
      ->required()
      ->type_name("FILE.csv");
  sub->add_option("--method", o->method, "tpe, lsq (least squares) or both")
      ->capture_default_str()
      ->check(CLI::IsMember([] {
        std::vector<std::string> names = fit_method_names();
        names.push_back("both");
        return names;
      }()));
  sub->add_option("--trials", o->trials, "TPE trials per fit")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  sub->add_option("--seed", o->seed, "TPE seed")->capture_default_str();
  sub->add_option("--cores", o->cores,
                  "cores per node where the CSV has no cores_per_node column (default: this "
                  "machine's)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--backends", o->backends,
                  "select only between these backends (default: every backend of the grid)")
      ->type_name("NAME ...");
  sub->add_option("--out", o->out, "write the models fitted on every row (JSON)")
      ->type_name("FILE.json");
  sub->add_option("--remeasured", o->remeasured,
                  "a second measurement of the same grid: report how often the two agree on the "
                  "fastest backend (the ceiling of any selection) and judge the picks on it")
      ->type_name("FILE.csv");
  sub->add_option("--per-configuration", o->per_configuration,
                  "write every configuration's measured and predicted times and picks (CSV)")
      ->type_name("FILE.csv");
  return {
      sub, [o] {
        auto data = read_measurements(o->measurements, o->cores);
        if (!o->backends.empty()) data = only_backends(data, o->backends, o->measurements);
        std::set<std::string> backends;
        for (const auto& m : data) backends.insert(m.backend);
        std::printf("%s: %zu measurements, backends:", o->measurements.c_str(), data.size());
        for (const auto& b : backends) std::printf(" %s", b.c_str());
        std::printf("\n");
        // The replayed switcher starts from the first candidate, as `ddgnn train` does: shm in
        // the default candidate list, else the first of --backends.
        const std::string shm = to_string(Backend::kShm);
        const std::string incumbent = !o->backends.empty()  ? o->backends.front()
                                      : backends.count(shm) ? shm
                                                            : "";
        std::vector<FetchMeasurement> again;
        if (!o->remeasured.empty()) {
          again = read_measurements(o->remeasured, o->cores);
          if (!o->backends.empty()) again = only_backends(again, o->backends, o->remeasured);
          const Agreement ceiling = measurements_agree(data, again, o->remeasured);
          std::printf(
              "remeasured (%s): the two measurements agree on the fastest backend in %d of %d "
              "configurations (%.1f%%: the most any selection can be expected to score); the "
              "first's fastest is within %.0f%% of the second's in %d (%.1f%%), time lost mean "
              "%.1f%%, worst %.1f%%\n",
              o->remeasured.c_str(), ceiling.same_best, ceiling.configurations,
              100.0 * ceiling.same_best / ceiling.configurations, 100 * ceiling.tie_tolerance,
              ceiling.within_tolerance, 100.0 * ceiling.within_tolerance / ceiling.configurations,
              100 * ceiling.mean_lost, 100 * ceiling.max_lost);
          if (some_not_exchanging(ceiling.exchanging, ceiling.configurations))
            std::printf("  %s: agree in %d of %d (%.1f%%), within %.0f%% in %d\n", kExchanging,
                        ceiling.exchanging_same_best, ceiling.exchanging,
                        100.0 * ceiling.exchanging_same_best / ceiling.exchanging,
                        100 * ceiling.tie_tolerance, ceiling.exchanging_within);
        }
        std::string table;
        nlohmann::json models;
        for (const std::string& method : fit_method_names()) {
          if (o->method != "both" && o->method != method) continue;
          const FitMethod m = parse_fit_method(method);
          std::printf("\n== %s ==\n%-11s %12s %12s\n", method == "tpe" ? "TPE" : "least squares",
                      "backend", "MdAPE fit", "MdAPE held");
          const SelectionReport rep =
              leave_one_configuration_out(data, m, o->trials, o->seed, incumbent);
          for (const auto& b : backends) {
            CostModel model(b);
            model.fit(data, m, o->trials, o->seed);
            const auto held = rep.held_out_mdape.find(b);
            std::printf("%-11s %11.1f%% %11.1f%%\n", b.c_str(), 100 * median_ape(model, data),
                        held == rep.held_out_mdape.end() ? NAN : 100 * held->second);
            nlohmann::json terms;
            for (size_t k = 0; k < model.terms().size(); ++k)
              terms[model.terms()[k]] = model.parameters()[k];
            models[method][b] = {{"terms", terms},
                                 {"contention_exponent", model.contention_exponent()}};
          }
          std::printf(
              "selection, leave one configuration out: %d of %d right (%.1f%%); time lost "
              "mean %.1f%%, worst %.1f%%, mean when wrong %.1f%%\n",
              rep.correct, rep.configurations, 100 * rep.accuracy, 100 * rep.mean_lost,
              100 * rep.max_lost, 100 * rep.mean_lost_wrong);
          std::printf(
              "  the baseline, always %s (the most often fastest): right in %d of %d (%.1f%%)\n",
              rep.always.c_str(), rep.always_correct, rep.configurations,
              100.0 * rep.always_correct / rep.configurations);
          if (some_not_exchanging(rep.exchanging, rep.configurations))
            std::printf(
                "  %s: %d of %d right (%.1f%%), within %.0f%% in %d; always %s: right in %d "
                "(%.1f%%)\n",
                kExchanging, rep.exchanging_correct, rep.exchanging,
                100.0 * rep.exchanging_correct / rep.exchanging, 100 * rep.tie_tolerance,
                rep.exchanging_within, rep.always_exchanging.c_str(), rep.always_exchanging_correct,
                100.0 * rep.always_exchanging_correct / rep.exchanging);
          std::printf(
              "picks within %.0f%% of the measured best (near-ties count): %d of %d "
              "(%.1f%%)\n",
              100 * rep.tie_tolerance, rep.within_tolerance, rep.configurations,
              100.0 * rep.within_tolerance / rep.configurations);
          if (rep.tested > 0)
            std::printf(
                "picks not distinguishable from the measured best (paired sign test over the "
                "repetitions, 5%%): %d of %d (%.1f%%)\n",
                rep.indistinguishable, rep.tested, 100.0 * rep.indistinguishable / rep.tested);
          std::printf("predicted pick vs always one backend (mean / largest time ratio):");
          for (const auto& [b, s] : rep.speedup_over)
            std::printf("  %s %.2fx / %.2fx", b.c_str(), s, rep.max_speedup_over.at(b));
          std::printf("\n");
          if (rep.online_configurations > 0) {
            std::printf(
                "auto replayed (picks by the first repetitions, %s kept unless beaten by %.0f%%, "
                "judged on the others): best "
                "%d of %d, within %.0f%% of the best %d of %d (%.1f%%), worst %.1f%% "
                "slower\n",
                incumbent.empty() ? "none" : incumbent.c_str(), 100 * OnlineOptions{}.switch_margin,
                rep.online_correct, rep.online_configurations, 100 * rep.tie_tolerance,
                rep.online_within, rep.online_configurations,
                100.0 * rep.online_within / rep.online_configurations, 100 * rep.online_max_lost);
            if (some_not_exchanging(rep.online_exchanging, rep.online_configurations))
              std::printf("  %s: auto within %.0f%% of the best in %d of %d (%.1f%%)\n",
                          kExchanging, 100 * rep.tie_tolerance, rep.online_exchanging_within,
                          rep.online_exchanging,
                          100.0 * rep.online_exchanging_within / rep.online_exchanging);
            std::printf("auto vs always one backend (mean / largest time ratio):");
            for (const auto& [b, x] : rep.online_speedup_over)
              std::printf("  %s %.2fx / %.2fx", b.c_str(), x, rep.online_max_speedup_over.at(b));
            std::printf("\n");
            if (rep.online_tested > 0)
              std::printf(
                  "auto's pick not distinguishable from the measured best (sign test, 5%%): %d "
                  "of %d (%.1f%%)\n",
                  rep.online_indistinguishable, rep.online_tested,
                  100.0 * rep.online_indistinguishable / rep.online_tested);
          }
          if (!again.empty()) {
            const Agreement a = picks_agree(rep, again, o->remeasured);
            std::printf(
                "picks judged on the remeasurement: its fastest in %d of %d (%.1f%%), within "
                "%.0f%% of it in %d (%.1f%%); time lost mean %.1f%%, worst %.1f%%\n",
                a.same_best, a.configurations, 100.0 * a.same_best / a.configurations,
                100 * a.tie_tolerance, a.within_tolerance,
                100.0 * a.within_tolerance / a.configurations, 100 * a.mean_lost, 100 * a.max_lost);
            if (some_not_exchanging(a.exchanging, a.configurations))
              std::printf("  %s: its fastest in %d of %d (%.1f%%), within %.0f%% in %d\n",
                          kExchanging, a.exchanging_same_best, a.exchanging,
                          100.0 * a.exchanging_same_best / a.exchanging, 100 * a.tie_tolerance,
                          a.exchanging_within);
          }
          table += per_configuration_rows(method, rep, backends, table.empty());
          models[method]["selection"] = {{"configurations", rep.configurations},
                                         {"correct", rep.correct},
                                         {"within_tolerance", rep.within_tolerance},
                                         {"indistinguishable", rep.indistinguishable},
                                         {"tested", rep.tested},
                                         {"exchanging", rep.exchanging},
                                         {"exchanging_correct", rep.exchanging_correct},
                                         {"always", rep.always},
                                         {"always_correct", rep.always_correct},
                                         {"mean_lost", rep.mean_lost},
                                         {"max_lost", rep.max_lost}};
        }
        if (!o->out.empty()) write_file_atomic(o->out, models.dump(2) + "\n");
        if (!o->per_configuration.empty()) write_file_atomic(o->per_configuration, table);
        return 0;
      }};
}

}  // namespace ddgnn
