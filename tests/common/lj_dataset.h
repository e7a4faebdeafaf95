// Small datasets with exact labels for end-to-end tests of `ddgnn train`: clusters (or periodic
// cells) of argon-like (Z=18) and neon-like (Z=10) atoms under a Lennard-Jones potential
// (energy and analytic forces), plus a per-species offset so that reference energies matter.
// Written with the real DatasetWriter.
#pragma once

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "loader/dataset.h"
#include "loader/frame.h"

namespace ddgnn::testing {

struct LjOptions {
  int n_frames = 40;
  int n_atoms = 6;
  unsigned seed = 1;
  bool forces = true;     // store forces
  bool periodic = false;  // cubic cell of side `cell`, pbc on all axes
  double cell = 7.0;      // Å
  bool charges = false;   // an extra per-atom column "charges" (a smooth function of pos)
  // A per-structure key "gap" of two numbers: the mean over atoms of Σ_j exp(-r_ij / 2 Å) (an
  // invariant of the structure) and the fraction of neon-like atoms (what a graph head learns).
  bool gap = false;
  int single_atom_frame = -1;  // this frame holds one atom only (no neighbours)
  int vary_atoms = 0;          // > 0: frame k holds n_atoms + k % (vary_atoms + 1) atoms
  // > 0: a per-structure key "dataset_name" (the branch of multi-branch heads), k % branches, and
  // the energies of branch b frames shifted by 0.3 b eV per atom (another level of theory).
  int branches = 0;
  // A per-structure key "graph_attr" of two numbers: the frame's branch (k % branches, 0 without
  // branches) and 1.
  bool graph_attr = false;
  // >= 0: this frame is a mislabelled, overlapping structure: atoms 0 and 1 0.05 Å apart, its
  // energy `overlapping_energy` eV above the species offsets and its forces zero (a loss spike).
  int overlapping_frame = -1;
  double overlapping_energy = 50.0;
  // > 0: frame k's config_type is "cluster<k / frames_per_group>" (frames of one "molecule",
  // kept whole by Dataset.split_by group).
  int frames_per_group = 0;
  double energy_shift = 0.0;   // eV per atom added to every energy (another level of theory)
  int64_t format_version = 0;  // of the file written (0: the newest)
};

// LJ energy (eV) and forces (eV/Å) of `f`; epsilon 0.0104 eV, sigma 3.4 Å, with per-species
// offsets -1.5 eV (Z=18) and -0.7 eV (Z=10). A cluster: every pair, no cutoff. Periodic (a cubic
// cell of side `cell` >= 5 Å): every periodic image within 5 Å, the pair energy shifted to zero
// there, and the stress (1/V) dE/dε = (1/V) Σ_pairs (dE/dr / r) d ⊗ d, eV/Å³.
inline void lj_label(Frame& f, bool periodic, double cell) {
  const double eps = 0.0104, sig = 3.4, rc = 5.0;
  const auto pair_energy = [&](double r2) {
    const double s6 = std::pow(sig * sig / r2, 3);
    return 4 * eps * (s6 * s6 - s6);
  };
  const size_t n = f.n_atoms();
  f.forces.assign(3 * n, 0.0);
  f.stress.fill(0.0);
  f.has_stress = periodic;
  double e = 0.0;
  for (size_t i = 0; i < n; ++i) e += f.z[i] == 18 ? -1.5 : -0.7;
  const auto add_pair = [&](size_t i, size_t j, const double* d) {
    const double r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
    if (periodic && r2 >= rc * rc) return;
    const double s6 = std::pow(sig * sig / r2, 3);
    e += pair_energy(r2) - (periodic ? pair_energy(rc * rc) : 0.0);
    const double dEdr_over_r = 4 * eps * (-12 * s6 * s6 + 6 * s6) / r2;
    for (int c = 0; c < 3; ++c) {
      f.forces[3 * i + c] += dEdr_over_r * d[c];
      f.forces[3 * j + c] -= dEdr_over_r * d[c];
      for (int c2 = 0; c2 < 3 && periodic; ++c2)
        f.stress[size_t(3 * c + c2)] += dEdr_over_r * d[c] * d[c2] / (cell * cell * cell);
    }
  };
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j) {
      double d[3];
      for (int c = 0; c < 3; ++c) {
        d[c] = f.pos[3 * j + c] - f.pos[3 * i + c];
        if (periodic) d[c] -= cell * std::round(d[c] / cell);
      }
      if (!periodic) {
        add_pair(i, j, d);
        continue;
      }
      for (int a = -1; a <= 1; ++a)  // images beyond ±1 cell are farther than 5 Å
        for (int b = -1; b <= 1; ++b)
          for (int k = -1; k <= 1; ++k) {
            const double di[3] = {d[0] + a * cell, d[1] + b * cell, d[2] + k * cell};
            add_pair(i, j, di);
          }
    }
  f.energy = e;
  f.has_energy = true;
}

