// Runs the built `meridian` binary as a user would (a real process, stdout and stderr together) and
// returns its exit code and output. For tests only; fails the running test if the process cannot start.
#pragma once

#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <memory>
#include <string>

namespace meridian::tests {

struct CommandOutput {
  int exit_code;  // -1 when the process did not exit normally
  std::string output;
};

// `args` is appended to the binary's path and run through the shell; `environment` (e.g. "LD_DEBUG=libs")
// is set for that process only.
inline CommandOutput run_meridian(const std::string& args, const std::string& environment = {}) {
  const std::string command =
      (environment.empty() ? "" : environment + " ") + std::string(MERIDIAN_BINARY) + " " + args + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  REQUIRE(pipe);
  std::string output;
  std::array<char, 4096> buffer{};
  while (std::fgets(buffer.data(), buffer.size(), pipe.get()) != nullptr) output += buffer.data();
  const int status = pclose(pipe.release());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

}  // namespace meridian::tests
