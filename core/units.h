// Units and constants used project-wide. Inside ddgnn: energies in eV, lengths in Å, forces in
// eV/Å; reported errors in meV/atom and meV/Å.
#pragma once

namespace ddgnn {

// Atomic numbers run from 1 (H) to 118 (Og); per-species tables have kMaxAtomicNumber + 1 rows.
constexpr int kMaxAtomicNumber = 118;

}  // namespace ddgnn