inline void write_lj_dataset(const std::string& path, const LjOptions& o) {
  std::mt19937 rng(o.seed);
  std::uniform_real_distribution<double> u(-0.35, 0.35);
  WriterOptions wo;
  if (o.charges) wo.extra_columns = {"charges"};
  if (o.gap) wo.info_keys = {"gap"};
  if (o.branches > 0) wo.info_keys.push_back("dataset_name");
  if (o.graph_attr) wo.info_keys.push_back("graph_attr");
  wo.format_version = o.format_version;
  DatasetWriter w(path, wo);
  for (int k = 0; k < o.n_frames; ++k) {
    Frame f;
    const int n = k == o.single_atom_frame ? 1 : o.n_atoms + k % (o.vary_atoms + 1);
    for (int i = 0; i < n; ++i) {
      f.z.push_back(i % 3 == 0 ? 10 : 18);
      // atoms on a 3.7 Å grid, displaced
      const double base[3] = {3.7 * (i % 2), 3.7 * ((i / 2) % 2), 3.7 * (i / 4)};
      for (int c = 0; c < 3; ++c) f.pos.push_back(base[c] + 0.5 + u(rng));
    }
    if (o.periodic) {
      f.has_cell = true;
      f.cell = {o.cell, 0, 0, 0, o.cell, 0, 0, 0, o.cell};
      f.pbc = {true, true, true};
    }
    lj_label(f, o.periodic, o.cell);
    if (k == o.overlapping_frame && n > 1) {
      for (int c = 0; c < 3; ++c) f.pos[size_t(3 + c)] = f.pos[size_t(c)] + (c == 0 ? 0.05 : 0.0);
      f.energy = o.overlapping_energy;
      for (int i = 0; i < n; ++i) f.energy += f.z[size_t(i)] == 18 ? -1.5 : -0.7;
      f.forces.assign(f.forces.size(), 0.0);
    }
    if (!o.forces) f.forces.clear();
    if (o.charges) {
      ExtraColumn q{"charges", 1, {}};
      for (int i = 0; i < n; ++i)
        q.values.push_back(0.1 * std::sin(f.pos[3 * i]) + (f.z[i] == 10 ? 0.2 : -0.1));
      f.extra.push_back(q);
    }
    if (o.gap) {
      ExtraColumn g{"gap", 2, {0.0, 0.0}};
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) {
          double r2 = 0;
          for (int c = 0; c < 3; ++c) r2 += std::pow(f.pos[3 * i + c] - f.pos[3 * j + c], 2);
          if (j != i) g.values[0] += std::exp(-std::sqrt(r2) / 2) / n;
        }
        g.values[1] += (f.z[i] == 10 ? 1.0 : 0.0) / n;
      }
      f.info.push_back(g);
    }
    if (o.branches > 0) {
      f.info.push_back({"dataset_name", 1, {double(k % o.branches)}});
      f.energy += 0.3 * (k % o.branches) * n;
    }
    f.energy += o.energy_shift * n;
    if (o.graph_attr)
      f.info.push_back({"graph_attr", 2, {double(o.branches > 0 ? k % o.branches : 0), 1.0}});
    if (o.frames_per_group > 0) f.config_type = "cluster" + std::to_string(k / o.frames_per_group);
    w.add(f, path + ":" + std::to_string(k));
  }
  w.note_source("lj_dataset.h", o.n_frames);
  w.commit();
}

}  // namespace ddgnn::testing
