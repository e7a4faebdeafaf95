// Loader backend names.
#include "core/backend.h"

#include "core/error.h"

namespace ddgnn {

const std::vector<std::string>& backend_names() {
  static const std::vector<std::string> names = {"rma",        "collective", "shm",
                                                 "replicated", "file",       "nccl"};
  return names;
}

std::string to_string(Backend b) {
  return backend_names()[size_t(b)];
}

std::optional<Backend> find_backend(const std::string& name) {
  const auto& names = backend_names();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return Backend(i);
  return std::nullopt;
}

Backend parse_backend(const std::string& name, const std::string& what) {
  if (const auto b = find_backend(name)) return *b;
  std::string known;
  for (const auto& n : backend_names()) known += (known.empty() ? "" : ", ") + n;
  throw ConfigError(what + ": unknown backend '" + name + "'", "known backends: " + known);
}

std::vector<Backend> parse_backends(const std::vector<std::string>& names,
                                    const std::string& what) {
  std::vector<Backend> out;
  for (const auto& n : names) out.push_back(parse_backend(n, what));
  return out;
}

std::vector<std::string> to_strings(const std::vector<Backend>& backends) {
  std::vector<std::string> out;
  for (Backend b : backends) out.push_back(to_string(b));
  return out;
}

}  // namespace ddgnn
