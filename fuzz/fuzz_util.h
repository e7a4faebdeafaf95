// Shared by the libFuzzer targets: input bytes as a file path (memfd: no disk), and the rule that
// a ddgnn::Error is an answer while any other exception or a crash is a bug.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "core/error.h"

namespace ddgnn::fuzz {

// A file holding `data`, readable by path ("/proc/self/fd/N") until the object is destroyed.
class MemFile {
 public:
  MemFile(const uint8_t* data, size_t size) {
    m_fd = memfd_create("ddgnn-fuzz", 0);
    if (m_fd < 0) std::abort();
    for (size_t done = 0; done < size;) {
      const ssize_t n = ::write(m_fd, data + done, size - done);
      if (n <= 0) std::abort();
      done += size_t(n);
    }
    m_path = "/proc/self/fd/" + std::to_string(m_fd);
  }
  ~MemFile() { ::close(m_fd); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  const std::string& path() const { return m_path; }

 private:
  int m_fd = -1;
  std::string m_path;
};

// Runs `body`: returns normally for success or a ddgnn::Error (the clear message a user gets);
// aborts, so that libFuzzer records the input, for any other exception ("internal error").
template <class F>
void expect_clean(F&& body) {
  try {
    body();
  } catch (const Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "not a ddgnn::Error: %s\n", e.what());
    std::abort();
  }
}

}  // namespace ddgnn::fuzz
