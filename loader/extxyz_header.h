// The comment line of an extxyz frame (loader-internal): ASE's key=value syntax with quoting,
// and the keys Lattice, pbc, energy, stress/virial, config_type and Properties. Yields the frame's
// cell, pbc, energy, stress and config_type, and the Layout the reader follows for the atom lines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "loader/extxyz.h"
#include "loader/frame.h"

namespace ddgnn::extxyz {

// What the reader does with one Properties column of an atom line.
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

// The atom lines of a frame as Properties describes them: all the reader needs to read them.
struct Layout {
  std::string properties;       // the Properties value it was built from
  std::vector<Column> columns;  // in file order
  int n_tokens = 0;             // tokens per atom line
  int n_extra = 0;              // columns kept in Frame::extra
  bool has_forces = false;      // a column holds ExtxyzKeys::forces
};

// Parses comment lines one frame after another, reusing its storage (and the Layout while
// Properties stays the same), so that the steady state allocates nothing.
class HeaderParser {
 public:
  // `file` is the name shown in messages.
  HeaderParser(std::string file, ExtxyzKeys keys);

  // Parses comment line `s`, line `at_line` of the file: sets f.has_cell, cell, pbc, has_energy,
  // energy, has_stress, stress and config_type, and layout(). Throws DataError on bad input.
  void parse(std::string_view s, long long at_line, Frame& f);

  const Layout& layout() const { return m_layout; }

 private:
  struct KeyValue {
    std::string key, value;
    bool has_value = false;
  };

  void split_pairs(std::string_view s);
  const KeyValue* find(std::string_view key) const;
  std::string keys_present() const;
  void parse_numbers(const KeyValue& e, long long at_line);
  void check_finite(const double* v, size_t n, long long at_line, const std::string& what) const;
  void setup_layout(std::string_view text, long long at_line);
  [[noreturn]] void fail(long long at_line, const std::string& what, const std::string& hint) const;

  std::string m_file;
  ExtxyzKeys m_keys;
  std::vector<KeyValue> m_kv;  // the pairs of the current line: the first m_n_kv
  size_t m_n_kv = 0;
  std::vector<double> m_numbers;  // scratch for comment-line number lists
  Layout m_layout;
  bool m_layout_valid = false;
  bool m_warned_twice = false;  // a key given twice with two values (warned once a file)
};

}  // namespace ddgnn::extxyz
