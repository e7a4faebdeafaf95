// Owned MPI handles: a communicator (made by dup or split) and a window, each freed with its object
// while MPI is up. Freeing is collective like making, so every rank destroys its copies in the
// same order. Move-only. Both return error codes (MPI_ERRORS_RETURN) so that MPI_CHECK reports.
#pragma once

#include <mpi.h>

namespace ddgnn {

class Communicator {
 public:
  Communicator() = default;  // MPI_COMM_NULL
  // A communicator of its own over the ranks of `of` (collective over `of`).
  static Communicator dup(MPI_Comm of);
  // MPI_Comm_split of `of`.
  static Communicator split(MPI_Comm of, int color, int key);
  // The ranks of `of` that share this rank's node (MPI_COMM_TYPE_SHARED), ordered by `key`.
  static Communicator split_node(MPI_Comm of, int key);
  ~Communicator();
  Communicator(Communicator&& other) noexcept;
  Communicator& operator=(Communicator&& other) noexcept;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  MPI_Comm get() const { return m_comm; }
  int rank() const { return m_rank; }
  int size() const { return m_size; }

 private:
  explicit Communicator(MPI_Comm owned);
  void reset();
  MPI_Comm m_comm = MPI_COMM_NULL;
  int m_rank = 0, m_size = 1;
};

class Window {
 public:
  Window() = default;  // MPI_WIN_NULL
  // MPI_Win_allocate: `bytes` of window memory on this rank (returned in *base), displacement
  // unit `disp_unit`. Collective over `comm`.
  static Window allocate(MPI_Aint bytes, int disp_unit, MPI_Comm comm, void* base);
  // MPI_Win_allocate_shared over the ranks of a node communicator.
  static Window allocate_shared(MPI_Aint bytes, int disp_unit, MPI_Comm node, void* base);
  // MPI_Win_create over memory that another window owns.
  static Window create(void* base, MPI_Aint bytes, int disp_unit, MPI_Comm comm);
  // Unlocks a passive-target epoch left open (lock_all), then MPI_Win_free.
  ~Window();
  Window(Window&& other) noexcept;
  Window& operator=(Window&& other) noexcept;
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;

  MPI_Win get() const { return m_win; }
  explicit operator bool() const { return m_win != MPI_WIN_NULL; }
  // Opens a passive-target epoch on every rank of the window (MPI_MODE_NOCHECK) that lasts until
  // the window is freed; a second call does nothing.
  void lock_all();

 private:
  void reset();
  MPI_Win m_win = MPI_WIN_NULL;
  bool m_locked = false;
};

}  // namespace ddgnn
