// Atomic file replacement: temporary name, fsync, rename, fsync of the folder.
#include "core/files.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <spdlog/spdlog.h>

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

int remove_stale_temporaries(const std::string& dir, const std::string& prefix) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const auto at = name.rfind(".tmp.");
    if (at == std::string::npos || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string pid_text = name.substr(at + 5);
    if (pid_text.empty() || pid_text.size() > 9 ||
        pid_text.find_first_not_of("0123456789") != std::string::npos)
      continue;
    const pid_t pid = pid_t(std::stol(pid_text));
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive, or unsure
    if (fs::remove(entry.path(), ec)) ++removed;
  }
  return removed;
}

FolderLock::FolderLock(const std::string& dir, const std::string& what) {
  const std::string folder = dir.empty() ? "." : dir;
  m_fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (m_fd < 0)
    throw Error("cannot open folder " + folder + " to lock it (" + std::strerror(errno) + ")",
                "check that the folder exists and is readable");
  if (::flock(m_fd, LOCK_EX | LOCK_NB) == 0) return;
  if (errno == EWOULDBLOCK) {
    spdlog::info("{}: another process is writing there; waiting for it to finish", what);
    int rc;
    while ((rc = ::flock(m_fd, LOCK_EX)) != 0 && errno == EINTR) {
    }
    if (rc == 0) return;
  }
  const std::string why = std::strerror(errno);
  ::close(m_fd);
  throw Error("cannot lock folder " + folder + " (" + why + ")",
              "the file system may not support locks (flock); write to a local folder");
}

FolderLock::~FolderLock() {
  if (m_fd >= 0) ::close(m_fd);  // closing releases the lock
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
