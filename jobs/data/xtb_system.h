// The pieces of ddgnn-xtb-md (xtb_md.cpp) that are not the drivers: units, elements, the
// molecule and frame records, the checked xtb calculator, the seeded random numbers, and the
// xyz / extended XYZ file I/O.
#pragma once

#include <xtb.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

// Thread counts of the OpenMP and OpenBLAS runtimes that libxtb links; weak, so that the program
// also links against an xtb built without them.
extern "C" {
void omp_set_num_threads(int) __attribute__((weak));
void openblas_set_num_threads(int) __attribute__((weak));
}

namespace xtbmd {

// One thread unless asked otherwise: reruns are then bit-identical (threaded reductions are not),
// and on a busy machine OpenMP's spinning threads make xtb tens of times slower.
inline void set_threads(int n) {
  if (omp_set_num_threads) omp_set_num_threads(n);
  if (openblas_set_num_threads) openblas_set_num_threads(n);
}

// CODATA 2018.
constexpr double kHartreeEv = 27.211386245988;
constexpr double kBohrAng = 0.529177210903;
constexpr double kBoltzmannEv = 8.617333262e-5;        // eV/K
constexpr double kElementaryCharge = 1.602176634e-19;  // C (= J/eV)
constexpr double kDalton = 1.66053906660e-27;          // kg
// 1 eV/(Å·u) expressed in Å/fs²; equivalently 1 eV/u in Å²/fs².
constexpr double kAccel = kElementaryCharge / (1e-10 * kDalton) * 1e10 * 1e-30;

struct Element {
  const char* symbol;
  int z;
  double mass;  // u, IUPAC standard atomic weights (abridged)
};

constexpr Element kElements[] = {
    {"H", 1, 1.008},  {"B", 5, 10.81},   {"C", 6, 12.011},   {"N", 7, 14.007},
    {"O", 8, 15.999}, {"F", 9, 18.998},  {"Si", 14, 28.085}, {"P", 15, 30.974},
    {"S", 16, 32.06}, {"Cl", 17, 35.45}, {"Br", 35, 79.904}, {"I", 53, 126.90},
};

inline const Element& find_element(const std::string& symbol, const std::string& where) {
  for (const auto& e : kElements) {
    if (symbol == e.symbol) return e;
  }
  std::string known;
  for (const auto& e : kElements) known += std::string(" ") + e.symbol;
  throw std::runtime_error(where + ": element '" + symbol +
                           "' is not in the mass table of xtb_md.cpp (known:" + known +
                           "); add it to kElements");
}

struct Molecule {
  std::vector<std::string> symbols;
  std::vector<int> numbers;
  std::vector<double> masses;  // u
  std::vector<double> pos;     // Å, [n][3]
  size_t size() const { return symbols.size(); }
  void add(const std::string& symbol, double x, double y, double z, const std::string& where) {
    const Element& e = find_element(symbol, where);
    symbols.push_back(e.symbol);
    numbers.push_back(e.z);
    masses.push_back(e.mass);
    pos.insert(pos.end(), {x, y, z});
  }
};

// One stored frame of an extxyz file written by this program.
struct Frame {
  Molecule mol;
  double energy = 0;           // eV
  std::vector<double> forces;  // eV/Å, [n][3]
};

// ---- xtb ------------------------------------------------------------------------------------

// Owns the xtb environment, molecule, calculator and results; every call is checked.
class Xtb {
 public:
  Xtb(const Molecule& mol, double accuracy) : n_(static_cast<int>(mol.size())) {
    try {
      init(mol, accuracy);
    } catch (...) {
      release();
      throw;
    }
  }
  ~Xtb() { release(); }
  Xtb(const Xtb&) = delete;
  Xtb& operator=(const Xtb&) = delete;

