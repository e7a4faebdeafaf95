// Chemical element symbols <-> atomic numbers (H..Og), and standard atomic masses.
#pragma once

#include <string>
#include <string_view>

#include "core/units.h"

namespace ddgnn {

// Atomic number of a symbol ("Cu" -> 29); accepts exact case as in the periodic table
// (also all-lower/all-upper forms like "cu"/"CU"). Returns 0 when unknown.
int atomic_number(std::string_view symbol);

// Symbol of atomic number z (1..118); throws DataError otherwise.
const std::string& element_symbol(int z);

// Standard atomic mass in u (IUPAC 2013 conventional values) of z (1..118).
double atomic_mass(int z);

}  // namespace ddgnn
