// Tests of the run config: each kind of bad input gets its own message (unknown key, wrong type,
// range, enum, not-implemented HydraGNN key, JSON syntax, missing file/key, heads, overrides), and
// the good paths: defaults, overrides, typed access, table, atomic write, shipped configs, docs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/config.h"
#include "config/config_schema.h"
#include "core/error.h"

namespace ddgnn {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

const ConfigOptions kStrict{};

// The smallest config that validates.
json minimal() {
  return json::parse(R"({
    "Dataset": {"path": "data/cu_eam.h5"},
    "NeuralNetwork": {
      "Architecture": {"mpnn_type": "SchNet", "hidden_dim": 64, "num_conv_layers": 3,
                       "radius": 5.0},
      "Variables_of_interest": {"output_names": ["energy"], "output_index": [0],
                                "type": ["graph"]},
      "Training": {"num_epoch": 10, "batch_size": 16, "Optimizer": {"learning_rate": 0.001}}
    }
  })");
}

Config resolve(const json& raw, const std::vector<std::string>& overrides = {},
               ConfigOptions options = {}) {
  return resolve_config(raw, "test.json", overrides, options);
}

// The message and the hint of the ConfigError that `body` throws ("" if none is thrown).
template <class F>
std::string error_of(F&& body) {
  try {
    body();
  } catch (const ConfigError& e) {
    return std::string(e.what()) + " || hint: " + e.hint();
  }
  return "";
}

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

// A fresh folder under the test temp dir, removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::path(testing::TempDir()) /
           ("ddgnn_config_" +
            std::string(testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
    return (path / name).string();
  }
};

TEST(Config, DefaultsAreFilledIn) {
  const Config c = resolve(minimal());
  EXPECT_EQ(c.get<std::string>("NeuralNetwork.Architecture.activation_function"), "relu");
  EXPECT_EQ(c.get<int>("NeuralNetwork.Architecture.max_neighbours"), 64);
  EXPECT_EQ(c.get<std::string>("NeuralNetwork.Training.Optimizer.type"), "AdamW");
  EXPECT_DOUBLE_EQ(c.get<double>("NeuralNetwork.Training.Optimizer.weight_decay"), 0.01);
  EXPECT_EQ(c.get<std::vector<double>>("NeuralNetwork.Architecture.task_weights"),
            std::vector<double>{1.0});
  EXPECT_EQ(c.get<std::vector<int>>("NeuralNetwork.Variables_of_interest.output_dim"),
            std::vector<int>{1});
  EXPECT_EQ(c.get<std::string>("Loader.backend"), "auto");
  EXPECT_DOUBLE_EQ(c.get<double>("Tuner.drift_threshold"), 0.25);
  EXPECT_EQ(c.get<std::string>("Dataset.format"), "ddgnn");
  EXPECT_EQ(c.sources.at("Loader.backend"), "default");
  EXPECT_EQ(c.sources.at("NeuralNetwork.Architecture.task_weights"), "default");
  EXPECT_EQ(c.sources.at("NeuralNetwork.Architecture.hidden_dim"), "file");
  EXPECT_TRUE(c.warnings.empty());
  EXPECT_FALSE(c.has("NeuralNetwork.Architecture.initial_bias"));  // optional, no default
}

TEST(Config, WeightDecayDefaultFollowsTheOptimizer) {
  const Config c = resolve(minimal(), {"Training.Optimizer.type=Adam"});
  EXPECT_DOUBLE_EQ(c.get<double>("NeuralNetwork.Training.Optimizer.weight_decay"), 0.0);
}

TEST(Config, NullMeansNotGiven) {
  json raw = minimal();
  raw["NeuralNetwork"]["Architecture"]["max_neighbours"] = nullptr;
  raw["NeuralNetwork"]["Architecture"]["num_gaussians"] = nullptr;  // HydraGNN saves these
  const Config c = resolve(raw);
  EXPECT_EQ(c.get<int>("NeuralNetwork.Architecture.max_neighbours"), 64);
  EXPECT_EQ(c.sources.at("NeuralNetwork.Architecture.max_neighbours"), "default");
}

