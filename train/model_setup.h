// The parts of a trained model that travel with its checkpoint and that `train` and `evaluate`
// share: the model spec and heads, how targets are normalised (per-species reference energies,
// one scale), and how a batch is prepared from graphs in memory. Prediction and loss:
// model/predict.h.
//
// Normalisation (fitted on the training split): the model learns
//   E_n = (E - sum_i e_ref(z_i) - n_atoms * mu) / s,   F_n = F / s,
// with e_ref the least-squares reference energies, mu the mean residual energy per atom and s the
// RMS force component (the residual energy spread per atom when there are no forces). Extra
// per-atom and per-structure columns are standardised per component, and so are the per-atom
// inputs beside the atomic number. Predictions are mapped back before any metric.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/train_settings.h"
#include "core/units.h"
#include "loader/dataset.h"
#include "loader/targets.h"
#include "model/batch.h"
#include "model/predict.h"
#include "model/spec.h"

namespace ddgnn {

class TrainData;
struct StaticShapes;
struct Upload;
class BatchUploader;

struct Normalizer {
  std::array<double, kMaxAtomicNumber + 1> reference_energy{};  // eV per atom of each Z
  double mean_residual_per_atom = 0.0;                          // eV/atom
  double scale = 1.0;                                           // eV (energies) and eV/Å (forces)
  std::vector<std::vector<double>> column_mean, column_std;     // per head (empty unless kColumn)
  bool e0s_given = false;  // reference_energy from Dataset.e0s, not fitted

