// Loading a run config: its JSON text (config/json_text.h), --set overrides, the walk of every key
// against the schema, defaults, cross-checks between keys, the resolved table (key | value |
// source), and the atomic write of the resolved JSON.
#include "config/config.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "config/config_schema.h"
#include "config/hydragnn_compat.h"
#include "config/json_text.h"
#include "core/error.h"
#include "core/text.h"

namespace ddgnn {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

const char* kDefault = "default";
const char* kFile = "file";
const char* kOverride = "--set";

std::vector<std::string> split_key(const std::string& dotted) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(dotted);
  while (std::getline(in, part, '.')) parts.push_back(part);
  if (!dotted.empty() && dotted.back() == '.') parts.push_back("");
  return parts;
}

std::string join_key(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

// The value at a dotted key, or nullptr (null values count as absent).
const json* find_path(const json& root, const std::string& dotted) {
  const json* node = &root;
  for (const auto& part : split_key(dotted)) {
    if (!node->is_object()) return nullptr;
    const auto it = node->find(part);
    if (it == node->end()) return nullptr;
    node = &*it;
  }
  return node->is_null() ? nullptr : node;
}

// ---- overrides ----

struct Override {
  std::string text;  // as given
  std::string key;   // expanded dotted key
  json value;
};

Override parse_override(const std::string& text) {
  const auto eq = text.find('=');
  const std::string form_hint =
      "use --set KEY=VALUE, e.g. --set Training.batch_size=32 or --set Loader.backend=rma";
  if (const size_t bad = invalid_utf8_at(text); bad != std::string::npos) {
    throw ConfigError("--set: the text is not valid UTF-8 (" + utf8_error_at(text, bad) + ")",
                      "write the key and value as UTF-8 text; " + form_hint);
  }
  if (eq == std::string::npos || eq == 0)
    throw ConfigError("--set '" + text + "': expected KEY=VALUE", form_hint);
  Override out;
  out.text = text;
  out.key = expand_key_shorthand(text.substr(0, eq));
  for (const auto& part : split_key(out.key))
    if (part.empty()) throw ConfigError("--set '" + text + "': empty part in the key", form_hint);
  const std::string value = text.substr(eq + 1);
  try {
    out.value = parse_json_value(value, "--set '" + out.key + "'");
  } catch (const json::parse_error&) {
    out.value = value;  // not JSON: a plain string such as rma or data/cu.h5
  } catch (const json::out_of_range&) {
    throw ConfigError(
        "--set '" + text + "': " + value + " is beyond the range of a double (±1.8e308)",
        "write the number in the range of a 64-bit float");
  }
  // A key that takes a string gets the text as written: --set Output.run_dir=2024 is "2024".
  if (const KeySpec* spec = find_key_spec(out.key)) {
    const bool stringy = spec->type == KeyType::kString || spec->type == KeyType::kEnum ||
                         spec->type == KeyType::kDatasetPath;
    if (stringy && !out.value.is_string() && !out.value.is_object() && !out.value.is_array())
      out.value = value;
  }
  return out;
}

// ---- the resolver ----

class Resolver {
 public:
  Resolver(std::string source, const ConfigOptions& options) : m_options(options) {
    m_config.source = std::move(source);
  }

  Config run(json raw, const std::vector<std::string>& override_texts) {
    if (!raw.is_object())
      throw ConfigError(
          m_config.source + ": a config must be a JSON object ({...}), found " + short_value(raw),
          "see configs/ for complete examples");
    for (const auto& text : override_texts) apply_override(raw, parse_override(text));
    normalise_hydragnn_forms(raw, [this](const std::string& key) { return where(key); });
    walk(raw, "");
    fill_defaults(raw);
    cross_check(raw);
    m_config.resolved = std::move(raw);
    return std::move(m_config);
  }

 private:
  // "--set" when an override set this key, a part of it, or a section holding it.
  std::string origin(const std::string& key) const {
    for (const auto& o : m_override_keys)
      if (o == key || starts_with(key, o + ".") || starts_with(o, key + ".")) return kOverride;
    return kFile;
  }

  std::string where(const std::string& key) const {
    return origin(key) == kOverride ? "--set " + key : m_config.source + ": " + key;
  }

  void apply_override(json& raw, const Override& o) {
    const auto parts = split_key(o.key);
    std::string prefix;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      prefix = join_key(prefix, parts[i]);
      const KeySpec* spec = find_key_spec(prefix);
      if (!spec) {
        const std::string hint = suggest_key(prefix);
        throw ConfigError("--set " + prefix + ": unknown key",
                          hint.empty() ? "`ddgnn config --list-keys` lists every key" : hint);
      }
      const bool last = i + 1 == parts.size();
      if (last || spec->type == KeyType::kSection) continue;
      if (spec->type == KeyType::kDatasetPath && i + 2 == parts.size()) break;  // path.train
      throw ConfigError("--set " + o.key + ": " + prefix + " is not a section (its type is " +
                            type_name(*spec) + ")",
                        "set it as a whole: --set " + prefix + "=VALUE");
    }
    json* node = &raw;
    std::string at;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (node->is_null()) *node = json::object();
      if (!node->is_object())
        throw ConfigError("--set " + o.key + ": " + at + " is " + short_value(node->dump()) +
                              " in the config, not an object",
                          "set " + at + " as a whole: --set '" + at + "=VALUE'");
      node = &(*node)[parts[i]];
      at = join_key(at, parts[i]);
    }
    *node = o.value;
    m_override_keys.push_back(o.key);
  }

  // Every key of the user's config against the schema; nulls are dropped (= not given).
  void walk(json& node, const std::string& prefix) {
    for (auto it = node.begin(); it != node.end();) {
      const std::string key = join_key(prefix, it.key());
      if (it->is_null()) {
        it = node.erase(it);
        continue;
      }
      const KeySpec* spec = find_key_spec(key);
      if (!spec) {
        const std::string hint = suggest_key(key);
        throw ConfigError(
            where(key) + ": unknown key",
            hint.empty() ? "remove it; `ddgnn config --list-keys` lists every key" : hint);
      }
      check_value(*spec, *it, where(key));
      if (spec->type == KeyType::kSection) {
        walk(*it, key);
      } else {
        if (spec->type == KeyType::kFlag && it->is_number()) *it = it->get<int>() != 0;
        if (spec->type == KeyType::kDatasetPath && it->is_object() && it->contains("total"))
          *it = (*it)["total"];
        if (!is_inert(*spec, *it)) refuse_or_warn(*spec, key, *it);
      }
      ++it;
    }
  }

  void refuse_or_warn(const KeySpec& spec, const std::string& key, const json& value) {
    if (spec.changes_model) {
      std::string hint = spec.hint.empty() ? "" : spec.hint + "; ";
      hint += "set it to " + spec.inert.front().dump() +
              " or remove it (refused even with --allow-unimplemented: without it ddgnn would "
              "train another model than the config describes)";
      throw ConfigError(where(key) + ": ddgnn does not implement this HydraGNN feature (" +
                            spec.description + "); found " + short_value(value, 40),
                        hint);
    }
    if (spec.outputs_only) {
      m_config.warnings.push_back(
          key + " = " + short_value(value, 40) + ": ddgnn does not do this (" + spec.description +
          "); the model trained is the same" + (spec.hint.empty() ? "" : " (" + spec.hint + ")"));
      return;
    }
    if (m_options.allow_unimplemented) {
      m_config.warnings.push_back(key + " = " + short_value(value, 40) +
                                  ": ddgnn does not implement this HydraGNN key (" +
                                  spec.description + "); ignored (--allow-unimplemented)");
      return;
    }
    std::string hint = spec.hint.empty() ? "" : spec.hint + "; ";
    if (!spec.inert.empty()) hint += "set it to " + spec.inert.front().dump() + " or ";
    hint += "remove it, or pass --allow-unimplemented to run without it (a warning)";
    throw ConfigError(where(key) + ": ddgnn does not implement this HydraGNN key (" +
                          spec.description + "); found " + short_value(value, 40),
                      hint);
  }

  void fill_defaults(json& root) {
    for (const auto& spec : config_schema()) {
      if (spec.type == KeyType::kSection) continue;
      if (find_path(root, spec.key)) {
        m_config.sources[spec.key] = origin(spec.key);
      } else if (spec.presence == Presence::kRequired) {
        const auto dot = spec.key.rfind('.');
        throw ConfigError(
            m_config.source + ": missing required key " + spec.key + " (" + spec.description + ")",
            "add \"" + spec.key.substr(dot + 1) + "\" to the " + spec.key.substr(0, dot) +
                " section, or pass --set " + spec.key + "=VALUE" +
                (spec.hint.empty() ? "" : "; " + spec.hint));
      } else if (spec.presence == Presence::kDefault && spec.default_note.empty()) {
        set_default(root, spec.key, spec.default_value);
      }
    }
  }

  void set_default(json& root, const std::string& key, json value) {
    json* node = &root;
    for (const auto& part : split_key(key)) node = &(*node)[part];
    *node = std::move(value);
    m_config.sources[key] = kDefault;
  }

  // Rules that span several keys: one entry per head, layer widths, derived keys.
  void cross_check(json& root) {
    const std::string voi = "NeuralNetwork.Variables_of_interest.";
    const std::string arch = "NeuralNetwork.Architecture.";
    const json& names = *find_path(root, voi + "output_names");
    const std::size_t n_heads = names.size();
    if (n_heads == 0)
      throw ConfigError(where(voi + "output_names") + ": no heads",
                        "name at least one target, e.g. \"output_names\": [\"energy\"]");
    const std::string per_head =
        "give one entry per head in output_names, output_index, type and output_dim";
    auto same_length = [&](const std::string& key, const char* what) {
      const json& value = *find_path(root, key);
      if (value.size() != n_heads)
        throw ConfigError(where(key) + ": " + std::to_string(value.size()) +
                              " entries, but output_names has " + std::to_string(n_heads),
                          what);
    };
    // Keys HydraGNN derives: where present they must agree with what they derive from.
    auto agree = [&](const std::string& key, const json& expected, const std::string& from) {
      const json* found = find_path(root, key);
      if (found && *found != expected)
        throw ConfigError(where(key) + ": " + found->dump() + " disagrees with " + from + " (" +
                              expected.dump() + ")",
                          "remove it: ddgnn derives it from " + from);
    };
    same_length(voi + "output_index", per_head.c_str());
    same_length(voi + "type", per_head.c_str());
    // HydraGNN's binding by output_index: a head of a level whose Dataset.<level>_features is
    // given selects one of its entries, and takes its output_dim from it when none is given.
    const json& types = *find_path(root, voi + "type");
    const json& index = *find_path(root, voi + "output_index");
    const bool conservative =
        find_path(root, arch + "enable_interatomic_potential")->get<bool>() ||
        find_path(root, "NeuralNetwork.Training.compute_grad_energy")->get<bool>();
    std::vector<int64_t> dims(n_heads, 1);
    for (std::size_t h = 0; h < n_heads; ++h) {
      const std::string key = "Dataset." + types[h].get<std::string>() + "_features";
      const json* features = find_path(root, key);
      if (!features) continue;
      const std::size_t n_entries = (*features)["name"].size();
      if (index[h].get<std::size_t>() >= n_entries)
        throw ConfigError(where(voi + "output_index") + ": head " + std::to_string(h) + " ('" +
                              names[h].get<std::string>() + "', " + types[h].get<std::string>() +
                              ") selects entry " + index[h].dump() + " of " + key + ", which has " +
                              std::to_string(n_entries),
                          "output_index counts from 0 within the entries of the head's level");
      if (reads_output_index(names[h].get<std::string>(), conservative))
        dims[h] = feature_entry(*features, index[h].get<std::size_t>()).dim;
    }
    for (const char* level : {"graph", "node"}) {
      const std::string key = std::string("Dataset.") + level + "_features";
      const json* features = find_path(root, key);
      if (!features) continue;
      agree(voi + level + "_feature_names", (*features)["name"], key + ".name");
      agree(voi + level + "_feature_dims", (*features)["dim"], key + ".dim");
    }
    if (find_path(root, voi + "output_dim"))
      same_length(voi + "output_dim", per_head.c_str());
    else
      set_default(root, voi + "output_dim", json(dims));
    if (find_path(root, arch + "task_weights"))
      same_length(arch + "task_weights", "give one loss weight per head");
    else
      set_default(root, arch + "task_weights", json(std::vector<double>(n_heads, 1.0)));

    for (const char* level : {"graph", "node"}) {
      const json* names_of_level = find_path(root, voi + level + "_feature_names");
      const json* dims_of_level = find_path(root, voi + level + "_feature_dims");
      if (names_of_level && dims_of_level && names_of_level->size() != dims_of_level->size())
        throw ConfigError(where(voi + level + "_feature_dims") + ": " +
                              std::to_string(dims_of_level->size()) + " entries, but " +
                              std::to_string(names_of_level->size()) + " in " + level +
                              "_feature_names",
                          "give one size per feature name");
      for (std::size_t h = 0; h < n_heads && names_of_level; ++h)
        if (types[h] == level && (*find_path(root, voi + "output_index"))[h].get<std::size_t>() >=
                                     names_of_level->size())
          throw ConfigError(where(voi + "output_index") + ": head " + std::to_string(h) +
                                " points past the " + std::to_string(names_of_level->size()) +
                                " entries of " + level + "_feature_names",
                            "output_index counts from 0 within the head's level");
    }

    const std::string heads = arch + "output_heads.";
    for (const char* level : {"graph", "node"}) {
      const std::string prefix = heads + level;
      const json& widths = *find_path(root, prefix + ".dim_headlayers");
      const json& count = *find_path(root, prefix + ".num_headlayers");
      if (widths.size() != count.get<std::size_t>())
        throw ConfigError(where(prefix + ".dim_headlayers") + ": " + std::to_string(widths.size()) +
                              " widths, but num_headlayers is " + count.dump(),
                          "give one width per head layer, e.g. \"num_headlayers\": 2, "
                          "\"dim_headlayers\": [50, 25]");
    }

    agree(arch + "input_dim", json(find_path(root, voi + "input_node_features")->size()),
          "the length of Variables_of_interest.input_node_features");
    agree(arch + "output_dim", *find_path(root, voi + "output_dim"),
          "Variables_of_interest.output_dim");
    agree(arch + "output_type", *find_path(root, voi + "type"), "Variables_of_interest.type");

    const std::string model = find_path(root, arch + "mpnn_type")->get<std::string>();
    // As HydraGNN: a warning, since the layers of the other models ignore it.
    if (find_path(root, arch + "equivariance")->get<bool>() && model != "EGNN" &&
        model != "SchNet" && model != "PAINN" && model != "PNAEq" && model != "MACE")
      m_config.warnings.push_back(arch + "equivariance = true changes nothing for " + model +
                                  ", whose features are invariant (EGNN, SchNet, PAINN, PNAEq "
                                  "and MACE are the equivariant models)");
    if (find_path(root, arch + "enable_interatomic_potential")->get<bool>() &&
        (model == "GIN" || model == "SAGE" || model == "MFC"))
      m_config.warnings.push_back(
          arch + "mpnn_type " + model +
          " reads the graph but not the distances (as in HydraGNN): its energy is constant "
          "between changes of neighbours, so its forces and stress are zero; for an "
          "interatomic potential use SchNet, PAINN, MACE, DimeNet, EGNN, GAT, CGCNN, PNA, "
          "PNAPlus or PNAEq");
    if (find_path(root, arch + "enable_interatomic_potential")->get<bool>()) {
      double total = 0;
      for (const char* w :
           {"energy_weight", "energy_peratom_weight", "force_weight", "stress_weight"})
        total += find_path(root, arch + w)->get<double>();
      if (total <= 0)
        throw ConfigError(where(arch + "force_weight") +
                              ": energy_weight, energy_peratom_weight, force_weight and "
                              "stress_weight are all 0",
                          "with enable_interatomic_potential, give the energy or forces a weight");
    }

    const std::string optimizer = "NeuralNetwork.Training.Optimizer.";
    if (!find_path(root, optimizer + "weight_decay")) {
      const bool adamw = find_path(root, optimizer + "type")->get<std::string>() == "AdamW";
      set_default(root, optimizer + "weight_decay", adamw ? 0.01 : 0.0);
    }
    const std::string perc = "NeuralNetwork.Training.perc_train";
    if (find_path(root, "Dataset.path")->is_object() && m_config.sources[perc] != kDefault)
      m_config.warnings.push_back(perc +
                                  " is ignored: Dataset.path names the train/validate/test files");
    const std::string stratified = "Dataset.compositional_stratified_splitting";
    if (find_path(root, "Dataset.path")->is_object() && find_path(root, stratified)->get<bool>())
      m_config.warnings.push_back(stratified +
                                  " is ignored: Dataset.path names the train/validate/test files");
  }

  ConfigOptions m_options;
  Config m_config;
  std::vector<std::string> m_override_keys;
};

