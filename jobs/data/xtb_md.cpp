// ddgnn-xtb-md: GFN2-xTB molecular dynamics through xtb's C API (velocity Verlet, Bussi
// stochastic velocity-rescaling thermostat driven by a seeded std::mt19937_64), writing extended
// XYZ frames; --fd-check compares stored forces with central differences of xtb energies.

#include "xtb_system.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using namespace xtbmd;

// ---- molecular dynamics ---------------------------------------------------------------------

struct MdOptions {
  std::string in, out, config_type;
  int frames = 100;
  int stride = 10;
  int equil = 1000;
  double dt = 0.5;           // fs
  double temperature = 500;  // K
  double tau = 50;           // fs, thermostat time constant
  uint64_t seed = 1;
  double accuracy = 0.01;  // xtb_setAccuracy: SCC thresholds scale with it (xtb's default is 1)
  int relax = 0;           // FIRE steps towards the GFN2 minimum before the MD (0: none)
  double fmax = 0.01;      // eV/Å: the relaxation stops below this largest force component
};

double kinetic_ev(const Molecule& mol, const std::vector<double>& vel) {
  double k = 0;
  for (size_t i = 0; i < mol.size(); ++i) {
    const double v2 =
        vel[3 * i] * vel[3 * i] + vel[3 * i + 1] * vel[3 * i + 1] + vel[3 * i + 2] * vel[3 * i + 2];
    k += 0.5 * mol.masses[i] * v2 / kAccel;
  }
  return k;
}

// Removes centre-of-mass velocity and rigid rotation about the centre of mass.
void remove_drift(const Molecule& mol, std::vector<double>& vel) {
  const size_t n = mol.size();
  double mtot = 0, com[3] = {0, 0, 0}, p[3] = {0, 0, 0};
  for (size_t i = 0; i < n; ++i) {
    mtot += mol.masses[i];
    for (int d = 0; d < 3; ++d) {
      com[d] += mol.masses[i] * mol.pos[3 * i + d];
      p[d] += mol.masses[i] * vel[3 * i + d];
    }
  }
  for (int d = 0; d < 3; ++d) com[d] /= mtot;
  for (size_t i = 0; i < n; ++i) {
    for (int d = 0; d < 3; ++d) vel[3 * i + d] -= p[d] / mtot;
  }
  if (n < 3) return;
  double L[3] = {0, 0, 0}, I[3][3] = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}};
  for (size_t i = 0; i < n; ++i) {
    const double m = mol.masses[i];
    const double r[3] = {mol.pos[3 * i] - com[0], mol.pos[3 * i + 1] - com[1],
                         mol.pos[3 * i + 2] - com[2]};
    const double* v = &vel[3 * i];
    L[0] += m * (r[1] * v[2] - r[2] * v[1]);
    L[1] += m * (r[2] * v[0] - r[0] * v[2]);
    L[2] += m * (r[0] * v[1] - r[1] * v[0]);
    const double r2 = r[0] * r[0] + r[1] * r[1] + r[2] * r[2];
    for (int a = 0; a < 3; ++a) {
      for (int b = 0; b < 3; ++b) I[a][b] += m * ((a == b ? r2 : 0.0) - r[a] * r[b]);
    }
  }
  const double det = I[0][0] * (I[1][1] * I[2][2] - I[1][2] * I[2][1]) -
                     I[0][1] * (I[1][0] * I[2][2] - I[1][2] * I[2][0]) +
                     I[0][2] * (I[1][0] * I[2][1] - I[1][1] * I[2][0]);
  if (std::fabs(det) < 1e-12) return;  // linear molecule: leave rotation alone
  double inv[3][3];
  for (int a = 0; a < 3; ++a) {
    for (int b = 0; b < 3; ++b) {
      const int a1 = (b + 1) % 3, a2 = (b + 2) % 3, b1 = (a + 1) % 3, b2 = (a + 2) % 3;
      inv[a][b] = (I[a1][b1] * I[a2][b2] - I[a1][b2] * I[a2][b1]) / det;
    }
  }
  double w[3];
  for (int a = 0; a < 3; ++a) w[a] = inv[a][0] * L[0] + inv[a][1] * L[1] + inv[a][2] * L[2];
  for (size_t i = 0; i < n; ++i) {
    const double r[3] = {mol.pos[3 * i] - com[0], mol.pos[3 * i + 1] - com[1],
                         mol.pos[3 * i + 2] - com[2]};
    vel[3 * i] -= w[1] * r[2] - w[2] * r[1];
    vel[3 * i + 1] -= w[2] * r[0] - w[0] * r[2];
    vel[3 * i + 2] -= w[0] * r[1] - w[1] * r[0];
  }
}

