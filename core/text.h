// Names joined into one line of text, for messages that list the accepted values.
#pragma once

#include <string>
#include <vector>

namespace ddgnn {

// "a, b, c" (or with `separator` between them); empty for no names.
inline std::string join_names(const std::vector<std::string>& names,
                              const std::string& separator = ", ") {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : separator) + n;
  return out;
}

}  // namespace ddgnn