  // Energy (eV) and forces (eV/Å) at pos (Å). With fresh_guess the SCC starts from xtb's
  // default guess instead of the previous wavefunction, so the result does not depend on history.
  double evaluate(const std::vector<double>& pos, std::vector<double>* forces, bool fresh_guess) {
    std::vector<double> bohr = to_bohr(pos);
    xtb_updateMolecule(env_, mol_, bohr.data(), nullptr);
    check("xtb_updateMolecule");
    if (fresh_guess) {
      xtb_delResults(&res_);
      res_ = xtb_newResults();
      if (!res_) throw std::runtime_error("xtb_newResults returned null");
    }
    xtb_singlepoint(env_, mol_, calc_, res_);
    check("xtb_singlepoint (SCC did not converge or the geometry is unreasonable?)");
    double energy = 0;
    xtb_getEnergy(env_, res_, &energy);
    check("xtb_getEnergy");
    if (forces) {
      std::vector<double> grad(3 * n_);
      xtb_getGradient(env_, res_, grad.data());
      check("xtb_getGradient");
      forces->resize(grad.size());
      for (size_t i = 0; i < grad.size(); ++i) (*forces)[i] = -grad[i] * kHartreeEv / kBohrAng;
    }
    return energy * kHartreeEv;
  }

 private:
  void init(const Molecule& mol, double accuracy) {
    env_ = xtb_newEnvironment();
    if (!env_) throw std::runtime_error("xtb_newEnvironment returned null");
    xtb_setVerbosity(env_, XTB_VERBOSITY_MUTED);
    check("xtb_setVerbosity");
    std::vector<double> bohr = to_bohr(mol.pos);
    const double charge = 0.0;
    const int uhf = 0;
    mol_ = xtb_newMolecule(env_, &n_, mol.numbers.data(), bohr.data(), &charge, &uhf, nullptr,
                           nullptr);
    check("xtb_newMolecule");
    calc_ = xtb_newCalculator();
    if (!calc_) throw std::runtime_error("xtb_newCalculator returned null");
    xtb_loadGFN2xTB(env_, mol_, calc_, nullptr);
    check("xtb_loadGFN2xTB");
    xtb_setAccuracy(env_, calc_, accuracy);
    check("xtb_setAccuracy");
    res_ = xtb_newResults();
    if (!res_) throw std::runtime_error("xtb_newResults returned null");
  }
  void release() {
    if (res_) xtb_delResults(&res_);
    if (calc_) xtb_delCalculator(&calc_);
    if (mol_) xtb_delMolecule(&mol_);
    if (env_) xtb_delEnvironment(&env_);
  }
  static std::vector<double> to_bohr(const std::vector<double>& ang) {
    std::vector<double> b(ang.size());
    for (size_t i = 0; i < ang.size(); ++i) b[i] = ang[i] / kBohrAng;
    return b;
  }
  void check(const char* what) {
    if (xtb_checkEnvironment(env_) == 0) return;
    char buf[4096] = {0};
    const int size = sizeof buf;
    xtb_getError(env_, buf, &size);
    throw std::runtime_error(std::string("xtb error in ") + what + ": " + buf);
  }

  int n_;
  xtb_TEnvironment env_ = nullptr;
  xtb_TMolecule mol_ = nullptr;
  xtb_TCalculator calc_ = nullptr;
  xtb_TResults res_ = nullptr;
};

// ---- random numbers: fixed algorithms (mt19937_64 + Box–Muller), not std::*_distribution,
// whose output differs between standard libraries ----

class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  double uniform() { return (static_cast<double>(gen_() >> 11) + 0.5) * 0x1.0p-53; }  // (0,1)
  double normal() {  // Box–Muller; std::normal_distribution differs between libraries
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double r = std::sqrt(-2.0 * std::log(uniform()));
    const double phi = 2.0 * 3.14159265358979323846 * uniform();
    spare_ = r * std::sin(phi);
    has_spare_ = true;
    return r * std::cos(phi);
  }

 private:
  std::mt19937_64 gen_;
  bool has_spare_ = false;
  double spare_ = 0;
};

// ---- file I/O -------------------------------------------------------------------------------

