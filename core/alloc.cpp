// glibc malloc tuning (see alloc.h): large tensor buffers stay in the heap between steps.
#include "core/alloc.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace ddgnn {

void tune_allocator() {
#if defined(__GLIBC__)
  constexpr int kMmapThreshold = 1 << 30;  // bytes: blocks below this come from the heap
  constexpr int kTrimThreshold = 1 << 30;  // bytes of free heap top kept before trimming
  constexpr int kTopPad = 256 << 20;       // bytes added to every heap extension
  mallopt(M_MMAP_THRESHOLD, kMmapThreshold);
  mallopt(M_TRIM_THRESHOLD, kTrimThreshold);
  mallopt(M_TOP_PAD, kTopPad);
#endif
}

}  // namespace ddgnn
