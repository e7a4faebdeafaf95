// What a model is built from and what its heads learn, free of torch: the trunk and head specs
// (HydraGNN's NeuralNetwork.Architecture), precision, radius graph options, the head targets,
// optimizer, loss and weights, with their names and JSON. The run config (config/) fills these;
// model/ builds and runs them; checkpoints store them as JSON.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/units.h"

namespace ddgnn {

// ---- precision (`NeuralNetwork.Training.precision`) ----

// kBFloat16: float32 weights and tensors, matrix products in bfloat16 (model/device.h).
enum class Precision { kFloat32, kFloat64, kBFloat16 };

// "fp32"/"float32"/"float" and "fp64"/"float64"/"double"; anything else is a ConfigError that
// lists the accepted names.
Precision parse_precision(const std::string& name);
std::string to_string(Precision p);  // "fp32" | "fp64" | "bf16"
const std::vector<std::string>& precision_names();

// ---- the radius graph ----

struct RadiusGraphOptions {
  double radius = 5.0;         // Å, cutoff (strict: |r_ij| < radius); must be > 0
  int64_t max_neighbours = 0;  // per center, nearest kept; 0 = no limit
  // With max_neighbours: a center with more neighbours keeps max_neighbours + 1, and the last
  // of them (its boundary edge) is the radius of its envelope (EdgeGeometry, model/batch.h), so
  // the energy stays continuous as neighbours change rank. Off: the nearest max_neighbours.
  bool smooth_cap = false;
};

// ---- the trunk and heads ----

// The radial envelope that takes an edge's terms to zero at the cutoff rc, in x = d / rc:
// kCosine 0.5 (cos(pi x) + 1) (PyG's SchNet and PaiNN, as HydraGNN), which falls from x = 0;
// kPolynomial DimeNet's of order p, 1 - (p+1)(p+2)/2 x^p + p(p+2) x^(p+1) - p(p+1)/2 x^(p+2)
// (NequIP p = 6, MACE p = 5), flat near 0 and falling near rc. Both: value and slope 0 at rc.
struct Envelope {
  enum Kind { kCosine, kPolynomial };
  Kind kind = kCosine;
  int64_t p = 5;  // kPolynomial: order, >= 1
};
Envelope::Kind parse_envelope(const std::string& name);  // "cosine" | "polynomial"
std::string to_string(Envelope::Kind kind);

// What a message-passing layer is built from: the Architecture keys that layers use.
struct LayerSpec {
  int64_t hidden_dim = 64;  // F, input and output width
  double radius = 5.0;      // Å, cutoff of the radius graph
  std::string activation = "ssp";
  int64_t num_gaussians = 50;    // SchNet radial expansion
  int64_t num_filters = 128;     // SchNet filter width
  int64_t num_radial = 6;        // PaiNN / DimeNet radial basis size
  Envelope envelope;             // SchNet and PaiNN filters
  bool equivariance = false;     // EGNN: update positions-like vectors
  std::vector<int64_t> pna_deg;  // PNA: histogram of in-degrees of the training set
  // DimeNet++ (HydraGNN's keys): spherical harmonics and Bessel functions per distance, widths of
  // the basis embedding, the triplet messages and the output block, residual layers before and
  // after the skip connection; and the most triplets a batch may have (memory).
  int64_t num_spherical = 7;
  int64_t basis_emb_size = 8;
  int64_t int_emb_size = 64;
  int64_t out_emb_size = 256;
  int64_t num_before_skip = 1;
  int64_t num_after_skip = 2;
  int64_t max_triplets = 20000000;
  // MACE (HydraGNN's keys): degree of the edges' spherical harmonics and of the message irreps,
  // degree of the node features, body order of the product basis, radial basis
  // ("bessel" | "gaussian" | "chebyshev"), distance transform ("None"), and the divisor of the
  // neighbour sums (the run config's 0 means the mean in-degree of the training set, which the
  // trainer sets before the model is built).
  int64_t max_ell = 3;
  int64_t node_max_ell = 1;
  int64_t correlation = 2;
  std::string radial_type = "bessel";
  std::string distance_transform = "None";
  double avg_num_neighbors = 1.0;
  int64_t heads = 6;             // GAT: attention heads (HydraGNN's fixed 6), averaged
  double negative_slope = 0.05;  // GAT: slope of the attention's leaky ReLU (HydraGNN's 0.05)
  int64_t max_degree = 10;       // MFC: degrees with their own weights (HydraGNN: max_neighbours)
  // Rows of element-dependent weights (MACE's element weights), indexed by GraphBatch::species.
  int64_t num_species = 119;
  // SchNet: width of the edge attributes its filter reads beside the Gaussians (GPS's relative
  // positional encodings, NodeState::edge_attr); 0: none.
  int64_t edge_attr_dim = 0;
  int64_t num_layers = 1;   // message-passing layers of the trunk
  int64_t layer_index = 0;  // position in the trunk (0-based); >= num_layers: a conv head
};

// Highest degree of MACE's spherical harmonics (max_ell).
constexpr int64_t kMaxMaceEll = 3;
// The MACE keys of `spec` in range: max_ell 0..kMaxMaceEll, node_max_ell 0..max_ell, correlation
// 1..3, a known radial_type, distance_transform "None", avg_num_neighbors positive (or 0, "from
// the training set", unless required). ConfigError naming the key and what to write otherwise.
void check_mace_spec(const LayerSpec& spec, bool require_avg_num_neighbors);
// DimeNet's keys in range: num_spherical >= 2, num_radial, the widths and max_triplets >= 1,
// the residual counts >= 0; ConfigError naming the key and what to write otherwise.
void check_dimenet_spec(const LayerSpec& spec);

// The head layers of one branch of HydraGNN's multi-branch heads (one set of heads per source data
// set, the foundation-model format): the shared and per-head MLPs of the graph heads, the per-head
// MLPs (or convolutions) of the node heads. Every branch has every head.
struct HeadBranch {
  int64_t num_sharedlayers = 2;
  int64_t dim_sharedlayers = 50;
  int64_t num_headlayers = 2;
  std::vector<int64_t> dim_headlayers = {50, 25};
  int64_t node_num_headlayers = 2;
  std::vector<int64_t> node_dim_headlayers = {50, 25};
};

struct HeadSpec {
  enum Kind { kGraph, kNode };
  std::string name;
  Kind kind = kGraph;
  int64_t output_dim = 1;
};

// Closed sets of names: parse_* throws a ConfigError that lists the known names; *_names() lists
// them in the enum's order (the config schema's allowed values).
enum class Pooling { kAdd, kMean, kMax };  // Architecture.graph_pooling
Pooling parse_pooling(const std::string& name);
std::string to_string(Pooling p);
const std::vector<std::string>& pooling_names();
enum class NodeHeadType { kMlp, kConv };  // Architecture.output_heads.node.type
NodeHeadType parse_node_head_type(const std::string& name);
std::string to_string(NodeHeadType t);
const std::vector<std::string>& node_head_type_names();

// The model (NeuralNetwork.Architecture keys). `mpnn_type` and `activation` are names of the
// layer and activation registries (model/layer.h, model/activation.h).
struct GnnSpec {
  LayerSpec layer;  // hidden_dim F, radius, activation, ... (layer_index set by the trunk)
  std::string mpnn_type = "SchNet";
  int64_t num_conv_layers = 2;
  int64_t max_z = kMaxAtomicNumber;  // largest atomic number the model reads
  // The atomic numbers (ascending) that have weights of their own: the embedding's rows and
  // MACE's element weights, row k for elements[k] (the elements of the run's dataset; a run's
  // checkpoint keeps them). Empty: every atomic number 0..max_z is its own row.
  std::vector<int64_t> elements;
  // Rows of the element-indexed weights.
  int64_t num_species() const { return elements.empty() ? max_z + 1 : int64_t(elements.size()); }
  Pooling graph_pooling = Pooling::kMean;
  // The head layers: graph heads' shared MLP, then one MLP per head; node heads' MLPs (branch 0
  // of multi-branch heads).
  HeadBranch head;
  NodeHeadType node_head_type = NodeHeadType::kMlp;
  std::vector<HeadSpec> heads;
  double dropout = 0.0;           // dropout probability after each hidden layer of the head MLPs
  bool has_initial_bias = false;  // set the bias of each head's last Linear to initial_bias
  double initial_bias = 0.0;
  bool interatomic_potential = false;  // energy = sum of a per-atom node head, F = -dE/dx
  // Per-atom input values beside the atomic number (GraphBatch::node_inputs), added to the
  // embedding through one Linear; 0: the atomic number alone.
  int64_t node_inputs = 0;
  // Branches 1, 2, ... of multi-branch heads (branch 0 is `head`); each graph goes
  // through the branch GraphBatch::branch names. Empty: one branch.
  std::vector<HeadBranch> more_branches;
  // GPS global attention (global_attn_engine "GPS", model/gps.h): attention heads beside each
  // layer, and the width of the Laplacian positional encodings; gps_heads 0: none.
  int64_t gps_heads = 0;
  int64_t pe_dim = 0;
  // Graph-attribute conditioning (use_graph_attr_conditioning): "" none; "film" (each layer's
  // invariant output scaled and shifted per graph), "concat_node" (each layer's output and the
  // graph's attributes through one Linear), "fuse_pool" (the pooled features and the attributes
  // through an MLP), from the graph_attr_dim numbers per graph of GraphBatch::graph_attr.
  std::string graph_attr_mode;
  int64_t graph_attr_dim = 0;

