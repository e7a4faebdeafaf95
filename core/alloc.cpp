// glibc malloc tuning (see alloc.h): large tensor buffers stay in the heap between steps.
#include "core/alloc.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>  // defines __GLIBC__ (through <features.h>) where glibc is the C library

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace ddgnn {

bool tune_allocator() {
#if defined(__GLIBC__)
  // glibc refuses an mmap threshold above HEAP_MAX_SIZE / 2 (32 MiB on 64-bit) and returns 0;
  // every one of these calls also switches off glibc's dynamic threshold, so a refused threshold
  // would leave the default 128 KiB in force for good: every tensor above it mmapped, faulted in
  // page by page and unmapped again on every step. Hence the largest accepted value, checked.
  constexpr int kMmapThreshold = 32 << 20;  // bytes: blocks below this come from the heap
  constexpr int kTrimThreshold = 1 << 30;   // bytes of free heap top kept before trimming
  constexpr int kTopPad = 64 << 20;         // bytes added to every heap extension
  const bool ok = mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 &&
                  mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1 &&
                  mallopt(M_TOP_PAD, kTopPad) == 1;
  return ok;
#else
  return false;
#endif
}

bool prepare_store_memory(void* p, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHuge = uintptr_t(2) << 20;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
  const bool huge =
      p && end > begin && madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE) == 0;
  // MADV_POPULATE_WRITE (Linux 5.14): every page at once, in one call, instead of one fault a
  // page as the loader first writes it. Older kernels refuse it (EINVAL): pages then fault in.
  constexpr int kPopulateWrite = 23;
  constexpr uintptr_t kPage = 4096;
  const uintptr_t pbegin = reinterpret_cast<uintptr_t>(p) & ~(kPage - 1);
  const uintptr_t pend = reinterpret_cast<uintptr_t>(p) + bytes;
  const bool populated =
      p && bytes > 0 &&
      madvise(reinterpret_cast<void*>(pbegin), pend - pbegin, kPopulateWrite) == 0;
  return huge || populated;
#else
  (void)p;
  (void)bytes;
  return false;
#endif
}

void release_free_memory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace ddgnn
