#include "daemon/heap_retention.h"

#include <cstddef>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace meridian::daemon {

bool retain_freed_heap_memory() {
#if defined(__GLIBC__)
  // A fixed mmap threshold also stops glibc from adjusting it (and the trim threshold) on its own.
  constexpr int kMmapThreshold = 32 << 20;
  constexpr int kTrimThreshold = 1 << 30;
  return mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 && mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1;
#else
  return false;
#endif
}

}  // namespace meridian::daemon
