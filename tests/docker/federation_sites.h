// Test helper: the demo federation's sites as docker/sites/*.toml define them (the files compose.yml
// mounts), so the namespace test runs exactly the compose file's sites and cannot drift from it.
#pragma once

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "daemon/site_config.h"
#include "tests/support/build_paths.h"

namespace meridian::tests {

struct FederationSite {
  std::filesystem::path file;  // docker/sites/NAME.toml
  daemon::SiteConfig config;   // as `meridian start --config FILE` reads it
  std::string host;            // the IPv4 address of config.listen
};

// "tcp://HOST:PORT" -> HOST; throws when `address` has another shape.
inline std::string tcp_host(const std::string& address) {
  const std::string scheme = "tcp://";
  const auto colon = address.rfind(':');
  if (address.rfind(scheme, 0) != 0 || colon == std::string::npos || colon < scheme.size())
    throw std::runtime_error("'" + address + "' is not tcp://HOST:PORT");
  return address.substr(scheme.size(), colon - scheme.size());
}

// Every docker/sites/*.toml, in site-index order. Throws naming the file when one does not read back.
inline std::vector<FederationSite> load_federation_sites() {
  const std::filesystem::path dir = std::filesystem::path(meridian::tests::source_dir()) / "docker" / "sites";
  std::vector<FederationSite> sites;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".toml") continue;
    FederationSite site;
    site.file = entry.path();
    site.config = daemon::read_site_config_file(entry.path().string());
    site.host = tcp_host(site.config.listen);
    sites.push_back(std::move(site));
  }
  std::sort(sites.begin(), sites.end(),
            [](const FederationSite& a, const FederationSite& b) { return a.config.site_index < b.config.site_index; });
  return sites;
}

}  // namespace meridian::tests
