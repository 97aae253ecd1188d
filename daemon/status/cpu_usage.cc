#include "daemon/status/cpu_usage.h"

#include <sys/resource.h>
#include <time.h>

namespace meridian::daemon {
namespace {

double seconds_of(const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; }

}  // namespace

CpuUsage CpuUsage::now() {
  CpuUsage u;
  timespec ts{};
  if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0)
    u.thread_seconds = static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) == 0) {
    u.process_seconds = seconds_of(usage.ru_utime) + seconds_of(usage.ru_stime);
    u.minor_faults = static_cast<std::uint64_t>(usage.ru_minflt);
  }
  return u;
}

CpuUsage operator-(const CpuUsage& later, const CpuUsage& earlier) {
  return CpuUsage{later.thread_seconds - earlier.thread_seconds, later.process_seconds - earlier.process_seconds,
                  later.minor_faults - earlier.minor_faults};
}

}  // namespace meridian::daemon
