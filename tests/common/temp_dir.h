// A temporary directory for one test, removed with everything in it when the test ends.
#pragma once

#include <ftw.h>
#include <stdio.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

namespace ddgnn::testing {

// Removes a folder and everything in it (nothing when it does not exist). POSIX nftw rather than
// std::filesystem::remove_all: in the GPU build's test binary (PyTorch 2.11's LibTorch, the
// machine's g++) remove_all of a non-empty folder jumped to a null address.
inline void remove_tree(const std::string& path) {
  nftw(
      path.c_str(),
      [](const char* p, const struct stat*, int, struct FTW*) {
        ::remove(p);
        return 0;
      },
      16, FTW_DEPTH | FTW_PHYS);
}

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    m_path = std::filesystem::temp_directory_path() /
             ("ddgnn-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    remove_tree(m_path.string());
    std::filesystem::create_directories(m_path);
  }
  ~TempDir() { remove_tree(m_path.string()); }
  std::string file(const std::string& name) const { return (m_path / name).string(); }
  const std::filesystem::path& path() const { return m_path; }

 private:
  std::filesystem::path m_path;
};

}  // namespace ddgnn::testing
