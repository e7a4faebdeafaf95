// Owned communicators and windows (comm/communicator.h).
#include "comm/communicator.h"

#include <utility>

#include "comm/mpi.h"

namespace ddgnn {

Communicator::Communicator(MPI_Comm owned) : m_comm(owned) {
  MPI_CHECK(MPI_Comm_set_errhandler(m_comm, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_rank(m_comm, &m_rank));
  MPI_CHECK(MPI_Comm_size(m_comm, &m_size));
}

Communicator Communicator::dup(MPI_Comm of) {
  MPI_Comm c = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_dup(of, &c));
  return Communicator(c);
}

Communicator Communicator::split(MPI_Comm of, int color, int key) {
  MPI_Comm c = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split(of, color, key, &c));
  return Communicator(c);
}

Communicator Communicator::split_node(MPI_Comm of, int key) {
  MPI_Comm c = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split_type(of, MPI_COMM_TYPE_SHARED, key, MPI_INFO_NULL, &c));
  return Communicator(c);
}

void Communicator::reset() {
  if (m_comm != MPI_COMM_NULL && mpi_active()) MPI_Comm_free(&m_comm);
  m_comm = MPI_COMM_NULL;
}

Communicator::~Communicator() {
  reset();
}

Communicator::Communicator(Communicator&& other) noexcept
    : m_comm(std::exchange(other.m_comm, MPI_COMM_NULL)),
      m_rank(other.m_rank),
      m_size(other.m_size) {}

Communicator& Communicator::operator=(Communicator&& other) noexcept {
  if (this != &other) {
    reset();
    m_comm = std::exchange(other.m_comm, MPI_COMM_NULL);
    m_rank = other.m_rank;
    m_size = other.m_size;
  }
  return *this;
}

Window Window::allocate(MPI_Aint bytes, int disp_unit, MPI_Comm comm, void* base) {
  Window w;
  MPI_CHECK(MPI_Win_allocate(bytes, disp_unit, MPI_INFO_NULL, comm, base, &w.m_win));
  MPI_CHECK(MPI_Win_set_errhandler(w.m_win, MPI_ERRORS_RETURN));
  return w;
}

Window Window::allocate_shared(MPI_Aint bytes, int disp_unit, MPI_Comm node, void* base) {
  Window w;
  MPI_CHECK(MPI_Win_allocate_shared(bytes, disp_unit, MPI_INFO_NULL, node, base, &w.m_win));
  MPI_CHECK(MPI_Win_set_errhandler(w.m_win, MPI_ERRORS_RETURN));
  return w;
}

Window Window::create(void* base, MPI_Aint bytes, int disp_unit, MPI_Comm comm) {
  Window w;
  MPI_CHECK(MPI_Win_create(base, bytes, disp_unit, MPI_INFO_NULL, comm, &w.m_win));
  MPI_CHECK(MPI_Win_set_errhandler(w.m_win, MPI_ERRORS_RETURN));
  return w;
}

void Window::lock_all() {
  if (m_locked || m_win == MPI_WIN_NULL) return;
  MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, m_win));
  m_locked = true;
}

void Window::reset() {
  if (m_win != MPI_WIN_NULL && mpi_active()) {
    if (m_locked) MPI_Win_unlock_all(m_win);
    MPI_Win_free(&m_win);
  }
  m_win = MPI_WIN_NULL;
  m_locked = false;
}

Window::~Window() {
  reset();
}

Window::Window(Window&& other) noexcept
    : m_win(std::exchange(other.m_win, MPI_WIN_NULL)),
      m_locked(std::exchange(other.m_locked, false)) {}

Window& Window::operator=(Window&& other) noexcept {
  if (this != &other) {
    reset();
    m_win = std::exchange(other.m_win, MPI_WIN_NULL);
    m_locked = std::exchange(other.m_locked, false);
  }
  return *this;
}

}  // namespace ddgnn
