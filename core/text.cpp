// UTF-8 checks for names from outside (core/text.h).
#include "core/text.h"

#include <cstdio>

namespace ddgnn {

size_t invalid_utf8_at(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80                 ? 1
                       : c >= 0xC2 && c <= 0xDF ? 2
                       : c >= 0xE0 && c <= 0xEF ? 3
                       : c >= 0xF0 && c <= 0xF4 ? 4
                                                : 0;
    if (len == 0 || i + len > s.size()) return i;
    // The second byte's range: narrower after E0 (overlong), ED (surrogates), F0 (overlong)
    // and F4 (beyond U+10FFFF).
    const auto second = static_cast<unsigned char>(len > 1 ? s[i + 1] : 0x80);
    const unsigned char lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
    const unsigned char hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    if (len > 1 && (second < lo || second > hi)) return i;
    for (size_t k = 2; k < len; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return i;
    i += len;
  }
  return std::string::npos;
}

std::string utf8_error_at(const std::string& s, size_t at) {
  char byte[8] = "?";
  if (at < s.size()) std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(s[at]));
  return "byte " + std::string(byte) + " at position " + std::to_string(at);
}

std::string escape_invalid_utf8(const std::string& s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const size_t bad = invalid_utf8_at(s.substr(i));
    if (bad == std::string::npos) {
      out.append(s, i, std::string::npos);
      break;
    }
    out.append(s, i, bad);
    char esc[8];
    std::snprintf(esc, sizeof esc, "\\x%02X", static_cast<unsigned char>(s[i + bad]));
    out += esc;
    i += bad + 1;
  }
  return out;
}

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t comma = line.find(','); comma != std::string::npos; comma = line.find(',', start)) {
    out.push_back(line.substr(start, comma - start));
    start = comma + 1;
  }
  if (!line.empty()) out.push_back(line.substr(start));
  return out;
}

}  // namespace ddgnn
