// Frames no training set should hold unseen: an energy per atom far from the others of its
// composition and config_type (robust: median and median absolute deviation of the group's
// distinct energies, judged once a group has min_composition of them: fewer give no trustworthy
// spread, and exact copies of a frame none), a force beyond any physical scale,
// two atoms on top of each other. Found by `convert` (stored in the dataset, refused with
// --strict), shown by `info`, refused by `train` unless Dataset.allow_outliers.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "loader/frame.h"

namespace ddgnn {

struct OutlierOptions {
  double energy_mads = 10.0;     // |E/atom - median| above this many MADs of the composition
  double energy_floor = 0.001;   // eV/atom: the threshold never falls below this (MAD ~ 0)
  int64_t min_composition = 10;  // distinct energies of a group needed to judge them
  // A frame of a group too small to judge is still an outlier when its energy per atom lies
  // further than this (eV/atom) from a robust least-squares fit of energy to per-element counts
  // over the whole set: no chemistry binds or strains 20 eV an atom beyond its elements' mean (a
  // cohesive energy is at most ~9), while a unit slip or a broken label does.
  double max_fit_residual = 20.0;
  // ... or beyond this absolute bound (eV/atom), which also judges frames the fit cannot: those
  // holding an element no other frame has (no element's all-electron energy reaches 10^7 eV).
  double max_energy_per_atom = 1e7;
  double max_force = 100.0;   // eV/Å: a larger force component norm is an outlier
  double min_distance = 0.1;  // Å: two atoms closer than this (periodic images included)
};

struct Outlier {
  int64_t graph = 0;  // index of the frame in the dataset (0-based)
  std::string
      what;  // "energy ... eV/atom is 41 MADs ...", "largest force ...", "atoms 3 and 9 ..."
};

// Feeds frames in dataset order; finish() judges them all (the energy test needs every frame of
// a composition). About 56 bytes a frame.
class OutlierScan {
 public:
  explicit OutlierScan(OutlierOptions options = {});
  void add(const Frame& frame);
  int64_t n_frames() const { return int64_t(m_frames.size()); }
  // Every outlier, by graph index; a frame may appear once per reason.
  std::vector<Outlier> finish() const;
  // Frames whose energy was not judged (their composition has fewer than min_composition frames).
  int64_t energy_unjudged() const;

 private:
  struct Summary {
    uint64_t composition = 0;
    double energy_per_atom = 0.0;
    double max_force = 0.0;
    double min_distance = 0.0;  // +inf when no pair is closer than options.min_distance
    int32_t force_atom = -1, close_a = -1, close_b = -1;
    int32_t n_atoms = 0;
  };
  // Energy minus the per-element fit, eV/atom, for every frame (NaN where it has no energy).
  std::vector<double> fit_residuals() const;
  // Each group's distinct energies per atom (exact copies once), sorted.
  std::unordered_map<uint64_t, std::vector<double>> distinct_energies() const;
  OutlierOptions m_options;
  std::vector<Summary> m_frames;
  std::unordered_map<uint64_t, std::string> m_formula;  // composition -> "Cu108", "C2H6O"
  // composition -> (atomic number, count) of its elements
  std::unordered_map<uint64_t, std::vector<std::pair<uint8_t, int32_t>>> m_counts;
};

// The closest pair of atoms of `frame` nearer than `limit` Å (periodic images included):
// {distance, a, b}, or {+inf, -1, -1} when there is none.
struct ClosePair {
  double distance;
  int32_t a, b;
};
ClosePair closest_pair_below(const Frame& frame, double limit);

// The first `max_lines` outliers as lines "graph 17: ...", then "... and N more".
std::string outlier_lines(const std::vector<Outlier>& outliers, size_t max_lines,
                          const std::string& indent = "  ");

}  // namespace ddgnn
