#include "cli/site_options.h"

namespace meridian::cli {

daemon::SiteSettings configure_site(CLI::App& app, daemon::SiteConfig& config,
                                    const std::function<void(daemon::SiteConfig&)>& complete) {
  daemon::apply_site_config_file(app, config);
  daemon::apply_algorithm_defaults(app, config);
  if (complete) complete(config);
  return daemon::settings_of(config);
}

}  // namespace meridian::cli