std::string read_text(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw ConfigError(path + ": no such config file",
                      "check the path; ready configs are in configs/ (e.g. "
                      "configs/cu_eam_schnet.json)");
  if (fs::is_directory(path, ec))
    throw ConfigError(path + ": is a directory, not a config file", "give a .json file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path + ": cannot open the config file", "check its permissions");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

namespace config_detail {
void wrong_type(const Config& config, const std::string& dotted_key, const char* expected,
                const nlohmann::json& found) {
  throw ConfigError(config.source + ": " + expand_key_shorthand(dotted_key) + ": read as " +
                        expected + ", but it holds " + short_value(found),
                    "the schema and the code that reads this key disagree; this is a bug");
}
}  // namespace config_detail

std::string expand_key_shorthand(const std::string& dotted_key) {
  for (const char* section : {"Architecture", "Variables_of_interest", "Training"}) {
    const std::string s = section;
    if (dotted_key == s || starts_with(dotted_key, s + ".")) return "NeuralNetwork." + dotted_key;
  }
  return dotted_key;
}

bool Config::has(const std::string& dotted_key) const {
  const std::string key = expand_key_shorthand(dotted_key);
  read_keys.insert(key);
  return find_path(resolved, key) != nullptr;
}

const nlohmann::json& Config::at(const std::string& dotted_key) const {
  const std::string key = expand_key_shorthand(dotted_key);
  read_keys.insert(key);
  const json* value = find_path(resolved, key);
  if (!value) {
    const KeySpec* spec = find_key_spec(key);
    throw ConfigError(source + ": " + key + ": not set",
                      spec ? "it has no default; check Config::has() before reading it"
                           : "not a config key; `ddgnn config --list-keys` lists every key");
  }
  return *value;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides,
                   const ConfigOptions& options) {
  return resolve_config(parse_json_text(read_text(path), path), path, overrides, options);
}

Config resolve_config(const nlohmann::json& raw, const std::string& source,
                      const std::vector<std::string>& overrides, const ConfigOptions& options) {
  Config config = Resolver(source, options).run(raw, overrides);
  config.read_keys.clear();  // what resolving looked at is not what the code consumes
  return config;
}

std::string config_table(const Config& config) {
  std::vector<std::array<std::string, 3>> rows;
  std::size_t key_w = 3, value_w = 5;
  for (const auto& spec : config_schema()) {
    if (spec.type == KeyType::kSection) continue;
    const json* value = find_path(config.resolved, spec.key);
    if (!value) continue;
    const auto source = config.sources.find(spec.key);
    rows.push_back({spec.key, short_value(*value, 48),
                    source == config.sources.end() ? kFile : source->second});
    key_w = std::max(key_w, rows.back()[0].size());
    value_w = std::max(value_w, rows.back()[1].size());
  }
  auto pad = [](const std::string& text, std::size_t width) {
    return text + std::string(width > text.size() ? width - text.size() : 0, ' ');
  };
  std::ostringstream out;
  out << pad("key", key_w) << "  " << pad("value", value_w) << "  source\n";
  out << std::string(key_w, '-') << "  " << std::string(value_w, '-') << "  ------\n";
  for (const auto& row : rows)
    out << pad(row[0], key_w) << "  " << pad(row[1], value_w) << "  " << row[2] << "\n";
  return out.str();
}

void write_resolved_config(const Config& config, const std::string& path) {
  const fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << config.resolved.dump(2) << "\n";
    out.close();
    if (!out) {
      std::remove(temp.c_str());
      throw Error(temp + ": cannot write the resolved config",
                  "check that the folder exists and is writable");
    }
  }
  fs::rename(temp, target, ec);
  if (ec) {
    std::remove(temp.c_str());
    throw Error(path + ": cannot rename " + temp + " to it: " + ec.message(),
                "check that the folder is writable");
  }
}

}  // namespace ddgnn
