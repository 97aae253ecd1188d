// The view a site's round runs in, once the view the round awaits has come into force.
//
// A view that changes the members comes into force at a site only once every other member holds it
// (peer/membership.h), and the members see that one or two gossip hops apart. Rounds the view's
// proposer or an old member ran in the view before it meanwhile would leave out the site it takes in,
// which starts at its effective round: so round k waits until the view it awaits
// (FederationTransport::view_awaited) is in force, and then runs in it, as every member does. The
// members' lists cross within a heartbeat interval or so; the wait is bounded all the same (once per
// view): a view still not in force then (a member never takes it, gossip far slower than the bound)
// is given up for this site's rounds, logged and counted, and round k and the ones after it run in the
// view in force, as they would on a member that does not hold the new view. The bound is below the
// round timeout, so such a member's round in the older view still finishes with this site.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "daemon/metrics/metrics_registry.h"
#include "peer/federation_transport.h"

namespace meridian::daemon {

// Thread-safety: none (one trainer thread). Does not own the transport, which must outlive it.
class RoundView {
 public:
  // `bound`: how long one view is waited for at most; `given_up` counts the waits that ran out.
  RoundView(const peer::FederationTransport& transport, std::chrono::milliseconds bound, Counter& given_up)
      : transport_(transport), bound_(bound), given_up_(given_up) {}

  // The view to run round `k` in (transport.view_for(k), after the wait above). Returns at once, with
  // the view in force then, when `stop` is set.
  peer::View for_round(std::uint64_t k, const std::atomic<bool>& stop);

 private:
  const peer::FederationTransport& transport_;
  std::chrono::milliseconds bound_;
  Counter& given_up_;
  std::uint64_t waited_through_ = 0;  // views with ids up to this one were waited for already
};

}  // namespace meridian::daemon
