// Files that are either complete or absent: write to a temporary name in the same folder, fsync,
// rename over the target, fsync the folder. A crash (even SIGKILL) at any point leaves the old
// file or the new one, never a half-written one.
#pragma once

#include <string>

namespace ddgnn {

// "<path>.tmp.<pid>": the temporary name used for `path` (same folder, so rename is atomic).
std::string temporary_name(const std::string& path);

// fsync(tmp), rename(tmp, path), fsync(folder of path). On failure tmp is removed and an Error
// names both paths.
void commit_file(const std::string& tmp, const std::string& path);

// Writes `content` to `path` atomically (temporary_name, then commit_file). Creates the folder.
void write_file_atomic(const std::string& path, const std::string& content);

// Creates the folder `dir` and its parents, or throws an Error naming `what` (e.g. "evaluate
// --out"), the folder and the reason (a read-only place, a file in the way, no space).
void create_folders(const std::string& dir, const std::string& what);

// Removes the files "<name>.tmp.<pid>" in `dir` (those whose name starts with `prefix`) that a
// process no longer running left behind (killed during a write); returns how many.
int remove_stale_temporaries(const std::string& dir, const std::string& prefix = "");

// An exclusive lock on a folder (flock), held for the object's life: writers of one output wait
// for each other instead of losing each other's work. When the lock is busy it logs that it waits
// and for whom (the holder's pid and command line, from /proc/locks), and gives up after
// `wait_s` seconds (negative: the environment's DDGNN_LOCK_WAIT_S, else 600; 0: at once) with an
// Error that names the holder and whether it is stopped.
// `lock_file` true: `dir` names a lock file instead (created if missing, removed when the lock
// is released; a waiter that finds it removed locks the new one), so that writers of other
// outputs in one folder do not wait for each other.
class FolderLock {
 public:
  FolderLock(const std::string& dir, const std::string& what, double wait_s = -1,
             bool lock_file = false);
  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  void acquire(const std::string& dir, const std::string& what, double wait_s, bool lock_file);
  int m_fd = -1;
  std::string m_lock_file;  // the lock file to remove on release (empty: a folder)
};

}  // namespace ddgnn
