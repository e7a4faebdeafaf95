// The periodic table as ddgnn needs it: symbols H..Og, symbol -> atomic number lookup (a flat
// table indexed by the two letters, fast enough for the extxyz hot path), standard atomic masses.
#include "loader/elements.h"

#include <array>
#include <cstdint>

#include "core/error.h"

namespace ddgnn {
namespace {

// kSymbols[z] for z = 1..118; index 0 is unused.
const std::array<std::string, kMaxAtomicNumber + 1> kSymbols = {
    "",   "H",  "He", "Li", "Be", "B",  "C",  "N",  "O",  "F",  "Ne", "Na", "Mg", "Al", "Si",
    "P",  "S",  "Cl", "Ar", "K",  "Ca", "Sc", "Ti", "V",  "Cr", "Mn", "Fe", "Co", "Ni", "Cu",
    "Zn", "Ga", "Ge", "As", "Se", "Br", "Kr", "Rb", "Sr", "Y",  "Zr", "Nb", "Mo", "Tc", "Ru",
    "Rh", "Pd", "Ag", "Cd", "In", "Sn", "Sb", "Te", "I",  "Xe", "Cs", "Ba", "La", "Ce", "Pr",
    "Nd", "Pm", "Sm", "Eu", "Gd", "Tb", "Dy", "Ho", "Er", "Tm", "Yb", "Lu", "Hf", "Ta", "W",
    "Re", "Os", "Ir", "Pt", "Au", "Hg", "Tl", "Pb", "Bi", "Po", "At", "Rn", "Fr", "Ra", "Ac",
    "Th", "Pa", "U",  "Np", "Pu", "Am", "Cm", "Bk", "Cf", "Es", "Fm", "Md", "No", "Lr", "Rf",
    "Db", "Sg", "Bh", "Hs", "Mt", "Ds", "Rg", "Cn", "Nh", "Fl", "Mc", "Lv", "Ts", "Og"};

// Standard atomic weights 2013 (Meija et al., Pure Appl. Chem. 88, 265 (2016), Table 1; the
// "conventional" values of Table 3 where IUPAC gives a range), as ASE uses. Elements without a
// stable isotope take the mass of their longest-lived isotope (Table 4), so no entry is NaN.
constexpr std::array<double, kMaxAtomicNumber + 1> kMasses = {
    0.0,       1.008,        4.002602,  6.94,        9.0121831, 10.81,      12.011,    14.007,
    15.999,    18.998403163, 20.1797,   22.98976928, 24.305,    26.9815385, 28.085,    30.973761998,
    32.06,     35.45,        39.948,    39.0983,     40.078,    44.955908,  47.867,    50.9415,
    51.9961,   54.938044,    55.845,    58.933194,   58.6934,   63.546,     65.38,     69.723,
    72.630,    74.921595,    78.971,    79.904,      83.798,    85.4678,    87.62,     88.90584,
    91.224,    92.90637,     95.95,     97.90721,    101.07,    102.90550,  106.42,    107.8682,
    112.414,   114.818,      118.710,   121.760,     127.60,    126.90447,  131.293,   132.90545196,
    137.327,   138.90547,    140.116,   140.90766,   144.242,   144.91276,  150.36,    151.964,
    157.25,    158.92535,    162.500,   164.93033,   167.259,   168.93422,  173.054,   174.9668,
    178.49,    180.94788,    183.84,    186.207,     190.23,    192.217,    195.084,   196.966569,
    200.592,   204.38,       207.2,     208.98040,   208.98243, 209.98715,  222.01758, 223.01974,
    226.02541, 227.02775,    232.0377,  231.03588,   238.02891, 237.04817,  244.06421, 243.06138,
    247.07035, 247.07031,    251.07959, 252.0830,    257.09511, 258.09843,  259.1010,  262.110,
    267.122,   268.126,      271.134,   270.133,     269.1338,  278.156,    281.165,   281.166,
    285.177,   286.182,      289.190,   289.194,     293.204,   293.208,    294.214};

// Lookup table keyed by (first letter, second letter or none): 26 * 27 slots of atomic numbers.
constexpr int kNoSecond = 26;
constexpr int key_of(int first, int second) {
  return first * 27 + second;
}

struct SymbolTable {
  std::array<uint8_t, 26 * 27> z{};
  SymbolTable() {
    for (int n = 1; n <= kMaxAtomicNumber; ++n) {
      const std::string& s = kSymbols[n];
      const int second = s.size() > 1 ? s[1] - 'a' : kNoSecond;
      z[key_of(s[0] - 'A', second)] = static_cast<uint8_t>(n);
    }
  }
};

const SymbolTable& symbol_table() {
  static const SymbolTable table;
  return table;
}

bool is_upper(char c) {
  return c >= 'A' && c <= 'Z';
}
bool is_lower(char c) {
  return c >= 'a' && c <= 'z';
}

}  // namespace

int atomic_number(std::string_view symbol) {
  if (symbol.empty() || symbol.size() > 2) return 0;
  const char c0 = symbol[0];
  int first;
  if (is_upper(c0)) {
    first = c0 - 'A';
  } else if (is_lower(c0)) {
    first = c0 - 'a';
  } else {
    return 0;
  }
  int second = kNoSecond;
  if (symbol.size() == 2) {
    const char c1 = symbol[1];
    // "Cu", "cu", "CU" are accepted; "cU" is not.
    if (is_lower(c1)) {
      second = c1 - 'a';
    } else if (is_upper(c1) && is_upper(c0)) {
      second = c1 - 'A';
    } else {
      return 0;
    }
  }
  return symbol_table().z[key_of(first, second)];
}

const std::string& element_symbol(int z) {
  if (z < 1 || z > kMaxAtomicNumber) {
    throw DataError("atomic number " + std::to_string(z) + " is out of range 1.." +
                        std::to_string(kMaxAtomicNumber),
                    "atomic numbers run from 1 (H) to 118 (Og)");
  }
  return kSymbols[z];
}

double atomic_mass(int z) {
  if (z < 1 || z > kMaxAtomicNumber) {
    throw DataError("atomic number " + std::to_string(z) + " is out of range 1.." +
                        std::to_string(kMaxAtomicNumber),
                    "atomic numbers run from 1 (H) to 118 (Og)");
  }
  return kMasses[z];
}

}  // namespace ddgnn
