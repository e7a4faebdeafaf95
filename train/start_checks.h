// What a training run checks before it moves any data: that every rank runs rank 0's config, and
// that the datasets hold no outlier frame the config does not allow.
#pragma once

#include <mpi.h>

#include "config/config.h"
#include "train/train_data.h"

namespace ddgnn {

// Collective: a ConfigError on every rank, naming the first differing rank and keys, when any
// rank's resolved config differs from rank 0's (a batch size or an epoch count would make the
// ranks wait for each other forever; a dataset or a seed, train on mixed data without a word).
void check_ranks_run_one_config(MPI_Comm comm, const Config& config);

// Frames that `convert` flagged as outliers in the datasets of the splits: a DataError listing
// them, unless `allow` (then a warning on the root). Files converted before outliers were looked
// for get a warning that says how to list them.
void check_outliers(const TrainData& data, bool allow, bool root);

}  // namespace ddgnn