TEST(Config, UnknownKeySuggestsTheSibling) {
  json raw = minimal();
  raw["NeuralNetwork"]["Training"]["batchsize"] = 16;
  const std::string e = error_of([&] { resolve(raw); });
  EXPECT_HAS(e, "test.json: NeuralNetwork.Training.batchsize: unknown key");
  EXPECT_HAS(e, "did you mean 'batch_size'?");
}

TEST(Config, UnknownKeyInTheOldHydraGnnPlacePointsToTheNewOne) {
  json raw = minimal();
  raw["NeuralNetwork"]["Training"]["learning_rate"] = 0.01;
  const std::string e = error_of([&] { resolve(raw); });
  EXPECT_HAS(e, "NeuralNetwork.Training.learning_rate: unknown key");
  EXPECT_HAS(e, "did you mean 'NeuralNetwork.Training.Optimizer.learning_rate'?");
}

TEST(Config, UnknownKeyCaseAndUnderscoreInsensitive) {
  json raw = minimal();
  raw["NeuralNetwork"]["Training"]["Early_stopping"] = true;
  EXPECT_HAS(error_of([&] { resolve(raw); }), "did you mean 'EarlyStopping'?");
  json top = minimal();
  top["Training"] = json::object();
  EXPECT_HAS(error_of([&] { resolve(top); }), "did you mean 'NeuralNetwork.Training'?");
  json far = minimal();
  far["Loader"]["zzzzzzzzzzzz"] = 1;
  const std::string e = error_of([&] { resolve(far); });
  EXPECT_HAS(e, "Loader.zzzzzzzzzzzz: unknown key");
  EXPECT_HAS(e, "--list-keys");
}

// HydraGNN's LennardJones example writes `early_stopping`, which HydraGNN does not read: the
// config runs as it does there (no early stopping), and the warning names the key it reads.
TEST(Config, HydraGnnsIgnoredEarlyStoppingSpellingWarnsAndStaysOff) {
  json raw = minimal();
  raw["NeuralNetwork"]["Training"]["early_stopping"] = true;
  const Config c = resolve(raw);
  EXPECT_FALSE(c.at("NeuralNetwork.Training.EarlyStopping").get<bool>());
  std::string all;
  for (const auto& w : c.warnings) all += w + "\n";
  EXPECT_HAS(all, "NeuralNetwork.Training.early_stopping = true");
  EXPECT_HAS(all, "write EarlyStopping to stop early");
}

TEST(Config, WrongTypeNamesKeyExpectedTypeAndValue) {
  json raw = minimal();
  raw["NeuralNetwork"]["Training"]["batch_size"] = "32";
  std::string e = error_of([&] { resolve(raw); });
  EXPECT_HAS(e, "NeuralNetwork.Training.batch_size: expected an int, found \"32\" (a string)");
  EXPECT_HAS(e, "without quotes");

  raw = minimal();
  raw["NeuralNetwork"]["Architecture"]["hidden_dim"] = 3.5;
  e = error_of([&] { resolve(raw); });
  EXPECT_HAS(e, "hidden_dim: expected an int, found 3.5");
  EXPECT_HAS(e, "whole number");

  raw = minimal();
  raw["NeuralNetwork"]["Architecture"]["periodic_boundary_conditions"] = 1;
  EXPECT_HAS(error_of([&] { resolve(raw); }),
             "periodic_boundary_conditions: expected a bool (true or false), found 1");

  raw = minimal();
  raw["NeuralNetwork"]["Architecture"]["output_heads"] = 3;
  EXPECT_HAS(error_of([&] { resolve(raw); }), "output_heads: expected an object");

  raw = minimal();
  raw["NeuralNetwork"]["Variables_of_interest"]["output_index"] = json::array({0, "1"});
  EXPECT_HAS(error_of([&] { resolve(raw); }), "output_index[1]: expected an int");
}

