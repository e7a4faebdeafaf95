// Benchmark of the extxyz reader: writes a realistic file (108-atom periodic Cu frames with
// Lattice, species/pos/forces, energy, stress, pbc, as ASE writes them), then times
// ExtxyzReader against a bare sequential read() of the same file (the ceiling). Deletes the file.
//
// usage: bench_extxyz [size_MB=300] [repeats=3] [buffer_KiB=reader default]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "loader/extxyz.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kCells = 3;                                     // 3x3x3 fcc conventional cells
constexpr double kA = 3.61;                                   // Å, Cu lattice constant
constexpr int kAtomsPerFrame = 4 * kCells * kCells * kCells;  // 108

void put_fixed(std::string& out, double v, int width, int digits) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, digits);
  const int len = static_cast<int>(r.ptr - buf);
  if (len < width) out.append(width - len, ' ');
  out.append(buf, r.ptr);
}

// One frame: a thermally displaced fcc Cu supercell with forces, energy and stress.
void write_frame(std::string& out, std::mt19937_64& rng) {
  std::normal_distribution<double> jitter(0.0, 0.08), force(0.0, 0.5), small(0.0, 0.01);
  const double box = kA * kCells;
  out += std::to_string(kAtomsPerFrame) + "\n";
  out += "Lattice=\"";
  for (int i = 0; i < 9; ++i) {
    out += i ? " " : "";
    put_fixed(out, i % 4 == 0 ? box : 0.0, 0, 10);
  }
  out += "\" Properties=species:S:1:pos:R:3:forces:R:3 energy=";
  const double energy = -3.7 * kAtomsPerFrame + small(rng) * 100;
  put_fixed(out, energy, 0, 10);
  out += " stress=\"";
  for (int i = 0; i < 9; ++i) {
    out += i ? " " : "";
    put_fixed(out, i % 4 == 0 ? small(rng) : 0.1 * small(rng), 0, 10);
  }
  out += "\" free_energy=";
  put_fixed(out, energy, 0, 10);
  out += " pbc=\"T T T\"\n";
  const double basis[4][3] = {{0, 0, 0}, {0, 0.5, 0.5}, {0.5, 0, 0.5}, {0.5, 0.5, 0}};
  for (int i = 0; i < kCells; ++i) {
    for (int j = 0; j < kCells; ++j) {
      for (int k = 0; k < kCells; ++k) {
        for (const auto& b : basis) {
          out += "Cu";
          put_fixed(out, (i + b[0]) * kA + jitter(rng), 18, 10);
          put_fixed(out, (j + b[1]) * kA + jitter(rng), 18, 10);
          put_fixed(out, (k + b[2]) * kA + jitter(rng), 18, 10);
          for (int c = 0; c < 3; ++c) put_fixed(out, force(rng), 18, 10);
          out += '\n';
        }
      }
    }
  }
}

long long generate(const std::string& path, size_t target_bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot write " + path);
  std::mt19937_64 rng(42);
  std::string chunk;
  size_t written = 0;
  long long frames = 0;
  while (written < target_bytes) {
    chunk.clear();
    while (chunk.size() < (size_t{1} << 20)) {
      write_frame(chunk, rng);
      ++frames;
    }
    std::fwrite(chunk.data(), 1, chunk.size(), f);
    written += chunk.size();
  }
  std::fclose(f);
  return frames;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Bare sequential read() of the whole file into one buffer: no parsing.
double time_raw_read(const std::string& path, size_t buffer_bytes, size_t& bytes) {
  std::unique_ptr<char[]> buf(new char[buffer_bytes]);
  const auto t0 = Clock::now();
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw std::runtime_error("cannot open " + path);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  bytes = 0;
  ssize_t r;
  while ((r = ::read(fd, buf.get(), buffer_bytes)) > 0) bytes += static_cast<size_t>(r);
  ::close(fd);
  return seconds_since(t0);
}

double time_reader(const std::string& path, size_t buffer_bytes, long long& frames,
                   long long& atoms) {
  const auto t0 = Clock::now();
  ddgnn::ExtxyzReader reader(path, {}, buffer_bytes);
  ddgnn::Frame frame;
  frames = atoms = 0;
  double check = 0;
  while (reader.next(frame)) {
    ++frames;
    atoms += static_cast<long long>(frame.n_atoms());
    check += frame.pos[0] + frame.forces[3 * frame.n_atoms() - 1];
  }
  const double s = seconds_since(t0);
  if (check == 12345.678) std::printf(" ");  // keep the loop's results alive
  return s;
}

struct Row {
  double best = 1e300, sum = 0;
  int n = 0;
  void add(double s) {
    best = std::min(best, s);
    sum += s;
    ++n;
  }
};

void print_row(const char* name, const Row& r, double mb, long long frames, long long atoms) {
  std::printf("%-26s %10.1f %12.0f %14.0f %9.3f %9.3f\n", name, mb / r.best, frames / r.best,
              atoms / r.best, r.best, r.sum / r.n);
}

}  // namespace

int main(int argc, char** argv) {
  const double size_mb = argc > 1 ? std::atof(argv[1]) : 300.0;
  const int repeats = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
  const size_t buffer_bytes = argc > 3 ? static_cast<size_t>(std::atof(argv[3]) * 1024)
                                       : ddgnn::ExtxyzReader::kDefaultBufferBytes;
  if (size_mb <= 0 || buffer_bytes < 16) {
    std::fprintf(stderr, "usage: bench_extxyz [size_MB=300] [repeats=3] [buffer_KiB]\n");
    return 2;
  }
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("ddgnn_bench_extxyz_" + std::to_string(::getpid()) + ".xyz"))
                               .string();
  struct Remove {
    std::string path;
    ~Remove() { std::remove(path.c_str()); }
  } remove_at_end{path};

  try {
    auto t0 = Clock::now();
    const long long frames_written = generate(path, static_cast<size_t>(size_mb * 1e6));
    const double gen_s = seconds_since(t0);
    const auto file_bytes = std::filesystem::file_size(path);
    const double mb = file_bytes / 1e6;
    std::printf("extxyz benchmark: %.1f MB, %lld frames of %d Cu atoms (written in %.1f s)\n", mb,
                frames_written, kAtomsPerFrame, gen_s);
    std::printf("file: %s; read buffer %.0f KiB; best of %d runs, one core, page cache warm\n\n",
                path.c_str(), buffer_bytes / 1024.0, repeats);

    Row raw, parse;
    long long frames = 0, atoms = 0;
    for (int r = 0; r < repeats; ++r) {
      size_t bytes = 0;
      raw.add(time_raw_read(path, buffer_bytes, bytes));
      if (bytes != file_bytes) throw std::runtime_error("raw read came up short");
      parse.add(time_reader(path, buffer_bytes, frames, atoms));
      if (frames != frames_written || atoms != frames * kAtomsPerFrame) {
        throw std::runtime_error("reader returned a different number of frames or atoms");
      }
    }
    std::printf("%-26s %10s %12s %14s %9s %9s\n", "", "MB/s", "graphs/s", "atoms/s", "best s",
                "mean s");
    print_row("read() only (ceiling)", raw, mb, frames, atoms);
    print_row("ExtxyzReader::next", parse, mb, frames, atoms);
    std::printf("\nreader reaches %.1f%% of the bare read speed\n", 100.0 * raw.best / parse.best);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", ddgnn::error_line(e, -1).c_str());
    return 1;
  }
  return 0;
}
