// The argument list of a `meridian start` site in a process test. It starts from what those tests
// share: the site's name, an ephemeral port on 127.0.0.1, no metrics server, one trainer thread and no
// keys (--insecure). A test then states only what differs: set() gives a flag its value, replacing the
// one already there (CLI11 refuses a repeated flag), so a list built from a shared base can be varied
// per site or per run. Flags keep the place where they were first given.
//
// The list holds neither `start` nor --run-dir: tests/daemon/site_process.h adds them. A plain value
// type; one thread uses an instance.
#pragma once

#include <algorithm>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace meridian::tests {

class StartArgs {
 public:
  explicit StartArgs(const std::string& name) {
    set("--name", name);
    on("--insecure");
    set("--listen", "tcp://127.0.0.1:0");
    set("--metrics-address", "off");
    set("--threads", 1);
  }

  // FLAG VALUE, replacing FLAG's value when FLAG is already there.
  StartArgs& set(const std::string& flag, std::string value) {
    if (auto* at = find(flag)) {
      at->second = std::move(value);
    } else {
      flags_.emplace_back(flag, std::move(value));
    }
    return *this;
  }
  StartArgs& set(const std::string& flag, const char* value) { return set(flag, std::string(value)); }
  StartArgs& set(const std::string& flag, const std::filesystem::path& value) { return set(flag, value.string()); }
  // A number as the command line reads it back (15, 0.5).
  template <typename Number>
  requires std::is_arithmetic_v<Number> StartArgs& set(const std::string& flag, Number value) {
    std::ostringstream text;
    text << value;
    return set(flag, text.str());
  }
  // FLAG alone, a switch such as --insecure; once, however often it is given.
  StartArgs& on(const std::string& flag) {
    if (find(flag) == nullptr) flags_.emplace_back(flag, std::nullopt);
    return *this;
  }
  // Without FLAG (and its value); nothing when it is not there.
  StartArgs& drop(const std::string& flag) {
    std::erase_if(flags_, [&](const auto& f) { return f.first == flag; });
    return *this;
  }

  // Site `index` of `count`: which part of the data it trains on.
  StartArgs& site(int index, int count) { return set("--site-index", index).set("--site-count", count); }
  // Trains on the CSV table `train`; evaluates on `test` when given.
  StartArgs& csv(const std::filesystem::path& train, const std::filesystem::path& test = {}) {
    set("--dataset", "csv").set("--train-csv", train);
    return test.empty() ? *this : set("--test-csv", test);
  }
  // A multilayer perceptron with one hidden layer of `width`.
  StartArgs& mlp(int width) { return set("--model", "mlp").set("--widths", width); }
  // CurveZMQ with the key pair in `key_dir` and the peers of `roster`, in place of --insecure.
  StartArgs& secure(const std::filesystem::path& key_dir, const std::filesystem::path& roster) {
    return drop("--insecure").set("--key-dir", key_dir).set("--roster", roster);
  }
  // Dials `endpoint` ("tcp://HOST:PORT" or "NAME@tcp://HOST:PORT") to join its federation.
  StartArgs& join(const std::string& endpoint) { return set("--join", endpoint); }

  // The value FLAG has, or nullopt when FLAG is absent or a switch.
  std::optional<std::string> value(const std::string& flag) const {
    const auto at = std::find_if(flags_.begin(), flags_.end(), [&](const auto& f) { return f.first == flag; });
    return at == flags_.end() ? std::nullopt : at->second;
  }

  std::vector<std::string> list() const {
    std::vector<std::string> out;
    for (const auto& [flag, value] : flags_) {
      out.push_back(flag);
      if (value) out.push_back(*value);
    }
    return out;
  }
  operator std::vector<std::string>() const { return list(); }

 private:
  std::pair<std::string, std::optional<std::string>>* find(const std::string& flag) {
    const auto at = std::find_if(flags_.begin(), flags_.end(), [&](const auto& f) { return f.first == flag; });
    return at == flags_.end() ? nullptr : &*at;
  }

  std::vector<std::pair<std::string, std::optional<std::string>>> flags_;
};

}  // namespace meridian::tests
