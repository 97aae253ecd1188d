// The ZAP (ZeroMQ Authentication Protocol, RFC 27) handler of one ZeroMQ context: it admits a CURVE
// client only when its public key is in the roster, and gives the connection that key (Z85) as its
// user id (the "User-Id" property of every message received on it). The receiver names the sender by
// looking the key up in the roster in force for every message, so a key removed or replaced later
// stops counting at once, on connections already open too.
//
// Thread-safety: none. The transport's I/O thread creates it, polls socket() and calls handle().
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <zmq.hpp>

#include "peer/roster.h"

namespace meridian::peer {

class ZapHandler {
 public:
  // Binds inproc://zeromq.zap.01 in `context` (one handler per context). `roster` must outlive it.
  // Throws zmq::error_t when another handler is bound in this context.
  ZapHandler(zmq::context_t& context, const Roster& roster);

  zmq::socket_t& socket() { return socket_; }

  // Answers one pending request (call when socket() is readable; returns at once when none is).
  void handle();

  std::uint64_t admitted() const { return admitted_; }
  std::uint64_t denied() const { return denied_; }

 private:
  const Roster& roster_;
  zmq::socket_t socket_;
  std::uint64_t admitted_ = 0;
  std::uint64_t denied_ = 0;
  std::set<std::string> logged_;  // refused keys already logged (libzmq retries every reconnect)
};

}  // namespace meridian::peer
