// Atomic file replacement: temporary name, fsync, rename, fsync of the folder.
#include "core/files.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

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

namespace {

// "pid 123 (ddgnn convert a.xyz d.h5)", ", stopped" added when it is: the process holding a
// flock on the file behind `fd`, from /proc/locks; "another process" when none is found.
std::string lock_holder(int fd) {
  struct stat st {};
  std::ifstream locks("/proc/locks");
  if (::fstat(fd, &st) != 0 || !locks) return "another process";
  for (std::string line; std::getline(locks, line);) {
    std::istringstream in(line);
    std::string id, kind, mode, access, pid, where;
    in >> id >> kind;
    if (kind != "FLOCK") continue;  // also skips "->" lines: waiters, not holders
    in >> mode >> access >> pid >> where;
    unsigned maj = 0, min = 0;
    unsigned long long ino = 0;
    if (std::sscanf(where.c_str(), "%x:%x:%llu", &maj, &min, &ino) != 3) continue;
    if (maj != major(st.st_dev) || min != minor(st.st_dev) || ino != st.st_ino) continue;
    std::ifstream cmd_file("/proc/" + pid + "/cmdline", std::ios::binary);
    std::string cmd((std::istreambuf_iterator<char>(cmd_file)), std::istreambuf_iterator<char>());
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    while (!cmd.empty() && cmd.back() == ' ') cmd.pop_back();
    if (cmd.size() > 160) cmd = cmd.substr(0, 157) + "...";
    std::ifstream stat_file("/proc/" + pid + "/stat");
    std::string stat_line;
    std::getline(stat_file, stat_line);
    const auto close = stat_line.rfind(')');
    const bool stopped = close != std::string::npos && close + 2 < stat_line.size() &&
                         (stat_line[close + 2] == 'T' || stat_line[close + 2] == 't');
    return "pid " + pid + (cmd.empty() ? std::string() : " (" + cmd + ")") +
           (stopped ? ", which is stopped" : "");
  }
  return "another process";
}

double default_lock_wait_s() {
  const char* env = std::getenv("DDGNN_LOCK_WAIT_S");
  if (!env || !*env) return 600.0;
  char* end = nullptr;
  const double v = std::strtod(env, &end);
  if (end == env || *end || !(v >= 0))
    throw Error(
        std::string("DDGNN_LOCK_WAIT_S must be a number of seconds >= 0, got '") + env + "'",
        "unset it for the default (600 s), or give seconds");
  return v;
}

}  // namespace

FolderLock::FolderLock(const std::string& dir, const std::string& what, double wait_s,
                       bool lock_file) {
  for (;;) {
    acquire(dir, what, wait_s, lock_file);
    if (!lock_file) return;
    // The holder before us may have removed the file after we opened it: ours must be the one
    // under the name, else lock the new one.
    struct stat held {
    }, named{};
    if (::fstat(m_fd, &held) == 0 && ::stat(dir.c_str(), &named) == 0 &&
        held.st_ino == named.st_ino && held.st_dev == named.st_dev) {
      m_lock_file = dir;
      return;
    }
    ::close(m_fd);
    m_fd = -1;
  }
}

void FolderLock::acquire(const std::string& dir, const std::string& what, double wait_s,
                         bool lock_file) {
  const std::string target = dir.empty() ? "." : dir;
  const std::string folder = (lock_file ? "" : "folder ") + target;
  m_fd = lock_file ? ::open(target.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)
                   : ::open(target.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (m_fd < 0)
    throw Error("cannot open " + folder + " to lock it (" + std::strerror(errno) + ")",
                lock_file ? "check that its folder exists and is writable"
                          : "check that the folder exists and is readable");
  if (::flock(m_fd, LOCK_EX | LOCK_NB) == 0) return;
  if (errno == EWOULDBLOCK) {
    if (wait_s < 0) wait_s = default_lock_wait_s();
    std::string holder = lock_holder(m_fd);
    if (wait_s > 0)
      spdlog::info("{}: {} is writing there; waiting for it to finish (up to {:.0f} s)", what,
                   holder, wait_s);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
    bool busy = true;
    int error = EWOULDBLOCK;
    while (busy && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (::flock(m_fd, LOCK_EX | LOCK_NB) == 0) return;
      error = errno;
      busy = error == EWOULDBLOCK || error == EINTR;
    }
    errno = error;
    if (busy) {
      holder = lock_holder(m_fd);
      ::close(m_fd);
      m_fd = -1;
      throw Error(what + ": " + folder + " is locked by " + holder +
                      (wait_s > 0 ? "; gave up after " + std::to_string(int64_t(wait_s + 0.5)) +
                                        " s of waiting"
                                  : std::string()),
                  wait_s > 0 ? "if that process is stopped or hung, end it; else wait for it, "
                               "wait longer (DDGNN_LOCK_WAIT_S=seconds), or write elsewhere"
                             : "wait for it to finish, or choose another folder");
    }
  }
  const std::string why = std::strerror(errno);
  ::close(m_fd);
  m_fd = -1;
  throw Error("cannot lock " + folder + " (" + why + ")",
              "the file system may not support locks (flock); write to a local folder");
}

FolderLock::~FolderLock() {
  if (m_fd >= 0 && !m_lock_file.empty()) ::unlink(m_lock_file.c_str());  // still held: safe
  if (m_fd >= 0) ::close(m_fd);  // closing releases the lock
}

void create_folders(const std::string& dir, const std::string& what) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!ec && !fs::is_directory(dir, ec)) ec = std::make_error_code(std::errc::not_a_directory);
  if (ec)
    throw Error(what + ": cannot create the folder " + dir + " (" + ec.message() + ")",
                "choose a place where you may write (a read-only or full file system, or a file "
                "in the way, stops it)");
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
