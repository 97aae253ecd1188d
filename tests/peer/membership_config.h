// The membership configuration the membership tests share (peer/membership.h): site `self` at a
// placeholder address, a 1 s heartbeat timeout and views taking effect 5 rounds ahead.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "peer/membership.h"

namespace meridian::peer::testing {

inline MembershipConfig membership_config(const std::string& self, std::uint64_t incarnation = 1) {
  MembershipConfig c;
  c.self = self;
  c.address = "tcp://127.0.0.1:1/" + self;
  c.incarnation = incarnation;
  c.heartbeat_timeout = std::chrono::milliseconds(1000);
  c.view_lead_rounds = 5;
  return c;
}

}  // namespace meridian::peer::testing
