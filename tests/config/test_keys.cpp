// The config is honest: every key that docs/config.md documents as doing something is read by the
// code that trains (train_settings, which records every key it reads), every key documented as
// derived says that it is only checked or ignored, and every not-implemented key refuses a value
// that would change something.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/config_schema.h"
#include "config/train_settings.h"
#include "core/error.h"

namespace ddgnn {
namespace {

const std::string kConfigs = std::string(DDGNN_SOURCE_DIR) + "/configs/";

// The keys train_settings() reads from the config at `file` with `overrides`.
std::set<std::string> keys_read(const std::string& file,
                                const std::vector<std::string>& overrides) {
  const Config config = load_config(kConfigs + file, overrides, {});
  EXPECT_TRUE(config.read_keys.empty()) << "resolving the config reads no key for the code";
  train_settings(config);
  return config.read_keys;
}

TEST(ConfigKeys, EveryImplementedKeyIsReadByTheCode) {
  std::set<std::string> read;
  for (const char* file : {"ethanol_schnet.json", "cu_eam_schnet.json", "si_sw_painn.json"})
    for (const std::vector<std::string>& overrides : std::vector<std::vector<std::string>>{
             {},
             {"Architecture.initial_bias=0.5", "Output.log_level=debug"},
             {"Training.Scheduler.type=TimeExponential", "Training.time_limit_s=60"},
             {"Architecture.mpnn_type=SchNet", "Architecture.global_attn_engine=GPS",
              "Architecture.global_attn_type=multihead", "Architecture.global_attn_heads=2",
              "Architecture.pe_dim=2", "Architecture.use_graph_attr_conditioning=true"},
             {"Training.stage_two.start_epoch=2", "Training.stage_two.energy_weight=2",
              "Training.stage_two.energy_peratom_weight=1", "Training.stage_two.force_weight=1",
              "Training.stage_two.stress_weight=0"}}) {
      const std::set<std::string> keys = keys_read(file, overrides);
      read.insert(keys.begin(), keys.end());
    }
  int implemented = 0;
  for (const KeySpec& spec : config_schema()) {
    if (spec.type == KeyType::kSection) continue;
    if (spec.status != KeyStatus::kSupported && spec.status != KeyStatus::kDdgnnOnly) continue;
    ++implemented;
    EXPECT_TRUE(read.count(spec.key))
        << spec.key << " is documented (" << status_text(spec.status)
        << ") but the training code never reads it: read it, or mark it derived or not "
           "implemented";
  }
  EXPECT_GT(implemented, 80);
}

TEST(ConfigKeys, SmoothNeighbourCapNeedsAModelWithAnEnvelope) {
  const std::string on = "Architecture.smooth_neighbour_cap=true";
  EXPECT_TRUE(
      train_settings(load_config(kConfigs + "si_sw_painn.json", {on}, {})).graph.smooth_cap);
  EXPECT_FALSE(train_settings(load_config(kConfigs + "si_sw_painn.json", {}, {})).graph.smooth_cap);
  try {
    train_settings(
        load_config(kConfigs + "cu_eam_schnet.json", {on, "Architecture.mpnn_type=EGNN"}, {}));
    ADD_FAILURE() << "EGNN with a smooth neighbour cap was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("smooth_neighbour_cap: EGNN has no radial envelope"),
              std::string::npos)
        << e.what();
  }
}

TEST(ConfigKeys, AListOfFilesGetsTheirNamesFromTheListOrTheirStems) {
  const TrainSettings s = train_settings(
      load_config(kConfigs + "molecules_mace.json",
                  {"Dataset.path=[\"d/ani.h5\",{\"path\":\"e/mp.h5\",\"name\":\"mptrj\"}]"}, {}));
  ASSERT_EQ(s.data.files.size(), 2u);
  EXPECT_FALSE(s.data.explicit_split());
  EXPECT_EQ(s.data.files[0].name, "ani");
  EXPECT_EQ(s.data.files[1].path, "e/mp.h5");
  EXPECT_EQ(s.data.files[1].name, "mptrj");
  try {  // two stems alike
    train_settings(load_config(kConfigs + "molecules_mace.json",
                               {"Dataset.path=[\"a/x.h5\",\"b/x.h5\"]"}, {}));
    ADD_FAILURE() << "two files named x were accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("two files named 'x' (a/x.h5, b/x.h5)"), std::string::npos)
        << e.what();
  }
}

TEST(ConfigKeys, SplitSeedDefaultsToTheTrainingSeedAndCanHoldTheSplitWhileItChanges) {
  const auto settings = [](const std::vector<std::string>& sets) {
    return train_settings(load_config(kConfigs + "molecules_mace.json", sets, {}));
  };
  EXPECT_EQ(settings({"Training.seed=3"}).split_seed, 3u);
  const TrainSettings held = settings({"Training.seed=3", "Dataset.split_seed=0"});
  EXPECT_EQ(held.seed, 3u);
  EXPECT_EQ(held.split_seed, 0u);
  EXPECT_THROW(settings({"Dataset.split_seed=-1"}), ConfigError);
  EXPECT_EQ(settings({"Dataset.train_fraction=0.25"}).train_fraction, 0.25);
  EXPECT_THROW(settings({"Dataset.train_fraction=0"}), ConfigError);
}

TEST(ConfigKeys, RadialEnvelopeReachesTheModelSpecAndNeedsAModelWithAnEnvelope) {
  const TrainSettings poly = train_settings(load_config(
      kConfigs + "si_sw_painn.json",
      {"Architecture.radial_envelope=polynomial", "Architecture.envelope_exponent=5"}, {}));
  EXPECT_EQ(poly.gnn.layer.envelope.kind, Envelope::kPolynomial);
  EXPECT_EQ(poly.gnn.layer.envelope.p, 5);
  EXPECT_EQ(
      train_settings(load_config(kConfigs + "si_sw_painn.json", {}, {})).gnn.layer.envelope.kind,
      Envelope::kCosine);
  EXPECT_THROW(
      train_settings(load_config(
          kConfigs + "cu_eam_schnet.json",
          {"Architecture.radial_envelope=polynomial", "Architecture.mpnn_type=CGCNN"}, {})),
      ConfigError);
  EXPECT_THROW(
      load_config(kConfigs + "cu_eam_schnet.json", {"Architecture.envelope_exponent=0"}, {}),
      ConfigError);
}

TEST(ConfigKeys, DerivedKeysSayWhatTheyDo) {
  for (const KeySpec& spec : config_schema()) {
    if (spec.status != KeyStatus::kDerived) continue;
    const std::string& d = spec.description;
    EXPECT_TRUE(d.rfind("checked against", 0) == 0 || d.rfind("ignored", 0) == 0)
        << spec.key << ": a derived key is checked or ignored, and says which: \"" << d << "\"";
  }
}

// A value of the key's type that is not one of its inert values.
nlohmann::json active_value(const KeySpec& spec) {
  switch (spec.type) {
    case KeyType::kBool:
    case KeyType::kFlag:
      return true;
    case KeyType::kInt:
      return 7;
    case KeyType::kNumber:
      return 0.5;
    case KeyType::kString:
      return "x";
    case KeyType::kIntArray:
    case KeyType::kNumberArray:
      return nlohmann::json::array({1});
    case KeyType::kStringArray:
      return nlohmann::json::array({"x"});
    default:
      return nlohmann::json::object({{"x", 1}});
  }
}

TEST(ConfigKeys, NotImplementedKeysRefuseValuesThatWouldChangeSomething) {
  const nlohmann::json base = nlohmann::json::parse(std::ifstream(kConfigs + "cu_eam_schnet.json"));
  int refused = 0;
  for (const KeySpec& spec : config_schema()) {
    if (spec.status != KeyStatus::kNotImplemented || spec.type == KeyType::kSection) continue;
    if (spec.inert_any) {  // documented as "any value accepted": it changes nothing in ddgnn
      EXPECT_NE(constraint_text(spec).find("any value accepted"), std::string::npos) << spec.key;
      continue;
    }
    nlohmann::json raw = base;
    raw[nlohmann::json::json_pointer("/" + [&] {
      std::string p = spec.key;
      for (char& c : p)
        if (c == '.') c = '/';
      return p;
    }())] = active_value(spec);
    if (spec.outputs_only) {  // plots, a profiler: the model is the same, so a warning
      EXPECT_NE(constraint_text(spec).find("accepted with a warning"), std::string::npos)
          << spec.key;
      const Config c = resolve_config(raw, "test.json", {}, {});
      ASSERT_FALSE(c.warnings.empty()) << spec.key;
      EXPECT_NE(c.warnings.back().find(spec.key), std::string::npos) << c.warnings.back();
      continue;
    }
    EXPECT_THROW(resolve_config(raw, "test.json", {}, {}), ConfigError) << spec.key;
    ++refused;
  }
  EXPECT_GE(refused, 9);
}

}  // namespace
}  // namespace ddgnn
