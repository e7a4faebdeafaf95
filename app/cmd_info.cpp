// `ddgnn info data.h5`: what is in a dataset — sizes, species, energy and force statistics,
// per-species reference energies (least squares), neighbours per atom within a radius, and the
// bytes a graph's record takes in the store, per array (loader/packed.h).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "app/commands.h"
#include "core/error.h"
#include "core/text.h"
#include "loader/array_codec.h"
#include "loader/dataset.h"
#include "loader/elements.h"
#include "loader/outliers.h"
#include "loader/packed.h"
#include "loader/stats.h"

namespace ddgnn {

namespace {

struct InfoArgs {
  std::string path;
  double radius = 5.0;
  int64_t sample = 500;
  bool json = false;
};

// Records measured over at most this many graphs (the first ones).
constexpr int64_t kRecordGraphs = 100000;

nlohmann::json records_json(const RecordSizes& r) {
  nlohmann::json arrays = nlohmann::json::array();
  for (const auto& a : r.arrays) {
    nlohmann::json chosen;
    for (int e = 0; e < 4; ++e)
      if (a.chosen[e] > 0) chosen[to_string(ArrayEncoding(e))] = a.chosen[e];
    if (a.absent > 0) chosen["absent"] = a.absent;
    arrays.push_back({{"name", escape_invalid_utf8(a.name)},
                      {"raw_bytes", a.raw},
                      {"encoded_bytes", a.encoded},
                      {"encodings", chosen}});
  }
  const double g = double(std::max<int64_t>(r.graphs, 1));
  return {{"graphs_measured", r.graphs},
          {"bytes_per_graph_raw", double(r.raw) / g},
          {"bytes_per_graph_encoded", double(r.encoded) / g},
          {"arrays", arrays}};
}

void print_records(const RecordSizes& r, int64_t n_graphs) {
  const double g = double(std::max<int64_t>(r.graphs, 1));
  std::printf(
      "records        %.1f B a graph in the store, %.1f as float64: %.2fx smaller%s\n",
      double(r.encoded) / g, double(r.raw) / g,
      double(r.raw) / double(std::max<int64_t>(r.encoded, 1)),
      r.graphs < n_graphs ? (" (the first " + std::to_string(r.graphs) + " graphs)").c_str() : "");
  for (const auto& a : r.arrays) {
    std::string chosen;
    for (int e = 0; e < 4; ++e)
      if (a.chosen[e] > 0)
        chosen += (chosen.empty() ? "" : ", ") + std::string(to_string(ArrayEncoding(e))) + " " +
                  std::to_string(a.chosen[e]);
    if (a.absent > 0)
      chosen += (chosen.empty() ? "" : ", ") + std::string("absent ") + std::to_string(a.absent);
    std::printf("  %-12s %8.1f B a graph as float64, %8.1f encoded (%s)\n",
                escape_invalid_utf8(a.name).c_str(), double(a.raw) / g, double(a.encoded) / g,
                chosen.c_str());
  }
}

nlohmann::json to_json(const Dataset& ds, const DatasetStats& st) {
  nlohmann::json j;
  j["path"] = escape_invalid_utf8(ds.path());
  j["format_version"] = ds.format_version();
  j["producer"] = ds.producer();
  j["graphs"] = st.n_graphs;
  j["atoms"] = {
      {"total", st.n_atoms}, {"min", st.atoms_min}, {"mean", st.atoms_mean}, {"max", st.atoms_max}};
  j["periodic_graphs"] = st.n_periodic;
  j["graphs_with_stress"] = st.n_with_stress;
  j["has_forces"] = ds.has_forces();
  nlohmann::json sp = nlohmann::json::object();
  for (size_t s = 0; s < st.species.size(); ++s)
    sp[element_symbol(st.species[s])] = {{"Z", st.species[s]},
                                         {"atoms", st.species_count[st.species[s]]},
                                         {"reference_energy_eV", st.ref_energy[s]}};
  j["species"] = sp;
  j["energy_eV"] = {{"mean", st.energy_mean},
                    {"std", st.energy_std},
                    {"min", st.energy_min},
                    {"max", st.energy_max}};
  j["energy_per_atom_eV"] = {{"mean", st.epa_mean}, {"std", st.epa_std}};
  j["reference_fit"] = {{"rank", st.ref_rank},
                        {"residual_rms_meV_per_atom", st.ref_residual_rms_per_atom * 1e3}};
  if (ds.has_forces())
    j["forces_eV_per_A"] = {{"mean_norm", st.force_norm_mean},
                            {"rms_component", st.force_rms},
                            {"max_norm", st.force_max}};
  j["outliers"] = nlohmann::json::array();
  for (const auto& o : st.outliers) j["outliers"].push_back({{"graph", o.graph}, {"what", o.what}});
  j["neighbours"] = {{"radius_A", st.radius},
                     {"mean", st.neighbours_mean},
                     {"min", st.neighbours_min},
                     {"max", st.neighbours_max},
                     {"sampled_graphs", st.neighbour_graphs}};
  j["config_types"] = ds.config_types();
  return j;
}

void print_report(const Dataset& ds, const DatasetStats& st, double seconds) {
  std::printf("dataset        %s\n", ds.path().c_str());
  std::printf("format         ddgnn-dataset v%lld, written by %s\n",
              static_cast<long long>(ds.format_version()), ds.producer().c_str());
  std::printf("graphs         %lld (%lld periodic, %lld with stress)\n",
              static_cast<long long>(st.n_graphs), static_cast<long long>(st.n_periodic),
              static_cast<long long>(st.n_with_stress));
  std::printf("atoms          %lld in all; per graph min %lld, mean %.2f, max %lld\n",
              static_cast<long long>(st.n_atoms), static_cast<long long>(st.atoms_min),
              st.atoms_mean, static_cast<long long>(st.atoms_max));
  std::string types;
  for (const auto& t : ds.config_types())
    types += (types.empty() ? "" : ", ") + (t.empty() ? "(none)" : t);
  std::printf("config types   %s\n", types.c_str());
  std::printf("energy (eV)    mean %.6f  std %.6f  min %.6f  max %.6f\n", st.energy_mean,
              st.energy_std, st.energy_min, st.energy_max);
  std::printf("energy/atom    mean %.6f eV  std %.3f meV\n", st.epa_mean, st.epa_std * 1e3);
  if (ds.has_forces())
    std::printf("forces (eV/Å)  mean |F| %.4f  RMS component %.4f  max |F| %.4f\n",
                st.force_norm_mean, st.force_rms, st.force_max);
  else
    std::printf("forces         none\n");
  std::printf("\nspecies  Z    atoms        fraction  reference energy (eV/atom, least squares)\n");
  for (size_t s = 0; s < st.species.size(); ++s) {
    const int z = st.species[s];
    std::printf("%-7s  %-3d  %-11lld  %-8.4f  %.6f\n", element_symbol(z).c_str(), z,
                static_cast<long long>(st.species_count[z]),
                double(st.species_count[z]) / double(st.n_atoms), st.ref_energy[s]);
  }
  std::printf("reference fit: residual RMS %.3f meV/atom", st.ref_residual_rms_per_atom * 1e3);
  if (st.ref_rank < int(st.species.size()))
    std::printf(
        " (composition matrix has rank %d < %zu species: the split between species is "
        "the minimum-norm one)",
        st.ref_rank, st.species.size());
  std::printf(
      "\n\nneighbours within %.2f Å: mean %.2f per atom (min %lld, max %lld), over %lld "
      "sampled graphs\n",
      st.radius, st.neighbours_mean, static_cast<long long>(st.neighbours_min),
      static_cast<long long>(st.neighbours_max), static_cast<long long>(st.neighbour_graphs));
  std::printf("outliers       %zu", st.outliers.size());
  if (st.energy_unjudged > 0)
    std::printf(
        " (energies of %lld graphs judged only against the per-element fit, within %.0f "
        "eV/atom: fewer than %lld graphs of their composition and config_type)",
        static_cast<long long>(st.energy_unjudged), OutlierOptions{}.max_fit_residual,
        static_cast<long long>(OutlierOptions{}.min_composition));
  std::printf("\n%s", outlier_lines(st.outliers, 20).c_str());
  std::printf("checksums      every block verified (whole pass %.2f s)\n", seconds);
}

int run_info(const InfoArgs& a) {
  if (!(a.radius > 0) || !std::isfinite(a.radius))
    throw ConfigError("info: --radius must be a finite number > 0 Å, got " +
                      std::to_string(a.radius));
  const auto t0 = std::chrono::steady_clock::now();
  Dataset ds(a.path);
  const DatasetStats st = compute_stats(ds, a.radius, a.sample);
  const RecordSizes records = record_sizes(ds, kRecordGraphs);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (a.json) {
    nlohmann::json j = to_json(ds, st);
    j["records"] = records_json(records);
    // What the file itself holds a graph: the records and their offsets (format version 4).
    j["records"]["file_bytes_per_graph"] =
        ds.record_bytes() > 0
            ? nlohmann::json(double(ds.record_bytes() + 8 * ds.n_graphs()) / double(ds.n_graphs()))
            : nlohmann::json(nullptr);
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    print_report(ds, st, s);
    print_records(records, ds.n_graphs());
    if (ds.record_bytes() > 0)
      std::printf("  in the file  %8.1f B a graph: the records and an offset each\n",
                  double(ds.record_bytes() + 8 * ds.n_graphs()) / double(ds.n_graphs()));
    else
      std::printf(
          "  in the file  float64 arrays (format version %lld; `ddgnn convert` writes "
          "records)\n",
          static_cast<long long>(ds.format_version()));
  }
  return 0;
}

}  // namespace

Command add_info_command(CLI::App& app) {
  auto args = std::make_shared<InfoArgs>();
  CLI::App* sub = app.add_subcommand("info", "Statistics of a ddgnn dataset (verifies checksums)");
  sub->add_option("dataset", args->path, "dataset file written by `ddgnn convert`")->required();
  sub->add_option("--radius", args->radius, "radius (Å) for the neighbour count")
      ->capture_default_str();
  sub->add_option("--sample", args->sample, "graphs sampled for the neighbour count (0 = none)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_flag("--json", args->json, "print JSON instead of a report");
  return {sub, [args] { return run_info(*args); }};
}

}  // namespace ddgnn
