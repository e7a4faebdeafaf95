// The config keys of how a run executes: loader, communication, tuner, runtime and output
// (config/schema_run.cpp).
#pragma once

#include <vector>

#include "config/config_schema.h"

namespace ddgnn {

// Appends the Loader, Comm, Tuner, Runtime and Output sections and their keys, in the reference's
// order (the table's last sections).
void add_run_keys(std::vector<KeySpec>& schema);

}  // namespace ddgnn