TEST(Config, OutOfRangeNamesTheBound) {
  json raw = minimal();
  raw["NeuralNetwork"]["Architecture"]["hidden_dim"] = 0;
  EXPECT_HAS(error_of([&] { resolve(raw); }), "hidden_dim: 0 is out of range (must be 1 … 65536)");
  raw = minimal();
  raw["NeuralNetwork"]["Training"]["perc_train"] = 1.0;
  EXPECT_HAS(error_of([&] { resolve(raw); }),
             "perc_train: 1.0 is out of range (must be > 0 and < 1)");
  raw = minimal();
  raw["Verbosity"]["level"] = 5;
  EXPECT_HAS(error_of([&] { resolve(raw); }), "Verbosity.level: 5 is out of range (must be 0 … 4)");
  raw = minimal();
  raw["NeuralNetwork"]["Architecture"]["radius"] = 0;
  EXPECT_HAS(error_of([&] { resolve(raw); }), "radius: 0 is out of range (must be > 0)");
}

TEST(Config, ValueNotInEnumListsTheAllowedOnes) {
  json raw = minimal();
  raw["NeuralNetwork"]["Architecture"]["activation_function"] = "swish";
  std::string e = error_of([&] { resolve(raw); });
  EXPECT_HAS(e, "activation_function: \"swish\" is not an allowed value (allowed: relu, selu");
  EXPECT_HAS(e, "ssp");

  raw = minimal();
  raw["NeuralNetwork"]["Architecture"]["mpnn_type"] = "schnet";
  EXPECT_HAS(error_of([&] { resolve(raw); }), "did you mean \"SchNet\"?");

  raw = minimal();
  raw["NeuralNetwork"]["Training"]["Optimizer"]["type"] = "Adagrad";
  e = error_of([&] { resolve(raw); });
  EXPECT_HAS(e, "\"Adagrad\" is a HydraGNN value that ddgnn does not implement");
  EXPECT_HAS(e, "use SGD, Adam, AdamW or RMSprop");
  // A refused value stays an error even with --allow-unimplemented: nothing can stand in for it.
  EXPECT_NE(error_of([&] { resolve(raw, {}, ConfigOptions{true}); }), "");

  raw = minimal();
  raw["Dataset"]["format"] = "XYZ";
  EXPECT_HAS(error_of([&] { resolve(raw); }), "ddgnn convert");

  raw = minimal();
  raw["Tuner"]["candidates"] = json::array({"rma", "auto"});
  EXPECT_HAS(error_of([&] { resolve(raw); }), "Tuner.candidates[1]: \"auto\" is not an allowed");
}

TEST(Config, NotImplementedKeyIsAnErrorOrWithTheOptionAWarning) {
  json raw = minimal();
  raw["NeuralNetwork"]["Training"]["conv_checkpointing"] = true;
  const std::string e = error_of([&] { resolve(raw); });
  EXPECT_HAS(e, "Training.conv_checkpointing: ddgnn does not implement this HydraGNN key");
  EXPECT_HAS(e, "--allow-unimplemented");

  const Config c = resolve(raw, {}, ConfigOptions{true});
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_HAS(c.warnings[0], "Training.conv_checkpointing");

  raw = minimal();
  raw["Variables"] = {{"input", {{"x", 1}}}};
  EXPECT_HAS(error_of([&] { resolve(raw); }), "Variables: ddgnn does not implement");
}

// Plots and HydraGNN's profiler change nothing about the model: HydraGNN's configs that ask for
// them run, with a warning that says what ddgnn writes instead.
TEST(Config, PlotsAndTheProfilerAreAcceptedWithAWarning) {
  json raw = minimal();
  raw["Visualization"] = {{"create_plots", true}, {"plot_init_solution", true}};
  raw["NeuralNetwork"]["Profile"]["enable"] = 1;
  const Config c = resolve(raw);
  ASSERT_EQ(c.warnings.size(), 3u);
  std::string all;
  for (const auto& w : c.warnings) all += w + "\n";
  EXPECT_HAS(all, "Visualization.create_plots = true: ddgnn does not do this");
  EXPECT_HAS(all, "the model trained is the same");
  EXPECT_HAS(all, "jobs/parity_plot.py");
  EXPECT_HAS(all, "NeuralNetwork.Profile.enable = true");
  EXPECT_HAS(all, "trace.json");
}

