// Token scanners of the extxyz reader (loader-internal): blanks, numbers via std::from_chars,
// logicals, list splitting. Shared by the atom-line hot path, the comment-line parser and the
// diagnostics; inline so that the hot path compiles as if they were local to it.
#pragma once

#include <charconv>
#include <cstdlib>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace ddgnn::extxyz {

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

// Cold: a number from_chars rejects as out of range (underflow becomes 0, overflow inf).
__attribute__((noinline)) inline double strtod_token(const char* p, const char* e) {
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

// Out of line: only logical columns use it, and inlined it would crowd the atom-line loop.
__attribute__((noinline)) inline bool to_bool(std::string_view t, bool& v) {
  if (t == "T" || t == "True" || t == "true" || t == "TRUE" || t == "1") {
    v = true;
  } else if (t == "F" || t == "False" || t == "false" || t == "FALSE" || t == "0") {
    v = false;
  } else {
    return false;
  }
  return true;
}

// Separators of a list in a comment-line value: blanks, commas, brackets ("1, 2" or "[1, 2]").
inline bool is_list_sep(char c) {
  return is_space(c) || c == ',' || c == '[' || c == ']';
}

// Tokens of s split on blanks (or on list separators too); cold paths and per-frame keys only.
inline std::vector<std::string_view> split_tokens(std::string_view s, bool list = false) {
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

}  // namespace ddgnn::extxyz