// Bussi, Donadio, Parrinello, J. Chem. Phys. 126, 014101 (2007): the factor that rescales the
// velocities over one step dt with time constant tau towards the canonical distribution.
double bussi_scale(double kinetic, double target, int nf, double dt, double tau, Rng& rng) {
  const double c = std::exp(-dt / tau);
  const double r1 = rng.normal();
  double sum_r2 = 0;  // chi-squared with nf - 1 degrees of freedom, as a sum of squares
  for (int i = 1; i < nf; ++i) {
    const double r = rng.normal();
    sum_r2 += r * r;
  }
  const double ratio = target / (nf * kinetic);
  const double alpha2 =
      c + (1 - c) * (sum_r2 + r1 * r1) * ratio + 2 * r1 * std::sqrt(c * (1 - c) * ratio);
  const double sign = (r1 + std::sqrt(c / ((1 - c) * ratio)) < 0) ? -1.0 : 1.0;
  return sign * std::sqrt(alpha2);
}

// FIRE (Bitzek et al., Phys. Rev. Lett. 97, 170201 (2006); the constants of ASE's FIRE), unit
// masses: moves `pos` towards the nearest GFN2 minimum for at most `steps` steps, stopping once no
// force component exceeds `fmax` eV/Å; a step moves the atoms by at most 0.2 Å in all. Starting
// geometries from a force field can sit far from it (MMFF94 gives CO2 C=O bonds of 1.40 Å; GFN2
// 1.16 Å), and the energy released would heat a small molecule for hundreds of fs of MD.
void relax(Xtb& xtb, std::vector<double>& pos, int steps, double fmax, const std::string& what) {
  const double dt_max = 1.0, max_step = 0.2, f_inc = 1.1, f_dec = 0.5, a_start = 0.1, f_a = 0.99;
  const int n_min = 5;
  double dt = 0.1, a = a_start;
  int positive = 0, step = 0;
  std::vector<double> v(pos.size(), 0.0), f;
  double energy = xtb.evaluate(pos, &f, false);
  const double e0 = energy;
  auto largest = [&f] {
    double m = 0;
    for (double x : f) m = std::max(m, std::fabs(x));
    return m;
  };
  for (; step < steps && largest() > fmax; ++step) {
    double vf = 0, vv = 0, ff = 0;
    for (size_t i = 0; i < f.size(); ++i) {
      vf += v[i] * f[i];
      vv += v[i] * v[i];
      ff += f[i] * f[i];
    }
    if (vf > 0) {
      const double mix = std::sqrt(vv / ff);
      for (size_t i = 0; i < v.size(); ++i) v[i] = (1 - a) * v[i] + a * f[i] * mix;
      if (++positive > n_min) {
        dt = std::min(dt * f_inc, dt_max);
        a *= f_a;
      }
    } else {
      std::fill(v.begin(), v.end(), 0.0);
      a = a_start;
      dt *= f_dec;
      positive = 0;
    }
    double dr2 = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] += dt * f[i];
      dr2 += dt * v[i] * dt * v[i];
    }
    const double scale = dr2 > max_step * max_step ? max_step / std::sqrt(dr2) : 1.0;
    for (size_t i = 0; i < pos.size(); ++i) pos[i] += scale * dt * v[i];
    energy = xtb.evaluate(pos, &f, false);
  }
  std::fprintf(
      stderr,
      "ddgnn-xtb-md: %s relaxed in %d FIRE steps: energy %+.6f eV, largest force %.2e eV/A%s\n",
      what.c_str(), step, energy - e0, largest(),
      largest() > fmax ? " (not converged; the MD starts from there)" : "");
}

