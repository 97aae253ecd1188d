// Test helper: a private network of Linux network namespaces, built with iproute2. A hub namespace
// holds a bridge; every site gets its own namespace, joined to the bridge by a veth pair, with one
// address and its own loopback. Nothing is created in the caller's namespace: the veth pairs are created
// inside the hub and moved straight into the sites, so traffic between the sites never reaches the host's
// interfaces, routes or firewall.
//
// Ownership: the destructor kills every process left in the namespaces and deletes them (which deletes
// the veth pairs and the bridge with them), also when a test fails half-way. Namespaces are named
// "mrdn-PID-..." after the test process; the constructor deletes those of test processes that no longer
// run (a test killed with SIGKILL cannot clean up after itself).
// Needs root or CAP_NET_ADMIN + CAP_SYS_ADMIN; `unavailable_reason()` says why it cannot be built here.
// Not thread-safe: one thread builds and tears down a network.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/support/child_process.h"

namespace meridian::tests {

class NamespaceNetwork {
 public:
  // Creates the hub namespace with its bridge. Throws std::runtime_error with iproute2's message when
  // that is not possible (see unavailable_reason()).
  NamespaceNetwork() : prefix_("mrdn-" + std::to_string(::getpid()) + "-") {
    remove_stale_namespaces();
    hub_ = prefix_ + "hub";
    add_namespace(hub_);
    ip({"-n", hub_, "link", "add", "br0", "type", "bridge"});
    ip({"-n", hub_, "link", "set", "br0", "up"});
  }

  ~NamespaceNetwork() {
    // Sites first: their processes, then the namespaces. Errors are ignored: this is best effort and
    // must not throw from a destructor.
    for (auto it = namespaces_.rbegin(); it != namespaces_.rend(); ++it) {
      kill_processes_in(*it);
      tests::run_command({"ip", "netns", "delete", *it});
    }
  }

  NamespaceNetwork(const NamespaceNetwork&) = delete;
  NamespaceNetwork& operator=(const NamespaceNetwork&) = delete;

  // Why no network can be built here (not root, no CAP_NET_ADMIN, no iproute2, no veth or bridge in the
  // kernel), or nullopt when a trial network comes up and goes away again.
  static std::optional<std::string> unavailable_reason() {
    try {
      NamespaceNetwork trial;
      trial.add_site("probe", "192.0.2.1/24");
      return std::nullopt;
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
  }

  // Adds namespace PREFIX+name with interface eth0 at `address_cidr` (e.g. "172.31.74.11/24") on the
  // bridge, and its loopback up (control sockets, metrics on 127.0.0.1). Returns the namespace's name.
  std::string add_site(const std::string& name, const std::string& address_cidr) {
    const std::string ns = prefix_ + name;
    // Interface names are at most 15 characters; the hub's end is named after the site's index.
    // (Appended, not "v" + to_string(...): GCC 12 reports a false -Wrestrict on that expression.)
    std::string hub_end = "v";
    hub_end += std::to_string(namespaces_.size());
    add_namespace(ns);
    ip({"-n", hub_, "link", "add", hub_end, "type", "veth", "peer", "name", "eth0", "netns", ns});
    ip({"-n", hub_, "link", "set", hub_end, "master", "br0"});
    ip({"-n", hub_, "link", "set", hub_end, "up"});
    ip({"-n", ns, "addr", "add", address_cidr, "dev", "eth0"});
    ip({"-n", ns, "link", "set", "eth0", "up"});
    ip({"-n", ns, "link", "set", "lo", "up"});
    return ns;
  }

  // The argv prefix that runs a program inside namespace `ns`.
  static std::vector<std::string> exec_in(const std::string& ns) { return {"ip", "netns", "exec", ns}; }

  const std::string& prefix() const { return prefix_; }
  const std::vector<std::string>& namespaces() const { return namespaces_; }

 private:
  static void ip(std::vector<std::string> args) {
    args.insert(args.begin(), "ip");
    const auto r = tests::run_command(args);
    if (r.exit_code != 0) {
      std::string command;
      for (const auto& a : args) command += (command.empty() ? "" : " ") + a;
      auto message = r.output;
      while (!message.empty() && message.back() == '\n') message.pop_back();
      throw std::runtime_error("'" + command + "' failed (exit " + std::to_string(r.exit_code) + "): " + message);
    }
  }

  void add_namespace(const std::string& ns) {
    ip({"netns", "add", ns});
    namespaces_.push_back(ns);
  }

  static void kill_processes_in(const std::string& ns) {
    const auto r = tests::run_command({"ip", "netns", "pids", ns});
    std::size_t pos = 0;
    while (pos < r.output.size()) {
      const auto end = r.output.find('\n', pos);
      const auto line = r.output.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
      if (!line.empty() && line.find_first_not_of("0123456789") == std::string::npos) {
        const pid_t pid = static_cast<pid_t>(std::stol(line));
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, WNOHANG);  // reaps our own children; others are reaped by their parents
      }
      if (end == std::string::npos) break;
      pos = end + 1;
    }
  }

  // Namespaces "mrdn-PID-..." whose PID no longer runs were left by a test that was killed.
  static void remove_stale_namespaces() {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/run/netns", ec)) {
      const auto name = entry.path().filename().string();
      if (name.rfind("mrdn-", 0) != 0) continue;
      const auto dash = name.find('-', 5);
      if (dash == std::string::npos) continue;
      const auto pid_text = name.substr(5, dash - 5);
      if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
      if (::kill(static_cast<pid_t>(std::stol(pid_text)), 0) == 0 || errno != ESRCH) continue;
      kill_processes_in(name);
      tests::run_command({"ip", "netns", "delete", name});
    }
  }

  std::string prefix_;
  std::string hub_;
  std::vector<std::string> namespaces_;  // in creation order, the hub first
};

}  // namespace meridian::tests
