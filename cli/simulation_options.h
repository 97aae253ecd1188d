// What `meridian simulate` was asked to do: how many sites, which algorithms, and the settings every
// site shares (a daemon::SiteConfig: model, data, optimizer, algorithm knobs, WAN).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "cli/unpacked_idx_cache.h"
#include "daemon/site_config.h"

namespace meridian::cli {

struct SimulationOptions {
  int sites = 4;
  std::vector<std::string> algos;  // run one after the other, in this order; ALGO[:KNOB=VALUE]... (algorithm_variant.h)
  // Shared by every site; simulate fills in what differs per site (name, listen, join, keys, roster,
  // run-dir, site-index, site-count, region, threads, metrics address) and, per run, the algorithm.
  daemon::SiteConfig site;
  // Each site's own training data (--site-train, one path per site, in site order) instead of parts of
  // one dataset split by --partition; empty: site.train or site.dataset is split.
  std::vector<std::string> site_train;
  // The options given on simulate's command line, by long name without "--": an algorithm picks its own
  // value for a knob given neither there nor in its --algo entry (daemon::apply_algorithm_defaults; dts
  // without --delay or --period runs its default shape).
  std::vector<std::string> given;
  bool was_given(std::string_view option) const;
  int threads_per_site = 1;
  int eval_every = 50;            // steps between test evaluations of every site (curves, time to target)
  double target_accuracy = 0.8;   // fraction in (0, 1)
  bool stop_at_target = false;    // stop an algorithm's sites once every one has reached target_accuracy
  double timeout_seconds = 1800;  // per algorithm: sites still running then are stopped, the run fails
  std::filesystem::path out_dir = "meridian-simulation";
  bool json = false;
  // Fault injection: site index whose contributions are garbage (its site.toml gets byzantine-scale =
  // byzantine_scale); -1 = every site honest. Its own accuracy is reported but means little.
  int byzantine_site = -1;
  double byzantine_scale = 100.0;
  std::filesystem::path program = "/proc/self/exe";  // the `meridian` binary the sites run
  // The user's own training command (`sh -c` text): each site is then `meridian start --trainer
  // attached`, with this command run beside it as its trainer (simulation_layout.h); empty: the sites
  // train the built-in model themselves.
  std::string trainer_command;
  // Where the gzip IDX files are unpacked once for all sites (cli/unpacked_idx_cache.h); "none" makes
  // every site inflate them itself.
  std::filesystem::path data_cache = default_cache_root();
};

// Every problem with `options`, each "--option: problem (hint)", including those of the shared site
// configuration for each algorithm (daemon::site_config_problems); empty when valid.
std::vector<std::string> simulation_problems(const SimulationOptions& options);

// "allreduce,sgp" -> {"allreduce", "sgp"} (spaces around names are dropped; empty parts are kept as
// "" so that simulation_problems reports them).
std::vector<std::string> split_algorithm_list(const std::string& text);

// Site i's name: "site-<i>".
std::string simulated_site_name(int index);
// Site i's region under `wan`: region i mod R of a WAN with R > 1 regions (world4: oregon, ohio,
// london, tokyo, oregon, ...), "" for a WAN without regions or a --wan that does not parse.
std::string simulated_site_region(const std::string& wan, int index);

}  // namespace meridian::cli
