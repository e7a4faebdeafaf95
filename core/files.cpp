// Atomic file replacement: temporary name, fsync, rename, fsync of the folder.
#include "core/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace ddgnn {

namespace fs = std::filesystem;

namespace {

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

std::string temporary_name(const std::string& path) {
  return path + ".tmp." + std::to_string(::getpid());
}

void commit_file(const std::string& tmp, const std::string& path) {
  fsync_path(tmp);
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw Error("cannot rename " + tmp + " to " + path + ": " + ec.message(),
                "check that the folder is writable and on one file system");
  }
  const fs::path parent = fs::path(path).parent_path();
  fsync_path(parent.empty() ? "." : parent.string());
}

void write_file_atomic(const std::string& path, const std::string& content) {
  const fs::path parent = fs::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) fs::create_directories(parent, ec);
  const std::string tmp = temporary_name(path);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << content;
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      throw Error(tmp + ": cannot write (" + std::strerror(errno) + ")",
                  "check that the folder exists, is writable and has free space");
    }
  }
  commit_file(tmp, path);
}

}  // namespace ddgnn
