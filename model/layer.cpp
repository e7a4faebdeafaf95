// The registry of message-passing layers: built-in factories plus any registered at run time.
#include "model/layer.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "core/error.h"
#include "core/text.h"
#include "model/layers.h"

namespace ddgnn {

namespace {

std::map<std::string, LayerFactory>& registry() {
  static std::map<std::string, LayerFactory> r = [] {
    std::map<std::string, LayerFactory> builtin;
    // Built-in layers, by HydraGNN `mpnn_type` name (each entry: {"Name", make_name}).
    builtin.emplace("SchNet", make_schnet);
    builtin.emplace("EGNN", make_egnn);
    builtin.emplace("CGCNN", make_cgcnn);
    builtin.emplace("PAINN", make_painn);
    builtin.emplace("GIN", make_gin);
    builtin.emplace("PNA", make_pna);
    builtin.emplace("PNAPlus", make_pna_plus);
    builtin.emplace("PNAEq", make_pna_eq);
    builtin.emplace("MACE", make_mace);
    builtin.emplace("DimeNet", make_dimenet);
    builtin.emplace("GAT", make_gat);
    builtin.emplace("SAGE", make_sage);
    builtin.emplace("MFC", make_mfc);
    return builtin;
  }();
  return r;
}

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

void register_layer(const std::string& name, LayerFactory factory) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  if (!registry().emplace(name, std::move(factory)).second)
    throw Error("a message-passing layer named '" + name + "' is already registered");
}

std::vector<std::string> known_layers() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  std::vector<std::string> names;
  for (const auto& [name, f] : registry()) names.push_back(name);
  return names;
}

std::shared_ptr<MessagePassing> make_layer(const std::string& name, const LayerSpec& spec) {
  LayerFactory factory;
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    auto it = registry().find(name);
    if (it != registry().end()) factory = it->second;
  }
  if (!factory) {
    const std::string known = join_names(known_layers());
    throw ConfigError(
        "unknown mpnn_type '" + name + "'",
        known.empty() ? "no layers are built into this ddgnn" : "known types: " + known);
  }
  return factory(spec);
}

}  // namespace ddgnn
