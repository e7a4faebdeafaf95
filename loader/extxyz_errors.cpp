// Slow-path diagnostics of the extxyz reader: a rejected count or atom line is re-read token by
// token, and the message names the line, column and token, what was expected, and what to do.
#include "loader/extxyz_errors.h"

#include <cmath>
#include <vector>

#include "core/error.h"
#include "loader/elements.h"
#include "loader/extxyz_lex.h"

namespace ddgnn::extxyz {
namespace {

const char* kAxis[3] = {"x", "y", "z"};

}  // namespace

void fail(const std::string& file, long long line, const std::string& what,
          const std::string& hint) {
  throw DataError(at(file, line) + ": " + what, hint);
}

std::string shown(std::string_view t) {
  std::string out = "'";
  for (size_t i = 0; i < t.size() && i < 40; ++i) out += (t[i] >= 32 && t[i] < 127) ? t[i] : '?';
  return out + (t.size() > 40 ? "...'" : "'");
}

void explain_count(const std::string& file, long long line, std::string_view s,
                   const PreviousFrame& prev) {
  const char* e = s.data() + s.size();
  const char* p = s.data();
  long long n = 0;
  if (to_int(p, e, n) && skip_space(p, e) == e) {
    fail(file, line,
         "the count line says " + std::to_string(n) + " atoms; a frame needs at least one",
         n == 0 ? "remove the empty frame" : "the first line of a frame is its number of atoms");
  }
  if (prev.frames > 0) {
    const std::string before = "the count line at line " + std::to_string(prev.count_line) +
                               " says " + std::to_string(prev.n_atoms) + " atoms";
    const bool atom_line = static_cast<int>(split_tokens(s).size()) == prev.n_tokens;
    fail(file, line,
         "expected the count line of frame " + std::to_string(prev.frames + 1) + ", found " +
             (atom_line ? "the atom line " + shown(s) + ": " + before +
                              " but the frame appears to have more"
                        : shown(s) + " (if the frame before has more lines: " + before + ")"),
         "fix the count line at line " + std::to_string(prev.count_line));
  }
  fail(file, line, "expected the number of atoms (a positive integer), found " + shown(s),
       "is this an extended XYZ file? each frame starts with its number of atoms");
}

void explain_atom(const std::string& file, long long line, std::string_view s, size_t i,
                  long long n_atoms, long long count_line, bool unterminated,
                  const Layout& layout) {
  const std::string atom = "atom " + std::to_string(i + 1) + " of " + std::to_string(n_atoms);
  const std::vector<std::string_view> t = split_tokens(s);
  const std::string appears = ": the count line at line " + std::to_string(count_line) + " says " +
                              std::to_string(n_atoms) + " atoms but the frame appears to have " +
                              std::to_string(i);
  const std::string fix_count = "fix the count line at line " + std::to_string(count_line);
  const int n_tokens = layout.n_tokens;
  if (unterminated && static_cast<int>(t.size()) < n_tokens) {
    fail(file, line,
         "the last line, of " + atom + ", is incomplete (" + std::to_string(t.size()) +
             " columns but Properties=" + layout.properties + " says " + std::to_string(n_tokens) +
             ") and has no line end",
         kTruncatedHint);
  }
  if (t.empty()) {
    fail(file, line, "expected " + atom + ", found a blank line" + appears, fix_count);
  }
  long long dummy = 0;
  const char* p = t[0].data();
  if (t.size() == 1 && to_int(p, t[0].data() + t[0].size(), dummy)) {
    fail(file, line,
         "expected " + atom + ", found " + shown(t[0]) +
             ", which looks like the count line of the next frame" + appears,
         fix_count);
  }
  if (static_cast<int>(t.size()) != n_tokens) {
    fail(file, line,
         "the line of " + atom + " has " + std::to_string(t.size()) +
             " columns but Properties=" + layout.properties + " says " + std::to_string(n_tokens),
         "each atom line needs one value per Properties column; check the Properties key on line " +
             std::to_string(count_line + 1));
  }
  const std::string bad_frame = "the calculation behind this frame probably failed; remove it";
  for (const Column& c : layout.columns) {
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
        fail(file, line, "unknown element symbol " + shown(tok) + " in " + where,
             "check the species column: it must hold element symbols such as Cu or O (use Z:I:1 "
             "in Properties for atomic numbers)");
      }
      if (c.role == Role::kNumbers || c.role == Role::kExtraInt) {
        if (!to_int(b, q, z))
          fail(file, line, "expected an integer in " + where + ", found " + shown(tok),
               "check the Properties types");
        if (c.role == Role::kNumbers && (z < 1 || z > kMaxAtomicNumber)) {
          fail(file, line,
               "atomic number " + std::to_string(z) + " in " + where + " is out of range 1.." +
                   std::to_string(kMaxAtomicNumber),
               "check the species column: Z holds atomic numbers from 1 (H) to 118 (Og)");
        }
      }
      if (c.role == Role::kExtraBool && !to_bool(tok, flag)) {
        fail(file, line, "expected T or F in " + where + ", found " + shown(tok),
             "check the Properties types");
      }
      if (c.role == Role::kPos || c.role == Role::kForces || c.role == Role::kExtraReal) {
        if (!to_double(b, q, v)) {
          fail(file, line, "expected a number in " + where + ", found " + shown(tok),
               "check the Properties key on line " + std::to_string(count_line + 1) +
                   " against the columns of the atom lines");
        }
        if (c.role != Role::kExtraReal && !std::isfinite(v)) {
          fail(file, line,
               std::string(c.role == Role::kPos ? "position" : "force") + " " + kAxis[k] + " of " +
                   atom + " is " + shown(tok) + ", not a finite number",
               bad_frame);
        }
      }
    }
  }
  fail(file, line, "cannot read the line of " + atom, "check the Properties key");
}

}  // namespace ddgnn::extxyz