// HydraGNN's canonical frame: every ddgnn model is rotation invariant (the all-layer suites of
// tests/model check energies, forces and stress under rotation), so the config runs, with a
// warning that says why nothing is done.
TEST(Config, RotationalInvarianceIsAcceptedWithAWarningThatSaysWhy) {
  json raw = minimal();
  raw["Dataset"]["rotational_invariance"] = true;
  const Config c = resolve(raw);
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_HAS(c.warnings[0], "Dataset.rotational_invariance = true: ddgnn does not do this");
  EXPECT_HAS(c.warnings[0], "the model trained is the same");
  EXPECT_HAS(c.warnings[0], "invariant under rotations");
  raw["Dataset"]["rotational_invariance"] = "yes";
  EXPECT_HAS(error_of([&] { resolve(raw); }), "Dataset.rotational_invariance");
}

TEST(Config, NotImplementedKeyWithAnInertValueIsAccepted) {
  json raw = minimal();
  raw["Visualization"] = {{"plot_init_solution", false}, {"create_plots", false}};
  raw["NeuralNetwork"]["Architecture"]["SyncBatchNorm"] = false;
  raw["NeuralNetwork"]["Training"]["conv_checkpointing"] = false;
  raw["NeuralNetwork"]["Architecture"]["global_attn_engine"] = "";
  raw["NeuralNetwork"]["Architecture"]["global_attn_heads"] = 8;  // inert without the engine
  raw["NeuralNetwork"]["Architecture"]["int_emb_size"] = 32;      // DimeNet's, any value
  raw["NeuralNetwork"]["Profile"]["enable"] = 0;
  const Config c = resolve(raw);
  EXPECT_TRUE(c.warnings.empty());
  EXPECT_FALSE(c.get<bool>("NeuralNetwork.Profile.enable"));
}

// Found by fuzz/fuzz_config.cpp: a --set value that is not UTF-8 (here 0xC1) reached the JSON
// library's writer, which threw "invalid UTF-8 byte" as an internal error.
TEST(Config, OverrideThatIsNotUtf8IsAConfigError) {
  for (const std::string& bad :
       {std::string("Training.batch_size=\xC1"), std::string("Loader.backend=rm\xE2\x82"),
        std::string("Train\xFFing.batch_size=3"),
        // Well-formed continuation bytes but not UTF-8 (an hour of fuzzing found the first):
        // an overlong three-byte form, a surrogate, a code point above U+10FFFF.
        std::string("Dataset.name=a\xE0\x9A\xB1"), std::string("Dataset.name=\xED\xA0\x80"),
        std::string("Dataset.name=\xF4\x90\x80\x80")}) {
    const std::string e = error_of([&] { resolve(minimal(), {bad}); });
    EXPECT_HAS(e, "--set: the text is not valid UTF-8 (byte 0x");
    EXPECT_HAS(e, "write the key and value as UTF-8 text");
  }
  EXPECT_EQ(error_of([&] {
              resolve(minimal(),
                      {"Dataset.name=Kupfer \xC3\xBC \xE2\x82\xAC \xE0\xB1\x9A \xF0\x9F\x98\x80"});
            }),
            "");
}

