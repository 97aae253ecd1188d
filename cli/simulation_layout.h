// Where a simulation keeps its files, and the per-site settings it derives from the shared ones.
//   OUT/roster.txt                     the federation's roster (secure runs)
//   OUT/keys/<site>/                   each site's CurveZMQ key pair (secure runs)
//   OUT/<algo>/<site>/site.toml        the site's full configuration (`meridian start --config` it)
//   OUT/<algo>/<site>/log.txt          everything the site printed
//   OUT/<algo>/<site>/progress.jsonl   its evaluations; result.json and checkpoints/ at the end
// With --trainer-command, each site is attached (`meridian start --trainer attached`) and the
// command runs beside it, as `sh -c COMMAND` in simulate's working directory, with
// MERIDIAN_RUN_DIR (the site's run directory, where the Python package attaches),
// MERIDIAN_SITE_INDEX (0 .. N-1) and MERIDIAN_SITE_COUNT (N) in its environment:
//   OUT/<algo>/<site>/trainer.txt              everything the trainer printed
//   OUT/<algo>/<site>/trainer-progress.jsonl   the trainer's evaluations (meridian.Site.report), in
//                                              progress.jsonl's format
// Sites are named site-0 .. site-(N-1); site i is in region i mod 4 under world4.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/simulation_options.h"
#include "daemon/site_config.h"

namespace meridian::cli {

// Creates OUT/keys/<site>/ for every site (keeping key pairs that already exist there, so a rerun
// into the same directory keeps its identities) and writes OUT/roster.txt listing them. Returns the
// roster's path. Throws error::UserError naming the file on failure.
std::filesystem::path create_simulation_identities(const std::filesystem::path& out_dir, int sites);

// One site of one algorithm's run, ready to start.
struct SiteLaunch {
  std::string name;
  std::filesystem::path run_dir;
  std::filesystem::path log_file;
  daemon::SiteConfig config;
  std::vector<std::string> arguments;  // for the meridian binary: start --config OUT/<algo>/<site>/site.toml
  // With --trainer-command: the trainer's program and arguments (the command under `sh -c`, with its
  // environment), its log, and the file of its evaluations. Empty program: the site trains itself.
  std::filesystem::path trainer_program;
  std::vector<std::string> trainer_arguments;
  std::filesystem::path trainer_log_file;
  std::filesystem::path trainer_evaluations;
};

// The configuration of every site for `algo` (an --algo entry, knobs included; throws
// error::UserError for one that simulation_problems would report): `ports[i]` is site i's listening port on
// 127.0.0.1, and each site bootstraps from all the others. `out_dir` must be absolute (the sites may not share the
// caller's working directory forever). Pure: creates nothing.
std::vector<SiteLaunch> plan_algorithm_sites(const SimulationOptions& options, const std::string& algo,
                                             const std::filesystem::path& out_dir,
                                             const std::vector<std::uint16_t>& ports);

// Replaces OUT/<algo>/ with fresh site directories holding each site's site.toml. Throws
// error::UserError naming the path on failure.
void prepare_site_directories(const std::vector<SiteLaunch>& sites);

}  // namespace meridian::cli
