// The one way `meridian start` and `meridian init` turn their command line into a site's configuration:
// flags bound to a SiteConfig (daemon::bind_site_options), parsed by CLI11, then the config file's values
// for what the command line left out, then the algorithm's defaults for the knobs given neither way, then
// the checks.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

#include "daemon/site_config.h"

namespace meridian::cli {

// In the callback of a command whose options daemon::bind_site_options bound to `config`, after CLI11
// parsed them: applies --config FILE (daemon::apply_site_config_file) and the algorithm's defaults
// (daemon::apply_algorithm_defaults), then `complete` (what the command fills in itself, such as init's
// name from the host; may be empty), then returns the validated settings. Throws
// daemon::SiteConfigError naming the file and key, or listing every problem of the configuration.
daemon::SiteSettings configure_site(CLI::App& app, daemon::SiteConfig& config,
                                    const std::function<void(daemon::SiteConfig&)>& complete = {});

}  // namespace meridian::cli