TEST(Config, JsonSyntaxErrorGivesFileLineAndColumn) {
  TempDir dir;
  const std::string path = dir.write("bad.json", "{\n  \"Verbosity\": {\"level\": 2},\n  ]\n}\n");
  const std::string e = error_of([&] { load_config(path, {}, kStrict); });
  EXPECT_HAS(e, path + ":3:3: JSON syntax error: ");
  EXPECT_EQ(e.find("[json.exception"), std::string::npos) << e;

  const std::string comma = dir.write("comma.json", "{\"Verbosity\": {\"level\": 2,}}");
  EXPECT_HAS(error_of([&] { load_config(comma, {}, kStrict); }), comma + ":1:27: JSON syntax");
}

TEST(Config, DuplicateKeyIsAnError) {
  TempDir dir;
  const std::string path =
      dir.write("dup.json", R"({"Verbosity": {"level": 2, "level": 3}, "Loader": {}})");
  EXPECT_HAS(error_of([&] { load_config(path, {}, kStrict); }),
             path + ": Verbosity.level: duplicate key");
}

TEST(Config, MissingFileIsAClearError) {
  const std::string e = error_of([] { load_config("no/such/config.json", {}, kStrict); });
  EXPECT_HAS(e, "no/such/config.json: no such config file");
  EXPECT_HAS(e, "configs/");
}

TEST(Config, TopLevelMustBeAnObject) {
  EXPECT_HAS(error_of([] { resolve(json::array({1, 2})); }), "must be a JSON object");
}

TEST(Config, MissingRequiredKeyIsNamed) {
  json raw = minimal();
  raw["NeuralNetwork"]["Architecture"].erase("hidden_dim");
  std::string e = error_of([&] { resolve(raw); });
  EXPECT_HAS(e, "test.json: missing required key NeuralNetwork.Architecture.hidden_dim");
  EXPECT_HAS(e, "--set NeuralNetwork.Architecture.hidden_dim=VALUE");
  raw = minimal();
  raw.erase("Dataset");
  EXPECT_HAS(error_of([&] { resolve(raw); }), "missing required key Dataset.path");
}

TEST(Config, InconsistentHeadsAreErrors) {
  json raw = minimal();
  raw["NeuralNetwork"]["Variables_of_interest"]["output_names"] = {"energy", "forces"};
  raw["NeuralNetwork"]["Variables_of_interest"]["output_index"] = {0, 0};
  std::string e = error_of([&] { resolve(raw); });
  EXPECT_HAS(e, "Variables_of_interest.type: 1 entries, but output_names has 2");

  raw["NeuralNetwork"]["Variables_of_interest"]["type"] = {"graph", "node"};
  raw["NeuralNetwork"]["Variables_of_interest"]["output_dim"] = {1};
  EXPECT_HAS(error_of([&] { resolve(raw); }), "output_dim: 1 entries, but output_names has 2");

  raw["NeuralNetwork"]["Variables_of_interest"]["output_dim"] = {1, 3};
  raw["NeuralNetwork"]["Architecture"]["task_weights"] = {1.0};
  EXPECT_HAS(error_of([&] { resolve(raw); }), "task_weights: 1 entries, but output_names has 2");

  raw["NeuralNetwork"]["Architecture"]["task_weights"] = {1.0, 10.0};
  EXPECT_EQ(resolve(raw).get<std::vector<int>>("Variables_of_interest.output_dim"),
            (std::vector<int>{1, 3}));

  raw["NeuralNetwork"]["Architecture"]["output_heads"]["node"]["num_headlayers"] = 3;
  EXPECT_HAS(error_of([&] { resolve(raw); }),
             "output_heads.node.dim_headlayers: 2 widths, but num_headlayers is 3");
}

TEST(Config, DerivedHydraGnnKeysMustAgree) {
  json raw = minimal();
  raw["NeuralNetwork"]["Architecture"]["input_dim"] = 1;
  raw["NeuralNetwork"]["Architecture"]["output_dim"] = {1};
  raw["NeuralNetwork"]["Architecture"]["pna_deg"] = {0, 3, 10};
  EXPECT_NO_THROW(resolve(raw));
  raw["NeuralNetwork"]["Architecture"]["input_dim"] = 3;
  EXPECT_HAS(error_of([&] { resolve(raw); }), "input_dim: 3 disagrees with");
}

