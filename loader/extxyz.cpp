// Streaming extended-XYZ reader (ASE convention): one large read buffer refilled with read(2),
// lines handed out as string_views into it, numbers parsed with std::from_chars. Errors are
// diagnosed on a cold path that re-reads the offending line and says what was expected.
#include "loader/extxyz.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "core/error.h"
#include "loader/elements.h"

namespace ddgnn {
namespace {

constexpr size_t kMaxLineBytes = size_t{1} << 30;
constexpr size_t kFirstAlloc = size_t{1} << 16;  // atoms allocated before the count is trusted

inline bool is_space(char c) {
  return c == ' ' || static_cast<unsigned char>(c - '\t') <= 4;
}

inline const char* skip_space(const char* p, const char* e) {
  while (p < e && is_space(*p)) ++p;
  return p;
}

inline const char* token_end(const char* p, const char* e) {
  while (p < e && !is_space(*p)) ++p;
  return p;
}

bool is_blank(std::string_view s) {
  return skip_space(s.data(), s.data() + s.size()) == s.end();
}

// Cold: a number from_chars rejects as out of range (underflow becomes 0, overflow inf).
__attribute__((noinline)) double strtod_token(const char* p, const char* e) {
  std::string token(p, e);
  return std::strtod(token.c_str(), nullptr);
}

// Parses one real token at p (after blanks); advances p past it. False if absent or malformed.
inline bool to_double(const char*& p, const char* e, double& v) {
  const char* s = skip_space(p, e);
  if (s < e && *s == '+') {  // from_chars takes no leading '+'
    ++s;
    if (s < e && (*s == '+' || *s == '-')) return false;
  }
  auto r = std::from_chars(s, e, v);
  if (r.ec == std::errc::result_out_of_range) {
    v = strtod_token(s, token_end(s, e));
  } else if (r.ec != std::errc()) {
    return false;
  }
  if (r.ptr < e && !is_space(*r.ptr)) return false;
  p = r.ptr;
  return true;
}

inline bool to_int(const char*& p, const char* e, long long& v) {
  const char* s = skip_space(p, e);
  if (s < e && *s == '+') ++s;
  auto r = std::from_chars(s, e, v);
  if (r.ec != std::errc() || (r.ptr < e && !is_space(*r.ptr))) return false;
  p = r.ptr;
  return true;
}

bool to_bool(std::string_view t, bool& v) {
  if (t == "T" || t == "True" || t == "true" || t == "TRUE" || t == "1") {
    v = true;
  } else if (t == "F" || t == "False" || t == "false" || t == "FALSE" || t == "0") {
    v = false;
  } else {
    return false;
  }
  return true;
}

// A token as shown in a message: quoted, at most 40 characters, non-printables as '?'.
std::string shown(std::string_view t) {
  std::string out = "'";
  for (size_t i = 0; i < t.size() && i < 40; ++i) out += (t[i] >= 32 && t[i] < 127) ? t[i] : '?';
  return out + (t.size() > 40 ? "...'" : "'");
}

// Separators of a list in a comment-line value: blanks, commas, brackets ("1, 2" or "[1, 2]").
inline bool is_list_sep(char c) {
  return is_space(c) || c == ',' || c == '[' || c == ']';
}

// Tokens of s split on blanks (or on list separators too); cold paths and per-frame keys only.
std::vector<std::string_view> split_tokens(std::string_view s, bool list = false) {
  std::vector<std::string_view> out;
  auto sep = [list](char c) { return list ? is_list_sep(c) : is_space(c); };
  for (size_t b = 0; b < s.size();) {
    if (sep(s[b])) {
      ++b;
      continue;
    }
    size_t q = b;
    while (q < s.size() && !sep(s[q])) ++q;
    out.push_back(s.substr(b, q - b));
    b = q;
  }
  return out;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

double det3(const std::array<double, 9>& m) {
  return m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) +
         m[2] * (m[3] * m[7] - m[4] * m[6]);
}

// 9 numbers row-major, or 6 in Voigt order xx yy zz yz xz xy -> symmetric 3x3.
std::array<double, 9> to_matrix(const std::vector<double>& v) {
  if (v.size() == 9) return {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]};
  return {v[0], v[5], v[4], v[5], v[1], v[3], v[4], v[3], v[2]};
}

enum class Role : uint8_t {
  kSpecies,
  kNumbers,
  kPos,
  kForces,
  kExtraReal,
  kExtraInt,
  kExtraBool,
  kSkip
};

struct Column {  // one name:type:count triple of Properties
  std::string name;
  char type = 'R';
  int n = 1;
  Role role = Role::kSkip;
  int extra = -1;  // index into Frame::extra
  int first = 0;   // 0-based index of its first token in an atom line
};

struct KeyValue {
  std::string key, value;
  bool has_value = false;
};

const char* kAxis[3] = {"x", "y", "z"};
const char* kTruncatedHint =
    "the file looks truncated (an interrupted write or copy?); regenerate it or cut off the "
    "last, incomplete frame";

}  // namespace

