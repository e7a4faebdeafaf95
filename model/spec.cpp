// Names and JSON of the model specs (model/spec.h). Torch-free: the config and checkpoint code
// both use it.
#include "model/spec.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <set>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/text.h"

namespace ddgnn {

namespace {

// The index of `name` in `names`; a ConfigError naming `what` and listing the names otherwise.
size_t index_of(const std::vector<std::string>& names, const std::string& name,
                const std::string& what) {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return i;
  throw ConfigError(what + ": unknown value '" + name + "'", "allowed: " + join_names(names));
}

const char* kind_name(HeadSpec::Kind k) {
  return k == HeadSpec::kNode ? "node" : "graph";
}

HeadSpec::Kind parse_kind(const std::string& name) {
  return name == "node" ? HeadSpec::kNode : HeadSpec::kGraph;
}

const std::vector<std::string>& source_names() {
  static const std::vector<std::string> names = {"energy", "forces", "column"};
  return names;
}

}  // namespace

const std::vector<std::string>& precision_names() {
  static const std::vector<std::string> names = {"fp32", "fp64", "bf16"};
  return names;
}

Precision parse_precision(const std::string& name) {
  if (name == "fp32" || name == "float32" || name == "float") return Precision::kFloat32;
  if (name == "fp64" || name == "float64" || name == "double") return Precision::kFloat64;
  if (name == "bf16" || name == "bfloat16") return Precision::kBFloat16;
  throw ConfigError("unknown precision '" + name + "'", "use fp32, bf16 or fp64");
}

std::string to_string(Precision p) {
  return precision_names()[size_t(p)];
}

// names(), parse() and to_string() of a closed set of names, in the enum's order; `key` names the
// setting in the ConfigError of an unknown name (which lists the known ones).
#define DDGNN_ENUM_NAMES(Enum, names, parse, key, ...)          \
  const std::vector<std::string>& names() {                     \
    static const std::vector<std::string> list = {__VA_ARGS__}; \
    return list;                                                \
  }                                                             \
  Enum parse(const std::string& name) {                         \
    return Enum(index_of(names(), name, key));                  \
  }                                                             \
  std::string to_string(Enum value) {                           \
    return names()[size_t(value)];                              \
  }

DDGNN_ENUM_NAMES(Pooling, pooling_names, parse_pooling, "graph_pooling", "add", "mean", "max")
DDGNN_ENUM_NAMES(NodeHeadType, node_head_type_names, parse_node_head_type, "output_heads.node.type",
                 "mlp", "conv")
DDGNN_ENUM_NAMES(LossType, loss_type_names, parse_loss_type, "loss_function_type", "mse", "mae",
                 "rmse", "smooth_l1", "huber")
DDGNN_ENUM_NAMES(OptimizerType, known_optimizer_names, parse_optimizer_type,
                 "NeuralNetwork.Training.Optimizer.type", "SGD", "Adam", "AdamW", "RMSprop")
#undef DDGNN_ENUM_NAMES

int TargetSpec::forces_head() const {
  for (size_t k = 0; k < heads.size(); ++k)
    if (heads[k].source == TargetSource::kForces) return int(k);
  return -1;
}

Envelope::Kind parse_envelope(const std::string& name) {
  static const std::vector<std::string> names = {"cosine", "polynomial"};
  return index_of(names, name, "radial_envelope") == 0 ? Envelope::kCosine : Envelope::kPolynomial;
}

std::string to_string(Envelope::Kind kind) {
  return kind == Envelope::kCosine ? "cosine" : "polynomial";
}

bool gps_supports(const std::string& mpnn_type) {
  return mpnn_type == "SchNet" || mpnn_type == "GIN" || mpnn_type == "SAGE" || mpnn_type == "MFC";
}

void check_gps_spec(const GnnSpec& spec) {
  if (spec.gps_heads <= 0) return;
  if (!gps_supports(spec.mpnn_type))
    throw ConfigError("NeuralNetwork.Architecture.global_attn_engine: GPS with mpnn_type " +
                          spec.mpnn_type + ": HydraGNN's " + spec.mpnn_type +
                          " layers read GPS's relative positional encodings as edge features, "
                          "which ddgnn gives SchNet's filters only",
                      "use GPS with SchNet, GIN, SAGE or MFC, or leave global_attn_engine empty");
  if (spec.pe_dim < 1)
    throw ConfigError("NeuralNetwork.Architecture.pe_dim: GPS needs positional encodings",
                      "write pe_dim >= 1, e.g. 6");
  if (spec.layer.hidden_dim % spec.gps_heads != 0)
    throw ConfigError(
        "NeuralNetwork.Architecture.global_attn_heads: " + std::to_string(spec.gps_heads) +
            " heads do not divide hidden_dim " + std::to_string(spec.layer.hidden_dim),
        "choose a number of heads that divides hidden_dim (e.g. 8 for 64)");
}

HeadBranch GnnSpec::branch(int64_t b) const {
  return b > 0 ? more_branches.at(size_t(b - 1)) : head;
}

nlohmann::json spec_to_json(const GnnSpec& s) {
  nlohmann::json heads = nlohmann::json::array();
  for (const auto& h : s.heads)
    heads.push_back({{"name", h.name}, {"type", kind_name(h.kind)}, {"output_dim", h.output_dim}});
  nlohmann::json branches = nlohmann::json::array();
  for (const auto& b : s.more_branches)
    branches.push_back({{"num_sharedlayers", b.num_sharedlayers},
                        {"dim_sharedlayers", b.dim_sharedlayers},
                        {"num_headlayers", b.num_headlayers},
                        {"dim_headlayers", b.dim_headlayers},
                        {"node_num_headlayers", b.node_num_headlayers},
                        {"node_dim_headlayers", b.node_dim_headlayers}});
  return {{"mpnn_type", s.mpnn_type},
          {"hidden_dim", s.layer.hidden_dim},
          {"radius", s.layer.radius},
          {"activation_function", s.layer.activation},
          {"num_gaussians", s.layer.num_gaussians},
          {"num_filters", s.layer.num_filters},
          {"num_radial", s.layer.num_radial},
          {"radial_envelope", to_string(s.layer.envelope.kind)},
          {"envelope_exponent", s.layer.envelope.p},
          {"equivariance", s.layer.equivariance},
          {"pna_deg", s.layer.pna_deg},
          {"num_spherical", s.layer.num_spherical},
          {"basis_emb_size", s.layer.basis_emb_size},
          {"int_emb_size", s.layer.int_emb_size},
          {"out_emb_size", s.layer.out_emb_size},
          {"num_before_skip", s.layer.num_before_skip},
          {"num_after_skip", s.layer.num_after_skip},
          {"max_triplets", s.layer.max_triplets},
          {"max_ell", s.layer.max_ell},
          {"node_max_ell", s.layer.node_max_ell},
          {"correlation", s.layer.correlation},
          {"radial_type", s.layer.radial_type},
          {"distance_transform", s.layer.distance_transform},
          {"avg_num_neighbors", s.layer.avg_num_neighbors},
          {"attention_heads", s.layer.heads},
          {"negative_slope", s.layer.negative_slope},
          {"max_degree", s.layer.max_degree},
          {"num_conv_layers", s.num_conv_layers},
          {"max_z", s.max_z},
          {"elements", s.elements},
          {"graph_pooling", to_string(s.graph_pooling)},
          {"num_sharedlayers", s.head.num_sharedlayers},
          {"dim_sharedlayers", s.head.dim_sharedlayers},
          {"num_headlayers", s.head.num_headlayers},
          {"dim_headlayers", s.head.dim_headlayers},
          {"node_num_headlayers", s.head.node_num_headlayers},
          {"node_dim_headlayers", s.head.node_dim_headlayers},
          {"node_head_type", to_string(s.node_head_type)},
          {"heads", heads},
          {"dropout", s.dropout},
          {"interatomic_potential", s.interatomic_potential},
          {"node_inputs", s.node_inputs},
          {"branches", branches},
          {"gps_heads", s.gps_heads},
          {"pe_dim", s.pe_dim},
          {"graph_attr_mode", s.graph_attr_mode},
          {"graph_attr_dim", s.graph_attr_dim}};
}

GnnSpec spec_from_json(const nlohmann::json& j) {
  GnnSpec s;
  try {
    s.mpnn_type = j.at("mpnn_type");
    s.layer.hidden_dim = j.at("hidden_dim");
    s.layer.radius = j.at("radius");
    s.layer.activation = j.at("activation_function");
    s.layer.num_gaussians = j.at("num_gaussians");
    s.layer.num_filters = j.at("num_filters");
    s.layer.num_radial = j.at("num_radial");
    s.layer.envelope.kind = parse_envelope(j.value("radial_envelope", "cosine"));
    s.layer.envelope.p = j.value("envelope_exponent", int64_t(5));
    s.layer.equivariance = j.at("equivariance");
    s.layer.pna_deg = j.at("pna_deg").get<std::vector<int64_t>>();
    s.layer.num_spherical = j.value("num_spherical", s.layer.num_spherical);
    s.layer.basis_emb_size = j.value("basis_emb_size", s.layer.basis_emb_size);
    s.layer.int_emb_size = j.value("int_emb_size", s.layer.int_emb_size);
    s.layer.out_emb_size = j.value("out_emb_size", s.layer.out_emb_size);
    s.layer.num_before_skip = j.value("num_before_skip", s.layer.num_before_skip);
    s.layer.num_after_skip = j.value("num_after_skip", s.layer.num_after_skip);
    s.layer.max_triplets = j.value("max_triplets", s.layer.max_triplets);
    s.layer.max_ell = j.value("max_ell", s.layer.max_ell);
    s.layer.node_max_ell = j.value("node_max_ell", s.layer.node_max_ell);
    s.layer.correlation = j.value("correlation", s.layer.correlation);
    s.layer.radial_type = j.value("radial_type", s.layer.radial_type);
    s.layer.distance_transform = j.value("distance_transform", s.layer.distance_transform);
    s.layer.avg_num_neighbors = j.value("avg_num_neighbors", s.layer.avg_num_neighbors);
    s.layer.heads = j.value("attention_heads", s.layer.heads);
    s.layer.negative_slope = j.value("negative_slope", s.layer.negative_slope);
    s.layer.max_degree = j.value("max_degree", s.layer.max_degree);
    s.num_conv_layers = j.at("num_conv_layers");
    s.max_z = j.at("max_z");
    s.elements = j.value("elements", std::vector<int64_t>());
    s.graph_pooling = parse_pooling(j.at("graph_pooling"));
    s.head.num_sharedlayers = j.at("num_sharedlayers");
    s.head.dim_sharedlayers = j.at("dim_sharedlayers");
    s.head.num_headlayers = j.at("num_headlayers");
    s.head.dim_headlayers = j.at("dim_headlayers").get<std::vector<int64_t>>();
    s.head.node_num_headlayers = j.at("node_num_headlayers");
    s.head.node_dim_headlayers = j.at("node_dim_headlayers").get<std::vector<int64_t>>();
    s.node_head_type = parse_node_head_type(j.at("node_head_type"));
    for (const auto& h : j.at("heads"))
      s.heads.push_back({h.at("name"), parse_kind(h.at("type")), h.at("output_dim")});
    s.dropout = j.at("dropout");
    s.interatomic_potential = j.at("interatomic_potential");
    s.node_inputs = j.value("node_inputs", int64_t(0));
    s.gps_heads = j.value("gps_heads", int64_t(0));
    s.pe_dim = j.value("pe_dim", int64_t(0));
    s.graph_attr_mode = j.value("graph_attr_mode", std::string());
    s.graph_attr_dim = j.value("graph_attr_dim", int64_t(0));
    for (const auto& b : j.value("branches", nlohmann::json::array()))
      s.more_branches.push_back(
          {b.at("num_sharedlayers"), b.at("dim_sharedlayers"), b.at("num_headlayers"),
           b.at("dim_headlayers").get<std::vector<int64_t>>(), b.at("node_num_headlayers"),
           b.at("node_dim_headlayers").get<std::vector<int64_t>>()});
  } catch (const nlohmann::json::exception& e) {
    throw DataError(std::string("checkpoint model record: ") + e.what(),
                    "the checkpoint was not written by this version of ddgnn");
  }
  return s;
}

std::vector<std::string> spec_differences(const nlohmann::json& a, const nlohmann::json& b) {
  std::vector<std::string> out;
  std::set<std::string> keys;
  for (auto it = a.begin(); it != a.end(); ++it) keys.insert(it.key());
  for (auto it = b.begin(); it != b.end(); ++it) keys.insert(it.key());
  for (const auto& k : keys) {
    const nlohmann::json va = a.contains(k) ? a.at(k) : nlohmann::json();
    const nlohmann::json vb = b.contains(k) ? b.at(k) : nlohmann::json();
    if (va != vb) out.push_back(k + ": " + va.dump() + " vs " + vb.dump());
  }
  return out;
}

nlohmann::json to_json(const HeadTarget& t) {
  return {{"name", t.name},
          {"data_name", t.target_name()},
          {"type", kind_name(t.kind)},
          {"output_dim", t.dim},
          {"source", source_names()[size_t(t.source)]},
          {"column", t.column},
          {"weight", t.weight}};
}

HeadTarget head_target_from_json(const nlohmann::json& j) {
  HeadTarget h;
  try {
    h.name = j.at("name");
    h.data_name = j.value("data_name", h.name);  // absent in records written before it
    h.kind = parse_kind(j.at("type"));
    h.dim = j.at("output_dim");
    const std::string source = j.at("source");
    h.source = source == "energy"   ? TargetSource::kEnergy
               : source == "forces" ? TargetSource::kForces
                                    : TargetSource::kColumn;
    h.column = j.at("column");
    h.weight = j.at("weight");
  } catch (const nlohmann::json::exception& e) {
    throw DataError(std::string("checkpoint record: ") + e.what(),
                    "the checkpoint was not written by this version of ddgnn");
  }
  return h;
}

void check_mace_spec(const LayerSpec& spec, bool require_avg_num_neighbors) {
  if (spec.max_ell < 0 || spec.max_ell > kMaxMaceEll)
    throw ConfigError("max_ell " + std::to_string(spec.max_ell) +
                          ": MACE's spherical harmonics "
                          "are implemented for degrees 0.." +
                          std::to_string(kMaxMaceEll),
                      "set NeuralNetwork.Architecture.max_ell between 0 and " +
                          std::to_string(kMaxMaceEll) + " (MACE's default is 3)");
  if (spec.node_max_ell < 0 || spec.node_max_ell > spec.max_ell)
    throw ConfigError("node_max_ell " + std::to_string(spec.node_max_ell) +
                          ": the degree of MACE's node features must be between 0 and max_ell (" +
                          std::to_string(spec.max_ell) + ")",
                      "set NeuralNetwork.Architecture.node_max_ell to 1 (MACE's default) or up "
                      "to max_ell");
  if (spec.correlation < 1 || spec.correlation > 3)
    throw ConfigError("correlation " + std::to_string(spec.correlation) +
                          ": MACE's body order per layer must be 1, 2 or 3",
                      "set NeuralNetwork.Architecture.correlation to 1, 2 or 3 (3 is MACE's "
                      "default, 2 HydraGNN's)");
  if (spec.radial_type != "bessel" && spec.radial_type != "gaussian" &&
      spec.radial_type != "chebyshev")
    throw ConfigError("radial_type \"" + spec.radial_type + "\" is not a radial basis of MACE",
                      "use bessel, gaussian or chebyshev");
  if (spec.distance_transform != "None")
    throw ConfigError("distance_transform \"" + spec.distance_transform +
                          "\": ddgnn's MACE implements no distance transform",
                      "remove the key or set it to \"None\" (Agnesi and Soft, which scale the "
                      "distance by covalent radii, are not implemented)");
  if ((require_avg_num_neighbors || spec.avg_num_neighbors != 0.0) &&
      (!(spec.avg_num_neighbors > 0.0) || !std::isfinite(spec.avg_num_neighbors)))
    throw ConfigError("avg_num_neighbors " + std::to_string(spec.avg_num_neighbors) +
                          ": MACE divides its neighbour sums by it, so it must be positive",
                      "leave it out (the mean in-degree of the training set is used) or give "
                      "a positive number");
  if (spec.num_radial < 1) throw ConfigError("num_radial: MACE needs at least one radial function");
  if (spec.envelope.p < 1) throw ConfigError("envelope_exponent: must be >= 1");
}

void check_dimenet_spec(const LayerSpec& spec) {
  if (spec.num_spherical < 2)
    throw ConfigError("num_spherical " + std::to_string(spec.num_spherical) +
                          ": DimeNet's angular basis needs at least 2 spherical harmonics (the "
                          "angle enters from degree 1)",
                      "set NeuralNetwork.Architecture.num_spherical to 7 (DimeNet++'s) or at "
                      "least 2");
  const std::pair<const char*, int64_t> positive[] = {{"num_radial", spec.num_radial},
                                                      {"basis_emb_size", spec.basis_emb_size},
                                                      {"int_emb_size", spec.int_emb_size},
                                                      {"out_emb_size", spec.out_emb_size},
                                                      {"max_triplets", spec.max_triplets}};
  for (const auto& [name, value] : positive)
    if (value < 1)
      throw ConfigError(std::string(name) + " " + std::to_string(value) +
                        ": DimeNet needs it to be at least 1");
  if (spec.num_before_skip < 0 || spec.num_after_skip < 0)
    throw ConfigError(
        "num_before_skip / num_after_skip: DimeNet's residual layers cannot be "
        "negative in number");
  if (spec.envelope.p < 1) throw ConfigError("envelope_exponent: must be >= 1");
}

}  // namespace ddgnn
