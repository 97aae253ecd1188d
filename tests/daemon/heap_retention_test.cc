#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "daemon/heap_retention.h"

namespace {

// Minor page faults of this process so far.
long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Allocates a block of `bytes`, writes it whole, frees it; returns the page faults that took.
long faults_of_block(std::size_t bytes) {
  const long before = minor_faults();
  auto* block = static_cast<unsigned char*>(std::malloc(bytes));
  if (!block) return -1;
  std::memset(block, 1, bytes);
  volatile unsigned char last = block[bytes - 1];
  (void)last;
  std::free(block);
  return minor_faults() - before;
}

}  // namespace

TEST_CASE("a freed model-sized block is reused without faulting its pages in again", "[daemon][memory][process]") {
  // In a child: the allocator's limits are process-wide and would outlive this test.
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (!meridian::daemon::retain_freed_heap_memory()) _exit(2);
    // 24 MiB: glibc's defaults map such a block afresh (then serve the next one from a heap they trim
    // again), 6144 page faults for each of the first two. Kept, the second costs (almost) none.
    constexpr std::size_t kBlock = 24u << 20;
    if (faults_of_block(kBlock) < 0) _exit(3);
    _exit(faults_of_block(kBlock) < 64 ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
