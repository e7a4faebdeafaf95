// The run configuration: a JSON file (HydraGNN's schema plus ddgnn's sections) with --set
// overrides, checked against the schema in config_schema.cpp, every default filled in, each value
// remembering where it came from (default, file, --set); typed access by dotted key.
#pragma once

#include <map>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

namespace ddgnn {

struct ConfigOptions {
  bool allow_unimplemented = false;  // HydraGNN keys ddgnn doesn't do -> warnings instead of errors
};

struct Config;

namespace config_detail {
template <class T>
struct is_vector : std::false_type {};
template <class T, class A>
struct is_vector<std::vector<T, A>> : std::true_type {};

// Whether `value` holds a T without a lossy conversion (3.5 is not an int, 1 is not a bool).
template <class T>
bool holds(const nlohmann::json& value) {
  if constexpr (std::is_same_v<T, bool>) {
    return value.is_boolean();
  } else if constexpr (std::is_integral_v<T>) {
    return value.is_number_integer() && (std::is_signed_v<T> || value.get<long long>() >= 0);
  } else if constexpr (std::is_floating_point_v<T>) {
    return value.is_number();
  } else if constexpr (std::is_same_v<T, std::string>) {
    return value.is_string();
  } else if constexpr (is_vector<T>::value) {
    if (!value.is_array()) return false;
    for (const auto& element : value)
      if (!holds<typename T::value_type>(element)) return false;
    return true;
  } else {
    return true;  // nlohmann::json itself, or a type nlohmann converts
  }
}

template <class T>
const char* type_label() {
  if constexpr (std::is_same_v<T, bool>) return "bool";
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) return "int";
  if constexpr (std::is_floating_point_v<T>) return "number";
  if constexpr (std::is_same_v<T, std::string>) return "string";
  if constexpr (is_vector<T>::value) return "array";
  return "value";
}

[[noreturn]] void wrong_type(const Config& config, const std::string& dotted_key,
                             const char* expected, const nlohmann::json& found);
}  // namespace config_detail

struct Config {
  nlohmann::json resolved;                     // every default filled in
  std::vector<std::string> warnings;           // listed once by rank 0
  std::string source;                          // file path, or "<string>"
  std::map<std::string, std::string> sources;  // dotted key -> "default", "file" or "--set"
  // Every key read through get/at/has since the config was resolved (full dotted names): what
  // the code consumes, which a test holds against the schema.
  mutable std::set<std::string> read_keys;

  // Typed access by dotted key, e.g. get<int>("NeuralNetwork.Training.batch_size"); the
  // shorthand "Training.batch_size" works too. Throws ConfigError if absent or of another type.
  template <class T>
  T get(const std::string& dotted_key) const {
    const nlohmann::json& value = at(dotted_key);
    if (!config_detail::holds<T>(value))
      config_detail::wrong_type(*this, dotted_key, config_detail::type_label<T>(), value);
    if constexpr (std::is_same_v<T, nlohmann::json>) {
      return value;
    } else {
      return value.get<T>();
    }
  }
  bool has(const std::string& dotted_key) const;
  // The value at a dotted key; throws ConfigError if absent.
  const nlohmann::json& at(const std::string& dotted_key) const;
};

// Reads a config file, applies `overrides` ("KEY=VALUE"), validates and fills defaults.
// Throws ConfigError with file (and line:col for JSON syntax), key, and a hint.
Config load_config(const std::string& path, const std::vector<std::string>& overrides,
                   const ConfigOptions& options);

// The same from an already-parsed JSON value; `source` names it in messages.
Config resolve_config(const nlohmann::json& raw, const std::string& source,
                      const std::vector<std::string>& overrides, const ConfigOptions& options);

// Aligned table of every value: key | value | source (default, file, --set).
std::string config_table(const Config& config);

// Writes `config.resolved` as JSON, atomically: a temporary name in the same folder, then rename.
void write_resolved_config(const Config& config, const std::string& path);

// "Training.x" -> "NeuralNetwork.Training.x" (also Architecture, Variables_of_interest).
std::string expand_key_shorthand(const std::string& dotted_key);

}  // namespace ddgnn
