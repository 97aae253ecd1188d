// Test helpers for `meridian start --trainer attached` with real PyTorch trainer processes (Debian's
// python3-torch): a trainer process beside its site, a federation of attached sites over CurveZMQ on
// 127.0.0.1, and comparisons of the state_dicts the trainers save.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "daemon/checkpoint/checkpoint.h"
#include "tests/daemon/federation_process_support.h"
#include "tests/daemon/site_process.h"
#include "tests/support/build_paths.h"
#include "tests/support/child_process.h"
#include "tests/support/file_contents.h"
#include "tests/support/temp_dir.h"

namespace meridian::tests::attached {

namespace fs = std::filesystem;
using meridian::tests::StartArgs;

// Debian's interpreter, which python3-torch is installed for, whatever python3 comes first on PATH.
inline const std::string kPython = "/usr/bin/python3";
inline const std::string kExample = std::string(meridian::tests::source_dir()) + "/examples/pytorch/fashion_mnist.py";
inline const std::string kCheck =
    std::string(meridian::tests::source_dir()) + "/tests/daemon/attached_trainer_check.py";

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

inline bool have_torch() { return std::system((kPython + " -c 'import numpy, torch' >/dev/null 2>&1").c_str()) == 0; }

// A trainer process with MERIDIAN_RUN_DIR set to its site's run directory; what it prints goes to a file.
class TrainerProcess {
 public:
  // `env` adds NAME=VALUE settings to its environment (a rank's RANK and WORLD_SIZE).
  TrainerProcess(const fs::path& run_dir, const fs::path& out, std::vector<std::string> args,
                 const std::vector<std::string>& env = {})
      : out_(out) {
    args.insert(args.begin(), kPython);
    args.insert(args.begin(), env.begin(), env.end());
    args.insert(args.begin(), {"/usr/bin/env", "MERIDIAN_RUN_DIR=" + run_dir.string()});
    fs::create_directories(run_dir);
    const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    process_ =
        std::make_unique<meridian::tests::ChildProcess>(args, meridian::tests::ChildStreams{.out = fd, .err = fd});
    if (fd >= 0) ::close(fd);
  }
  std::string output() const { return meridian::tests::file_contents(out_); }
  int wait_exit() { return process_->wait_exit({std::chrono::seconds(300), std::chrono::milliseconds(50)}); }
  void signal(int sig) const { process_->signal(sig); }

 private:
  fs::path out_;
  std::unique_ptr<meridian::tests::ChildProcess> process_;
};

// Sites over CurveZMQ, each `meridian start --trainer attached` with `algo`; site 0 first, the others
// joining it once it listens (after its trainer attached).
struct AttachedFederation {
  TempDir dir;
  std::vector<std::string> names;
  std::unique_ptr<SiteKeys> keys;
  std::vector<std::unique_ptr<SiteProcess>> sites;
  std::vector<std::unique_ptr<TrainerProcess>> trainers;

  explicit AttachedFederation(int count) {
    for (int i = 0; i < count; ++i) names.push_back(std::string(1, static_cast<char>('a' + i)));
    keys = std::make_unique<SiteKeys>(dir.path(), names);
    std::ofstream(dir.path() / "roster.txt") << keys->roster(names);
  }
  StartArgs args(int i, const std::string& algo) const {
    return StartArgs(names[static_cast<std::size_t>(i)])
        .secure(dir.path() / ("keys-" + names[static_cast<std::size_t>(i)]), dir.path() / "roster.txt")
        .set("--trainer", "attached")
        .set("--algo", algo)
        .site(i, static_cast<int>(names.size()))
        .set("--heartbeat-interval", "0.2")
        .set("--round-timeout", 20);
  }
  fs::path run_dir(int i) const { return dir.path() / names[static_cast<std::size_t>(i)]; }
  // Starts site i with `args` and its trainer with `trainer_args`.
  void start(int i, StartArgs site_args, const std::vector<std::string>& trainer_args) {
    if (i > 0) site_args.join(names[0] + "@" + sites[0]->endpoint(std::chrono::seconds(120)));
    sites.push_back(std::make_unique<SiteProcess>(run_dir(i), site_args.list()));
    trainers.push_back(std::make_unique<TrainerProcess>(
        run_dir(i), dir.path() / (names[static_cast<std::size_t>(i)] + ".out"), trainer_args));
  }
  std::string logs() const {
    std::string text;
    for (std::size_t i = 0; i < sites.size(); ++i)
      text += names[i] + ":\n" + sites[i]->log() + "\ntrainer:\n" + trainers[i]->output() + "\n";
    return text;
  }
  meridian::daemon::Checkpoint last_checkpoint(int i) const {
    const auto files = sites[static_cast<std::size_t>(i)]->checkpoints();
    REQUIRE_FALSE(files.empty());
    return meridian::daemon::read_checkpoint_file(files.back());
  }
};

// Whether two state_dicts torch.save wrote hold the same bits.
inline bool same_tensors(const fs::path& a, const fs::path& b) {
  const auto r = meridian::tests::run_shell(
      kPython +
      " -c 'import sys, torch; a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2]); "
      "print(\"same\" if a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a) else \"differ\")' '" +
      a.string() + "' '" + b.string() + "'");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return contains(r.output, "same");
}

// The L2 distance between two state_dicts torch.save wrote.
inline double distance(const fs::path& a, const fs::path& b) {
  const auto r =
      meridian::tests::run_shell(kPython +
                                 " -c 'import sys, torch; a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2]); "
                                 "print(sum(float((a[k] - b[k]).pow(2).sum()) for k in a) ** 0.5)' '" +
                                 a.string() + "' '" + b.string() + "'");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return std::stod(r.output);
}

// The number after "key": in the example's JSON line.
inline double json_number(const std::string& output, const std::string& key) {
  const auto at = output.find("\"" + key + "\": ");
  if (at == std::string::npos) return -1;
  return std::stod(output.substr(at + key.size() + 4));
}

}  // namespace meridian::tests::attached
