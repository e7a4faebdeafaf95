// How a dataset file is split into train / validation / test (Dataset.split_by): one spelling for
// the config, the checkpoint record and the logs.
#pragma once

#include <array>
#include <optional>
#include <string>

namespace ddgnn {

enum class SplitBy {
  kFrame,  // each frame on its own (frames of one trajectory land in every split)
  kBlock,  // contiguous blocks of Dataset.split_block frames kept whole (MD trajectories)
  kGroup,  // frames of one config_type kept whole (molecules: `convert --config-type-key mol_id`)
  kComposition,  // each frame alone, stratified: every composition split in the same proportions
                 // (HydraGNN's Dataset.compositional_stratified_splitting)
};

inline const std::array<const char*, 4>& split_by_names() {
  static const std::array<const char*, 4> names = {"frame", "block", "group", "composition"};
  return names;
}
inline std::string to_string(SplitBy s) {
  return split_by_names()[size_t(s)];
}
inline std::optional<SplitBy> find_split_by(const std::string& name) {
  for (size_t i = 0; i < split_by_names().size(); ++i)
    if (name == split_by_names()[i]) return SplitBy(i);
  return std::nullopt;
}

}  // namespace ddgnn
