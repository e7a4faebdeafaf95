// Parser of an extxyz comment line: splits it into key=value pairs as ASE does, reads Lattice, pbc,
// energy, stress (or virial), config_type into the frame, and turns Properties into the Layout of
// the atom lines. Every rejected value says which key, what was found, and how to write it.
#include "loader/extxyz_header.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>

#include <spdlog/spdlog.h>

#include "core/log.h"
#include "loader/cell.h"
#include "loader/extxyz_errors.h"
#include "loader/extxyz_lex.h"

namespace ddgnn::extxyz {
namespace {

// 9 numbers row-major, or 6 in Voigt order xx yy zz yz xz xy -> symmetric 3x3.
std::array<double, 9> to_matrix(const std::vector<double>& v) {
  if (v.size() == 9) return {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]};
  return {v[0], v[5], v[4], v[5], v[1], v[3], v[4], v[3], v[2]};
}

}  // namespace

HeaderParser::HeaderParser(std::string file, ExtxyzKeys keys)
    : m_file(std::move(file)), m_keys(std::move(keys)) {}

void HeaderParser::fail(long long at_line, const std::string& what, const std::string& hint) const {
  extxyz::fail(m_file, at_line, what, hint);
}

// ASE's key_val_str_to_dict: key=value, bare keys, values in "..", '..', {..}, [..] with the
// delimiters removed, backslash escapes, blanks around '=', "a=b=c" keeps value "b=c".
void HeaderParser::split_pairs(std::string_view s) {
  m_n_kv = 0;
  bool open = false, in_value = false, touched = false, escaped = false;
  char opener = 0, closer = 0;
  int depth = 0;  // nesting of [..] or {..}, e.g. Lattice=[[1, 0, 0], [0, 1, 0], [0, 0, 1]]
  auto begin = [&] {
    if (m_n_kv == m_kv.size()) m_kv.emplace_back();
    KeyValue& e = m_kv[m_n_kv++];
    e.key.clear();
    e.value.clear();
    e.has_value = false;
    open = true;
    in_value = touched = false;
  };
  auto put = [&](char c) {
    if (!open) begin();
    (in_value ? m_kv[m_n_kv - 1].value : m_kv[m_n_kv - 1].key) += c;
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
      if (!open && m_n_kv > 0) {  // "key = value": the '=' belongs to the previous key
        open = true;
        in_value = m_kv[m_n_kv - 1].has_value;
      }
      if (!open) begin();
      KeyValue& e = m_kv[m_n_kv - 1];
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

const HeaderParser::KeyValue* HeaderParser::find(std::string_view key) const {
  for (size_t i = m_n_kv; i-- > 0;) {
    if (m_kv[i].key == key) return &m_kv[i];
  }
  return nullptr;
}

std::string HeaderParser::keys_present() const {
  std::string out;
  for (size_t i = 0; i < m_n_kv; ++i) out += (i ? ", " : "") + m_kv[i].key;
  return out.empty() ? "(none)" : out;
}

// The numbers of a comment-line value, split on blanks and commas, into `m_numbers`.
void HeaderParser::parse_numbers(const KeyValue& e, long long at_line) {
  m_numbers.clear();
  if (!e.has_value) fail(at_line, e.key + " has no value", "write it as " + e.key + "=\"...\"");
  const char* p = e.value.data();
  const char* end = p + e.value.size();
  for (;;) {
    while (p < end && is_list_sep(*p)) ++p;
    if (p == end) break;
    const char* q = p;
    while (q < end && !is_list_sep(*q)) ++q;
    double v;
    const char* t = p;
    if (!to_double(t, q, v) || t != q) {
      fail(at_line,
           e.key + "=" + shown(e.value) + ": expected numbers, found " +
               shown(std::string_view(p, q - p)),
           "write the value as plain numbers separated by blanks");
    }
    m_numbers.push_back(v);
    p = q;
  }
}

void HeaderParser::check_finite(const double* v, size_t n, long long at_line,
                                const std::string& what) const {
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(v[i])) {
      fail(at_line, what + " is not finite (" + fmt("%.6g", v[i]) + ")",
           "the calculation behind this frame probably failed; remove the frame");
    }
  }
}

void HeaderParser::setup_layout(std::string_view text, long long at_line) {
  if (m_layout_valid && text == m_layout.properties) return;  // same as the frame before: reuse
  m_layout_valid = false;
  m_layout.properties.assign(text);
  std::vector<Column>& columns = m_layout.columns;
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
  int& n_tokens = m_layout.n_tokens;
  int& n_extra = m_layout.n_extra;
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
               shown(f[k + 2]) + "; expected type S, R, I or L and a count from 1 to 1000",
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
    } else if (col.name == m_keys.forces && forces < 0) {
      want('R', 3, (m_keys.forces + ":R:3").c_str());
      forces = idx;
      col.role = Role::kForces;
    } else if (std::find(m_keys.extra_columns.begin(), m_keys.extra_columns.end(), col.name) !=
               m_keys.extra_columns.end()) {
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
  for (const std::string& want : m_keys.extra_columns) {
    bool found = false;
    for (const Column& c : columns) found = found || (c.name == want && c.extra >= 0);
    if (!found) {
      fail(at_line,
           "Properties=" + shown(text) + " has no column " + shown(want) +
               " (asked for as an extra column)",
           "drop it from the extra columns or check the Properties of this frame");
    }
  }
  m_layout.has_forces = forces >= 0;
  m_layout_valid = true;
}