  // sum_i e_ref(z_i) + n * mu, eV.
  double energy_offset(const uint8_t* z, int64_t n_atoms) const;
};

// The per-atom inputs beside the atomic number (GnnSpec::node_inputs): where each value is in the
// data (TrainSettings::input_sources) and its standardisation, fitted on the training split.
struct NodeInputs {
  std::vector<std::pair<int, int>> sources;  // (-1 the forces, else an extra column; component)
  std::vector<std::string> names;            // per input: "forces" or the extra column's name
  std::vector<double> mean, std;
};

// The per-structure key of the attributes that graph-attribute conditioning reads
// (`ddgnn convert --info-keys graph_attr`; HydraGNN's data.graph_attr, e.g. charge and spin).
inline constexpr const char* kGraphAttrKey = "graph_attr";

struct ModelSetup {
  GnnSpec spec;
  NodeInputs inputs;
  // Multi-branch heads: index into the data's graph columns of kBranchKey (-1: absent, branch 0
  // for every graph); bound by name to the data (bind_targets, bind_to_dataset), not recorded.
  int branch_column = -1;
  int graph_attr_column = -1;  // graph-attribute conditioning: kGraphAttrKey's column, as above
  TargetSpec targets;
  RadiusGraphOptions graph;
  bool periodic = false;
  Precision precision = Precision::kFloat32;
  Normalizer norm;
  c10::Device device = c10::Device(c10::kCPU);  // where batches are used (not in the record)
  // Loader.static_shapes: the fixed shapes training batches are padded to (not in the record).
  std::shared_ptr<const StaticShapes> static_shapes;
  // The loader's uploads to a GPU (train/upload.h; not in the record). Null: tensors are copied
  // one by one (on the CPU: not at all).
  std::shared_ptr<const BatchUploader> uploader;
  // Elements of the model (spec.elements) that the training split does not hold: their weights
  // keep their initial values (make_model_setup; not in the record).
  std::vector<int64_t> untrained_elements;
};

nlohmann::json to_json(const ModelSetup& setup);
ModelSetup model_setup_from_json(const nlohmann::json& j);  // DataError on a bad record

// Resolves every head against what `dataset` holds (energy, forces, extra columns), fills
// HeadTarget::source/column (and, for multi-branch heads, settings.branch_column), and checks
// that the data has what the loss needs: a ConfigError naming the head, the file and what it does
// have otherwise.
void bind_targets(TrainSettings& settings, const Dataset& dataset);

// Multi-branch heads: checks every graph's kBranchKey (collective over the data's ranks): a
// DataError naming the file and a graph whose value is not a branch of the model. Reports the
// train graphs of each branch, or a warning when the data has no such key (every graph goes
// through branch 0). Nothing for a model of one branch.
struct BranchReport {
  std::string warning;
  std::vector<int64_t> train_graphs;  // per branch
};
BranchReport check_branches(const TrainSettings& s, const TrainData& data);
// Whether a kBranchKey value names one of `n_branches` branches (an integer 0 .. n - 1).
bool names_a_branch(double value, int64_t n_branches);

// Points a trained model's column heads and per-atom inputs at `dataset`'s columns by name (a
// file other than the one it trained on may order them differently): a DataError naming the
// head or input and what the file holds when one is missing or of another width.
void bind_to_dataset(ModelSetup& setup, const Dataset& dataset);

// Checks that the model has weights for every element of `z` (the atoms of `where`): a DataError
// naming the elements it lacks and those it was trained on.
void check_elements_known(const GnnSpec& spec, const std::vector<uint8_t>& z,
                          const std::string& where);
// "H, C, O": the symbols of atomic numbers.
std::string element_list(const std::vector<int64_t>& elements);

// The stress is predicted (and its errors reported) when the forces are conservative, the cells
// periodic and the train split has graphs with a stress: sets s.targets.stress (collective over
// the data's ranks). ConfigError when Architecture.stress_weight asks for a stress there is not.
// Returns a warning when every such graph has the same cell volume (else "").
std::string bind_stress(TrainSettings& s, const TrainData& data);

// The model of a run: from the settings, with the normaliser fitted on the training split (and
// PNA's degree histogram) over all ranks (collective over the data's ranks), and the elements of
// every split as the model's elements (GnnSpec::elements); or, resuming, the checkpoint record's
// normaliser, histogram and elements, after checking that the record holds the model the
// settings describe (DataError naming the differences) and knows every element of the data.
ModelSetup make_model_setup(const TrainSettings& settings, const TrainData& data,
                            const nlohmann::json* resume_record);

// Fits the normaliser on the training split: every graph that `visit` shows on any rank, the
// ranks' partial sums added up by `sum` (loader/targets.h).
Normalizer fit_normalizer(const VisitChunks& visit, const SumAcrossRanks& sum,
                          const std::vector<HeadTarget>& targets, bool use_forces,
                          const std::map<std::string, double>& e0s = {});
// The same on this process alone: the graphs `ids` of `block`.
Normalizer fit_normalizer(const GraphBlock& block, const std::vector<int64_t>& ids,
                          const std::vector<HeadTarget>& targets, bool use_forces);

// A batch ready for the model: the GraphBatch with normalised targets (batch.energy, batch.forces
// in the model dtype), the offsets to map energies back, and one target per column head.
struct PreparedBatch {
  GraphBatch batch;  // padded to a fixed shape when ModelSetup::static_shapes is set (training)
  std::vector<int64_t> ids;         // graph ids, in batch order: block-relative from prepare_batch;
                                    // the loader sets the file ids
  std::vector<double> offset;       // [n_graphs] eV, E = s * E_n + offset
  std::vector<at::Tensor> columns;  // per kColumn head, normalised: [n_atoms, k] (node) or
                                    // [n_graphs, k] (graph head)
  double seconds = 0.0;             // wall time of collate (gather + radius graph)
  // A padded batch: this rank's shares of the step's graphs and atoms, [2] in the model dtype on
  // the device (StepShare::device), and the index of its shape in StaticShapes::buckets (-1: not
  // padded).
  at::Tensor share;
  int bucket = -1;
  // Moved to the device by a BatchUploader (train/upload.h): wait_for_upload before use.
  std::shared_ptr<const Upload> upload;
};

// The batch of graphs `ids` of `block`, built on the host (collate: gather and radius graph; the
// normalised targets; the model's graph inputs, add_graph_inputs) and then put on setup.device.
// `step`: a training step's batch, with this rank's shares of the step; padded to the smallest
// of setup.static_shapes' shapes it fits (when set), or left as it is when it fits none.
PreparedBatch prepare_batch(const GraphBlock& block, const std::vector<int64_t>& ids,
                            const ModelSetup& setup, const StepShare* step = nullptr);
// `p` (on the CPU) padded to the smallest of setup.static_shapes' shapes it fits (which must be
// set), with the step's shares; unchanged when it fits none.
void pad_to_static_shape(PreparedBatch& p, const ModelSetup& setup, const StepShare& share);

// Physical-unit predictions of a batch (eV per graph, eV/Å per atom) from normalised ones.
std::vector<double> energies_ev(const at::Tensor& energy_n, const PreparedBatch& b,
                                const Normalizer& norm);
std::vector<double> to_doubles(const at::Tensor& t, double scale = 1.0);

}  // namespace ddgnn
