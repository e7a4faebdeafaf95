// The client side of the i-PI socket protocol (the one i-PI, ASE's SocketIOCalculator and
// DeePMD's dp_ipi speak): the server sends 12-byte space-padded headers (STATUS, INIT, POSDATA,
// GETFORCE, EXIT) and the client answers (NEEDINIT, READY, HAVEDATA, FORCEREADY); numbers are
// native-endian int32 and float64 in atomic units (Bohr, Hartree). Torch-free: bytes, sockets,
// units. Every read waits interruptibly: a stop signal (core/signals.h) ends a wait with
// IpiStopped, so SIGTERM never leaves the client blocked on a silent server.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ddgnn {

// CODATA 2018, the values i-PI and ASE round to their own digits (they differ from these by
// parts in 10^10, far below the float64 noise of a model's forces).
constexpr double kBohrInAngstrom = 0.529177210903;
constexpr double kHartreeInEv = 27.211386245988;

// A stop signal arrived while the client waited for the server.
struct IpiStopped : std::runtime_error {
  explicit IpiStopped(int signal) : std::runtime_error("stopped"), signal(signal) {}
  int signal;
};

// POSDATA, in Bohr: the cell with rows as the lattice vectors (the wire holds i-PI's h, whose
// columns are the lattice vectors, in C order: transposed on reading), the inverse as sent, and
// the positions [n_atoms, 3].
struct IpiPositions {
  std::array<double, 9> cell{};
  std::array<double, 9> inverse{};
  std::vector<double> positions;
};

class IpiClient {
 public:
  // Connects to the server: `unix_name` NAME is the socket /tmp/ipi_NAME that i-PI and ASE create
  // for it (a name holding '/' is taken as the socket's path); otherwise `inet` "HOST:PORT".
  // Retries a refused or absent server every 0.2 s for `timeout_s` seconds, then throws an Error
  // naming the address and the last reason.
  IpiClient(const std::string& unix_name, const std::string& inet, double timeout_s);
  ~IpiClient();
  IpiClient(const IpiClient&) = delete;
  IpiClient& operator=(const IpiClient&) = delete;

  // "/tmp/ipi_NAME" or "HOST:PORT".
  const std::string& address() const { return m_address; }

  // The next header, trailing spaces removed; "" when the server closed the connection between
  // two messages (its way to end, for ASE). A header cut short is an Error.
  std::string read_header();
  int32_t read_int(const char* message);
  void read_doubles(double* out, size_t n, const char* message);
  // Reads and drops `n` bytes (INIT's string).
  void skip(size_t n, const char* message);
  // POSDATA's body, after its header: an Error, before anything is allocated, when its atom count
  // is not `n_atoms` (the structure's).
  IpiPositions read_positions(int64_t n_atoms);

  void send_header(const std::string& header);
  // FORCEREADY: energy (Hartree), forces [n, 3] (Hartree/Bohr), virial [3, 3] (Hartree; sent
  // transposed, as i-PI's h is), and an empty extra string.
  void send_forces(double energy, const std::vector<double>& forces,
                   const std::array<double, 9>& virial);

 private:
  void read_exact(void* out, size_t n, const char* message);
  void write_all(const void* data, size_t n);
  int m_fd = -1;
  std::string m_address;
};

// A header as text for a message: printable ASCII kept, other bytes as \xNN.
std::string printable_header(const std::string& header);

}  // namespace ddgnn
