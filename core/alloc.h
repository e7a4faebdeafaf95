// Allocator tuning for training: keeps glibc malloc from handing large freed blocks back to the
// kernel (munmap / trim) on every step, which otherwise costs page faults and zeroing each time a
// tensor of a few hundred kB or more is allocated again (~35% of a CPU training step).
#pragma once

namespace ddgnn {

// Raises glibc's mmap threshold to 1 GiB, the trim threshold to 1 GiB and the top pad to 256 MiB
// (mallopt), so freed tensor buffers stay in the heap and are reused by the next step. Peak
// resident memory then stays at the high-water mark instead of shrinking between steps. Call once,
// at the start of main, before the first tensor is allocated. A no-op where glibc is not used.
void tune_allocator();

}  // namespace ddgnn