TEST(Config, CrossChecksOfTheModel) {
  const Config gin =
      resolve(minimal(), {"Architecture.mpnn_type=GIN", "Architecture.equivariance=true"});
  ASSERT_EQ(gin.warnings.size(), 1u);  // as HydraGNN: its layers ignore it
  EXPECT_HAS(gin.warnings[0], "equivariance = true changes nothing for GIN");
  EXPECT_HAS(error_of([] {
               resolve(minimal(), {"Architecture.enable_interatomic_potential=true",
                                   "Architecture.energy_weight=0", "Architecture.force_weight=0"});
             }),
             "are all 0");
}

TEST(Config, DatasetPathForms) {
  json raw = minimal();
  raw["Dataset"]["path"] = {{"train", "a.h5"}, {"validate", "b.h5"}, {"test", "c.h5"}};
  EXPECT_TRUE(resolve(raw).at("Dataset.path").is_object());
  raw["Dataset"]["path"] = {{"total", "all.h5"}};
  EXPECT_EQ(resolve(raw).get<std::string>("Dataset.path"), "all.h5");
  raw["Dataset"]["path"] = {{"train", "a.h5"}};
  EXPECT_HAS(error_of([&] { resolve(raw); }), "need \"train\" and \"validate\"");
  raw["Dataset"]["path"] = {{"trian", "a.h5"}};
  EXPECT_HAS(error_of([&] { resolve(raw); }), "did you mean 'train'?");
  raw["Dataset"]["path"] = 5;
  EXPECT_HAS(error_of([&] { resolve(raw); }), "Dataset.path: expected a file name, a list of");
}

TEST(Config, DatasetPathAsAListOfFiles) {
  json raw = minimal();
  raw["Dataset"]["path"] = {"a.h5", {{"path", "dir/b.h5"}, {"name", "bee"}}, "c.h5"};
  EXPECT_TRUE(resolve(raw).at("Dataset.path").is_array());
  // --set takes the list as JSON.
  EXPECT_TRUE(
      resolve(minimal(), {"Dataset.path=[\"a.h5\",\"b.h5\"]"}).at("Dataset.path").is_array());
  const auto refused = [&](const json& path, const std::string& needle) {
    json r = minimal();
    r["Dataset"]["path"] = path;
    EXPECT_HAS(error_of([&] { resolve(r); }), needle);
  };
  refused(json::array(), "Dataset.path: an empty list of files");
  refused({"a.h5", 3}, "Dataset.path[1]: expected a file name or {\"path\", \"name\"}, found");
  refused({"a.h5", ""}, "Dataset.path[1]: empty file name");
  refused({{{"file", "a.h5"}}}, "Dataset.path[0].file: unknown key (known: path, name)");
  refused({{{"name", "a"}}}, "Dataset.path[0]: expected {\"path\": \"file.h5\"");
  refused({{{"path", "a.h5"}, {"name", "x"}}, {{"path", "b.h5"}, {"name", "x"}}},
          "Dataset.path[1].name: 'x' names another file of the list too");
}

TEST(Config, ContinueAcceptsZeroOneOrBool) {
  json raw = minimal();
  raw["NeuralNetwork"]["Training"]["continue"] = 1;
  EXPECT_TRUE(resolve(raw).get<bool>("Training.continue"));
  raw["NeuralNetwork"]["Training"]["continue"] = 2;
  EXPECT_HAS(error_of([&] { resolve(raw); }), "expected true/false or 0/1");
}

