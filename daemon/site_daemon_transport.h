// The transport a site daemon runs on (daemon/site_daemon.h). The daemon sees its federation only
// through peer::FederationTransport; which implementation carries it is the factory's choice:
// `meridian start` runs on ZeroMQ over TCP (make_zmq_transport), while in-process tests and simulations
// hand the daemon a factory that joins the in-memory network (in_memory_transport).
//
// The daemon calls the factory once, on run()'s thread, after it has loaded the data and built the model
// and before any other thread starts; the spec (and the settings it points to) lives only for that call.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/site_config.h"
#include "peer/adaptive_deadline.h"
#include "peer/federation_terms.h"
#include "peer/federation_transport.h"
#include "peer/in_memory_transport.h"
#include "peer/curve_keys.h"
#include "peer/roster.h"
#include "peer/message_validator.h"
#include "peer/wire_codec.h"

namespace meridian::daemon {

// A secure site's CurveZMQ identity: its key pair (--key-dir) and the federation's roster (--roster).
struct SiteIdentity {
  peer::CurveKeyPair keys;
  peer::Roster roster;
};

// Reads the key pair and the roster and checks that the roster lists this site with that public key.
// Throws error::UserError naming the file, or the site and the roster, on any problem.
SiteIdentity read_site_identity(const SiteConfig& config);

// What a site's transport must know, worked out from the site's settings, model and data.
struct SiteTransportSpec {
  explicit SiteTransportSpec(const SiteSettings& s) : settings(s) {}

  // The whole configuration: name, region, --join, heartbeats; for ZeroMQ also --listen, --advertise,
  // security, WAN emulation and partitions.
  const SiteSettings& settings;
  // Membership's least distance between views: a view change acts a few rounds after it takes effect
  // (dts: after D steps at the next window start; dsync: D steps later), and the next view must not
  // come before that (peer/membership.h).
  std::uint64_t view_lead_rounds = 8;
  // Views carry the federation's pace for a shape chosen from the network (peer/membership.h).
  bool agree_pace = false;
  // Refused at join when they differ from a peer's (daemon/federation/federation_terms.h).
  peer::FederationTerms terms;
  // What every incoming mixer message must match: the model's wire fingerprint and the tensor lengths
  // this algorithm sends. The weight cap depends on the roster, which only the ZeroMQ transport reads.
  peer::ValidationPolicy validation;
  // The largest tensor a peer may send (caps what the network buffers).
  peer::WireLimits limits;
  // A secure site's identity, read before the data so that a missing key fails at once; nullopt: the
  // ZeroMQ factory reads it itself.
  std::optional<SiteIdentity> identity;
  // --heartbeat-timeout auto: the measured timeout the transport's membership follows (daemon/federation/deadlines.h);
  // null for a given timeout.
  std::shared_ptr<peer::AdaptiveDeadline> heartbeat_deadline;
};

// Makes the site's transport; throws (naming the cause) when it cannot, e.g. an address in use.
using TransportFactory = std::function<std::unique_ptr<peer::FederationTransport>(const SiteTransportSpec&)>;

// The transport of `meridian start`: peer::ZmqTransport listening on --listen, CurveZMQ with the key pair
// in --key-dir and the roster --roster unless --insecure, with the WAN emulation and partitions of the
// settings. Logs the address it listens on. Throws for unreadable keys or roster and for an address that
// cannot be bound.
std::unique_ptr<peer::FederationTransport> make_zmq_transport(const SiteTransportSpec& spec);

// A factory that joins `network` as the site's peer::InMemoryFederation, greeting the sites named in
// `bootstrap` first: the site's name, --region, heartbeats, view lead and terms as on TCP. --join holds
// TCP addresses and is not read; nothing of --listen, security or WAN emulation applies, and mixer
// messages are not validated. For several daemons in one process (tests, simulation).
TransportFactory in_memory_transport(std::shared_ptr<peer::InMemoryNetwork> network,
                                     std::vector<std::string> bootstrap = {});

}  // namespace meridian::daemon
