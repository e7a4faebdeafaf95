// The schema of a ddgnn run config: one table of every key (HydraGNN's NeuralNetwork schema plus
// ddgnn's own sections), the checks of one value against its entry, "did you mean" suggestions,
// and the key reference that `ddgnn config --list-keys` prints and docs/config.md holds.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ddgnn {

enum class KeyType {
  kSection,      // an object whose keys are themselves in the schema
  kBool,         // true / false
  kInt,          // integer
  kNumber,       // integer or floating point
  kString,       // free text
  kEnum,         // one string of `values`
  kIntArray,     // [int]
  kNumberArray,  // [number]
  kStringArray,  // [string]
  kEnumArray,    // [one of `values`]
  kNumberMap,    // {name: number}
  kFlag,         // 0/1 or true/false (HydraGNN writes `"continue": 0`); resolved to a bool
  kDatasetPath,  // "file.h5", or {"train": ..., "validate": ..., "test": ...}, or {"total": ...},
                 // or a list of "file.h5" / {"path": ..., "name": ...}
  kAny,          // any JSON value; only for keys ddgnn does not read
};

enum class KeyStatus {
  kSupported,       // HydraGNN key that ddgnn implements
  kNotImplemented,  // HydraGNN key that ddgnn recognises but does not do
  kDdgnnOnly,       // not in HydraGNN
  kDerived,         // HydraGNN fills it in from the data; accepted, checked where cheap
};

enum class Presence {
  kDefault,   // absent -> `default_value` (or a default derived from other keys)
  kRequired,  // absent -> error naming the key
  kOptional,  // absent stays absent; Config::has() tells
};

// One entry of the schema table. Built with the chaining setters below.
struct KeySpec {
  std::string key;  // dotted, e.g. "NeuralNetwork.Training.batch_size"
  KeyType type = KeyType::kAny;
  Presence presence = Presence::kOptional;
  nlohmann::json default_value;    // used when presence == kDefault and `default_note` is empty
  std::string default_note;        // a default derived from other keys, e.g. "1.0 per head"
  std::optional<double> min, max;  // bounds of a number, or of each element of an array
  bool min_open = false, max_open = false;
  std::vector<std::string> values;                // kEnum / kEnumArray: the implemented values
  std::vector<std::string> unimplemented_values;  // values HydraGNN knows and ddgnn refuses
  std::string hint;  // what to do when the key or one of its refused values is used
  std::vector<nlohmann::json> inert;  // kNotImplemented: values that change nothing
  bool inert_any = false;             // kNotImplemented: no value changes anything ddgnn does
  // kNotImplemented: a value that is not inert is refused even with --allow-unimplemented
  // (running without it would train another model than the config describes).
  bool changes_model = false;
  // kNotImplemented: a value that is not inert would leave the trained model the same (plots, a
  // profiler, a canonical frame for models that are rotation invariant anyway): accepted with a
  // warning, also without --allow-unimplemented.
  bool outputs_only = false;
  // A check of the value beyond its type and range (e.g. which columns may be inputs); called
  // with the value and `where` ("<file>: <dotted key>"), throws ConfigError.
  std::function<void(const nlohmann::json&, const std::string&)> value_check;
  std::string description;
  KeyStatus status = KeyStatus::kSupported;

  KeySpec& def(nlohmann::json value);
  KeySpec& derived_default(std::string note);
  KeySpec& required();
  KeySpec& ge(double bound);  // value >= bound
  KeySpec& gt(double bound);  // value > bound
  KeySpec& le(double bound);
  KeySpec& lt(double bound);
  KeySpec& one_of(std::vector<std::string> implemented);
  KeySpec& refuses(std::vector<std::string> hydragnn_values);
  KeySpec& with_hint(std::string text);
  KeySpec& not_implemented(std::vector<nlohmann::json> inert_values);
  KeySpec& not_implemented_any_value();
  KeySpec& model_changing();  // sets changes_model
  KeySpec& output_only();     // sets outputs_only
  KeySpec& checked_by(std::function<void(const nlohmann::json&, const std::string&)> check);
  KeySpec& ddgnn_only();
  KeySpec& derived();
};

// A new entry: the start of every chain of setters.
KeySpec make_key_spec(std::string dotted_key, KeyType type, std::string description);

// The whole table, in the order of the reference (sections before their keys).
const std::vector<KeySpec>& config_schema();

// The entry of a dotted key, or nullptr.
const KeySpec* find_key_spec(const std::string& dotted_key);

// For a key that is not in the schema, the hint to give: "did you mean 'X'?" (siblings first,
// then the same name elsewhere, then any close key), or "" when nothing is close.
std::string suggest_key(const std::string& dotted_key);

// Checks one value (not a section) against its entry: type, range, allowed values, the element
// type of arrays, and the entry's value_check. `where` prefixes the message ("<file>: <dotted
// key>").
// Throws ConfigError.
void check_value(const KeySpec& spec, const nlohmann::json& value, const std::string& where);

// True when a kNotImplemented key has a value that changes nothing (e.g. `create_plots: false`).
bool is_inert(const KeySpec& spec, const nlohmann::json& value);

// Human-readable pieces of an entry, shared by messages and the reference.
std::string type_name(const KeySpec& spec);
std::string constraint_text(const KeySpec& spec);
std::string default_text(const KeySpec& spec);
std::string status_text(KeyStatus status);

// A JSON value as one short line (strings without quotes), cut at `max_chars`.
std::string short_value(const nlohmann::json& value, std::size_t max_chars = 60);

// The key reference (config/reference.cpp): an aligned text table, or Markdown (what
// docs/config.md holds); `ddgnn config --list-keys [--markdown]` prints it.
std::string schema_reference(bool markdown);

}  // namespace ddgnn
