// `ddgnn convert in.extxyz... out.h5`: streams extended XYZ files into one dataset file,
// atomically (temporary name, then rename), optionally appending to an existing one.
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>

#include "app/commands.h"
#include "core/error.h"
#include "loader/dataset.h"
#include "loader/extxyz.h"
#include "loader/outliers.h"

namespace fs = std::filesystem;

namespace ddgnn {

namespace {

struct ConvertArgs {
  std::vector<std::string> files;  // inputs..., output
  bool append = false, overwrite = false, require_forces = false, strict = false;
  ExtxyzKeys keys;
  std::vector<std::string> extra_columns, info_keys;
  int64_t format_version = 0;  // the newest, or the file's own at an append
};

bool looks_like_extxyz(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  return ext == ".xyz" || ext == ".extxyz";
}

int run_convert(const ConvertArgs& a) {
  std::vector<std::string> inputs(a.files.begin(), a.files.end() - 1);
  const std::string output = a.files.back();
  if (looks_like_extxyz(output))
    throw ConfigError("convert: the last argument '" + output + "' looks like an input file",
                      "the last argument is the output dataset, e.g. `ddgnn convert in.xyz "
                      "out.h5`");
  if (!a.append && !a.overwrite && fs::exists(output))
    throw ConfigError("convert: output '" + output + "' already exists",
                      "pass --append to add to it, or --overwrite to replace it");
  for (const auto& in : inputs)
    if (in != "-" && !fs::exists(in))
      throw DataError(in + ": no such input file", "check the path");
  for (size_t i = 0; i < inputs.size(); ++i)
    for (size_t j = i + 1; j < inputs.size(); ++j) {
      std::error_code ec;
      if (inputs[i] != "-" && fs::equivalent(inputs[i], inputs[j], ec) && !ec)
        spdlog::warn(
            "convert: '{}' and '{}' are one file: its frames go into the dataset twice (a "
            "structure in two splits tests on training data)",
            inputs[i], inputs[j]);
    }
  // The output replaced (or appended to) under any name of an input would destroy that input.
  for (const auto& in : inputs) {
    std::error_code ec;
    if (in != "-" && fs::exists(output) && fs::equivalent(in, output, ec) && !ec)
      throw ConfigError("convert: the output '" + output + "' is the input '" + in + "'",
                        "the last argument is the output dataset: give it a name of its own, "
                        "e.g. `ddgnn convert in.xyz out.h5`");
  }

  ExtxyzKeys keys = a.keys;
  keys.extra_columns = a.extra_columns;
  keys.info_keys = a.info_keys;
  WriterOptions wopt;
  wopt.append = a.append;
  wopt.must_not_exist = !a.append && !a.overwrite;  // checked again under the writer's lock
  wopt.extra_columns = a.extra_columns;
  wopt.info_keys = a.info_keys;
  wopt.energy_key = keys.energy;
  wopt.forces_key = keys.forces;
  wopt.format_version = a.format_version;
  DatasetWriter writer(output, wopt);
  const int64_t graphs_before = writer.n_graphs();
  const auto t0 = std::chrono::steady_clock::now();
  size_t total_bytes = 0;
  Frame frame;
  // Where each new graph came from, for the outlier report: (first graph, file) and a line each.
  std::vector<std::pair<int64_t, std::string>> file_starts;
  std::vector<long long> lines;
  for (const auto& in : inputs) {
    file_starts.emplace_back(graphs_before + int64_t(lines.size()), in);
    const auto t_file = std::chrono::steady_clock::now();
    ExtxyzReader reader(in, keys);
    int64_t n = 0;
    while (reader.next(frame)) {
      writer.add(frame, at(in, frame.line));
      lines.push_back(frame.line);
      ++n;
    }
    writer.note_source(in, n);
    total_bytes += reader.bytes_read();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t_file).count();
    spdlog::info("{}: {} structures, {:.1f} MB in {:.2f} s ({:.0f} MB/s)", in, n,
                 reader.bytes_read() / 1e6, s, reader.bytes_read() / 1e6 / std::max(s, 1e-9));
  }
  const int64_t n_graphs = writer.n_graphs(), n_atoms = writer.n_atoms();
  std::vector<Outlier> outliers = writer.outliers();
  for (auto& o : outliers) {
    if (o.graph < graphs_before) continue;  // already in the file before this append
    auto f = std::upper_bound(file_starts.begin(), file_starts.end(), o.graph,
                              [](int64_t g, const auto& s) { return g < s.first; });
    o.what = at(std::prev(f)->second, lines[size_t(o.graph - graphs_before)]) + ": " + o.what;
  }
  if (!outliers.empty()) {
    const std::string what = output + ": " + std::to_string(outliers.size()) +
                             " outlier frame(s) (robust energy per composition, force above "
                             "100 eV/Å, atoms closer than 0.1 Å):\n" +
                             outlier_lines(outliers, 10);
    if (a.strict)
      throw DataError(what.substr(0, what.size() - 1),
                      "fix or drop these frames and convert again, or leave out --strict: "
                      "train then refuses them unless Dataset.allow_outliers is true");
    spdlog::warn("{}(stored in the dataset; train refuses them unless Dataset.allow_outliers)",
                 what);
  }
  writer.commit();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("wrote {}: {} graphs ({} new), {} atoms, {:.1f} MB of extxyz in {:.2f} s", output,
               n_graphs, n_graphs - graphs_before, n_atoms, total_bytes / 1e6, s);
  return 0;
}

}  // namespace

Command add_convert_command(CLI::App& app) {
  auto args = std::make_shared<ConvertArgs>();
  CLI::App* sub =
      app.add_subcommand("convert", "Convert extended XYZ files into one ddgnn dataset (HDF5)");
  sub->add_option("files", args->files,
                  "input .extxyz/.xyz files ('-' = stdin), then the output .h5")
      ->required()
      ->expected(2, -1);
  sub->add_flag("--append", args->append, "add the structures to an existing dataset");
  sub->add_flag("--overwrite", args->overwrite, "replace an existing output file");
  sub->add_option("--energy-key", args->keys.energy, "info key of the total energy (eV)")
      ->capture_default_str();
  sub->add_option("--forces-key", args->keys.forces, "per-atom column of the forces (eV/Å)")
      ->capture_default_str();
  sub->add_option("--stress-key", args->keys.stress, "info key of the stress (eV/Å^3)")
      ->capture_default_str();
  sub->add_option("--config-type-key", args->keys.config_type, "info key of the config type")
      ->capture_default_str();
  sub->add_flag("--strict", args->strict,
                "refuse outlier frames (energy far from its composition's, force above 100 eV/Å, "
                "atoms closer than 0.1 Å) instead of storing them with a warning");
  sub->add_flag("--require-forces", args->require_forces,
                "fail on a structure without forces (default: all or none)");
  sub->add_option("--extra-columns", args->extra_columns,
                  "other per-atom real columns to keep, e.g. charges")
      ->delimiter(',');
  sub->add_option("--info-keys", args->info_keys,
                  "per-structure numbers to keep from the comment line (one or more numbers a "
                  "key, in every structure), e.g. gap,dipole: the targets of graph heads")
      ->delimiter(',');
  sub->add_option("--format-version", args->format_version,
                  "file format to write: " + std::to_string(kFormatVersion) +
                      " (the default) holds encoded records, " +
                      std::to_string(kOldestWrittenVersion) +
                      " float64 arrays (what ddgnn read before the records); an append keeps "
                      "the file's");
  return {sub, [args] {
            args->keys.require_forces = args->require_forces;
            return run_convert(*args);
          }};
}

}  // namespace ddgnn