TEST(Config, OverridesAreAppliedWithTheirSource) {
  const Config c =
      resolve(minimal(), {"Training.batch_size=32", "NeuralNetwork.Architecture.hidden_dim=128",
                          "Loader.backend=rma", "Output.run_dir=2024",
                          "Architecture.output_heads.node.dim_headlayers=[60,20]"});
  EXPECT_EQ(c.get<int>("NeuralNetwork.Training.batch_size"), 32);
  EXPECT_EQ(c.get<int>("NeuralNetwork.Architecture.hidden_dim"), 128);
  EXPECT_EQ(c.get<std::string>("Loader.backend"), "rma");
  EXPECT_EQ(c.get<std::string>("Output.run_dir"), "2024");  // a string key keeps the text
  EXPECT_EQ(c.get<std::vector<int>>("Architecture.output_heads.node.dim_headlayers"),
            (std::vector<int>{60, 20}));
  EXPECT_EQ(c.sources.at("NeuralNetwork.Training.batch_size"), "--set");
  EXPECT_EQ(c.sources.at("Loader.backend"), "--set");
  EXPECT_EQ(c.sources.at("NeuralNetwork.Training.num_epoch"), "file");
}

TEST(Config, OverrideOfAPartOfTheDatasetPath) {
  const Config c = resolve(
      minimal(), {R"(Dataset.path={"train":"a.h5","validate":"b.h5"})", "Dataset.path.test=c.h5"});
  EXPECT_EQ(c.at("Dataset.path").value("test", ""), "c.h5");
}

TEST(Config, BadOverridesAreErrors) {
  std::string e = error_of([] { resolve(minimal(), {"Training.batch_size"}); });
  EXPECT_HAS(e, "--set 'Training.batch_size': expected KEY=VALUE");
  EXPECT_HAS(e, "--set Training.batch_size=32");
  EXPECT_HAS(error_of([] { resolve(minimal(), {"=3"}); }), "expected KEY=VALUE");
  EXPECT_HAS(error_of([] { resolve(minimal(), {"Training..batch_size=3"}); }), "empty part");
  e = error_of([] { resolve(minimal(), {"Training.batchsize=32"}); });
  EXPECT_HAS(e, "--set NeuralNetwork.Training.batchsize: unknown key");
  EXPECT_HAS(e, "did you mean 'batch_size'?");
  EXPECT_HAS(error_of([] { resolve(minimal(), {"Architecture.radius.x=1"}); }),
             "NeuralNetwork.Architecture.radius is not a section");
  e = error_of([] { resolve(minimal(), {"Training.batch_size=0"}); });
  EXPECT_HAS(e, "--set NeuralNetwork.Training.batch_size: 0 is out of range");
}

TEST(Config, TypedAccess) {
  const Config c = resolve(minimal());
  EXPECT_EQ(c.get<int>("NeuralNetwork.Training.batch_size"), 16);
  EXPECT_EQ(c.get<long long>("Training.batch_size"), 16);
  EXPECT_DOUBLE_EQ(c.get<double>("NeuralNetwork.Architecture.radius"), 5.0);
  EXPECT_DOUBLE_EQ(c.get<double>("NeuralNetwork.Training.batch_size"), 16.0);  // int as number
  EXPECT_FALSE(c.get<bool>("Loader.drop_remainder"));
  EXPECT_EQ(c.get<std::vector<std::string>>("Variables_of_interest.output_names"),
            std::vector<std::string>{"energy"});
  EXPECT_TRUE(c.get<json>("Loader").is_object());
  EXPECT_TRUE(c.has("Training.batch_size"));
  EXPECT_FALSE(c.has("Training.nope"));
  EXPECT_HAS(error_of([&] { c.get<int>("NeuralNetwork.Architecture.radius"); }),
             "NeuralNetwork.Architecture.radius: read as int");
  EXPECT_HAS(error_of([&] { c.get<bool>("NeuralNetwork.Training.batch_size"); }), "read as bool");
  EXPECT_HAS(error_of([&] { c.get<int>("NeuralNetwork.Architecture.initial_bias"); }), "not set");
  EXPECT_HAS(error_of([&] { c.get<int>("Nope.nope"); }), "not a config key");
}