inline Molecule read_xyz(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open geometry file '" + path + "'");
  std::string line;
  int n = 0;
  if (!std::getline(in, line) || !(std::istringstream(line) >> n) || n <= 0) {
    throw std::runtime_error(path + ":1: expected the number of atoms (xyz format)");
  }
  std::getline(in, line);  // comment
  Molecule mol;
  for (int i = 0; i < n; ++i) {
    const std::string where = path + ":" + std::to_string(i + 3);
    if (!std::getline(in, line)) {
      throw std::runtime_error(where + ": file ends after " + std::to_string(i) + " of " +
                               std::to_string(n) + " atoms");
    }
    std::istringstream ls(line);
    std::string sym;
    double x, y, z;
    if (!(ls >> sym >> x >> y >> z)) {
      throw std::runtime_error(where + ": expected 'symbol x y z' (Å), got '" + line + "'");
    }
    mol.add(sym, x, y, z, where);
  }
  return mol;
}

inline const char* const kProperties = "Properties=species:S:1:pos:R:3:forces:R:3";

inline void write_frame(std::FILE* f, const Molecule& mol, const std::vector<double>& forces,
                        double energy, const std::string& config_type) {
  std::fprintf(f, "%zu\n%s energy=%.10f pbc=\"F F F\" config_type=%s\n", mol.size(), kProperties,
               energy, config_type.c_str());
  for (size_t i = 0; i < mol.size(); ++i) {
    std::fprintf(f, "%-2s %16.10f %16.10f %16.10f %16.10f %16.10f %16.10f\n",
                 mol.symbols[i].c_str(), mol.pos[3 * i], mol.pos[3 * i + 1], mol.pos[3 * i + 2],
                 forces[3 * i], forces[3 * i + 1], forces[3 * i + 2]);
  }
}

// Streams through an extxyz file written by this program (a --large set has 100000 frames) and
// parses the frames whose indices are in `wanted` (sorted); returns the number of frames.
inline size_t read_extxyz(const std::string& path, const std::vector<size_t>& wanted,
                          std::vector<Frame>* frames) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open extxyz file '" + path + "'");
  size_t count = 0;
  std::string line;
  size_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    int n = 0;
    if (!(std::istringstream(line) >> n) || n <= 0) {
      throw std::runtime_error(path + ":" + std::to_string(lineno) +
                               ": expected the number of atoms of a frame");
    }
    std::string header;
    if (!std::getline(in, header)) throw std::runtime_error(path + ": truncated frame header");
    ++lineno;
    if (!std::binary_search(wanted.begin(), wanted.end(), count++)) {
      for (int i = 0; i < n; ++i, ++lineno) {
        if (!std::getline(in, line)) {
          throw std::runtime_error(path + ":" + std::to_string(lineno + 1) +
                                   ": file ends inside a frame");
        }
      }
      continue;
    }
    const std::string where = path + ":" + std::to_string(lineno);
    if (header.find(kProperties) == std::string::npos) {
      throw std::runtime_error(where + ": expected '" + kProperties +
                               "' (a file written by ddgnn-xtb-md)");
    }
    const size_t e = header.find(" energy=");
    if (e == std::string::npos) throw std::runtime_error(where + ": no energy= key");
    Frame fr;
    fr.energy = std::strtod(header.c_str() + e + 8, nullptr);
    for (int i = 0; i < n; ++i) {
      ++lineno;
      const std::string w = path + ":" + std::to_string(lineno);
      if (!std::getline(in, line)) throw std::runtime_error(w + ": file ends inside a frame");
      std::istringstream ls(line);
      std::string sym;
      double x, y, z, fx, fy, fz;
      if (!(ls >> sym >> x >> y >> z >> fx >> fy >> fz)) {
        throw std::runtime_error(w + ": expected 'symbol x y z fx fy fz'");
      }
      fr.mol.add(sym, x, y, z, w);
      fr.forces.insert(fr.forces.end(), {fx, fy, fz});
    }
    frames->push_back(std::move(fr));
  }
  if (count == 0) throw std::runtime_error(path + ": no frames");
  return count;
}

}  // namespace xtbmd
