// The chaining setters of a schema entry, the checks of one config value against its schema entry
// (config/config_schema.h), "did you mean" suggestions for unknown keys and values, and the text of
// the key reference
// (`ddgnn config --list-keys`).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <sstream>

#include "config/config_schema.h"
#include "core/error.h"

namespace ddgnn {

// ---- chaining setters ----

KeySpec make_key_spec(std::string dotted_key, KeyType type, std::string description) {
  KeySpec spec;
  spec.key = std::move(dotted_key);
  spec.type = type;
  spec.description = std::move(description);
  return spec;
}

KeySpec& KeySpec::def(nlohmann::json value) {
  presence = Presence::kDefault;
  default_value = std::move(value);
  return *this;
}
KeySpec& KeySpec::derived_default(std::string note) {
  presence = Presence::kDefault;
  default_note = std::move(note);
  return *this;
}
KeySpec& KeySpec::required() {
  presence = Presence::kRequired;
  return *this;
}
KeySpec& KeySpec::ge(double bound) {
  min = bound;
  min_open = false;
  return *this;
}
KeySpec& KeySpec::gt(double bound) {
  min = bound;
  min_open = true;
  return *this;
}
KeySpec& KeySpec::le(double bound) {
  max = bound;
  max_open = false;
  return *this;
}
KeySpec& KeySpec::lt(double bound) {
  max = bound;
  max_open = true;
  return *this;
}
KeySpec& KeySpec::one_of(std::vector<std::string> implemented) {
  values = std::move(implemented);
  return *this;
}
KeySpec& KeySpec::refuses(std::vector<std::string> hydragnn_values) {
  unimplemented_values = std::move(hydragnn_values);
  return *this;
}
KeySpec& KeySpec::with_hint(std::string text) {
  hint = std::move(text);
  return *this;
}
KeySpec& KeySpec::not_implemented(std::vector<nlohmann::json> inert_values) {
  status = KeyStatus::kNotImplemented;
  inert = std::move(inert_values);
  return *this;
}
KeySpec& KeySpec::not_implemented_any_value() {
  status = KeyStatus::kNotImplemented;
  inert_any = true;
  return *this;
}
KeySpec& KeySpec::model_changing() {
  changes_model = true;
  return *this;
}
KeySpec& KeySpec::output_only() {
  outputs_only = true;
  return *this;
}
KeySpec& KeySpec::checked_by(std::function<void(const nlohmann::json&, const std::string&)> check) {
  value_check = std::move(check);
  return *this;
}
KeySpec& KeySpec::ddgnn_only() {
  status = KeyStatus::kDdgnnOnly;
  return *this;
}
KeySpec& KeySpec::derived() {
  status = KeyStatus::kDerived;
  return *this;
}

namespace {

using json = nlohmann::json;
using T = KeyType;

// Case-insensitive, '_'-insensitive form used to compare names ("batchsize" ~ "batch_size").
std::string fold(const std::string& name) {
  std::string out;
  for (char c : name)
    if (c != '_') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Largest edit distance still worth suggesting for a name of this length.
std::size_t max_distance(const std::string& folded) {
  return folded.size() <= 3 ? 1 : folded.size() <= 7 ? 2 : 3;
}

std::string parent_of(const std::string& dotted) {
  const auto dot = dotted.rfind('.');
  return dot == std::string::npos ? "" : dotted.substr(0, dot);
}

std::string name_of(const std::string& dotted) {
  const auto dot = dotted.rfind('.');
  return dot == std::string::npos ? dotted : dotted.substr(dot + 1);
}

// The closest of `candidates` to `name`, or "" when none is close enough.
std::string closest(const std::string& name, const std::vector<std::string>& candidates) {
  const std::string folded = fold(name);
  std::string best;
  std::size_t best_distance = max_distance(folded) + 1;
  for (const auto& candidate : candidates) {
    const std::size_t d = edit_distance(folded, fold(candidate));
    if (d < best_distance) best_distance = d, best = candidate;
  }
  return best;
}

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? separator : "") + items[i];
  return out;
}

std::string describe_found(const json& value) {
  const char* kind = value.is_string()           ? "a string"
                     : value.is_boolean()        ? "a bool"
                     : value.is_number_integer() ? "an int"
                     : value.is_number()         ? "a number"
                     : value.is_array()          ? "an array"
                     : value.is_object()         ? "an object"
                                                 : "null";
  return short_value(value.is_string() ? json(value.dump()) : value) + " (" + kind + ")";
}

[[noreturn]] void wrong_type(const KeySpec& spec, const json& value, const std::string& where,
                             const std::string& expected) {
  std::string hint = "write " + expected;
  if (value.is_string() && (spec.type == T::kInt || spec.type == T::kNumber ||
                            spec.type == T::kBool || spec.type == T::kFlag))
    hint = "write the value without quotes";
  else if (value.is_number() && spec.type == T::kInt)
    hint = "write a whole number";
  else if (spec.type == T::kBool)
    hint = "write true or false";
  throw ConfigError(where + ": expected " + expected + ", found " + describe_found(value), hint);
}

bool in_range(const KeySpec& spec, double x) {
  if (spec.min && (spec.min_open ? !(x > *spec.min) : !(x >= *spec.min))) return false;
  if (spec.max && (spec.max_open ? !(x < *spec.max) : !(x <= *spec.max))) return false;
  return true;
}

std::string number_text(double x) {
  std::ostringstream out;
  out << x;
  return out.str();
}

std::string range_text(const KeySpec& spec) {
  if (spec.min && spec.max) {
    if (!spec.min_open && !spec.max_open)
      return number_text(*spec.min) + " … " + number_text(*spec.max);
    return std::string(spec.min_open ? "> " : "≥ ") + number_text(*spec.min) + " and " +
           (spec.max_open ? "< " : "≤ ") + number_text(*spec.max);
  }
  if (spec.min) return std::string(spec.min_open ? "> " : "≥ ") + number_text(*spec.min);
  if (spec.max) return std::string(spec.max_open ? "< " : "≤ ") + number_text(*spec.max);
  return "";
}

// One scalar against the entry: `scalar_type` is the element type for arrays.
void check_scalar(const KeySpec& spec, KeyType scalar_type, const json& value,
                  const std::string& where) {
  switch (scalar_type) {
    case T::kBool:
      if (!value.is_boolean()) wrong_type(spec, value, where, "a bool (true or false)");
      return;
    case T::kInt:
      if (!value.is_number_integer()) wrong_type(spec, value, where, "an int");
      if (value.is_number_unsigned() &&
          value.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
        throw ConfigError(where + ": " + value.dump() + " is too large for an int (at most " +
                              std::to_string(std::numeric_limits<int64_t>::max()) + ")",
                          "see `ddgnn config --list-keys` for the allowed range");
      break;
    case T::kNumber:
      if (!value.is_number()) wrong_type(spec, value, where, "a number");
      break;
    case T::kString:
      if (!value.is_string()) wrong_type(spec, value, where, "a string");
      return;
    case T::kEnum: {
      if (!value.is_string())
        wrong_type(spec, value, where, "a string, one of " + join(spec.values, ", "));
      const std::string text = value.get<std::string>();
      if (std::find(spec.values.begin(), spec.values.end(), text) != spec.values.end()) return;
      const bool refused =
          std::find(spec.unimplemented_values.begin(), spec.unimplemented_values.end(), text) !=
          spec.unimplemented_values.end();
      if (refused)
        throw ConfigError(
            where + ": \"" + text +
                "\" is a HydraGNN value that ddgnn does not implement (implemented: " +
                join(spec.values, ", ") + ")",
            spec.hint.empty() ? "use one of: " + join(spec.values, ", ") : spec.hint);
      const std::string near = closest(text, spec.values);
      throw ConfigError(where + ": \"" + text +
                            "\" is not an allowed value (allowed: " + join(spec.values, ", ") + ")",
                        near.empty() ? "use one of: " + join(spec.values, ", ")
                                     : "did you mean \"" + near + "\"?");
    }
    default:
      return;
  }
  const double x = value.get<double>();
  if (!in_range(spec, x))
    throw ConfigError(
        where + ": " + value.dump() + " is out of range (must be " + range_text(spec) + ")",
        "see `ddgnn config --list-keys` for the allowed range");
}

void check_dataset_path(const KeySpec& spec, const json& value, const std::string& where) {
  const std::string expected =
      "a file name, a list of files, or {\"train\": ..., \"validate\": ..., \"test\": ...}";
  if (value.is_string()) {
    if (value.get<std::string>().empty())
      throw ConfigError(where + ": empty file name", "give the .h5 written by `ddgnn convert`");
    return;
  }
  if (value.is_array()) {  // many files as one dataset: "a.h5" or {"path": "a.h5", "name": "a"}
    if (value.empty())
      throw ConfigError(where + ": an empty list of files", "give at least one .h5 file");
    std::vector<std::string> names;
    for (std::size_t i = 0; i < value.size(); ++i) {
      const json& entry = value[i];
      const std::string at = where + "[" + std::to_string(i) + "]";
      std::string path, name;
      if (entry.is_string()) {
        path = entry.get<std::string>();
      } else if (entry.is_object()) {
        for (const auto& item : entry.items())
          if (item.key() != "path" && item.key() != "name")
            throw ConfigError(at + "." + item.key() + ": unknown key (known: path, name)",
                              "give {\"path\": \"file.h5\", \"name\": \"its name\"}");
        if (!entry.contains("path") || !entry["path"].is_string())
          throw ConfigError(at + ": expected {\"path\": \"file.h5\", \"name\": ...}, found " +
                                describe_found(entry),
                            "give each file as \"file.h5\" or with its name");
        path = entry["path"].get<std::string>();
        if (entry.contains("name")) {
          if (!entry["name"].is_string() || entry["name"].get<std::string>().empty())
            throw ConfigError(
                at + ".name: expected a non-empty string, found " + describe_found(entry["name"]),
                "name the file's data, e.g. \"ani1x\"");
          name = entry["name"].get<std::string>();
        }
      } else {
        throw ConfigError(
            at + ": expected a file name or {\"path\", \"name\"}, found " + describe_found(entry),
            "give the .h5 files written by `ddgnn convert`");
      }
      if (path.empty())
        throw ConfigError(at + ": empty file name", "give the .h5 written by `ddgnn convert`");
      if (!name.empty()) {
        if (std::find(names.begin(), names.end(), name) != names.end())
          throw ConfigError(at + ".name: '" + name + "' names another file of the list too",
                            "give each file its own name");
        names.push_back(name);
      }
    }
    return;
  }
  if (!value.is_object()) wrong_type(spec, value, where, expected);
  const std::vector<std::string> parts = {"total", "train", "validate", "test"};
  for (const auto& item : value.items()) {
    if (std::find(parts.begin(), parts.end(), item.key()) == parts.end()) {
      const std::string near = closest(item.key(), parts);
      throw ConfigError(
          where + "." + item.key() + ": unknown key (known: train, validate, test)",
          near.empty() ? "use train, validate and test" : "did you mean '" + near + "'?");
    }
    if (!item.value().is_string() || item.value().get<std::string>().empty())
      throw ConfigError(where + "." + item.key() + ": expected a file name, found " +
                            describe_found(item.value()),
                        "give the .h5 written by `ddgnn convert`");
  }
  if (value.contains("total") && value.size() > 1)
    throw ConfigError(where + ": give either \"total\" or train/validate/test, not both",
                      "\"total\" is one file that ddgnn splits with perc_train");
  if (!value.contains("total") && (!value.contains("train") || !value.contains("validate")))
    throw ConfigError(where +
                          ": explicit splits need \"train\" and \"validate\" (\"test\" is "
                          "optional)",
                      "or give one file: \"path\": \"data.h5\"");
}

}  // namespace

std::string suggest_key(const std::string& dotted_key) {
  const std::string parent = parent_of(dotted_key);
  const std::string folded = fold(name_of(dotted_key));
  const KeySpec* best = nullptr;
  std::size_t best_distance = max_distance(folded) + 1;
  bool best_is_sibling = false;
  for (const auto& spec : config_schema()) {
    const std::size_t d = edit_distance(folded, fold(name_of(spec.key)));
    const bool sibling = parent_of(spec.key) == parent;
    if (d < best_distance || (d == best_distance && sibling && !best_is_sibling)) {
      best = &spec, best_distance = d, best_is_sibling = sibling;
    }
  }
  if (!best) return "";
  if (best_is_sibling) return "did you mean '" + name_of(best->key) + "'?";
  const std::string home = parent_of(best->key);
  return "did you mean '" + best->key + "'? ('" + name_of(best->key) + "' belongs in " +
         (home.empty() ? "the top level" : home) + ")";
}

namespace {

// Type, range and allowed values of one value (check_value without the entry's value_check).
void check_type(const KeySpec& spec, const json& value, const std::string& where) {
  switch (spec.type) {
    case T::kSection:
      if (!value.is_object()) wrong_type(spec, value, where, "an object (a section)");
      return;
    case T::kFlag:
      if (value.is_boolean()) return;
      if (value.is_number_integer() && (value.get<long long>() == 0 || value.get<long long>() == 1))
        return;
      wrong_type(spec, value, where, "true/false or 0/1");
    case T::kDatasetPath:
      check_dataset_path(spec, value, where);
      return;
    case T::kAny:
      return;
    case T::kNumberMap:
      if (!value.is_object()) wrong_type(spec, value, where, "an object of numbers");
      for (const auto& item : value.items())
        check_scalar(spec, T::kNumber, item.value(), where + "." + item.key());
      return;
    case T::kIntArray:
    case T::kNumberArray:
    case T::kStringArray:
    case T::kEnumArray: {
      const KeyType element = spec.type == T::kIntArray      ? T::kInt
                              : spec.type == T::kNumberArray ? T::kNumber
                              : spec.type == T::kEnumArray   ? T::kEnum
                                                             : T::kString;
      if (!value.is_array()) wrong_type(spec, value, where, "an array, " + type_name(spec));
      for (std::size_t i = 0; i < value.size(); ++i)
        check_scalar(spec, element, value[i], where + "[" + std::to_string(i) + "]");
      return;
    }
    default:
      check_scalar(spec, spec.type, value, where);
  }
}

}  // namespace

void check_value(const KeySpec& spec, const json& value, const std::string& where) {
  check_type(spec, value, where);
  if (spec.value_check) spec.value_check(value, where);
}

bool is_inert(const KeySpec& spec, const json& value) {
  if (spec.status != KeyStatus::kNotImplemented || spec.inert_any) return true;
  for (const auto& inert : spec.inert)
    if (inert == value) return true;
  return false;
}

std::string type_name(const KeySpec& spec) {
  switch (spec.type) {
    case T::kSection:
      return "section";
    case T::kBool:
      return "bool";
    case T::kInt:
      return "int";
    case T::kNumber:
      return "number";
    case T::kString:
      return "string";
    case T::kEnum:
      return "enum";
    case T::kIntArray:
      return "int[]";
    case T::kNumberArray:
      return "number[]";
    case T::kStringArray:
      return "string[]";
    case T::kEnumArray:
      return "enum[]";
    case T::kNumberMap:
      return "{name: number}";
    case T::kFlag:
      return "bool or 0/1";
    case T::kDatasetPath:
      return "string, list or object";
    case T::kAny:
      return "any";
  }
  return "?";
}

std::string constraint_text(const KeySpec& spec) {
  std::vector<std::string> parts;
  const bool array =
      spec.type == T::kIntArray || spec.type == T::kNumberArray || spec.type == T::kEnumArray;
  if (!spec.values.empty())
    parts.push_back((array ? "each one of: " : "") + join(spec.values, ", "));
  if (!spec.unimplemented_values.empty())
    parts.push_back("not implemented: " + join(spec.unimplemented_values, ", "));
  const std::string range = range_text(spec);
  if (!range.empty()) parts.push_back((array ? "each " : "") + range);
  if (spec.status == KeyStatus::kNotImplemented && spec.type != T::kSection) {
    if (spec.inert_any) {
      parts.push_back("any value accepted");
    } else if (spec.outputs_only) {
      parts.push_back("other values accepted with a warning (the model is the same)");
    } else if (!spec.inert.empty()) {
      std::vector<std::string> inert;
      for (const auto& v : spec.inert) inert.push_back(v.dump());
      parts.push_back("accepted only as " + join(inert, " or "));
    } else {
      parts.push_back("refused");
    }
    if (spec.changes_model) parts.push_back("refused even with --allow-unimplemented");
  }
  return join(parts, "; ");
}

std::string default_text(const KeySpec& spec) {
  if (spec.type == T::kSection) return "";
  switch (spec.presence) {
    case Presence::kRequired:
      return "required";
    case Presence::kOptional:
      return "—";
    case Presence::kDefault:
      return spec.default_note.empty() ? spec.default_value.dump() : spec.default_note;
  }
  return "";
}

std::string status_text(KeyStatus status) {
  switch (status) {
    case KeyStatus::kSupported:
      return "supported";
    case KeyStatus::kNotImplemented:
      return "not implemented";
    case KeyStatus::kDdgnnOnly:
      return "ddgnn-only";
    case KeyStatus::kDerived:
      return "derived";
  }
  return "?";
}

std::string short_value(const json& value, std::size_t max_chars) {
  std::string text = value.is_string() ? value.get<std::string>() : value.dump();
  if (text.empty()) text = "\"\"";
  if (text.size() > max_chars) text = text.substr(0, max_chars - 3) + "...";
  return text;
}

}  // namespace ddgnn