TEST(Config, TableShowsKeysValuesAndSources) {
  const std::string table = config_table(resolve(minimal(), {"Loader.backend=shm"}));
  EXPECT_HAS(table, "key");
  EXPECT_HAS(table, "source");
  std::istringstream lines(table);
  std::string line;
  bool saw_file = false, saw_default = false, saw_set = false;
  while (std::getline(lines, line)) {
    if (line.rfind("NeuralNetwork.Architecture.mpnn_type ", 0) == 0) {
      EXPECT_HAS(line, "SchNet");
      saw_file = line.size() >= 4 && line.substr(line.size() - 4) == "file";
    }
    if (line.rfind("Comm.grad_sync ", 0) == 0) saw_default = line.find("default") != line.npos;
    if (line.rfind("Loader.backend ", 0) == 0)
      saw_set = line.find("shm") != line.npos && line.find("--set") != line.npos;
  }
  EXPECT_TRUE(saw_file && saw_default && saw_set) << table;
}

TEST(Config, WriteResolvedRoundTripsAtomically) {
  TempDir dir;
  const Config c = resolve(minimal(), {"Training.batch_size=8"});
  const std::string path = (dir.path / "run" / "config.resolved.json").string();
  write_resolved_config(c, path);
  write_resolved_config(c, path);  // over an existing file
  std::ifstream in(path);
  EXPECT_EQ(json::parse(in), c.resolved);
  for (const auto& entry : fs::directory_iterator(dir.path / "run"))
    EXPECT_EQ(entry.path().filename(), "config.resolved.json");  // no temporary left behind
  // The resolved config is itself a valid config, and resolves to itself.
  const Config again = load_config(path, {}, kStrict);
  EXPECT_EQ(again.resolved, c.resolved);
}

TEST(Config, WriteIntoAMissingFolderFailsWithAnError) {
  TempDir dir;
  const std::string blocker = dir.write("file", "x");
  EXPECT_THROW(write_resolved_config(resolve(minimal()), blocker + "/sub/c.json"), Error);
}

TEST(Config, SchemaIsConsistent) {
  for (const auto& spec : config_schema()) {
    const auto dot = spec.key.rfind('.');
    if (dot != std::string::npos) {
      const KeySpec* parent = find_key_spec(spec.key.substr(0, dot));
      ASSERT_NE(parent, nullptr) << spec.key;
      EXPECT_EQ(parent->type, KeyType::kSection) << spec.key;
    }
    EXPECT_FALSE(spec.description.empty()) << spec.key;
    if (spec.presence == Presence::kDefault && spec.default_note.empty()) {
      EXPECT_NO_THROW(check_value(spec, spec.default_value, spec.key)) << spec.key;
      if (spec.status == KeyStatus::kNotImplemented) {
        EXPECT_TRUE(is_inert(spec, spec.default_value)) << spec.key;
      }
    }
    if (spec.changes_model) {  // refused even with --allow-unimplemented: its hint names a value
      EXPECT_EQ(spec.status, KeyStatus::kNotImplemented) << spec.key;
      EXPECT_FALSE(spec.inert.empty()) << spec.key;
    }
  }
}

TEST(Config, EveryShippedConfigValidates) {
  int n = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(DDGNN_SOURCE_DIR) / "configs")) {
    if (entry.path().extension() != ".json") continue;
    SCOPED_TRACE(entry.path().string());
    const Config c = load_config(entry.path().string(), {}, kStrict);
    EXPECT_TRUE(c.warnings.empty());
    ++n;
  }
  EXPECT_GE(n, 4);
}

TEST(Config, DocsAreUpToDate) {
  std::ifstream in(fs::path(DDGNN_SOURCE_DIR) / "docs" / "config.md");
  ASSERT_TRUE(in) << "docs/config.md is missing";
  std::ostringstream text;
  text << in.rdbuf();
  EXPECT_TRUE(text.str() == schema_reference(/*markdown=*/true))
      << "docs/config.md is stale: regenerate it with "
         "`ddgnn config --list-keys --markdown > docs/config.md`";
}

}  // namespace
}  // namespace ddgnn
