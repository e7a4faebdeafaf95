// Streaming extended-XYZ reader (ASE convention): one large read buffer refilled with read(2),
// lines handed out as string_views into it, numbers parsed with std::from_chars. The comment line
// is parsed in extxyz_header.cpp; a rejected line is diagnosed on the cold path, extxyz_errors.cpp.
#include "loader/extxyz.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "core/error.h"
#include "loader/elements.h"
#include "loader/extxyz_errors.h"
#include "loader/extxyz_header.h"
#include "loader/extxyz_lex.h"

namespace ddgnn {
namespace {

using extxyz::Column;
using extxyz::Role;

constexpr size_t kMaxLineBytes = size_t{1} << 30;
constexpr size_t kFirstAlloc = size_t{1} << 16;  // atoms allocated before the count is trusted

bool is_blank(std::string_view s) {
  return extxyz::skip_space(s.data(), s.data() + s.size()) == s.end();
}

}  // namespace

struct ExtxyzReader::Impl {
  Impl(const std::string& path_, ExtxyzKeys keys, size_t buffer_bytes)
      : path(path_),
        name(path_ == "-" ? "<stdin>" : path_),
        cap(std::max<size_t>(buffer_bytes, 16)),
        header(name, std::move(keys)) {}

  std::string path, name;  // name: what messages show ("<stdin>" for "-")
  int fd = -1;
  bool own_fd = false;
  std::unique_ptr<char[]> buf;
  size_t cap = 0;
  char* pos = nullptr;
  char* end = nullptr;
  bool eof = false, done = false;
  bool unterminated = false;  // the last line returned ended at end of file without a '\n'
  size_t total_read = 0;
  long long line = 0, frames = 0;
  long long prev_count_line = 0, prev_n_atoms = 0;
  int prev_n_tokens = 0;
  extxyz::HeaderParser header;  // the comment line, and the Layout of the atom lines

  [[noreturn]] void fail(long long at_line, const std::string& what, const std::string& hint) {
    extxyz::fail(name, at_line, what, hint);
  }

  void refill() {
    size_t keep = static_cast<size_t>(end - pos);
    if (keep == cap) {  // one line fills the whole buffer: grow it
      if (cap >= kMaxLineBytes) {
        fail(line + 1, "a line is longer than " + std::to_string(kMaxLineBytes >> 20) + " MiB",
             "is this a text file in extended XYZ format?");
      }
      std::unique_ptr<char[]> bigger(new char[cap * 2]);
      std::memcpy(bigger.get(), pos, keep);
      buf = std::move(bigger);
      cap *= 2;
    } else if (keep > 0 && pos != buf.get()) {
      std::memmove(buf.get(), pos, keep);
    }
    pos = buf.get();
    end = pos + keep;
    ssize_t r;
    do {
      r = ::read(fd, end, cap - keep);
    } while (r < 0 && errno == EINTR);
    if (r < 0) fail(line + 1, std::string("read failed: ") + std::strerror(errno), "");
    if (r == 0) eof = true;
    end += r;
    total_read += static_cast<size_t>(r);
  }

  // The next line without its '\n' (and '\r'); valid until the next call. False at end of file.
  bool next_line(std::string_view& out) {
    for (;;) {
      if (auto* nl = static_cast<char*>(std::memchr(pos, '\n', end - pos))) {
        out = std::string_view(pos, nl - pos);
        pos = nl + 1;
        break;
      }
      if (eof) {
        if (pos == end) return false;
        out = std::string_view(pos, end - pos);
        pos = end;
        unterminated = true;
        break;
      }
      refill();
    }
    ++line;
    if (!out.empty() && out.back() == '\r') out.remove_suffix(1);
    return true;
  }

