// Allocator tuning for training: keeps glibc malloc from handing large freed blocks back to the
// kernel (munmap / trim) on every step, which otherwise costs page faults and zeroing each time a
// tensor of a few hundred kB or more is allocated again (~35% of a CPU training step).
#pragma once

#include <cstddef>

namespace ddgnn {

// Raises glibc's mmap threshold to 32 MiB (the largest glibc accepts), the trim threshold to
// 1 GiB and the top pad to 64 MiB (mallopt), so freed tensor buffers stay in the heap and are
// reused by the next step; blocks of 32 MiB and more are still mmapped. Peak resident memory then
// stays at the high-water mark instead of shrinking between steps. Call once, at the start of
// main, before the first tensor is allocated. Returns false where glibc is not used (a no-op) or
// refused a setting.
bool tune_allocator();

// Hands the heap's free memory back to the kernel now (malloc_trim): after start-up's one-off
// passes over the data (loading the store, the split, statistics), whose freed blocks the settings
// above would otherwise keep resident for the whole run. A no-op without glibc.
void release_free_memory();

// Prepares [p, p + bytes), memory about to be filled once and kept (the store's window): asks
// for transparent huge pages (madvise MADV_HUGEPAGE, 2 MiB pages where the memory is private
// and THP allows it) and has the kernel populate every page now (MADV_POPULATE_WRITE, Linux
// 5.14), so that filling gigabytes takes neither a page fault per 4 KiB nor, in a virtual
// machine, a trap to the hypervisor per fault: most of the cost of loading a store there.
// Returns whether the kernel took either advice (without them the pages fault in as usual).
bool prepare_store_memory(void* p, size_t bytes);

}  // namespace ddgnn
