// Keeps freed heap memory in the process instead of handing it back to the kernel, for a site's
// steady state of model-sized blocks freed and allocated again every step (libzmq's receive buffer of
// each incoming message, scratch vectors). glibc's defaults hand such blocks back (mmap for large
// blocks, trimming the top of a heap on free), so every allocation faults its pages in again on first
// touch: 512 page faults per 2 MB share, which in a 4-site sgp run on 2 cores cost more CPU than the
// share's copies.
//
// Trade-off: the process keeps up to its peak heap mapped (blocks below 32 MiB come from the heap; a
// larger one is still mapped and unmapped on its own).
#pragma once

namespace meridian::daemon {

// Sets the allocator's limits for the whole process (glibc: M_MMAP_THRESHOLD to 32 MiB, the largest it
// takes, and M_TRIM_THRESHOLD to 1 GiB). Call once at start, before threads allocate. Does nothing with
// another C library. Returns whether the limits were set.
bool retain_freed_heap_memory();

}  // namespace meridian::daemon