  long long parse_count(std::string_view s, long long at_line);
  void parse_atom(std::string_view s, size_t i, Frame& f);
};

long long ExtxyzReader::Impl::parse_count(std::string_view s, long long at_line) {
  const char* e = s.data() + s.size();
  const char* p = s.data();
  long long n = 0;
  if (extxyz::to_int(p, e, n) && extxyz::skip_space(p, e) == e && n > 0) return n;
  extxyz::explain_count(name, at_line, s, {frames, prev_count_line, prev_n_atoms, prev_n_tokens});
}

// The hot path: one atom line into row i of the frame. Any problem goes to explain_atom.
void ExtxyzReader::Impl::parse_atom(std::string_view s, size_t i, Frame& f) {
  using extxyz::skip_space, extxyz::to_double, extxyz::to_int, extxyz::token_end;
  const char* p = s.data();
  const char* e = p + s.size();
  bool ok = true;
  for (const Column& c : header.layout().columns) {
    switch (c.role) {
      case Role::kSpecies: {
        const char* b = skip_space(p, e);
        p = token_end(b, e);
        const int z = atomic_number(std::string_view(b, p - b));
        f.z[i] = static_cast<uint8_t>(z);
        ok = ok && z > 0;
        break;
      }
      case Role::kNumbers: {
        long long z = 0;
        ok = ok && to_int(p, e, z) && z >= 1 && z <= kMaxAtomicNumber;
        f.z[i] = static_cast<uint8_t>(z);
        break;
      }
      case Role::kPos:
      case Role::kForces: {
        double* out = (c.role == Role::kPos ? f.pos.data() : f.forces.data()) + 3 * i;
        ok = ok && to_double(p, e, out[0]) && to_double(p, e, out[1]) && to_double(p, e, out[2]);
        ok = ok && std::isfinite(out[0]) && std::isfinite(out[1]) && std::isfinite(out[2]);
        break;
      }
      case Role::kExtraReal:
      case Role::kExtraInt:
      case Role::kExtraBool: {
        double* out = f.extra[c.extra].values.data() + i * c.n;
        for (int k = 0; ok && k < c.n; ++k) {
          long long v = 0;
          bool b = false;
          const char* t = skip_space(p, e);
          if (c.role == Role::kExtraReal) {
            ok = to_double(p, e, out[k]);
          } else if (c.role == Role::kExtraInt) {
            ok = to_int(p, e, v);
            out[k] = static_cast<double>(v);
          } else {
            p = token_end(t, e);
            ok = extxyz::to_bool(std::string_view(t, p - t), b);
            out[k] = b ? 1.0 : 0.0;
          }
        }
        break;
      }
      case Role::kSkip:
        for (int k = 0; k < c.n; ++k) {
          const char* b = skip_space(p, e);
          ok = ok && b < e;
          p = token_end(b, e);
        }
        break;
    }
    if (!ok) break;
  }
  if (!ok || skip_space(p, e) != e) {
    // prev_n_atoms was set by next() before the atom lines.
    extxyz::explain_atom(name, line, s, i, prev_n_atoms, f.line, unterminated, header.layout());
  }
}

ExtxyzReader::ExtxyzReader(const std::string& path, ExtxyzKeys keys, size_t buffer_bytes)
    : m_impl(std::make_unique<Impl>(path, std::move(keys), buffer_bytes)) {
  Impl& d = *m_impl;
  if (path == "-") {
    d.fd = STDIN_FILENO;
  } else {
    d.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (d.fd < 0) {
      throw DataError(path + ": cannot open: " + std::strerror(errno),
                      "check the path and that the file is readable");
    }
    d.own_fd = true;
    struct stat st;
    if (::fstat(d.fd, &st) == 0 && S_ISDIR(st.st_mode)) {
      ::close(d.fd);  // the destructor does not run when the constructor throws
      d.own_fd = false;
      throw DataError(path + ": is a directory, not an extended XYZ file", "name a .xyz file");
    }
    ::posix_fadvise(d.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  }
  d.buf.reset(new char[d.cap]);
  d.pos = d.end = d.buf.get();
}

ExtxyzReader::~ExtxyzReader() {
  if (m_impl && m_impl->own_fd) ::close(m_impl->fd);
}

bool ExtxyzReader::next(Frame& f) {
  Impl& d = *m_impl;
  if (d.done) return false;
  std::string_view s;
  do {
    if (!d.next_line(s)) {
      d.done = true;
      if (d.frames == 0) {
        d.fail(std::max(d.line, 1LL),
               d.line == 0 ? "contains no frames (the file is empty)"
                           : "contains no frames (only blank lines)",
               "is this the right file? an extended XYZ frame starts with its number of atoms");
      }
      return false;
    }
  } while (is_blank(s));
  const long long count_line = d.line;
  const long long n = d.parse_count(s, count_line);
  if (!d.next_line(s)) {
    d.fail(count_line,
           "the file ends after the count line (" + std::to_string(n) +
               " atoms) without a comment line or atom lines",
           extxyz::kTruncatedHint);
  }
  f.line = count_line;
  d.header.parse(s, count_line + 1, f);
  const extxyz::Layout& layout = d.header.layout();
  d.prev_count_line = count_line;
  d.prev_n_atoms = n;
  d.prev_n_tokens = layout.n_tokens;

  // Rows are allocated in chunks so that a huge bogus count cannot allocate before it is read.
  const size_t n_atoms = static_cast<size_t>(n);
  size_t rows = 0;
  auto grow = [&](size_t want) {
    rows = want;
    f.z.resize(rows);
    f.pos.resize(3 * rows);
    f.forces.resize(layout.has_forces ? 3 * rows : 0);
    f.extra.resize(layout.n_extra);
    for (const Column& c : layout.columns) {
      if (c.extra < 0) continue;
      ExtraColumn& x = f.extra[c.extra];
      if (x.name != c.name) x.name = c.name;
      x.n_cols = c.n;
      x.values.resize(rows * c.n);
    }
  };
  grow(std::min(n_atoms, kFirstAlloc));
  for (size_t i = 0; i < n_atoms; ++i) {
    if (i == rows) grow(std::min(n_atoms, 2 * rows));
    if (!d.next_line(s)) {
      d.fail(d.line,
             "the file ends inside the frame whose count line (line " + std::to_string(count_line) +
                 ") says " + std::to_string(n) + " atoms: found " + std::to_string(i) +
                 (i == 1 ? " atom line" : " atom lines"),
             std::string(extxyz::kTruncatedHint) +
                 "; or, if the file is complete, fix that count line");
    }
    d.parse_atom(s, i, f);
  }
  ++d.frames;
  return true;
}

long long ExtxyzReader::frames_read() const {
  return m_impl->frames;
}

size_t ExtxyzReader::bytes_read() const {
  return m_impl->total_read - static_cast<size_t>(m_impl->end - m_impl->pos);
}

const std::string& ExtxyzReader::path() const {
  return m_impl->path;
}

}  // namespace ddgnn
