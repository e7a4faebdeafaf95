// `ddgnn evaluate` (train/evaluate.h): the checkpoint's model on the chosen graphs, through the
// same prediction path as training (model/predict.h).
#include "train/evaluate.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <utility>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/files.h"
#include "core/log.h"
#include "core/threads.h"
#include "loader/elements.h"
#include "loader/split.h"
#include "model/metrics.h"
#include "model/precision.h"
#include "model/predict.h"
#include "train/checkpoint.h"
#include "train/model_setup.h"

namespace ddgnn {

namespace fs = std::filesystem;

namespace {

std::string num(double v) {
  return fmt("%.10g", v);
}

std::string find_checkpoint(const EvaluateOptions& o) {
  if (!o.checkpoint.empty()) return o.checkpoint;
  if (o.run_dir.empty()) throw ConfigError("evaluate: give --checkpoint FILE or --run RUN_DIR");
  const std::string dir = o.run_dir + "/checkpoints";
  if (fs::is_regular_file(dir + "/best.pt")) return dir + "/best.pt";
  std::vector<std::string> all;
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".pt") all.push_back(e.path().string());
  std::sort(all.begin(), all.end());
  if (all.empty())
    throw ConfigError("evaluate: " + dir + " holds no checkpoint",
                      "train first, with NeuralNetwork.Training.Checkpoint true");
  return all.back();
}

// The run's split of its one file, from the checkpoint record (runs before Dataset.split_by
// split by frame).
Split run_split(const Dataset& ds, const nlohmann::json& split) {
  SplitOptions o;
  o.perc_train = split.at("perc_train");
  o.seed = split.at("seed");
  const std::string by = split.value("split_by", std::string("frame"));
  if (!find_split_by(by)) throw DataError("checkpoint record: unknown split_by '" + by + "'");
  o.by = *find_split_by(by);
  o.block = split.value("split_block", int64_t(1));
  o.train_fraction = split.value("train_fraction", 1.0);
  return split_dataset(ds, o);
}

}  // namespace