int run_md(const MdOptions& o) {
  Molecule mol = read_xyz(o.in);
  const size_t n = mol.size();
  const int nf = n >= 3 ? static_cast<int>(3 * n - 6) : static_cast<int>(3 * n - 5);
  Rng rng(o.seed);
  Xtb xtb(mol, o.accuracy);
  if (o.relax > 0) relax(xtb, mol.pos, o.relax, o.fmax, o.in);

  // Maxwell–Boltzmann velocities at T, drift removed, rescaled to exactly T.
  std::vector<double> vel(3 * n);
  for (size_t i = 0; i < n; ++i) {
    const double sigma = std::sqrt(kBoltzmannEv * o.temperature / mol.masses[i] * kAccel);
    for (int d = 0; d < 3; ++d) vel[3 * i + d] = sigma * rng.normal();
  }
  remove_drift(mol, vel);
  const double target = 0.5 * nf * kBoltzmannEv * o.temperature;
  const double s0 = std::sqrt(target / kinetic_ev(mol, vel));
  for (double& v : vel) v *= s0;

  std::vector<double> forces;
  double energy = xtb.evaluate(mol.pos, &forces, false);

  const std::string tmp = o.out + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) throw std::runtime_error("cannot write '" + tmp + "': " + std::strerror(errno));
  const long total = o.equil + static_cast<long>(o.frames) * o.stride;
  double temp_sum = 0;
  int written = 0;
  try {
    for (long step = 1; step <= total; ++step) {
      for (size_t i = 0; i < n; ++i) {
        const double a = 0.5 * o.dt * kAccel / mol.masses[i];
        for (int d = 0; d < 3; ++d) {
          vel[3 * i + d] += a * forces[3 * i + d];
          mol.pos[3 * i + d] += o.dt * vel[3 * i + d];
        }
      }
      energy = xtb.evaluate(mol.pos, &forces, false);
      for (size_t i = 0; i < n; ++i) {
        const double a = 0.5 * o.dt * kAccel / mol.masses[i];
        for (int d = 0; d < 3; ++d) vel[3 * i + d] += a * forces[3 * i + d];
      }
      const double alpha = bussi_scale(kinetic_ev(mol, vel), target, nf, o.dt, o.tau, rng);
      for (double& v : vel) v *= alpha;
      if (step > o.equil && (step - o.equil) % o.stride == 0) {
        write_frame(f, mol, forces, energy, o.config_type);
        temp_sum += 2 * kinetic_ev(mol, vel) / (nf * kBoltzmannEv);
        ++written;
      }
    }
  } catch (...) {
    std::fclose(f);
    std::remove(tmp.c_str());
    throw;
  }
  if (std::fflush(f) != 0 || std::ferror(f) || std::fclose(f) != 0) {
    std::remove(tmp.c_str());
    throw std::runtime_error("error writing '" + tmp + "' (disk full?)");
  }
  if (std::rename(tmp.c_str(), o.out.c_str()) != 0) {
    throw std::runtime_error("cannot rename '" + tmp + "' to '" + o.out +
                             "': " + std::strerror(errno));
  }
  std::fprintf(stderr, "ddgnn-xtb-md: %d frames of %zu atoms -> %s (mean T of frames %.1f K)\n",
               written, n, o.out.c_str(), temp_sum / std::max(written, 1));
  return 0;
}

// ---- finite-difference check ----------------------------------------------------------------

// Defaults measured on ethanol and aspirin (accuracy 0.01): re-evaluated energies scatter by
// ~3e-10 eV (SCC convergence), i.e. ~1e-6 eV/Å after dividing by 2h; the O(h²) truncation error is
// ~2e-6 eV/Å at h = 2e-4 Å; stored forces agree with fresh ones to ~5e-6 eV/Å. Frames written
// with accuracy 1 (xtb's default) miss by ~1e-4 eV/Å and fail the 5e-5 tolerance.
struct FdOptions {
  std::string file;
  int frames = 3;
  int atoms = 3;
  double h = 2e-4;    // Å
  double tol = 5e-5;  // eV/Å
  double accuracy = 0.01;
};

