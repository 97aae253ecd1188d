// The membership protocol's messages as plain structs. They travel in Message::body of the
// membership kinds (kHello, kMembers, kHeartbeat, kLeave); peer/wire_codec.h turns them into bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "peer/federation_terms.h"
#include "peer/view.h"

namespace meridian::peer {

// The first message a site sends on a new connection.
struct HelloInfo {
  std::string name;
  std::string listen_address;  // where the sender accepts connections (tcp://host:port)
  std::string region;          // WAN region, empty when not configured
  std::uint64_t incarnation = 0;
  std::uint64_t round = 0;
  FederationTerms terms;  // what must be equal across the federation; empty: not checked
  std::string refusal;    // not empty: the sender refuses the receiver, for this reason
  friend bool operator==(const HelloInfo&, const HelloInfo&) = default;
};

enum class MemberState : std::uint8_t { kAlive = 0, kDead = 1, kLeft = 2 };

// What one site believes about one member. Records merge by (incarnation, state): a higher
// incarnation wins; at equal incarnation left > dead > alive.
struct MemberRecord {
  std::string name;
  std::string address;
  std::string region;
  std::uint64_t incarnation = 0;
  MemberState state = MemberState::kAlive;
  friend bool operator==(const MemberRecord&, const MemberRecord&) = default;
};

struct MemberListInfo {
  std::vector<MemberRecord> members;
  std::vector<View> views;  // oldest first
  std::uint64_t round = 0;
  friend bool operator==(const MemberListInfo&, const MemberListInfo&) = default;
};

struct HeartbeatInfo {
  std::uint64_t incarnation = 0;
  std::uint64_t round = 0;
  // Round-trip time: sender's steady clock (µs) at sending; the newest sent_us received from the
  // destination and how long ago it arrived (0, 0 when none). RTT = now - echo_us - held_us.
  std::uint64_t sent_us = 0;
  std::uint64_t echo_us = 0;
  std::uint64_t held_us = 0;
  // The sender's figures for automatic shapes (peer/view.h Pace), 0 when not measured: its largest
  // smoothed round trip to a live member and its step time.
  std::uint64_t rtt_us = 0;
  std::uint64_t step_us = 0;
  friend bool operator==(const HeartbeatInfo&, const HeartbeatInfo&) = default;
};

struct LeaveInfo {
  std::uint64_t incarnation = 0;
  friend bool operator==(const LeaveInfo&, const LeaveInfo&) = default;
};

}  // namespace meridian::peer