nlohmann::json evaluate(const EvaluateOptions& o) {
  const std::string ckpt = find_checkpoint(o);
  const nlohmann::json record = read_checkpoint_record(ckpt);
  ModelSetup setup = model_setup_from_json(record.at("model"));
  int64_t threads = o.threads;
  const char* key = "--threads";
  if (threads <= 0) {
    const nlohmann::json& config = record.at("config");
    threads = config.value("/Runtime/intra_op_threads"_json_pointer, int64_t(0));
    key = "Runtime.intra_op_threads";
  }
  threads = threads <= 0 ? cores_available() : cap_threads(threads, cores_available(), key);
  const std::string blas = set_up_cpu_compute(int(threads));
  if (!blas.empty()) spdlog::info("{}", blas);
  Gnn gnn(setup.spec);
  gnn.to(to_dtype(setup.precision));
  gnn.set_bf16_autocast(setup.precision == Precision::kBFloat16);
  load_checkpoint_model(ckpt, gnn);
  gnn.eval();

  // Which graphs.
  const nlohmann::json& split = record.at("split");
  const std::string split_name = o.split;
  if (split_name != "test" && split_name != "validate" && split_name != "train" &&
      split_name != "all")
    throw ConfigError("evaluate --split: unknown '" + split_name + "'",
                      "use test, validate, train or all");
  const auto same_file = [](const std::string& a, const std::string& b) {
    return !a.empty() && !b.empty() && fs::exists(b) &&
           fs::weakly_canonical(a) == fs::weakly_canonical(b);
  };
  // A run on a list of files: each file was split on its own; the one evaluated is as a run's
  // single file, with its place in the list as dataset_name (the branch of its heads).
  const nlohmann::json files = split.value("files", nlohmann::json::array());
  std::string data = o.data;
  if (data.empty() && !files.empty()) {
    std::string names;
    for (const auto& f : files) names += (names.empty() ? "" : ", ") + f.value("path", "");
    throw ConfigError("evaluate: the run trained on a list of " + std::to_string(files.size()) +
                          " files (" + names + ")",
                      "evaluate one of them with --data FILE.h5: its split and branch are the "
                      "run's");
  }
  size_t list_index = files.size();
  for (size_t f = 0; f < files.size(); ++f)
    if (same_file(data, files[f].value("path", ""))) list_index = f;
  const nlohmann::json& member = list_index < files.size() ? files[list_index] : split;
  const std::string single =
      member.value(list_index < files.size() ? "path" : "single", std::string());
  const int64_t run_graphs = member.value("n_graphs", int64_t(-1));
  const bool explicit_files = single.empty();
  if (data.empty())
    data = explicit_files ? split.value(split_name == "all" ? "test" : split_name, std::string())
                          : single;
  if (data.empty() || !fs::exists(data))
    throw ConfigError("evaluate: dataset '" + data + "' not found",
                      "give it with --data FILE.h5 (paths are relative to the working directory)");
  Dataset ds(data);
  if (list_index < files.size()) ds.add_constant_column(kBranchKey, double(list_index));
  bind_to_dataset(setup, ds);
  const GraphBlock block = ds.read(0, ds.n_graphs());
  check_elements_known(setup.spec, block.z, data);
  if (!setup.periodic) {  // as train warns
    int64_t periodic = 0;
    for (size_t g = 0; g < block.n_graphs(); ++g)
      periodic += (block.pbc[3 * g] | block.pbc[3 * g + 1] | block.pbc[3 * g + 2]) ? 1 : 0;
    if (periodic > 0)
      spdlog::warn(
          "{} graphs of {} have periodic cells, but the model was trained without "
          "Architecture.periodic_boundary_conditions: their cells are ignored (no edges across "
          "the boundary)",
          periodic, data);
  }
  std::vector<int64_t> ids;
  // Each graph's split in the run: the run's own file split by (perc_train, seed); with explicit
  // files, the file's role; a file the run did not see: "other".
  std::vector<const char*> label(size_t(ds.n_graphs()), "other");
  // The file's content identity against the one the run trained on (checkpoints that predate
  // it record none): the same path and graph count may hold other data after a new convert.
  const auto identity_differs = [&](int role) {
    if (list_index < files.size())
      return member.value("content_crc32", int64_t(-1)) != ds.content_crc32();
    const nlohmann::json crc = split.value("content_crc32", nlohmann::json());
    return crc.is_array() && crc.size() == 3 && crc[size_t(role)].is_number_integer() &&
           crc[size_t(role)].get<int64_t>() != ds.content_crc32();
  };
  const std::string rewritten =
      data +
      " was written again since the run trained on it (its content CRC-32 differs from "
      "the checkpoint's)";
  if (!explicit_files && same_file(data, single) && run_graphs == ds.n_graphs() &&
      identity_differs(0)) {
    if (split_name != "all")
      throw DataError(rewritten + ": its " + split_name + " split would be other graphs",
                      "evaluate the file the run trained on, or pass --split all to evaluate all "
                      "of this one");
    spdlog::warn("{}: no graph is labelled train, validate or test", rewritten);
  } else if (!explicit_files && same_file(data, single) && run_graphs == ds.n_graphs()) {
    const Split sp = run_split(ds, split);
    for (int64_t i : sp.train) label[size_t(i)] = "train";
    for (int64_t i : sp.validate) label[size_t(i)] = "validate";
    for (int64_t i : sp.test) label[size_t(i)] = "test";
  } else if (explicit_files) {
    for (int role = 0; role < 3; ++role) {
      const char* part = std::array{"train", "validate", "test"}[size_t(role)];
      if (!same_file(data, split.value(part, std::string()))) continue;
      if (identity_differs(role)) {
        spdlog::warn("{}: its graphs are labelled other, not {}", rewritten, part);
        break;
      }
      std::fill(label.begin(), label.end(), part);
    }
  }
  // --data naming the run's file (or a file of its list) evaluates its split as without it.
  const bool other_data = !o.data.empty() && list_index == files.size();
  if (split_name == "all" || explicit_files || other_data) {
    if (other_data && split_name != "all" && !explicit_files && !same_file(o.data, single))
      throw ConfigError("evaluate: --split " + split_name +
                            " applies to the file the run was "
                            "split from (" +
                            single + ")",
                        "pass --split all to evaluate every graph of " + o.data);
    for (int64_t i = 0; i < ds.n_graphs(); ++i) ids.push_back(i);
  } else {
    if (run_graphs != ds.n_graphs())
      throw DataError(data + " has " + std::to_string(ds.n_graphs()) +
                          " graphs but the run split " + std::to_string(run_graphs),
                      "the file changed since training; pass --split all to evaluate all of it");
    const Split sp = run_split(ds, split);
    ids = split_name == "test" ? sp.test : split_name == "validate" ? sp.validate : sp.train;
  }
  int64_t batch_size = o.batch_size;
  if (batch_size <= 0) {
    const auto& t = record.at("config").at("NeuralNetwork").at("Training");
    batch_size = t.value("eval_batch_size", int64_t(0));
    if (batch_size <= 0) batch_size = t.value("batch_size", int64_t(16));
  }
  const std::string out =
      o.out.empty()
          ? (o.run_dir.empty() ? fs::path(ckpt).parent_path().parent_path().string() : o.run_dir) +
                "/eval_" + split_name
          : o.out;
  // Before the predictions, not after them: a place it cannot write stops it at once.
  create_folders(out, o.out.empty() ? "evaluate" : "evaluate --out");

  const bool has_forces = !block.forces.empty();
  MetricsAccumulator acc;
  ElementForceAccumulator by_z;
  std::ostringstream xyz, ecsv, fcsv, scsv;
  ecsv << "graph,split,n_atoms,energy_ref_ev,energy_pred_ev\n";
  // Stress in eV/Å³, Voigt order xx yy zz yz xz xy; errors over all 9 components.
  static constexpr int kVoigt[6][2] = {{0, 0}, {1, 1}, {2, 2}, {1, 2}, {0, 2}, {0, 1}};
  scsv << "graph,split,sxx_ref,syy_ref,szz_ref,syz_ref,sxz_ref,sxy_ref,sxx_pred,syy_pred,szz_pred,"
          "syz_pred,sxz_pred,sxy_pred\n";
  long double stress_abs = 0, stress_sq = 0;
  int64_t stress_graphs = 0;
  fcsv << "graph,atom,z,fx_ref,fy_ref,fz_ref,fx_pred,fy_pred,fz_pred\n";
  // Per head: sum |error|, sum error², values (the column heads only).
  std::vector<std::array<long double, 3>> column_err(setup.targets.heads.size(), {0, 0, 0});
  int64_t n_atoms_total = 0;
  for (size_t start = 0; start < ids.size(); start += size_t(batch_size)) {
    const std::vector<int64_t> chunk(
        ids.begin() + long(start),
        ids.begin() + long(std::min(ids.size(), start + size_t(batch_size))));
    const PreparedBatch b = prepare_batch(block, chunk, setup);
    const Prediction p = predict(gnn, setup.targets, b.batch, /*create_graph=*/false);
    std::vector<double> e_pred, f_pred;
    if (p.energy.defined()) e_pred = energies_ev(p.energy, b, setup.norm);
    if (p.forces.defined()) f_pred = to_doubles(p.forces, setup.norm.scale);
    std::vector<double> s_pred;  // [n_graphs, 9], zero for graphs without a cell
    if (p.stress.defined()) s_pred = to_doubles(p.stress, setup.norm.scale);
    std::vector<std::vector<double>> cols(setup.targets.heads.size());
    for (size_t k = 0; k < setup.targets.heads.size(); ++k)
      if (setup.targets.heads[k].source == TargetSource::kColumn) {
        const auto& t = setup.targets.heads[k];
        std::vector<double> v = to_doubles(p.outputs[k]);
        for (size_t i = 0; i < v.size(); ++i)
          v[i] = v[i] * setup.norm.column_std[k][i % size_t(t.dim)] +
                 setup.norm.column_mean[k][i % size_t(t.dim)];
        cols[k] = std::move(v);
      }
    for (size_t k = 0; k < cols.size(); ++k) {  // errors of the column heads, in their units
      if (cols[k].empty()) continue;
      const HeadTarget& t = setup.targets.heads[k];
      const bool per_atom = t.kind == HeadSpec::kNode;
      const auto& ref = (per_atom ? block.extra : block.graph_extra)[size_t(t.column)];
      size_t row = 0;
      for (int64_t id : chunk) {
        const int64_t r0 = per_atom ? block.atom_start[size_t(id)] : id;
        const int64_t nr = per_atom ? block.n_atoms[size_t(id)] : 1;
        for (int64_t r = r0; r < r0 + nr; ++r, ++row)
          for (int64_t c = 0; c < t.dim; ++c) {
            const long double d =
                cols[k][row * size_t(t.dim) + size_t(c)] - ref[size_t(r * t.dim + c)];
            column_err[k][0] += std::fabs(d);
            column_err[k][1] += d * d;
            column_err[k][2] += 1;
          }
      }
    }
    size_t atom = 0;
    for (size_t g = 0; g < chunk.size(); ++g) {
      const size_t id = size_t(chunk[g]);
      const int64_t n = block.n_atoms[id], a0 = block.atom_start[id];
      const int64_t gid = block.id_of(size_t(id));
      n_atoms_total += n;
      if (!e_pred.empty()) {
        acc.add_energies(&e_pred[g], &block.energy[id], &n, 1);
        ecsv << gid << "," << label[id] << "," << n << "," << num(block.energy[id]) << ","
             << num(e_pred[g]) << "\n";
      }
      if (!f_pred.empty() && has_forces)
        by_z.add(&f_pred[3 * atom], &block.forces[size_t(3 * a0)], &block.z[size_t(a0)], n);
      const double* s_ref = block.has_stress(id) ? &block.stress[9 * id] : nullptr;
      const double* s_out = s_pred.empty() || !block.bulk(id) ? nullptr : &s_pred[9 * g];
      if (s_out && s_ref) {
        scsv << gid << "," << label[id];
        for (const double* s : {s_ref, s_out})
          for (const auto& v : kVoigt) scsv << "," << num(s[3 * v[0] + v[1]]);
        scsv << "\n";
        for (int k = 0; k < 9; ++k) {
          const long double d = s_out[k] - s_ref[k];
          stress_abs += std::fabs(d);
          stress_sq += d * d;
        }
        ++stress_graphs;
      }
      // extxyz frame
      const double* cell = &block.cell[9 * id];
      bool has_cell = false;
      for (int k = 0; k < 9; ++k) has_cell = has_cell || cell[k] != 0.0;
      xyz << n << "\n";
      if (has_cell) {
        xyz << "Lattice=\"";
        for (int k = 0; k < 9; ++k) xyz << (k ? " " : "") << num(cell[k]);
        xyz << "\" ";
      }
      xyz << "Properties=species:S:1:pos:R:3" << (has_forces ? ":forces:R:3" : "")
          << (f_pred.empty() ? "" : ":pred_forces:R:3");
      for (size_t k = 0; k < setup.targets.heads.size(); ++k)
        if (!cols[k].empty() && setup.targets.heads[k].kind == HeadSpec::kNode)
          xyz << ":pred_" << setup.targets.heads[k].name << ":R:" << setup.targets.heads[k].dim;
      xyz << " energy=" << num(block.energy[id]);
      if (!e_pred.empty()) xyz << " pred_energy=" << num(e_pred[g]);
      for (const auto& [key, values] :
           {std::pair("stress", s_ref), std::pair("pred_stress", s_out)})
        if (values) {
          xyz << " " << key << "=\"";
          for (int k = 0; k < 9; ++k) xyz << (k ? " " : "") << num(values[k]);
          xyz << "\"";
        }
      for (size_t k = 0; k < setup.targets.heads.size(); ++k) {  // per-structure columns
        const HeadTarget& t = setup.targets.heads[k];
        if (cols[k].empty() || t.kind != HeadSpec::kGraph) continue;
        const size_t d = size_t(t.dim);
        const double* ref = &block.graph_extra[size_t(t.column)][d * id];
        for (const auto& [key, values] :
             {std::pair(t.name, ref),
              std::pair("pred_" + t.name, static_cast<const double*>(&cols[k][d * g]))}) {
          xyz << " " << key << "=\"";
          for (size_t c = 0; c < d; ++c) xyz << (c ? " " : "") << num(values[c]);
          xyz << "\"";
        }
      }
      xyz << " graph=" << gid << " split=" << label[id] << " pbc=\""
          << (block.pbc[3 * id] ? "T" : "F") << " " << (block.pbc[3 * id + 1] ? "T" : "F") << " "
          << (block.pbc[3 * id + 2] ? "T" : "F") << "\"\n";
      for (int64_t a = 0; a < n; ++a, ++atom) {
        const size_t ga = size_t(a0 + a);
        xyz << element_symbol(block.z[ga]);
        for (int c = 0; c < 3; ++c) xyz << " " << num(block.pos[3 * ga + size_t(c)]);
        if (has_forces)
          for (int c = 0; c < 3; ++c) xyz << " " << num(block.forces[3 * ga + size_t(c)]);
        if (!f_pred.empty())
          for (int c = 0; c < 3; ++c) xyz << " " << num(f_pred[3 * atom + size_t(c)]);
        for (size_t k = 0; k < setup.targets.heads.size(); ++k)
          for (int64_t c = 0; !cols[k].empty() && setup.targets.heads[k].kind == HeadSpec::kNode &&
                              c < setup.targets.heads[k].dim;
               ++c)
            xyz << " " << num(cols[k][size_t(int64_t(atom) * setup.targets.heads[k].dim + c)]);
        xyz << "\n";
        if (has_forces && !f_pred.empty()) {
          fcsv << gid << "," << a << "," << int(block.z[ga]);
          for (int c = 0; c < 3; ++c) fcsv << "," << num(block.forces[3 * ga + size_t(c)]);
          for (int c = 0; c < 3; ++c) fcsv << "," << num(f_pred[3 * atom + size_t(c)]);
          fcsv << "\n";
        }
      }
    }
  }
  const ErrorMetrics m = acc.result();
  nlohmann::json errors = {{"checkpoint", ckpt},
                           {"epoch", record.value("epoch", int64_t(0))},
                           {"data", data},
                           {"split", split_name},
                           {"graphs", int64_t(ids.size())},
                           {"atoms", n_atoms_total}};
  if (m.n_graphs > 0)
    errors["energy"] = {{"mae_mev_atom", m.energy_mae_mev_per_atom},
                        {"rmse_mev_atom", m.energy_rmse_mev_per_atom}};
  const double stress_mae = stress_graphs ? double(1e3L * stress_abs / (9 * stress_graphs)) : 0;
  const double stress_rmse =
      stress_graphs ? double(1e3L * std::sqrt(stress_sq / (9 * stress_graphs))) : 0;
  if (stress_graphs > 0)
    errors["stress"] = {{"graphs", stress_graphs},
                        {"mae_mev_a3", stress_mae},
                        {"rmse_mev_a3", stress_rmse},
                        {"mae_gpa", stress_mae * 1e-3 * kGpaPerEvA3},
                        {"rmse_gpa", stress_rmse * 1e-3 * kGpaPerEvA3}};
  const auto force_json = [](const ForceErrors& f) {
    return nlohmann::json{{"atoms", f.atoms},
                          {"mae_mev_a", f.mae_mev_per_a},
                          {"rmse_mev_a", f.rmse_mev_per_a},
                          {"vector_mae_mev_a", f.vector_mae_mev_per_a},
                          {"vector_rmse_mev_a", f.vector_rmse_mev_per_a}};
  };
  const ForceErrors forces = by_z.all();
  if (forces.atoms > 0) {
    errors["forces"] = force_json(forces);
    for (const ForceErrors& f : by_z.by_element()) {
      nlohmann::json e = force_json(f);
      e["element"] = element_symbol(uint8_t(f.z));
      e["z"] = f.z;
      errors["forces_by_element"].push_back(e);
    }
  }
  for (size_t k = 0; k < column_err.size(); ++k)
    if (column_err[k][2] > 0)
      errors["heads"][setup.targets.heads[k].name] = {
          {"values", int64_t(column_err[k][2])},
          {"mae", double(column_err[k][0] / column_err[k][2])},
          {"rmse", double(std::sqrt(column_err[k][1] / column_err[k][2]))}};
  write_file_atomic(out + "/predictions.extxyz", xyz.str());
  write_file_atomic(out + "/energies.csv", ecsv.str());
  if (has_forces) write_file_atomic(out + "/forces.csv", fcsv.str());
  if (stress_graphs > 0) write_file_atomic(out + "/stress.csv", scsv.str());
  write_file_atomic(out + "/errors.json",
                    errors.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");

  std::printf("%s split: %zu graphs, %lld atoms; checkpoint %s (epoch %lld); %d thread(s)\n",
              split_name.c_str(), ids.size(), (long long)n_atoms_total, ckpt.c_str(),
              (long long)record.value("epoch", int64_t(0)), int(threads));
  std::printf("%-8s %14s %14s\n", "", "MAE", "RMSE");
  if (m.n_graphs > 0)
    std::printf("%-8s %9.4g meV/atom %9.4g meV/atom\n", "energy", m.energy_mae_mev_per_atom,
                m.energy_rmse_mev_per_atom);
  if (forces.atoms > 0) {
    std::printf("%-8s %9.4g meV/Å    %9.4g meV/Å       (components)\n", "forces",
                forces.mae_mev_per_a, forces.rmse_mev_per_a);
    std::printf("%-8s %9.4g meV/Å    %9.4g meV/Å       (|F_pred - F_ref| per atom)\n", "|dF|",
                forces.vector_mae_mev_per_a, forces.vector_rmse_mev_per_a);
    std::printf("forces by element: %8s %12s %12s %12s\n", "atoms", "MAE meV/Å", "RMSE meV/Å",
                "|dF| MAE");
    for (const ForceErrors& f : by_z.by_element())
      std::printf("  %-16s %8lld %12.4g %12.4g %12.4g\n", element_symbol(uint8_t(f.z)).c_str(),
                  (long long)f.atoms, f.mae_mev_per_a, f.rmse_mev_per_a, f.vector_mae_mev_per_a);
  }
  if (stress_graphs > 0)
    std::printf("%-8s %9.4g meV/Å³   %9.4g meV/Å³      (%.4g / %.4g GPa, %lld graphs)\n", "stress",
                stress_mae, stress_rmse, stress_mae * 1e-3 * kGpaPerEvA3,
                stress_rmse * 1e-3 * kGpaPerEvA3, (long long)stress_graphs);
  if (errors.contains("heads"))
    for (const auto& [name, e] : errors["heads"].items())
      std::printf("%-8s %9.4g          %9.4g               (%lld values, the data's units)\n",
                  name.c_str(), e.at("mae").get<double>(), e.at("rmse").get<double>(),
                  (long long)e.at("values").get<int64_t>());
  std::printf("wrote %s/{predictions.extxyz,energies.csv,%s%serrors.json}\n", out.c_str(),
              has_forces ? "forces.csv," : "", stress_graphs > 0 ? "stress.csv," : "");
  std::printf("parity plot: python3 jobs/parity_plot.py %s\n", out.c_str());
  errors["out"] = out;
  return errors;
}

}  // namespace ddgnn