  int64_t num_branches() const { return 1 + int64_t(more_branches.size()); }
  HeadBranch branch(int64_t b) const;  // b in [0, num_branches())
};

// The mpnn_types that run inside GPS: those whose HydraGNN layers read no edge features, and
// SchNet, whose filter reads GPS's relative positional encodings.
bool gps_supports(const std::string& mpnn_type);
// With GPS (gps_heads > 0): a supported mpnn_type, pe_dim >= 1, heads dividing hidden_dim;
// ConfigError naming the key and what to write otherwise.
void check_gps_spec(const GnnSpec& spec);

// GnnSpec <-> JSON (every field that decides the model's shape or behaviour; the checkpoint's
// "spec"). spec_from_json throws DataError on a missing or mistyped field.
nlohmann::json spec_to_json(const GnnSpec& spec);
GnnSpec spec_from_json(const nlohmann::json& j);
// Differences between two JSON objects as "key: a vs b" lines (empty: the same).
std::vector<std::string> spec_differences(const nlohmann::json& a, const nlohmann::json& b);

// ---- what the heads learn ----

enum class TargetSource {
  kEnergy,  // total energy (graph head of dim 1, or per-atom node head summed with
            // enable_interatomic_potential)
  kForces,  // forces, a node head of dim 3 (direct forces)
  kColumn,  // a column of the dataset, by name (HeadTarget::data_name): per-atom (a node head) or
            // per-structure (a graph head)
};

struct HeadTarget {
  std::string name;  // output_names[k]
  HeadSpec::Kind kind = HeadSpec::kGraph;
  int64_t dim = 1;
  TargetSource source = TargetSource::kEnergy;
  int column = -1;      // kColumn: index into Dataset::extra_columns() (node head) or
                        // Dataset::graph_columns() (graph head)
  double weight = 1.0;  // task_weights[k]
  // What the data calls the head's target: `name` (empty: the same), or, for a head bound by
  // output_index (HydraGNN's Dataset.node_features / graph_features), the name of the entry it
  // selects; a kColumn head reads the data's column of that name.
  std::string data_name;
  int64_t feature_index = -1;  // output_index[k] when bound by it, else -1 (not recorded)
  const std::string& target_name() const { return data_name.empty() ? name : data_name; }
};

// Every head's target (one per GnnSpec::heads entry, same order) and how energy and forces are
// read from the outputs.
struct TargetSpec {
  std::vector<HeadTarget> heads;
  int energy_head = -1;       // the kEnergy head, -1 when none
  bool conservative = false;  // forces = -dE/dx of the energy head; else the kForces head's output
  // With conservative forces: the stress (1/V) dE/dε under a homogeneous strain ε of the cell and
  // positions (graphs with a cell periodic in three directions).
  bool stress = false;
  // The kForces head (direct forces), -1 when none.
  int forces_head() const;
  // Whether the model predicts forces (conservative, or a forces head).
  bool predicts_forces() const { return conservative || forces_head() >= 0; }
};

nlohmann::json to_json(const HeadTarget& t);
HeadTarget head_target_from_json(const nlohmann::json& j);  // DataError on a bad record

// ---- loss and optimizer ----

struct EnergyForceWeights {
  double energy_weight = 1.0;
  double energy_peratom_weight = 0.0;
  double force_weight = 1.0;
  double stress_weight = 0.0;  // of the stress's 9 components, graphs without one counting 0
};

enum class LossType { kMse, kMae, kRmse, kSmoothL1, kHuber };
// "mse", "mae", "rmse", "smooth_l1", "huber"; anything else is a ConfigError listing them.
LossType parse_loss_type(const std::string& name);
std::string to_string(LossType t);
const std::vector<std::string>& loss_type_names();

struct LossSpec {
  LossType type = LossType::kMse;
  double huber_delta = 1.0;  // delta of huber and smooth_l1 (beta), > 0
};

enum class OptimizerType { kSGD, kAdam, kAdamW, kRMSprop };
// "SGD", "Adam", "AdamW", "RMSprop" (exact spelling, as in torch.optim); anything else is a
// ConfigError whose hint lists the known names.
OptimizerType parse_optimizer_type(const std::string& name);
std::string to_string(OptimizerType type);
const std::vector<std::string>& known_optimizer_names();

// torch.optim.lr_scheduler.ReduceLROnPlateau's arguments; mode is always 'min' and
// threshold_mode always 'rel'. Defaults are PyTorch's (the config has its own defaults).
struct PlateauOptions {
  double factor = 0.1;      // new lr = lr × factor, in (0, 1)
  int patience = 10;        // non-improving epochs tolerated; the next one reduces
  double threshold = 1e-4;  // improvement means metric < best × (1 − threshold)
  int cooldown = 0;         // epochs after a reduction during which bad epochs are not counted
  double min_lr = 0.0;      // lower bound of every group's lr
  double eps = 1e-8;        // reductions smaller than this are skipped
};

}  // namespace ddgnn
