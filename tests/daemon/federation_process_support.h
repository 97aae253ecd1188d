// Test helper for the federation view and roster tests: a small CSV table, key pairs and a roster
// file per site, and the arguments of a `meridian start` site that trains on the table until stopped.
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "peer/curve_keys.h"
#include "tests/support/start_args.h"

namespace meridian::tests {

// A small CSV table (two features, a text label): the sites load it in milliseconds.
inline std::filesystem::path write_small_table(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  const auto file = dir / "table.csv";
  std::ofstream out(file);
  out << "x,y,label\n";
  for (int i = 0; i < 96; ++i) out << i % 7 << "," << (i * 3) % 5 << "," << (i % 7 < 3 ? "cat" : "dog") << "\n";
  return file;
}

// `meridian start` arguments for site `name` (index `index` of `count`) training on `table` until
// stopped: a step evaluation every 20 steps, heartbeats every 0.2 s, metrics on a free port; without
// keys unless secure() gives them.
inline tests::StartArgs training_site_args(const std::string& name, int index, int count,
                                           const std::filesystem::path& table) {
  return tests::StartArgs(name)
      .set("--metrics-address", "127.0.0.1:0")
      .site(index, count)
      .csv(table, table)
      .mlp(8)
      .set("--algo", "sgp")
      .set("--epochs", 100000)
      .set("--batch", 8)
      .set("--eval-every", 20)
      .set("--seed", 3)
      .set("--heartbeat-interval", "0.2")
      .set("--round-timeout", 5)
      .set("--join-timeout", 600);
}

// Key pairs under DIR/keys-NAME, for `--key-dir`.
struct SiteKeys {
  std::map<std::string, peer::CurveKeyPair> of;
  SiteKeys(const std::filesystem::path& dir, const std::vector<std::string>& names) {
    for (const auto& n : names) {
      of[n] = peer::generate_curve_key_pair();
      peer::write_key_pair(of[n], dir / ("keys-" + n));
    }
  }
  // Roster text listing `names`, after a comment line.
  std::string roster(const std::vector<std::string>& names) const {
    std::string text = "# test federation\n";
    for (const auto& n : names) text += n + " " + of.at(n).public_key + "\n";
    return text;
  }
};

// The port of the metrics server a site logged ("metrics on http://127.0.0.1:PORT/metrics"), or 0.
inline int metrics_port(const std::string& log) {
  std::smatch m;
  if (!std::regex_search(log, m, std::regex("metrics on http://127\\.0\\.0\\.1:([0-9]+)/metrics"))) return 0;
  return std::stoi(m[1]);
}

}  // namespace meridian::tests
