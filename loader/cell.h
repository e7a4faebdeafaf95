// Lattice cells (3x3, rows are the lattice vectors a, b, c, Å): determinant, inverse, the spacing
// of lattice planes, and the one rule of what a periodic cell must be, shared by the extxyz
// reader, the dataset writer and reader, and the dataset statistics.
#pragma once

#include <cstdint>
#include <string>

namespace ddgnn {

// The smallest distance between lattice planes of a periodic axis (Å). Real crystals have
// several Å; a cell below this is a unit error or a corrupted file, and its neighbour lists would
// need (radius / height)^3 images.
constexpr double kMinCellHeight = 0.5;

// det of the 3x3 row-major matrix m (the signed cell volume, Å³).
double cell_det(const double* m);

// inv = m^-1 (row-major); false when |det| < 1e-12.
bool cell_invert(const double* m, double* inv);

// The distance between the lattice planes spanned by the two rows other than k: |det| / |a_i x a_j|
// (0 for a degenerate cell).
double cell_height(const double* m, int k);

// Empty when a structure with this cell and these periodic flags can be used; else what is wrong
// with it, in words ("the periodic cell has volume 0 Å^3", ...). A structure with no periodic
// axis needs no cell; every cell entry must be finite.
std::string cell_problem(const double* cell, const bool pbc[3]);

}  // namespace ddgnn
