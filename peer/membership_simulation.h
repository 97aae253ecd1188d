// A discrete-event simulation of the membership protocol: n sites, each the real MembershipDriver
// and Membership state machine (peer/membership_driver.h, peer/membership.h), exchange the real
// encoded membership messages over a simulated network on a virtual clock (nothing sleeps, no wall
// clock is read for the protocol's time). It measures what the protocol costs and how it behaves as
// n grows:
//
//   1. a join wave: every site starts within `start_spread` and greets the first `bootstraps` sites;
//      the wave ends when every site holds, in force, a view with all n sites;
//   2. a steady window: per-site membership traffic, counted as the sizes of the header frames the
//      wire codec makes for each message (peer/wire_codec.h encode_message; a membership message is
//      one frame, its body inside), and the CPU time the driver takes;
//   3. a crash of `crash_fraction` of the sites (at least one) at once: when each live site declares
//      each crashed site dead, and when every live site holds, in force, a view without them.
//
// Deaths of sites that did not crash are counted over the whole run as false deaths (the protocol has
// no "suspected" state: a site is alive or declared dead by its own timeout).
//
// The network: each site lies in a region of `wan` (site i in region i % regions, as in `meridian
// simulate`); a message takes that link's latency ± its jitter, and a link delivers in order (a
// connection). With probability `loss` a message is lost on its link: under kRetransmit (what TCP,
// which carries membership, does) it arrives `retransmit_timeout` later for each loss, holding back
// the messages behind it; under kDrop it never arrives. The WanModel's own loss and bandwidth are not
// used. The port behaves as the ZeroMQ transport's (peer/zmq/zmq_membership_port.cc): a message to a site
// without a connection opens one that starts with a hello, a dead, left or restarted member's
// connection closes, a bootstrap connection becomes the member's. Senders are named truly, as CURVE
// names them. Sites run no training rounds (their reported round stays 0).
//
// Deterministic for one seed except for the driver's own choice of anti-entropy targets, which it
// draws from its own random device.
//
// Thread-safety: simulate_membership() holds no shared state; it may run on several threads at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "peer/view.h"
#include "peer/wan_model.h"

namespace meridian::peer {

enum class SimulatedLoss {
  kRetransmit,  // a lost message arrives a retransmission timeout later, in order (TCP)
  kDrop,        // a lost message never arrives (datagrams)
};

struct MembershipSimulationOptions {
  std::size_t sites = 16;
  std::uint64_t seed = 1;
  std::chrono::milliseconds heartbeat_interval{500};
  std::chrono::milliseconds heartbeat_timeout{3000};
  WanModel wan = WanModel::world4();  // latency and jitter per pair of regions
  double loss = 0;                    // per message, in [0, 1)
  SimulatedLoss loss_kind = SimulatedLoss::kRetransmit;
  std::chrono::milliseconds retransmit_timeout{200};  // Linux's minimum TCP retransmission timeout
  std::size_t bootstraps = 1;                         // every site greets sites 0 .. bootstraps - 1
  std::chrono::milliseconds start_spread{100};        // start times are uniform in [0, start_spread)
  std::chrono::seconds join_limit{120};               // the wave counts as not converged after this
  std::chrono::seconds settle{5};                     // after the wave, before the steady window
  std::chrono::seconds steady{10};                    // the window traffic and CPU are measured over
  double crash_fraction = 0.01;                       // of the sites, rounded, at least one; 0: none
  std::chrono::seconds after_crash{20};               // simulated after the crash
};

struct MembershipSimulationReport {
  std::size_t sites = 0;
  std::vector<std::string> crashed;  // names of the sites crashed after the steady window

  // Join wave, from the first start. nullopt: not converged within join_limit.
  std::optional<std::chrono::microseconds> join_time;
  std::uint64_t join_view_id = 0;  // the view all sites first hold in force: views the wave took

  // Steady window, per site, bytes and messages sent per second (heartbeats, member lists, hellos).
  double bytes_per_s_mean = 0, bytes_per_s_max = 0;
  double heartbeat_bytes_per_s_mean = 0, members_bytes_per_s_mean = 0;
  double messages_per_s_mean = 0;
  std::size_t largest_member_list_bytes = 0;  // one member list frame (the whole table and views)
  // CPU time inside the driver (the state machine, encoding and decoding bodies), per site, as a
  // fraction of one core of the machine that ran the simulation.
  double driver_cpu_share_mean = 0;

  // Crash: from the crash to each live site's own declaration of death, over (live site, crashed
  // site) pairs; nullopt when no pair was declared.
  std::optional<std::chrono::microseconds> detect_first, detect_mean, detect_last;
  std::size_t detections_missing = 0;  // pairs never declared within after_crash
  // From the crash until every live site holds in force a view of exactly the live sites.
  std::optional<std::chrono::microseconds> new_view_everywhere;
  std::uint64_t crash_view_id = 0;  // that view's id (the last live site's, when they differ)

  std::size_t false_deaths = 0;  // a site that had not crashed declared dead, any time, any observer
  std::size_t refutations = 0;   // incarnations raised to refute a death, over all sites
  // Each live site's newest view in force at the end, in site order.
  std::vector<View> final_views;

  std::chrono::microseconds simulated{0};
  std::uint64_t messages = 0;  // delivered or lost, whole run
};

// One site's membership traffic in a steady federation of `sites`, computed rather than simulated: the
// driver's schedule with nothing changing (each heartbeat interval a heartbeat to every other member
// and the member list to one of them) times the sizes the wire codec gives those messages, with the
// names, addresses and regions the simulation uses and `views` views of all sites in the list (the
// driver gossips the newest 8). For sizes too large to simulate; the simulation's steady window
// measures the same schedule at the sizes it runs. Throws error::UserError for sites < 2.
struct SteadyMembershipTraffic {
  std::size_t heartbeat_bytes = 0;    // one heartbeat frame
  std::size_t member_list_bytes = 0;  // one member list frame
  double bytes_per_s = 0;             // sent by one site
};
SteadyMembershipTraffic steady_membership_traffic(std::size_t sites, std::size_t views,
                                                  const MembershipSimulationOptions& options);

// Runs the scenario above. Throws error::UserError for sites < 2, bootstraps outside [1, sites],
// loss outside [0, 1), or a heartbeat timeout not above the interval.
MembershipSimulationReport simulate_membership(const MembershipSimulationOptions& options);

}  // namespace meridian::peer
