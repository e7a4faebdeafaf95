// The schema table of a run config: every key with its type, default, constraint, status and
// description. The entries' chaining setters, the checks of a value against its entry, the "did
// you mean" suggestions and the reference text are in config/schema_checks.cpp; the keys of single
// layer types in config/schema_layers.cpp, those of how a run executes in config/schema_run.cpp.
#include "config/config_schema.h"

#include <map>

#include "config/hydragnn_compat.h"
#include "config/schema_layers.h"
#include "config/schema_run.h"
#include "model/spec.h"

namespace ddgnn {

namespace {

using json = nlohmann::json;
using T = KeyType;

KeySpec key(std::string dotted, KeyType type, std::string description) {
  return make_key_spec(std::move(dotted), type, std::move(description));
}

KeySpec section(std::string dotted, std::string description) {
  return key(std::move(dotted), T::kSection, std::move(description));
}

// The table. Order = the order of the reference and of the resolved table.
std::vector<KeySpec> build_schema() {
  const std::string arch = "NeuralNetwork.Architecture.";
  const std::string heads = "NeuralNetwork.Architecture.output_heads.";
  const std::string voi = "NeuralNetwork.Variables_of_interest.";
  const std::string train = "NeuralNetwork.Training.";
  std::vector<KeySpec> s;
  auto add = [&s](KeySpec spec) { s.push_back(std::move(spec)); };

  add(section("Verbosity", "How much rank 0 prints (HydraGNN's section)."));
  add(key("Verbosity.level", T::kInt,
          "0: epoch lines only … 4: per-step detail (Output.log_level sets the logger threshold)")
          .def(2)
          .ge(0)
          .le(4));

  add(section("NeuralNetwork", "The model and its training, in HydraGNN's schema."));
  add(section("NeuralNetwork.Architecture", "The message-passing model and its output heads."));
  add(key(arch + "mpnn_type", T::kEnum, "message-passing layer type")
          .required()
          .one_of({"SchNet", "EGNN", "PAINN", "CGCNN", "GIN", "PNA", "PNAPlus", "PNAEq", "MACE",
                   "DimeNet", "GAT", "SAGE", "MFC"}));
  add(key(arch + "hidden_dim", T::kInt, "width F of the node features").required().ge(1).le(65536));
  add(key(arch + "num_conv_layers", T::kInt, "number of message-passing layers")
          .required()
          .ge(1)
          .le(1000));
  add(key(arch + "radius", T::kNumber, "cutoff radius of the radius graph, Å")
          .required()
          .gt(0)
          .with_hint("ddgnn builds every graph from the atoms within this distance of each other "
                     "(periodic images included); a HydraGNN config without it builds its "
                     "graphs from chemical bonds (SMILES read by RDKit), which ddgnn does not"));
  add(key(arch + "max_neighbours", T::kInt,
          "at most this many neighbours per atom (the nearest are kept)")
          .def(64)
          .ge(1));
  add(key(arch + "radial_envelope", T::kEnum,
          "the function that takes SchNet's and PAINN's filters to zero at the radius: cosine "
          "0.5 (cos(pi d/radius) + 1), as PyG and HydraGNN, which already falls from d = 0 "
          "(to 0.5 at half the radius); polynomial, DimeNet's of order envelope_exponent, as "
          "NequIP and MACE, which stays near 1 to about a third of the radius and falls near it")
          .def("cosine")
          .one_of({"cosine", "polynomial"})
          .ddgnn_only());
  add(key(arch + "envelope_exponent", T::kInt,
          "order p of the polynomial radial envelope (HydraGNN's DimeNet key; MACE 5, NequIP "
          "6); higher keeps it flat longer (at p 5 it is 0.83 at 0.46 of the radius, at p 20 "
          "1.00). Read by MACE, DimeNet and PNAPlus, and by SchNet and PAINN with "
          "radial_envelope polynomial")
          .def(5)
          .ge(1));
  add(key(arch + "smooth_neighbour_cap", T::kBool,
          "when max_neighbours cuts an atom's neighbours, keep one more and end the radial "
          "envelope at that farthest one instead of at radius, so that the energy stays "
          "continuous as neighbours change rank (SchNet and PAINN, whose filters carry the "
          "envelope); false cuts at the max_neighbours nearest, as HydraGNN does")
          .def(false)
          .ddgnn_only());
  add(key(arch + "periodic_boundary_conditions", T::kBool,
          "build edges across the periodic cell (the dataset must have cells)")
          .def(false));
  add(key(arch + "activation_function", T::kEnum, "activation of the layers and heads")
          .def("relu")
          .one_of({"relu", "selu", "prelu", "elu", "lrelu_01", "lrelu_025", "lrelu_05", "silu",
                   "gelu", "tanh", "sigmoid", "softplus", "ssp"}));
  add(key(arch + "graph_pooling", T::kEnum,
          "node features -> graph features for graph heads (add suits extensive targets)")
          .def("mean")
          .one_of(pooling_names()));
  add(key(arch + "equivariance", T::kBool,
          "EGNN: every layer moves the atoms (E_GCL's coordinate update, as HydraGNN) and the "
          "next layer reads the moved ones; SchNet and PAINN accept it and move nothing "
          "(HydraGNN's SchNet moves them); with another model a warning, as in HydraGNN: it "
          "changes nothing")
          .def(false));
  add(section(arch + "output_heads", "The heads on top of the message-passing layers."));
  add(section(heads + "graph", "Graph-level heads: shared layers, then one MLP per head."));
  add(key(heads + "graph.type", T::kAny,
          "ignored: graph heads are MLPs (HydraGNN reads type for node heads only)")
          .derived());
  add(key(heads + "graph.num_sharedlayers", T::kInt, "layers shared by all graph heads")
          .def(2)
          .ge(1));
  add(key(heads + "graph.dim_sharedlayers", T::kInt, "width of the shared layers").def(50).ge(1));
  add(key(heads + "graph.num_headlayers", T::kInt, "hidden layers of each graph head")
          .def(2)
          .ge(1));
  add(key(heads + "graph.dim_headlayers", T::kIntArray,
          "widths of the hidden layers (one per num_headlayers)")
          .def(json::array({50, 25}))
          .ge(1));
  add(section(heads + "node", "Node-level heads (forces, per-atom energies)."));
  add(key(heads + "node.num_headlayers", T::kInt, "hidden layers of each node head").def(2).ge(1));
  add(key(heads + "node.dim_headlayers", T::kIntArray,
          "widths of the hidden layers (one per num_headlayers)")
          .def(json::array({50, 25}))
          .ge(1));
  add(key(heads + "node.type", T::kEnum, "an MLP per atom, or message-passing layers")
          .def("mlp")
          .one_of(node_head_type_names())
          .refuses({"mlp_per_node"})
          .with_hint("use \"mlp\" (shared across atoms) or \"conv\""));
  add(key(heads + "branches", T::kAny,
          "multi-branch heads: the head layers of branches 1, 2, ... as [{\"graph\": {...}, "
          "\"node\": {...}}, ...] (a key left out is branch 0's); each structure goes through "
          "the branch its per-structure key dataset_name names (`convert --info-keys "
          "dataset_name`), branch 0 when the data has none. HydraGNN's list form of "
          "output_heads.graph / .node is read into this")
          .ddgnn_only()
          .checked_by(check_head_branches));
  add(key(arch + "task_weights", T::kNumberArray, "loss weight of each head")
          .derived_default("1.0 for each head")
          .ge(0));
  add(key(arch + "enable_interatomic_potential", T::kBool,
          "the node head predicts per-atom energies; energy = their sum, forces = −∂E/∂x")
          .def(false));
  add(key(arch + "energy_weight", T::kNumber,
          "loss weight of the energy (with enable_interatomic_potential)")
          .def(1.0)
          .ge(0));
  add(key(arch + "energy_peratom_weight", T::kNumber,
          "loss weight of the energy per atom (with enable_interatomic_potential)")
          .def(0.0)
          .ge(0));
  add(key(arch + "force_weight", T::kNumber,
          "loss weight of the forces (with enable_interatomic_potential)")
          .def(1.0)
          .ge(0));
  add(key(arch + "stress_weight", T::kNumber,
          "loss weight of the stress, (1/V) ∂E/∂ε of the energy under a strain of cell and "
          "positions (with enable_interatomic_potential; graphs periodic in three directions "
          "with a stress), compared as the virial per atom σV/n so that it weighs like the "
          "energy per atom. The stress is predicted and its errors reported whenever the data "
          "has it; 0 leaves it out of the loss")
          .def(0.0)
          .ge(0)
          .ddgnn_only());
  add_layer_type_keys(s);
  add(key(arch + "dropout", T::kNumber, "dropout probability in the head MLPs")
          .def(0.0)
          .ge(0)
          .lt(1));
  add(key(arch + "initial_bias", T::kNumber,
          "initial bias of the last layer of every head (absent: 0)"));
  add(key(arch + "input_dim", T::kInt, "checked against the length of input_node_features")
          .derived());
  add(key(arch + "output_dim", T::kIntArray, "checked against Variables_of_interest.output_dim")
          .derived());
  add(key(arch + "output_type", T::kEnumArray, "checked against Variables_of_interest.type")
          .one_of({"graph", "node"})
          .derived());
  add(key(arch + "num_nodes", T::kAny, "ignored").derived());
  add(key(arch + "edge_dim", T::kAny, "ignored: ddgnn models use the edge lengths").derived());
  add(key(arch + "pna_deg", T::kAny, "ignored: ddgnn counts the degrees of the training set")
          .derived());
  add_hydragnn_architecture_keys(s);

  add(section("NeuralNetwork.Variables_of_interest",
              "The heads: one entry per head in output_names, output_index, type, output_dim."));
  add(key(voi + "input_node_features", T::kIntArray,
          "the model's per-atom inputs, numbered as HydraGNN numbers its node features: 0 the "
          "atomic number (always), 1, 2, 3 the positions, which ddgnn's layers read as geometry "
          "(distances and directions, never as raw coordinates, so [0] and [0, 1, 2, 3] are the "
          "same model), then the data's per-atom columns: the forces (4-6, when the data has "
          "them) and each column `convert --extra-columns` kept, in the file's order; each later "
          "column is standardised on the training split and added to the atom embedding through "
          "one linear map")
          .def(json::array({0}))
          .ge(0)
          .checked_by(check_input_node_features));
  add(key(voi + "output_names", T::kStringArray,
          "name of each head, and of its target when Dataset.node_features / graph_features "
          "are absent: " +
              energy_head_names() + " the energy, " + forces_head_names() +
              " the forces, else a column of the data by that name")
          .required());
  add(key(voi + "output_index", T::kIntArray,
          "one entry per head: with Dataset.node_features (node heads) or graph_features (graph "
          "heads) the entry of that list the head learns, counted from 0 (HydraGNN's binding), "
          "except the energy head of a conservative potential named as one, which learns the "
          "energy (as in HydraGNN); without them checked and not read (the head is bound by its "
          "name)")
          .required()
          .ge(0));
  add(key(voi + "output_dim", T::kIntArray, "size of each target (1 energy, 3 forces)")
          .derived_default("the dim of the entry of Dataset.node_features / graph_features each "
                           "head selects, 1 for a head bound by name")
          .ge(1));
  add(key(voi + "type", T::kEnumArray, "level of each head").required().one_of({"graph", "node"}));
  add(key(voi + "denormalize_output", T::kBool,
          "ignored: ddgnn always reports errors and predictions in physical units (eV, eV/Å)")
          .def(false)
          .derived());
  for (const char* level : {"graph", "node"}) {
    const std::string named = std::string("checked against Dataset.") + level +
                              "_features' \"name\" and \"dim\" when both are given (HydraGNN "
                              "copies them here), else ignored: a ddgnn dataset names its columns";
    add(key(voi + level + "_feature_names", T::kStringArray, named).derived());
    add(key(voi + level + "_feature_dims", T::kIntArray, named).ge(1).derived());
  }
  for (const char* name : {"x_minmax", "y_minmax", "minmax_node_feature", "minmax_graph_feature"})
    add(key(voi + name, T::kAny, "ignored: ddgnn does not min-max normalise").derived());

  add(section("NeuralNetwork.Training", "Epochs, batches, loss, optimizer, checkpoints."));
  add(key(train + "num_epoch", T::kInt, "number of epochs").required().ge(1));
  add(key(train + "batch_size", T::kInt, "graphs per rank per step (B)").required().ge(1));
  add(key(train + "perc_train", T::kNumber,
          "fraction for training; the rest splits evenly into validation and test")
          .def(0.7)
          .gt(0)
          .lt(1));
  add(key(train + "loss_function_type", T::kEnum, "loss of every head")
          .def("mse")
          .one_of(loss_type_names()));
  add(section(train + "Optimizer", "The optimizer."));
  add(key(train + "Optimizer.type", T::kEnum, "optimizer")
          .def("AdamW")
          .one_of(known_optimizer_names())
          .refuses({"Adadelta", "Adagrad", "Adamax", "FusedLAMB"})
          .with_hint("use SGD, Adam, AdamW or RMSprop"));
  add(key(train + "Optimizer.learning_rate", T::kNumber, "initial learning rate").required().gt(0));
  add(key(train + "Optimizer.weight_decay", T::kNumber, "L2 weight decay (torch's defaults)")
          .derived_default("0.01 for AdamW, else 0")
          .ge(0));
  add(key(train + "Optimizer.use_zero_redundancy", T::kBool, "ZeRO optimizer-state sharding")
          .not_implemented({false}));
  add(key(train + "EarlyStopping", T::kBool, "stop when the validation loss stops improving")
          .def(false));
  // One of HydraGNN's own examples (LennardJones) writes this spelling, which HydraGNN does not
  // read: the run trains as HydraGNN would (no early stopping), with a warning.
  add(key(train + "early_stopping", T::kBool,
          "a spelling HydraGNN does not read either: it reads EarlyStopping, so early stopping "
          "stays off")
          .not_implemented({})
          .output_only()
          .with_hint("write EarlyStopping to stop early"));
  add(key(train + "patience", T::kInt,
          "evaluations (epochs, or eval_every_steps) without improvement before early stopping")
          .def(10)
          .ge(1));
  add(key(train + "Checkpoint", T::kFlag,
          "write checkpoints (ddgnn default true; HydraGNN's is false)")
          .def(true));
  add(key(train + "checkpoint_warmup", T::kInt, "epochs before the first checkpoint").def(0).ge(0));
  add(key(train + "continue", T::kFlag, "resume from the checkpoint named by startfrom")
          .def(false));
  add(key(train + "startfrom", T::kString, "checkpoint to resume from (in run_dir/checkpoints)")
          .def("existing_model"));
  add(key(train + "precision", T::kEnum,
          "floating-point precision of the model: fp32 (TF32 matrix products on a GPU), bf16 "
          "(float32 weights, batches, energy and force sums; matrix products in bfloat16 by "
          "autocast), fp64 (tests, checks)")
          .def("fp32")
          .one_of(precision_names())
          .refuses({"fp16"})
          .with_hint("use fp32, bf16 or fp64 (fp16 needs loss scaling, which ddgnn has not)"));
  add(key(train + "compute_grad_energy", T::kBool,
          "forces as −∂E/∂x of the graph energy head instead of a force head")
          .def(false));
  add(key(train + "conv_checkpointing", T::kBool, "activation checkpointing of the layers")
          .not_implemented({false}));
  add(key(train + "CheckRemainingTime", T::kBool, "stop before the batch job's time runs out")
          .not_implemented({false}));
  add_hydragnn_training_keys(s);
  add(key(train + "seed", T::kInt, "seed of weights, sampler and splits")
          .def(0)
          .ge(0)
          .ddgnn_only());
  add(key(train + "grad_clip", T::kNumber, "clip the gradient norm to this (0 = off)")
          .def(0.0)
          .ge(0)
          .ddgnn_only());
  add(key(train + "warmup_steps", T::kInt,
          "learning-rate warm-up: optimizer step k of the run (k ≤ N) takes k/N of the scheduled "
          "rate, which a learning rate that overflows the first steps needs (0 = off; counted over "
          "the run, so a resumed run goes on where it was)")
          .def(0)
          .ge(0)
          .ddgnn_only());
  add(key(train + "divergence_factor", T::kNumber,
          "stop the run with an error when the median of an epoch's batch losses exceeds this "
          "many times the lowest such median so far, or its validation loss this many times the "
          "best so far or is not finite (a diverged model, which would otherwise train on for "
          "the rest of its time; a median, so that one batch cannot decide it; both count "
          "afresh when stage_two changes the loss weights; 0 = never)")
          .def(1000.0)
          .ge(0)
          .ddgnn_only());
  add(key(train + "spike_factor", T::kNumber,
          "skip the optimizer step of a batch whose loss or gradient norm is non-finite or more "
          "than this many times the median of the last 100 steps' (judged once 10 are known): "
          "the step is counted (metrics.csv's skipped_steps) and logged with its graphs, and "
          "training goes on. A spike after 3 skipped steps in a row is applied (every batch "
          "spiking means the weights are the cause, and that gradient corrects them); 25 "
          "non-finite steps in a row stop the run. 0 = off (a non-finite loss then stops the "
          "run)")
          .def(20.0)
          .ge(0)
          .ddgnn_only());
  add(key(train + "ema_decay", T::kNumber,
          "exponential moving average of the weights for validation, test and the saved model "
          "(MACE's --ema_decay; 0 = off, else in (0, 1), e.g. 0.99)")
          .def(0.0)
          .ge(0)
          .lt(1)
          .ddgnn_only());
  add(key(train + "time_limit_s", T::kNumber,
          "stop at the first step after this much wall time (from start, a resumed run's earlier "
          "time included) with a checkpoint that resumes at that step; the steps since the last "
          "evaluation are not evaluated (0 = no limit), s")
          .def(0.0)
          .ge(0)
          .ddgnn_only());
  add(key(train + "eval_every_steps", T::kInt,
          "optimizer steps between evaluations, inside epochs too: the validation and test "
          "splits, the metrics row and log line, the best checkpoint, the learning-rate "
          "schedule, early stopping (patience counts evaluations) and the divergence check; the "
          "run's last step is evaluated too (0 = at the end of each epoch)")
          .def(0)
          .ge(0)
          .ddgnn_only());
  add(key(train + "eval_batch_size", T::kInt,
          "graphs per batch when evaluating the validation and test splits (0 = batch_size)")
          .def(0)
          .ge(0)
          .ddgnn_only());
  add(key(train + "huber_delta", T::kNumber, "delta of the huber and smooth_l1 losses")
          .def(1.0)
          .gt(0)
          .ddgnn_only());
  add(section(train + "stage_two",
              "A second stage of training with other loss weights (MACE's stage two): from "
              "start_epoch on, each weight given here replaces the Architecture's, the validation "
              "loss follows them, and the best checkpoint, early stopping and ReduceLROnPlateau "
              "start counting afresh. E.g. the stress added once the forces are learned")
          .ddgnn_only());
  add(key(train + "stage_two.start_epoch", T::kInt,
          "first epoch of stage two (2..num_epoch; absent: one stage)")
          .ge(2)
          .ddgnn_only());
  for (const char* w : {"energy_weight", "energy_peratom_weight", "force_weight", "stress_weight"})
    add(key(train + "stage_two." + w, T::kNumber,
            std::string("Architecture.") + w + " from start_epoch on (absent: unchanged)")
            .ge(0)
            .ddgnn_only());
  add(section(train + "Scheduler", "Learning-rate schedule (HydraGNN's fixed ReduceLROnPlateau).")
          .ddgnn_only());
  add(key(train + "Scheduler.type", T::kEnum,
          "ReduceLROnPlateau: on the validation loss; ExponentialLR: lr × gamma every evaluation "
          "(epoch); "
          "TimeExponential: lr falls geometrically from learning_rate to min_lr over "
          "time_limit_s, set after every epoch from the elapsed time (a run that is slowed "
          "down still anneals fully; not bit-reproducible, since it follows the clock)")
          .def("ReduceLROnPlateau")
          .one_of({"ReduceLROnPlateau", "ExponentialLR", "TimeExponential", "none"})
          .ddgnn_only());
  add(key(train + "Scheduler.factor", T::kNumber, "learning rate × factor on a plateau")
          .def(0.5)
          .gt(0)
          .lt(1)
          .ddgnn_only());
  add(key(train + "Scheduler.patience", T::kInt,
          "evaluations (epochs, or eval_every_steps) without improvement before reducing")
          .def(5)
          .ge(0)
          .ddgnn_only());
  add(key(train + "Scheduler.gamma", T::kNumber,
          "ExponentialLR: learning rate × gamma per evaluation (each epoch, or each "
          "eval_every_steps)")
          .def(0.99)
          .gt(0)
          .le(1)
          .ddgnn_only());
  add(key(train + "Scheduler.min_lr", T::kNumber, "lower bound of the learning rate")
          .def(1e-5)
          .ge(0)
          .ddgnn_only());

  add(section("NeuralNetwork.Profile", "HydraGNN's torch profiler.").not_implemented({}));
  add(key("NeuralNetwork.Profile.enable", T::kFlag,
          "torch profiler (ddgnn writes trace.json instead; see Output.trace_steps)")
          .not_implemented({false, 0})
          .output_only()
          .with_hint("the run directory's trace.json has each step's phases"));

  add(section("Visualization", "HydraGNN's plots (ddgnn writes metrics.csv instead).")
          .not_implemented({}));
  for (const char* name : {"plot_init_solution", "plot_hist_solution", "create_plots"})
    add(key(std::string("Visualization.") + name, T::kBool, "plots of the predictions")
            .not_implemented({false})
            .output_only()
            .with_hint("ddgnn writes metrics.csv and `ddgnn evaluate` the predictions; "
                       "jobs/parity_plot.py and jobs/figures.py learning draw them"));

  add(section("Dataset", "Where the data is: a packed HDF5 file written by `ddgnn convert`."));
  add(key("Dataset.name", T::kString, "name of the data in the log and the run_start event")
          .def("dataset"));
  add(key("Dataset.path", T::kDatasetPath,
          "\"data.h5\" (relative to the working directory); a list of files trained as one "
          "dataset, each \"file.h5\" or {\"path\": \"file.h5\", \"name\": \"ani1x\"} "
          "(each file split on its own by perc_train and Dataset.split_by; every structure gets "
          "the per-structure value dataset_name, its file's place in the list from 0, which "
          "selects the branch of multi-branch heads); or {\"train\", \"validate\", "
          "\"test\"} files")
          .required());
  add(key("Dataset.split_by", T::kEnum,
          "how one Dataset.path file is split: frame (each frame alone), block (runs of "
          "Dataset.split_block consecutive frames kept whole: MD trajectories, whose neighbouring "
          "frames are correlated), group (the frames of one config_type kept whole: several "
          "configurations of one molecule; `ddgnn convert --config-type-key mol_id` groups by "
          "another info key), composition (each frame alone, every composition, the count of "
          "each element, split in the perc_train proportions on its own; as HydraGNN's "
          "compositional_stratified_splitting, without its copies of a composition too rare "
          "for every part)")
          .def("frame")
          .one_of({"frame", "block", "group", "composition"})
          .ddgnn_only());
  add(key("Dataset.split_block", T::kInt,
          "frames per block with Dataset.split_by block (longer than the correlation time of "
          "the trajectory)")
          .def(100)
          .ge(1)
          .ddgnn_only());
  add(key("Dataset.train_fraction", T::kNumber,
          "fraction of the training part of one Dataset.path file that is trained on: the first "
          "of its units (frames, blocks, groups) in the split's seeded order, so a smaller "
          "fraction's graphs are among a larger's; validation and test unchanged (a learning "
          "curve against training-set size)")
          .def(1.0)
          .gt(0)
          .le(1)
          .ddgnn_only());
  add(key("Dataset.split_seed", T::kInt,
          "seed of the split of one Dataset.path file, so that runs with other "
          "Training.seed values (weights, sampler) test on the same graphs")
          .derived_default("NeuralNetwork.Training.seed")
          .ge(0)
          .ddgnn_only());
  add(key("Dataset.e0s", T::kNumberMap,
          "isolated-atom reference energy of each element, eV, by symbol or atomic number "
          "({\"H\": -13.6, \"O\": -432.0}, MACE's E0s): subtracted from the energies instead "
          "of the per-element least-squares fit on the train split (empty: the fit); every "
          "element of the train split needs one")
          .def(nlohmann::json::object())
          .ddgnn_only());
  add(key("Dataset.allow_outliers", T::kBool,
          "train on frames that `ddgnn convert` flagged as outliers (energy far from its "
          "composition's, force above 100 eV/Å, atoms closer than 0.1 Å) instead of refusing")
          .def(false)
          .ddgnn_only());
  add(key("Dataset.format", T::kEnum, "format of Dataset.path")
          .def("ddgnn")
          .one_of({"ddgnn"})
          .refuses({"LSMS", "CFG", "XYZ", "unit_test", "pickle", "adios"})
          .with_hint("convert the raw data once with `ddgnn convert in.extxyz... out.h5`, then set "
                     "Dataset.path to the .h5 and Dataset.format to \"ddgnn\""));
  add(key("Dataset.compositional_stratified_splitting", T::kBool,
          "true: split as Dataset.split_by composition, each composition in the perc_train "
          "proportions on its own (HydraGNN's key; ignored with train, validate and test files)")
          .def(false));
  add(key("Dataset.rotational_invariance", T::kBool, "rotate samples to a canonical frame")
          .not_implemented({false})
          .output_only()
          .with_hint("every ddgnn model is invariant under rotations: the energy is the same in "
                     "any frame, forces and stress rotate with the sample"));
  using M = FeatureMeaning;
  const std::string entries =
      " as HydraGNN describes its data: {\"name\": [...], \"dim\": [...], \"column_index\": "
      "[...]}, one entry per name (dims >= 1; column_index optional, not read: a ddgnn file names "
      "its columns). When present, each ";
  add(key("Dataset.node_features", T::kAny,
          "the per-atom columns" + entries +
              "node head learns the entry its output_index selects (not its output_names "
              "entry): " +
              feature_names(M::kForces) +
              " the forces, else the per-atom column of that name "
              "(`convert --extra-columns`); " +
              feature_names(M::kAtomicNumber) + " (the atomic number) and " +
              feature_names(M::kPosition) +
              " (the positions) are the model's inputs, not targets. Absent: node heads are "
              "bound by name")
          .checked_by(check_feature_columns));
  add(key("Dataset.graph_features", T::kAny,
          "the per-structure values" + entries +
              "graph head learns the entry its output_index selects (not its output_names "
              "entry): " +
              feature_names(M::kEnergy) +
              " the total energy, else the per-structure key of that name (`convert "
              "--info-keys`). Absent: graph heads are bound by name")
          .checked_by(check_feature_columns));
  add(key("Variables", T::kAny, "HydraGNN's newer inputs/outputs section")
          .not_implemented({})
          .with_hint("describe the heads in NeuralNetwork.Variables_of_interest"));

  add_run_keys(s);
  return s;
}

}  // namespace

const std::vector<KeySpec>& config_schema() {
  static const std::vector<KeySpec> schema = build_schema();
  return schema;
}

const KeySpec* find_key_spec(const std::string& dotted_key) {
  static const std::map<std::string, const KeySpec*> index = [] {
    std::map<std::string, const KeySpec*> out;
    for (const auto& spec : config_schema()) out[spec.key] = &spec;
    return out;
  }();
  const auto it = index.find(dotted_key);
  return it == index.end() ? nullptr : it->second;
}

}  // namespace ddgnn
