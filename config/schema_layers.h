// The config keys of the individual message-passing layer types (config/schema_layers.cpp).
#pragma once

#include <vector>

#include "config/config_schema.h"

namespace ddgnn {

// Appends the Architecture keys that only some layer types read, in the reference's order.
void add_layer_type_keys(std::vector<KeySpec>& schema);

}  // namespace ddgnn
