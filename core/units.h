// Units and constants used project-wide. Inside ddgnn: energies in eV, lengths in Å, forces in
// eV/Å, stress in eV/Å³; reported errors in meV/atom, meV/Å and meV/Å³.
#pragma once

namespace ddgnn {

// Atomic numbers run from 1 (H) to 118 (Og); per-species tables have kMaxAtomicNumber + 1 rows.
constexpr int kMaxAtomicNumber = 118;

// Stress: 1 eV/Å³ in GPa (1.602176634e-19 J / 1e-30 m³ = 1.602176634e11 Pa).
constexpr double kGpaPerEvA3 = 160.2176634;

}  // namespace ddgnn