struct ExtxyzReader::Impl {
  std::string path, name;  // name: what messages show ("<stdin>" for "-")
  ExtxyzKeys keys;
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

  std::vector<KeyValue> kv;
  size_t n_kv = 0;
  std::string props_text;
  bool props_valid = false;
  std::vector<Column> columns;
  int n_tokens = 0, n_extra = 0;
  bool has_forces = false;
  std::vector<double> numbers;  // scratch for comment-line number lists

  [[noreturn]] void fail(long long at_line, const std::string& what, const std::string& hint) {
    throw DataError(at(name, at_line) + ": " + what, hint);
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

  // ASE's key_val_str_to_dict: key=value, bare keys, values in "..", '..', {..}, [..] with the
  // delimiters removed, backslash escapes, blanks around '=', "a=b=c" keeps value "b=c".
  void parse_comment(std::string_view s) {
    n_kv = 0;
    bool open = false, in_value = false, touched = false, escaped = false;
    char opener = 0, closer = 0;
    int depth = 0;  // nesting of [..] or {..}, e.g. Lattice=[[1, 0, 0], [0, 1, 0], [0, 0, 1]]
    auto begin = [&] {
      if (n_kv == kv.size()) kv.emplace_back();
      KeyValue& e = kv[n_kv++];
      e.key.clear();
      e.value.clear();
      e.has_value = false;
      open = true;
      in_value = touched = false;
    };
    auto put = [&](char c) {
      if (!open) begin();
      (in_value ? kv[n_kv - 1].value : kv[n_kv - 1].key) += c;
      touched = true;
    };
    for (char c : s) {
      if (escaped) {
        put(c);
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (closer) {
        if (c == closer && --depth == 0) {
          closer = 0;
        } else {
          if (c == opener && opener != closer) ++depth;
          put(c);
        }
      } else if (c == '"' || c == '\'' || c == '{' || c == '[') {
        if (!open) begin();
        opener = c;
        closer = c == '{' ? '}' : c == '[' ? ']' : c;
        depth = 1;
        touched = true;
      } else if (is_space(c)) {
        if (open && touched) open = false;
      } else if (c == '=') {
        if (!open && n_kv > 0) {  // "key = value": the '=' belongs to the previous key
          open = true;
          in_value = kv[n_kv - 1].has_value;
        }
        if (!open) begin();
        KeyValue& e = kv[n_kv - 1];
        if (in_value) {
          e.value += '=';
        } else {
          in_value = e.has_value = true;
          touched = false;
        }
      } else {
        put(c);
      }
    }
  }

  const KeyValue* find(std::string_view key) const {
    for (size_t i = n_kv; i-- > 0;) {
      if (kv[i].key == key) return &kv[i];
    }
    return nullptr;
  }

  std::string keys_present() const {
    std::string out;
    for (size_t i = 0; i < n_kv; ++i) out += (i ? ", " : "") + kv[i].key;
    return out.empty() ? "(none)" : out;
  }

  // The numbers of a comment-line value, split on blanks and commas, into `numbers`.
  void parse_numbers(const KeyValue& e, long long at_line) {
    numbers.clear();
    if (!e.has_value) fail(at_line, e.key + " has no value", "write it as " + e.key + "=\"...\"");
    const char* p = e.value.data();
    const char* end_ = p + e.value.size();
    for (;;) {
      while (p < end_ && is_list_sep(*p)) ++p;
      if (p == end_) break;
      const char* q = p;
      while (q < end_ && !is_list_sep(*q)) ++q;
      double v;
      const char* t = p;
      if (!to_double(t, q, v) || t != q) {
        fail(at_line,
             e.key + "=" + shown(e.value) + ": expected numbers, found " +
                 shown(std::string_view(p, q - p)),
             "write the value as plain numbers separated by blanks");
      }
      numbers.push_back(v);
      p = q;
    }
  }

  void check_finite(const double* v, size_t n, long long at_line, const std::string& what) {
    for (size_t i = 0; i < n; ++i) {
      if (!std::isfinite(v[i])) {
        fail(at_line, what + " is not finite (" + number(v[i]) + ")",
             "the calculation behind this frame probably failed; remove the frame");
      }
    }
  }

  void setup_properties(std::string_view text, long long at_line);
  void read_comment(Frame& f, long long at_line);
  long long parse_count(std::string_view s, long long at_line);
  void parse_atom(std::string_view s, size_t i, Frame& f);
  [[noreturn]] void explain_atom(std::string_view s, size_t i, const Frame& f);
};

void ExtxyzReader::Impl::setup_properties(std::string_view text, long long at_line) {
  if (props_valid && text == props_text) return;  // same as the frame before: reuse
  props_valid = false;
  props_text.assign(text);
  columns.clear();
  const std::string hint = "Properties is a list of name:type:count, e.g. species:S:1:pos:R:3";
  std::vector<std::string_view> f;
  for (size_t b = 0;;) {
    size_t c = text.find(':', b);
    f.push_back(text.substr(b, c == std::string_view::npos ? c : c - b));
    if (c == std::string_view::npos) break;
    b = c + 1;
  }
  if (f.size() % 3 != 0) {
    fail(at_line,
         "Properties=" + shown(text) + " has " + std::to_string(f.size()) +
             " fields, expected a multiple of 3 (name:type:count)",
         hint);
  }
  n_tokens = n_extra = 0;
  int species = -1, numbers_col = -1, positions = -1, forces = -1;
  for (size_t k = 0; k < f.size(); k += 3) {
    Column col;
    col.name.assign(f[k]);
    long long n = 0;
    const char* p = f[k + 2].data();
    if (f[k + 1].size() != 1 || std::string_view("SRIL").find(f[k + 1][0]) == std::string::npos ||
        !to_int(p, p + f[k + 2].size(), n) || n < 1 || n > 1000) {
      fail(at_line,
           "Properties column " + shown(col.name) + " has type " + shown(f[k + 1]) + " and count " +
               shown(f[k + 2]) + "; expected type S, R, I or L and a " + "count of at least 1",
           hint);
    }
    col.type = f[k + 1][0];
    col.n = static_cast<int>(n);
    col.first = n_tokens;
    n_tokens += col.n;
    const int idx = static_cast<int>(columns.size());
    auto want = [&](char type, int count, const char* example) {
      if (col.type != type || col.n != count) {
        fail(at_line,
             "Properties column " + shown(col.name) + " is " + col.name + ":" + col.type + ":" +
                 std::to_string(col.n) + ", expected " + example,
             hint);
      }
    };
    if (col.name == "species" && species < 0) {
      want('S', 1, "species:S:1");
      species = idx;
    } else if ((col.name == "Z" || col.name == "numbers") && numbers_col < 0) {
      want('I', 1, col.name == "Z" ? "Z:I:1" : "numbers:I:1");
      numbers_col = idx;
    } else if ((col.name == "pos" || col.name == "positions") && positions < 0) {
      want('R', 3, "pos:R:3");
      positions = idx;
      col.role = Role::kPos;
    } else if (col.name == keys.forces && forces < 0) {
      want('R', 3, (keys.forces + ":R:3").c_str());
      forces = idx;
      col.role = Role::kForces;
    } else if (std::find(keys.extra_columns.begin(), keys.extra_columns.end(), col.name) !=
               keys.extra_columns.end()) {
      if (col.type == 'S') {
        fail(at_line, "extra column " + shown(col.name) + " holds strings (type S)",
             "only real (R), integer (I) or logical (L) columns can be kept");
      }
      col.role = col.type == 'R'   ? Role::kExtraReal
                 : col.type == 'I' ? Role::kExtraInt
                                   : Role::kExtraBool;
      col.extra = n_extra++;
    }
    columns.push_back(std::move(col));
  }
  if (species >= 0) {
    columns[species].role = Role::kSpecies;
  } else if (numbers_col >= 0) {
    columns[numbers_col].role = Role::kNumbers;
  } else {
    fail(at_line, "Properties=" + shown(text) + " has no species column",
         "add species:S:1 (element symbols) or Z:I:1 (atomic numbers) to Properties");
  }
  if (positions < 0) {
    fail(at_line, "Properties=" + shown(text) + " has no positions column",
         "add pos:R:3 to Properties");
  }
  for (const std::string& want : keys.extra_columns) {
    bool found = false;
    for (const Column& c : columns) found = found || (c.name == want && c.extra >= 0);
    if (!found) {
      fail(at_line,
           "Properties=" + shown(text) + " has no column " + shown(want) +
               " (asked for as an extra column)",
           "drop it from the extra columns or check the Properties of this frame");
    }
  }
  has_forces = forces >= 0;
  props_valid = true;
}

void ExtxyzReader::Impl::read_comment(Frame& f, long long at_line) {
  const KeyValue* e = find("Lattice");
  if (!e) e = find("lattice");
  f.has_cell = e != nullptr;
  f.cell = {};
  if (e) {
    parse_numbers(*e, at_line);
    if (numbers.size() != 9) {
      fail(at_line,
           "Lattice has " + std::to_string(numbers.size()) +
               " numbers, expected 9 (ax ay az bx by bz cx cy cz)",
           "write the three lattice vectors as Lattice=\"ax ay az bx by bz cx cy cz\"");
    }
    std::copy(numbers.begin(), numbers.end(), f.cell.begin());
    check_finite(f.cell.data(), 9, at_line, "the cell (Lattice)");
  }

  f.pbc = {f.has_cell, f.has_cell, f.has_cell};  // ASE's default
  if ((e = find("pbc"))) {
    const std::vector<std::string_view> t =
        split_tokens(e->has_value ? std::string_view(e->value) : "T", /*list=*/true);
    bool ok = t.size() == 1 || t.size() == 3;
    for (size_t k = 0; ok && k < 3; ++k) ok = to_bool(t[t.size() == 1 ? 0 : k], f.pbc[k]);
    if (!ok) {
      fail(at_line, "pbc=" + shown(e->value) + " is not three logicals",
           "write it as pbc=\"T T T\" (T/F, True/False or 1/0 for each axis)");
    }
  }
  if ((f.pbc[0] || f.pbc[1] || f.pbc[2]) && !f.has_cell) {
    fail(at_line, "pbc says periodic but the frame has no Lattice",
         "add Lattice=\"ax ay az bx by bz cx cy cz\", or pbc=\"F F F\" for a molecule");
  }
  const double volume = f.has_cell ? det3(f.cell) : 0.0;
  if ((f.pbc[0] || f.pbc[1] || f.pbc[2]) && !(volume > 0.0)) {
    fail(at_line, "the periodic cell has volume " + number(volume) + " Å^3 (det of Lattice)",
         "a periodic cell needs three independent, right-handed lattice vectors (volume > 0); "
         "for a molecule, write pbc=\"F F F\"");
  }

  f.has_energy = false;
  f.energy = 0.0;
  if ((e = find(keys.energy))) {
    parse_numbers(*e, at_line);
    if (numbers.size() != 1) {
      fail(at_line, keys.energy + "=" + shown(e->value) + " is not one number",
           "the energy is one number in eV, e.g. " + keys.energy + "=-14.2");
    }
    f.energy = numbers[0];
    f.has_energy = true;
    check_finite(&f.energy, 1, at_line, "the energy (" + keys.energy + ")");
  } else if (keys.require_energy) {
    std::string hint = "use --energy-key to name the key holding the energy, e.g. REF_energy";
    for (size_t i = 0; i < n_kv; ++i) {
      std::string lower = kv[i].key;
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (lower.find("energy") != std::string::npos) {
        hint = "use --energy-key " + kv[i].key + " if that key holds the energy";
        break;
      }
    }
    fail(at_line,
         "no energy key " + shown(keys.energy) +
             " in the comment line; keys present: " + keys_present(),
         hint);
  }

  f.has_stress = false;
  f.stress = {};
  const bool from_virial = !find(keys.stress) && find("virial") && f.has_cell;
  if ((e = find(from_virial ? "virial" : keys.stress))) {
    parse_numbers(*e, at_line);
    if (numbers.size() != 9 && numbers.size() != 6) {
      fail(at_line,
           e->key + " has " + std::to_string(numbers.size()) +
               " numbers, expected 9 (3x3) or 6 (Voigt: xx yy zz yz xz xy)",
           "write it as " + e->key + "=\"xx xy xz yx yy yz zx zy zz\"");
    }
    f.stress = to_matrix(numbers);
    check_finite(f.stress.data(), 9, at_line, "the " + e->key);
    if (from_virial) {
      const double v = std::abs(volume);
      if (!(v > 0.0)) {
        fail(at_line, "virial given but the cell has zero volume, so no stress follows",
             "give stress= instead, or a Lattice with nonzero volume");
      }
      for (double& s : f.stress) s = -s / v;  // ASE: stress = -virial / volume
    }
    f.has_stress = true;
  }

  e = find(keys.config_type);
  f.config_type.assign(e && e->has_value ? e->value : "");

  e = find("Properties");
  if (!e) e = find("properties");
  setup_properties(e && e->has_value ? std::string_view(e->value) : "species:S:1:pos:R:3", at_line);
  if (keys.require_forces && !has_forces) {
    std::string names;
    for (const Column& c : columns) names += (names.empty() ? "" : ", ") + c.name;
    fail(at_line,
         "no forces column " + shown(keys.forces) + " in Properties; columns present: " + names,
         "use --forces-key to name the column holding the forces, e.g. REF_forces");
  }
}

long long ExtxyzReader::Impl::parse_count(std::string_view s, long long at_line) {
  const char* e = s.data() + s.size();
  const char* p = s.data();
  long long n = 0;
  if (to_int(p, e, n) && skip_space(p, e) == e) {
    if (n > 0) return n;
    fail(at_line, "the count line says " + std::to_string(n) + " atoms; a frame needs at least one",
         n == 0 ? "remove the empty frame" : "the first line of a frame is its number of atoms");
  }
  if (frames > 0) {
    const std::string prev = "the count line at line " + std::to_string(prev_count_line) +
                             " says " + std::to_string(prev_n_atoms) + " atoms";
    const bool atom_line = static_cast<int>(split_tokens(s).size()) == prev_n_tokens;
    fail(at_line,
         "expected the count line of frame " + std::to_string(frames + 1) + ", found " +
             (atom_line ? "the atom line " + shown(s) + ": " + prev +
                              " but the frame appears to have more"
                        : shown(s) + " (if the frame before has more lines: " + prev + ")"),
         "fix the count line at line " + std::to_string(prev_count_line));
  }
  fail(at_line, "expected the number of atoms (a positive integer), found " + shown(s),
       "is this an extended XYZ file? each frame starts with its number of atoms");
}

// The hot path: one atom line into row i of the frame. Any problem goes to explain_atom.
void ExtxyzReader::Impl::parse_atom(std::string_view s, size_t i, Frame& f) {
  const char* p = s.data();
  const char* e = p + s.size();
  bool ok = true;
  for (const Column& c : columns) {
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
            ok = to_bool(std::string_view(t, p - t), b);
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
  if (!ok || skip_space(p, e) != e) explain_atom(s, i, f);
}

// Cold path: re-reads a bad atom line and throws a message that names the column and token.
void ExtxyzReader::Impl::explain_atom(std::string_view s, size_t i, const Frame& f) {
  const long long count_line = f.line;
  const long long n_atoms = prev_n_atoms;  // set by next() before the atom lines
  const std::string atom = "atom " + std::to_string(i + 1) + " of " + std::to_string(n_atoms);
  const std::vector<std::string_view> t = split_tokens(s);
  const std::string appears = ": the count line at line " + std::to_string(count_line) + " says " +
                              std::to_string(n_atoms) + " atoms but the frame appears to have " +
                              std::to_string(i);
  const std::string fix_count = "fix the count line at line " + std::to_string(count_line);
  if (unterminated && static_cast<int>(t.size()) < n_tokens) {
    fail(line,
         "the last line, of " + atom + ", is incomplete (" + std::to_string(t.size()) +
             " columns but Properties=" + props_text + " says " + std::to_string(n_tokens) +
             ") and has no line end",
         kTruncatedHint);
  }
  if (t.empty()) fail(line, "expected " + atom + ", found a blank line" + appears, fix_count);
  long long dummy = 0;
  const char* p = t[0].data();
  if (t.size() == 1 && to_int(p, t[0].data() + t[0].size(), dummy)) {
    fail(line,
         "expected " + atom + ", found " + shown(t[0]) +
             ", which looks like the count line of the next frame" + appears,
         fix_count);
  }
  if (static_cast<int>(t.size()) != n_tokens) {
    fail(line,
         "the line of " + atom + " has " + std::to_string(t.size()) +
             " columns but Properties=" + props_text + " says " + std::to_string(n_tokens),
         "each atom line needs one value per Properties column; check the Properties key on line " +
             std::to_string(count_line + 1));
  }
  const std::string bad_frame = "the calculation behind this frame probably failed; remove it";
  for (const Column& c : columns) {
    for (int k = 0; k < c.n; ++k) {
      const std::string_view tok = t[c.first + k];
      const char* b = tok.data();
      const char* q = b + tok.size();
      const std::string where = "column " + std::to_string(c.first + k + 1) + " (" + c.name +
                                (c.n == 3 ? std::string(" ") + kAxis[k] : std::string()) + ") of " +
                                atom;
      double v = 0;
      long long z = 0;
      bool flag = false;
      if (c.role == Role::kSpecies && atomic_number(tok) == 0) {
        fail(line, "unknown element symbol " + shown(tok) + " in " + where,
             "check the species column: it must hold element symbols such as Cu or O (use Z:I:1 "
             "in Properties for atomic numbers)");
      }
      if (c.role == Role::kNumbers || c.role == Role::kExtraInt) {
        if (!to_int(b, q, z))
          fail(line, "expected an integer in " + where + ", found " + shown(tok),
               "check the Properties types");
        if (c.role == Role::kNumbers && (z < 1 || z > kMaxAtomicNumber)) {
          fail(line,
               "atomic number " + std::to_string(z) + " in " + where + " is out of range 1.." +
                   std::to_string(kMaxAtomicNumber),
               "check the species column: Z holds atomic numbers from 1 (H) to 118 (Og)");
        }
      }
      if (c.role == Role::kExtraBool && !to_bool(tok, flag)) {
        fail(line, "expected T or F in " + where + ", found " + shown(tok),
             "check the Properties types");
      }
      if (c.role == Role::kPos || c.role == Role::kForces || c.role == Role::kExtraReal) {
        if (!to_double(b, q, v)) {
          fail(line, "expected a number in " + where + ", found " + shown(tok),
               "check the Properties key on line " + std::to_string(count_line + 1) +
                   " against the columns of the atom lines");
        }
        if (c.role != Role::kExtraReal && !std::isfinite(v)) {
          fail(line,
               std::string(c.role == Role::kPos ? "position" : "force") + " " + kAxis[k] + " of " +
                   atom + " is " + shown(tok) + ", not a finite number",
               bad_frame);
        }
      }
    }
  }
  fail(line, "cannot read the line of " + atom, "check the Properties key");
}

ExtxyzReader::ExtxyzReader(const std::string& path, ExtxyzKeys keys, size_t buffer_bytes)
    : m_impl(std::make_unique<Impl>()) {
  Impl& d = *m_impl;
  d.path = path;
  d.keys = std::move(keys);
  d.cap = std::max<size_t>(buffer_bytes, 16);
  if (path == "-") {
    d.name = "<stdin>";
    d.fd = STDIN_FILENO;
  } else {
    d.name = path;
    d.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (d.fd < 0) {
      throw DataError(path + ": cannot open: " + std::strerror(errno),
                      "check the path and that the file is readable");
    }
    d.own_fd = true;
    struct stat st;
    if (::fstat(d.fd, &st) == 0 && S_ISDIR(st.st_mode)) {
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
           kTruncatedHint);
  }
  f.line = count_line;
  d.parse_comment(s);
  d.read_comment(f, count_line + 1);
  d.prev_count_line = count_line;
  d.prev_n_atoms = n;
  d.prev_n_tokens = d.n_tokens;

  // Rows are allocated in chunks so that a huge bogus count cannot allocate before it is read.
  const size_t n_atoms = static_cast<size_t>(n);
  size_t rows = 0;
  auto grow = [&](size_t want) {
    rows = want;
    f.z.resize(rows);
    f.pos.resize(3 * rows);
    f.forces.resize(d.has_forces ? 3 * rows : 0);
    f.extra.resize(d.n_extra);
    for (const Column& c : d.columns) {
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
             std::string(kTruncatedHint) + "; or, if the file is complete, fix that count line");
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
