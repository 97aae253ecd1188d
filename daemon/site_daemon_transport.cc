#include "daemon/site_daemon_transport.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "daemon/federation/deadlines.h"
#include "error/error.h"
#include "peer/curve_keys.h"
#include "peer/in_memory_federation.h"
#include "peer/roster.h"
#include "peer/zmq/zmq_transport.h"

namespace meridian::daemon {

SiteIdentity read_site_identity(const SiteConfig& config) {
  SiteIdentity identity{peer::read_key_pair(config.key_dir), peer::Roster::load(config.roster)};
  const auto* me = identity.roster.by_name(config.name);
  if (!me) throw error::UserError("site '" + config.name + "' is not in the roster " + config.roster);
  if (me->public_key != identity.keys.public_key)
    throw error::UserError("the roster " + config.roster + " lists another public key for site '" + config.name +
                           "' than the key pair in " + config.key_dir + " (" + identity.keys.public_key + ")");
  return identity;
}

std::unique_ptr<peer::FederationTransport> make_zmq_transport(const SiteTransportSpec& spec) {
  const SiteSettings& settings = spec.settings;
  const SiteConfig& config = settings.options;
  peer::ZmqTransportOptions o;
  o.name = config.name;
  o.listen = config.listen;
  o.advertise = config.advertise;
  o.region = config.region;
  o.wan = settings.wan;
  o.wan_seed = config.seed;
  o.view_lead_rounds = spec.view_lead_rounds;
  o.agree_pace = spec.agree_pace;
  o.hearsay_view_interval = hearsay_view_interval(config);
  o.partitions = settings.wan_partition;
  const auto& origin = settings.wan_partition_origin;
  if (origin.kind == PartitionOrigin::Kind::kUnixTime)
    o.partition_origin =
        std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::duration<double>(origin.unix_seconds)));
  o.partition_clock_deferred = origin.kind == PartitionOrigin::Kind::kTraining;
  o.bootstrap = config.join;
  o.insecure = config.insecure;
  o.heartbeat_interval = heartbeat_milliseconds(config.heartbeat_interval);
  o.heartbeat_timeout = heartbeat_timeout_bound(config);
  o.heartbeat_deadline = spec.heartbeat_deadline;
  o.max_send_bits_per_s = settings.max_send_bits_per_s;
  if (!config.insecure) {
    auto identity = spec.identity ? *spec.identity : read_site_identity(config);
    o.keys = std::move(identity.keys);
    o.roster = std::move(identity.roster);
  }
  o.validation = spec.validation;
  o.terms = spec.terms;
  o.limits = spec.limits;
  // Push-sum mass starts at one per site and is only split, never created, so no honest share can
  // exceed the number of sites the roster lets in; twice that leaves room for mass a restarted site
  // brings back from its checkpoint. A larger weight would let one share outweigh the whole
  // federation. (Insecure mode has no roster, and anyone may join: the wide default stays.)
  if (o.roster)
    o.validation.max_weight = 2.0 * static_cast<double>(std::max<std::size_t>(o.roster->entries().size(), 1));
  auto transport = std::make_unique<peer::ZmqTransport>(std::move(o));
  spdlog::info("site {} listening on {} ({})", config.name, transport->endpoint(),
               config.insecure ? "INSECURE: no encryption, no authentication" : "CurveZMQ, roster " + config.roster);
  return transport;
}

TransportFactory in_memory_transport(std::shared_ptr<peer::InMemoryNetwork> network,
                                     std::vector<std::string> bootstrap) {
  return [network = std::move(network), bootstrap = std::move(bootstrap)](
             const SiteTransportSpec& spec) -> std::unique_ptr<peer::FederationTransport> {
    const SiteConfig& config = spec.settings.options;
    peer::InMemoryFederationOptions o;
    o.name = config.name;
    o.region = config.region;
    o.bootstrap = bootstrap;
    o.heartbeat_interval = heartbeat_milliseconds(config.heartbeat_interval);
    o.heartbeat_timeout = heartbeat_timeout_bound(config);
    o.heartbeat_deadline = spec.heartbeat_deadline;
    o.view_lead_rounds = spec.view_lead_rounds;
    o.agree_pace = spec.agree_pace;
    o.hearsay_view_interval = hearsay_view_interval(config);
    o.terms = spec.terms;
    o.validation = spec.validation;
    auto transport = std::make_unique<peer::InMemoryFederation>(network, std::move(o));
    spdlog::info("site {} on the in-memory network as {}", config.name, transport->endpoint());
    return transport;
  };
}

}  // namespace meridian::daemon