void HeaderParser::parse(std::string_view s, long long at_line, Frame& f) {
  split_pairs(s);
  // One key twice with two values (energy=-1.0 ... energy=-2.0): the last is read, as ASE
  // does, with a warning the first time in a file.
  if (!m_warned_twice)
    for (size_t i = 0; i < m_n_kv && !m_warned_twice; ++i)
      for (size_t j = i + 1; j < m_n_kv; ++j)
        if (m_kv[i].key == m_kv[j].key && m_kv[i].value != m_kv[j].value) {
          spdlog::warn(
              "{}:{}: key '{}' appears twice in the comment line ('{}', then '{}'): the last is "
              "read (warned once a file)",
              m_file, at_line, m_kv[i].key, m_kv[i].value.substr(0, 40),
              m_kv[j].value.substr(0, 40));
          m_warned_twice = true;
          break;
        }
  const KeyValue* e = find("Lattice");
  if (!e) e = find("lattice");
  f.has_cell = e != nullptr;
  f.cell = {};
  if (e) {
    parse_numbers(*e, at_line);
    if (m_numbers.size() != 9) {
      fail(at_line,
           "Lattice has " + std::to_string(m_numbers.size()) +
               " numbers, expected 9 (ax ay az bx by bz cx cy cz)",
           "write the three lattice vectors as Lattice=\"ax ay az bx by bz cx cy cz\"");
    }
    std::copy(m_numbers.begin(), m_numbers.end(), f.cell.begin());
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
  const double volume = f.has_cell ? cell_det(f.cell.data()) : 0.0;
  if (f.has_cell) {
    const bool pbc[3] = {f.pbc[0], f.pbc[1], f.pbc[2]};
    const std::string problem = cell_problem(f.cell.data(), pbc);
    if (!problem.empty())
      fail(at_line, problem + " (Lattice)",
           "a periodic cell needs three independent, right-handed lattice vectors (volume > 0), "
           "each at least " +
               fmt("%.6g", kMinCellHeight) +
               " Å from the plane of the other two, in Å; "
               "for a molecule, write pbc=\"F F F\"");
  }

  f.has_energy = false;
  f.energy = 0.0;
  if ((e = find(m_keys.energy))) {
    parse_numbers(*e, at_line);
    if (m_numbers.size() != 1) {
      fail(at_line, m_keys.energy + "=" + shown(e->value) + " is not one number",
           "the energy is one number in eV, e.g. " + m_keys.energy + "=-14.2");
    }
    f.energy = m_numbers[0];
    f.has_energy = true;
    check_finite(&f.energy, 1, at_line, "the energy (" + m_keys.energy + ")");
  } else if (m_keys.require_energy) {
    std::string hint = "use --energy-key to name the key holding the energy, e.g. REF_energy";
    for (size_t i = 0; i < m_n_kv; ++i) {
      std::string lower = m_kv[i].key;
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (lower.find("energy") != std::string::npos) {
        hint = "use --energy-key " + m_kv[i].key + " if that key holds the energy";
        break;
      }
    }
    fail(at_line,
         "no energy key " + shown(m_keys.energy) +
             " in the comment line; keys present: " + keys_present(),
         hint);
  }

  f.has_stress = false;
  f.stress = {};
  const bool from_virial = !find(m_keys.stress) && find("virial") && f.has_cell;
  if ((e = find(from_virial ? "virial" : m_keys.stress))) {
    parse_numbers(*e, at_line);
    if (m_numbers.size() != 9 && m_numbers.size() != 6) {
      fail(at_line,
           e->key + " has " + std::to_string(m_numbers.size()) +
               " numbers, expected 9 (3x3) or 6 (Voigt: xx yy zz yz xz xy)",
           "write it as " + e->key + "=\"xx xy xz yx yy yz zx zy zz\"");
    }
    f.stress = to_matrix(m_numbers);
    check_finite(f.stress.data(), 9, at_line, "the " + e->key);
    if (from_virial) {
      const double v = std::abs(volume);
      if (!(v > 0.0)) {
        fail(at_line, "virial given but the cell has zero volume, so no stress follows",
             "give stress= instead, or a Lattice with nonzero volume");
      }
      for (double& x : f.stress) x = -x / v;  // ASE: stress = -virial / volume
    }
    f.has_stress = true;
  }

  e = find(m_keys.config_type);
  f.config_type.assign(e && e->has_value ? e->value : "");

  f.info.resize(m_keys.info_keys.size());
  for (size_t k = 0; k < m_keys.info_keys.size(); ++k) {
    const std::string& key = m_keys.info_keys[k];
    if (!(e = find(key)))
      fail(at_line,
           "no per-structure key " + shown(key) +
               " in the comment line; keys present: " + keys_present(),
           "every structure must carry the keys of --info-keys; convert the frames that have it "
           "separately, or leave the key out");
    parse_numbers(*e, at_line);
    if (m_numbers.empty())
      fail(at_line, key + "=" + shown(e->value) + " holds no number",
           "a per-structure target is one or more numbers, e.g. " + key + "=1.25");
    check_finite(m_numbers.data(), m_numbers.size(), at_line, "the value of " + key);
    ExtraColumn& x = f.info[k];
    x.name = key;
    x.n_cols = int(m_numbers.size());
    x.values.assign(m_numbers.begin(), m_numbers.end());
  }

  e = find("Properties");
  if (!e) e = find("properties");
  setup_layout(e && e->has_value ? std::string_view(e->value) : "species:S:1:pos:R:3", at_line);
  if (m_keys.require_forces && !m_layout.has_forces) {
    std::string names;
    for (const Column& c : m_layout.columns) names += (names.empty() ? "" : ", ") + c.name;
    fail(at_line,
         "no forces column " + shown(m_keys.forces) + " in Properties; columns present: " + names,
         "use --forces-key to name the column holding the forces, e.g. REF_forces");
  }
}

}  // namespace ddgnn::extxyz
