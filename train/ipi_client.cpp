// The i-PI socket protocol, client side (train/ipi_client.h).
#include "train/ipi_client.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "core/signals.h"

namespace ddgnn {

namespace {

constexpr size_t kHeaderBytes = 12;

// One connection attempt: the socket, or -1 with `why` set.
int try_connect(const std::string& unix_path, const std::string& host, const std::string& port,
                std::string& why) {
  if (!unix_path.empty()) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, unix_path.c_str(), unix_path.size() + 1);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      why = std::strerror(errno);
      return -1;
    }
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0) return fd;
    why = std::strerror(errno);
    ::close(fd);
    return -1;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    why = ::gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  return fd;
}

}  // namespace

std::string printable_header(const std::string& header) {
  std::string out;
  for (unsigned char c : header) {
    if (c >= 0x20 && c < 0x7F) {
      out += char(c);
    } else {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\x%02X", c);
      out += esc;
    }
  }
  return out;
}

IpiClient::IpiClient(const std::string& unix_name, const std::string& inet, double timeout_s) {
  std::string unix_path, host, port;
  if (!unix_name.empty()) {
    unix_path = unix_name.find('/') != std::string::npos ? unix_name : "/tmp/ipi_" + unix_name;
    if (unix_path.size() >= sizeof(sockaddr_un{}.sun_path))
      throw ConfigError("--unix " + unix_name + ": the socket path " + unix_path + " is " +
                            std::to_string(unix_path.size()) +
                            " bytes, longer than a Unix socket " + "path may be (" +
                            std::to_string(sizeof(sockaddr_un{}.sun_path) - 1) + ")",
                        "use a shorter name");
    m_address = unix_path;
  } else {
    const size_t colon = inet.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == inet.size())
      throw ConfigError("--inet '" + inet + "' is not HOST:PORT", "e.g. --inet localhost:31415");
    host = inet.substr(0, colon);
    port = inet.substr(colon + 1);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
      host = host.substr(1, host.size() - 2);  // [::1]:31415
    m_address = inet;
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(std::max(0.0, timeout_s));
  std::string why;
  for (;;) {
    m_fd = try_connect(unix_path, host, port, why);
    if (m_fd >= 0) return;
    if (const int s = stop_signal(); s != 0) throw IpiStopped(s);
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  throw Error(
      "no i-PI server at " + m_address + " after " + fmt("%g", timeout_s) + " s (" + why + ")",
      "start the server first (i-PI, or ASE's SocketIOCalculator with the same " +
          std::string(unix_path.empty() ? "port" : "unixsocket name") +
          "), or wait longer with --connect-timeout");
}

IpiClient::~IpiClient() {
  if (m_fd >= 0) ::close(m_fd);
}

void IpiClient::read_exact(void* out, size_t n, const char* message) {
  auto* p = static_cast<char*>(out);
  size_t got = 0;
  while (got < n) {
    pollfd pfd{m_fd, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, 250);
    if (const int s = stop_signal(); s != 0) throw IpiStopped(s);
    if (ready < 0) {
      if (errno == EINTR) continue;
      throw Error(std::string("waiting for the i-PI server: ") + std::strerror(errno));
    }
    if (ready == 0) continue;
    const ssize_t r = ::recv(m_fd, p + got, n - got, 0);
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw Error("reading " + std::string(message) + " from the i-PI server at " + m_address +
                      ": " + std::strerror(errno),
                  "the server ended or the connection broke; see the server's output");
    }
    if (r == 0)
      throw Error("the i-PI server at " + m_address + " closed the connection in the middle of " +
                      message + " (after " + std::to_string(got) + " of " + std::to_string(n) +
                      " bytes)",
                  "the server ended or broke off; see its output");
    got += size_t(r);
  }
}

void IpiClient::write_all(const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::send(m_fd, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw Error("writing to the i-PI server at " + m_address + ": " + std::strerror(errno),
                  "the server ended or the connection broke; see the server's output");
    }
    p += w;
    n -= size_t(w);
  }
}

std::string IpiClient::read_header() {
  char buf[kHeaderBytes];
  // The first byte alone: a close before it is the server's way to end.
  for (;;) {
    pollfd pfd{m_fd, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, 250);
    if (const int s = stop_signal(); s != 0) throw IpiStopped(s);
    if (ready < 0 && errno != EINTR)
      throw Error(std::string("waiting for the i-PI server: ") + std::strerror(errno));
    if (ready <= 0) continue;
    const ssize_t r = ::recv(m_fd, buf, 1, 0);
    if (r == 0) return "";
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      if (errno == ECONNRESET) return "";
      throw Error("reading from the i-PI server at " + m_address + ": " + std::strerror(errno));
    }
    break;
  }
  read_exact(buf + 1, kHeaderBytes - 1, "a message header");
  std::string h(buf, kHeaderBytes);
  while (!h.empty() && (h.back() == ' ' || h.back() == '\0')) h.pop_back();
  return h;
}

int32_t IpiClient::read_int(const char* message) {
  int32_t v = 0;
  read_exact(&v, sizeof v, message);
  return v;
}

void IpiClient::read_doubles(double* out, size_t n, const char* message) {
  read_exact(out, n * sizeof(double), message);
}

void IpiClient::skip(size_t n, const char* message) {
  char buf[4096];
  while (n > 0) {
    const size_t k = std::min(n, sizeof buf);
    read_exact(buf, k, message);
    n -= k;
  }
}

IpiPositions IpiClient::read_positions(int64_t n_atoms) {
  IpiPositions p;
  std::array<double, 9> h{};
  read_doubles(h.data(), 9, "POSDATA");
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) p.cell[size_t(3 * j + i)] = h[size_t(3 * i + j)];
  read_doubles(p.inverse.data(), 9, "POSDATA");
  const int32_t n = read_int("POSDATA");
  if (n != n_atoms)
    throw Error("the i-PI server at " + m_address + " sends positions of " + std::to_string(n) +
                    " atoms; the structure file holds " + std::to_string(n_atoms),
                "start the server from the structure given to --structure (the same atoms in the "
                "same order)");
  p.positions.resize(3 * size_t(n));
  read_doubles(p.positions.data(), p.positions.size(), "POSDATA");
  return p;
}

void IpiClient::send_header(const std::string& header) {
  std::string h = header;
  h.resize(kHeaderBytes, ' ');
  write_all(h.data(), h.size());
}

void IpiClient::send_forces(double energy, const std::vector<double>& forces,
                            const std::array<double, 9>& virial) {
  send_header("FORCEREADY");
  write_all(&energy, sizeof energy);
  const int32_t n = int32_t(forces.size() / 3);
  write_all(&n, sizeof n);
  write_all(forces.data(), forces.size() * sizeof(double));
  std::array<double, 9> t{};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) t[size_t(3 * i + j)] = virial[size_t(3 * j + i)];
  write_all(t.data(), t.size() * sizeof(double));
  const int32_t extra = 0;
  write_all(&extra, sizeof extra);
}

}  // namespace ddgnn
