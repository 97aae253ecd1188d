// What a stretch of a site's run cost in CPU, for result.json: the calling thread's CPU time, the whole
// process's (every thread: trainer, communication, control, libzmq's I/O), and the process's minor page
// faults. On a machine shared with other work these do not depend on the load, where wall time does:
// they tell an algorithm's own cost (its CPU per step) apart from time spent descheduled or waiting.
#pragma once

#include <cstdint>

namespace meridian::daemon {

struct CpuUsage {
  double thread_seconds = 0;   // the calling thread's CPU time (user + system)
  double process_seconds = 0;  // all threads of the process (user + system)
  std::uint64_t minor_faults = 0;

  // Now, for the calling thread and its process; zeros where the platform has no such counter.
  static CpuUsage now();
  // `later` minus `earlier`, field by field; both must come from the same thread.
  friend CpuUsage operator-(const CpuUsage& later, const CpuUsage& earlier);
};

}  // namespace meridian::daemon
