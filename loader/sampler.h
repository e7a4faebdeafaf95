// The distributed sampler: (seed, epoch, rank, world) -> this rank's batches of sample ids, with
// no state and no communication. Every sample appears exactly once per epoch across the ranks,
// and every rank gets the same number of steps:
//   the epoch's order is IndexPermutation(n, seed * 1000003 + epoch), whose entries each rank
//   computes for its own positions only (O(N/P) memory, no N-sized order); step s covers
//   positions [s B P, (s + 1) B P) of it, rank r taking [s B P + r B, s B P + (r + 1) B);
//   the last step holds the remainder R < B P, dealt out as evenly as possible: rank r gets
//   floor(R / P) samples, plus one when r < R mod P (so with R < P some ranks' last batch is
//   empty: they still step, with no samples, and gradient averaging weighs ranks by graphs).
// With drop_remainder the last short step is dropped on every rank instead.
#pragma once

#include <cstdint>
#include <vector>

namespace ddgnn {

// A seeded bijection of 0..n-1 evaluated one index at a time, in O(1) memory: a 4-round Feistel
// network on the smallest even number of bits that holds n (round function: SplitMix64 of the
// seed, the round and the half), cycle-walked back into 0..n-1 (fewer than 4 rounds of walking
// on average). The same on every platform.
class IndexPermutation {
 public:
  IndexPermutation(int64_t n, uint64_t seed);
  int64_t operator()(int64_t i) const;
  int64_t size() const { return m_n; }

 private:
  uint64_t feistel(uint64_t x) const;
  int64_t m_n;
  uint64_t m_seed;
  int m_half_bits = 1;
  uint64_t m_half_mask = 1;
};

struct SamplerOptions {
  int64_t n_samples = 0;    // ids 0 .. n_samples - 1 (indices into the training split)
  int64_t batch_size = 1;   // B, samples per rank per step
  int rank = 0, world = 1;  // position among the ranks that share the epoch
  uint64_t seed = 0;
  bool shuffle = true;  // false: the epoch's order is 0, 1, ..., n - 1
  bool drop_remainder = false;
};

// Steps per epoch (the same on every rank).
int64_t sampler_steps(const SamplerOptions& o);

// This rank's batches for `epoch` (1-based, as the trainer counts), each a list of ids.
std::vector<std::vector<int64_t>> sampler_epoch(const SamplerOptions& o, int64_t epoch);

// The epoch's order of all ids (the same on every rank; O(N): for tests and tools).
std::vector<int64_t> sampler_order(const SamplerOptions& o, int64_t epoch);

// Atom-budget batching, balanced over the ranks (as fairchem's balanced sampler): the epoch's
// order is cut into steps of at most batch_size * world samples and atom_budget * world atoms
// (a sample larger than that goes alone); a step's samples are dealt to the ranks longest first,
// each to the rank with the fewest atoms so far (ties: the lower rank), and keep epoch order
// within a rank. drop_remainder drops a last step of fewer than batch_size * world samples
// (unless it is the only one). n_atoms[id]: atoms of sample id (every sample, on every rank; 2
// bytes a sample). The order is walked once and not kept: memory is this rank's batches and one
// step. Every rank gets the same number of steps; with one rank, the batches are the budget
// cuts.
std::vector<std::vector<int64_t>> sampler_epoch_balanced(const SamplerOptions& o,
                                                         const std::vector<uint16_t>& n_atoms,
                                                         int64_t atom_budget, int64_t epoch);

}  // namespace ddgnn