int run_fd(const FdOptions& o) {
  std::vector<Frame> frames;
  const size_t count = read_extxyz(o.file, {}, &frames);
  const int nfr = static_cast<int>(std::min<size_t>(o.frames, count));
  std::vector<size_t> wanted;  // first, ..., last
  for (int k = 0; k < nfr; ++k) {
    wanted.push_back(nfr == 1 ? 0 : static_cast<size_t>(k) * (count - 1) / (nfr - 1));
  }
  read_extxyz(o.file, wanted, &frames);
  double max_abs = 0, max_rel = 0, max_de = 0, max_df = 0;
  int checked = 0;
  for (int k = 0; k < static_cast<int>(frames.size()); ++k) {
    const Frame& fr = frames[k];
    Xtb xtb(fr.mol, o.accuracy);
    std::vector<double> f0;
    const double e0 = xtb.evaluate(fr.mol.pos, &f0, true);
    max_de = std::max(max_de, std::fabs(e0 - fr.energy));
    for (size_t i = 0; i < f0.size(); ++i)
      max_df = std::max(max_df, std::fabs(f0[i] - fr.forces[i]));
    const size_t n = fr.mol.size();
    const int na = std::min<int>(o.atoms, static_cast<int>(n));
    for (int a = 0; a < na; ++a) {
      const size_t atom = (static_cast<size_t>(a) * n + k) / na % n;  // spread, shifted per frame
      for (int d = 0; d < 3; ++d) {
        std::vector<double> p = fr.mol.pos;
        p[3 * atom + d] += o.h;
        const double ep = xtb.evaluate(p, nullptr, true);
        p[3 * atom + d] -= 2 * o.h;
        const double em = xtb.evaluate(p, nullptr, true);
        const double fd = -(ep - em) / (2 * o.h);
        const double stored = fr.forces[3 * atom + d];
        const double err = std::fabs(fd - stored);
        max_abs = std::max(max_abs, err);
        max_rel = std::max(max_rel, err / std::max(std::fabs(stored), 1e-2));
        ++checked;
      }
    }
  }
  std::printf(
      "fd-check %s: %d frames, %d force components, h=%g A\n"
      "  max |F_stored - F_fd|          = %.3e eV/A (tolerance %.1e)\n"
      "  max relative error             = %.3e (|F| floored at 0.01 eV/A)\n"
      "  max |E_stored - E_recomputed|  = %.3e eV\n"
      "  max |F_stored - F_recomputed|  = %.3e eV/A\n",
      o.file.c_str(), nfr, checked, o.h, max_abs, o.tol, max_rel, max_de, max_df);
  if (max_abs > o.tol) {
    std::printf("FAIL: stored forces differ from -dE/dx of xtb energies by more than %g eV/A\n",
                o.tol);
    return 1;
  }
  std::printf("OK\n");
  return 0;
}

// ---- timing ---------------------------------------------------------------------------------

int run_time(const std::string& path, int repeat, double accuracy) {
  Molecule mol = read_xyz(path);
  Xtb xtb(mol, accuracy);
  std::vector<double> forces;
  xtb.evaluate(mol.pos, &forces, true);
  for (int fresh = 0; fresh < 2; ++fresh) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < repeat; ++r) {
      std::vector<double> p = mol.pos;
      p[0] += 1e-3 * (r % 7);  // small changes, as in MD
      xtb.evaluate(p, &forces, fresh != 0);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s: %zu atoms, GFN2 singlepoint + gradient (%s guess): %.2f ms\n", path.c_str(),
                mol.size(), fresh ? "fresh" : "restarted", 1e3 * s / repeat);
  }
  return 0;
}

// ---- command line ---------------------------------------------------------------------------

const char* kUsage =
    "usage:\n"
    "  ddgnn-xtb-md --in GEOM.xyz --out FRAMES.extxyz [--frames N] [--stride K] [--equil STEPS]\n"
    "               [--dt FS] [--temperature K] [--tau FS] [--seed S] [--config-type NAME]\n"
    "               [--accuracy 0.01] [--relax STEPS] [--fmax 0.01]\n"
    "  ddgnn-xtb-md --fd-check FRAMES.extxyz [--fd-frames 3] [--fd-atoms 3] [--h 2e-4]\n"
    "               [--tol 5e-5] [--accuracy 0.01]\n"
    "  ddgnn-xtb-md --time GEOM.xyz [--repeat 50]\n"
    "All modes: [--threads 1] (OpenMP/OpenBLAS threads; 1 keeps reruns bit-identical).\n"
    "MD: velocity Verlet, Bussi thermostat, seeded Maxwell-Boltzmann start; frames are written\n"
    "every K steps after the equilibration steps; --relax first moves the geometry towards the\n"
    "GFN2 minimum (FIRE, at most STEPS steps, until no force component exceeds --fmax eV/Å).\n"
    "Units: Å, fs, K, eV, eV/Å.\n";

