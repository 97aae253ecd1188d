#include "cli/simulation_layout.h"

#include <unistd.h>

#include <fstream>
#include <stdexcept>
#include <system_error>

#include "cli/algorithm_variant.h"
#include "error/error.h"
#include "peer/curve_keys.h"
#include "peer/roster.h"

namespace meridian::cli {
namespace fs = std::filesystem;

fs::path create_simulation_identities(const fs::path& out_dir, int sites) {
  peer::Roster roster;
  for (int i = 0; i < sites; ++i) {
    const std::string name = simulated_site_name(i);
    const fs::path dir = out_dir / "keys" / name;
    peer::CurveKeyPair keys;
    if (fs::exists(dir / "secret.key")) {
      keys = peer::read_key_pair(dir);
    } else {
      keys = peer::generate_curve_key_pair();
      peer::write_key_pair(keys, dir);
    }
    roster.add({name, keys.public_key, ""});
  }
  const fs::path file = out_dir / "roster.txt";
  std::ofstream out(file, std::ios::trunc);
  out << "# The sites of this simulation (written by meridian simulate).\n" << roster.to_text();
  out.close();
  if (!out) throw error::UserError("cannot write " + file.string());
  return file;
}

std::vector<SiteLaunch> plan_algorithm_sites(const SimulationOptions& options, const std::string& algo,
                                             const fs::path& out_dir, const std::vector<std::uint16_t>& ports) {
  std::vector<SiteLaunch> sites;
  const auto address = [&](int i) {
    return "tcp://127.0.0.1:" + std::to_string(ports.at(static_cast<std::size_t>(i)));
  };
  for (int i = 0; i < options.sites; ++i) {
    SiteLaunch s;
    s.name = simulated_site_name(i);
    s.run_dir = out_dir / algo / s.name;
    s.log_file = s.run_dir / "log.txt";
    daemon::SiteConfig& c = s.config;
    c = options.site;
    c.name = s.name;
    const AlgorithmVariantParse parsed = parse_algorithm_variant(algo);
    if (!parsed.error.empty()) throw error::UserError(parsed.error);
    if (auto problem =
            apply_algorithm_variant(parsed.variant, c, [&options](std::string_view n) { return options.was_given(n); }))
      throw error::UserError(*problem);
    c.listen = address(i);
    c.join.clear();
    // Every other site as a bootstrap: no site is special, and a slow starter delays nobody.
    for (int j = 0; j < options.sites; ++j)
      if (j != i) c.join.push_back(simulated_site_name(j) + "@" + address(j));
    c.run_dir = s.run_dir.string();
    if (!c.insecure) {
      c.key_dir = (out_dir / "keys" / s.name).string();
      c.roster = (out_dir / "roster.txt").string();
    }
    c.site_index = i;
    c.site_count = options.sites;
    if (!options.site_train.empty()) {
      // Its own data, whole: no split; the run still waits for every site before training.
      c.train = fs::absolute(options.site_train[static_cast<std::size_t>(i)]).string();
      c.site_index = 0;
      c.site_count = 1;
      c.min_sites = options.sites;
    }
    c.region = simulated_site_region(c.wan, i);
    c.threads = options.threads_per_site;
    // Many sites on one host cannot share the default metrics port; the simulation reads progress.jsonl.
    c.metrics_address = "off";
    c.checkpoint_dir.clear();
    c.control_socket.clear();
    // A Unix socket path must fit in 108 bytes; deep output directories get a short path in a
    // directory of their own under /tmp (a control socket's directory must be private).
    if ((s.run_dir / "control.sock").string().size() > 100)
      c.control_socket =
          "/tmp/meridian-sim-" + std::to_string(::getpid()) + "/" + algo + "-" + std::to_string(i) + ".sock";
    c.eval_every = options.eval_every;
    c.byzantine_scale = i == options.byzantine_site ? options.byzantine_scale : 0.0;
    s.arguments = {"start", "--config", (s.run_dir / "site.toml").string()};
    if (!options.trainer_command.empty()) {
      c.trainer = "attached";
      s.trainer_program = "/usr/bin/env";
      s.trainer_arguments = {"MERIDIAN_RUN_DIR=" + s.run_dir.string(),
                             "MERIDIAN_SITE_INDEX=" + std::to_string(i),
                             "MERIDIAN_SITE_COUNT=" + std::to_string(options.sites),
                             "/bin/sh",
                             "-c",
                             options.trainer_command};
      s.trainer_log_file = s.run_dir / "trainer.txt";
      s.trainer_evaluations = s.run_dir / "trainer-progress.jsonl";
    }
    sites.push_back(std::move(s));
  }
  return sites;
}

void prepare_site_directories(const std::vector<SiteLaunch>& sites) {
  if (sites.empty()) return;
  std::error_code ec;
  const fs::path algo_dir = sites.front().run_dir.parent_path();
  fs::remove_all(algo_dir, ec);
  if (ec) throw error::UserError("cannot clear " + algo_dir.string() + ": " + ec.message());
  for (const auto& s : sites) {
    fs::create_directories(s.run_dir, ec);
    if (ec) throw error::UserError("cannot create " + s.run_dir.string() + ": " + ec.message());
    const fs::path file = s.run_dir / "site.toml";
    std::ofstream out(file, std::ios::trunc);
    // The file's relative paths count from its folder (daemon/site_config.h).
    out << daemon::render_site_config(daemon::rebase_site_paths(s.config, {}, s.run_dir));
    out.close();
    if (!out) throw error::UserError("cannot write " + file.string());
  }
}

}  // namespace meridian::cli