double to_double(const std::string& opt, const std::string& v) {
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(d)) {
    throw std::invalid_argument(opt + " expects a number, got '" + v + "'");
  }
  return d;
}

long to_long(const std::string& opt, const std::string& v, long min) {
  char* end = nullptr;
  const long l = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || l < min) {
    throw std::invalid_argument(opt + " expects an integer >= " + std::to_string(min) + ", got '" +
                                v + "'");
  }
  return l;
}

int main_impl(int argc, char** argv) {
  MdOptions md;
  FdOptions fd;
  std::string time_path;
  int repeat = 50;
  int threads = 1;
  bool accuracy_set = false;
  double accuracy = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= argc) {
      throw std::invalid_argument("option '" + a + "' needs a value or is unknown");
    }
    const std::string v = argv[++i];
    if (a == "--in") {
      md.in = v;
    } else if (a == "--out") {
      md.out = v;
    } else if (a == "--config-type") {
      md.config_type = v;
    } else if (a == "--frames") {
      md.frames = static_cast<int>(to_long(a, v, 1));
    } else if (a == "--stride") {
      md.stride = static_cast<int>(to_long(a, v, 1));
    } else if (a == "--equil") {
      md.equil = static_cast<int>(to_long(a, v, 0));
    } else if (a == "--dt") {
      md.dt = to_double(a, v);
    } else if (a == "--temperature") {
      md.temperature = to_double(a, v);
    } else if (a == "--tau") {
      md.tau = to_double(a, v);
    } else if (a == "--seed") {
      md.seed = static_cast<uint64_t>(to_long(a, v, 0));
    } else if (a == "--accuracy") {
      accuracy = to_double(a, v);
      accuracy_set = true;
    } else if (a == "--relax") {
      md.relax = static_cast<int>(to_long(a, v, 0));
    } else if (a == "--fmax") {
      md.fmax = to_double(a, v);
    } else if (a == "--fd-check") {
      fd.file = v;
    } else if (a == "--fd-frames") {
      fd.frames = static_cast<int>(to_long(a, v, 1));
    } else if (a == "--fd-atoms") {
      fd.atoms = static_cast<int>(to_long(a, v, 1));
    } else if (a == "--h") {
      fd.h = to_double(a, v);
    } else if (a == "--tol") {
      fd.tol = to_double(a, v);
    } else if (a == "--time") {
      time_path = v;
    } else if (a == "--repeat") {
      repeat = static_cast<int>(to_long(a, v, 1));
    } else if (a == "--threads") {
      threads = static_cast<int>(to_long(a, v, 1));
    } else {
      throw std::invalid_argument("unknown option '" + a + "'");
    }
  }
  set_threads(threads);
  if (!fd.file.empty()) {
    if (accuracy_set) fd.accuracy = accuracy;
    return run_fd(fd);
  }
  if (!time_path.empty()) return run_time(time_path, repeat, accuracy_set ? accuracy : 0.01);
  if (md.in.empty() || md.out.empty()) throw std::invalid_argument("--in and --out are required");
  if (md.dt <= 0 || md.temperature <= 0 || md.tau <= 0 || md.fmax <= 0) {
    throw std::invalid_argument("--dt, --temperature, --tau and --fmax must be positive");
  }
  if (md.config_type.empty()) md.config_type = "xtb_md";
  if (accuracy_set) md.accuracy = accuracy;
  return run_md(md);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return main_impl(argc, argv);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "ddgnn-xtb-md: %s\n%s", e.what(), kUsage);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddgnn-xtb-md: error: %s\n", e.what());
    return 1;
  }
}
