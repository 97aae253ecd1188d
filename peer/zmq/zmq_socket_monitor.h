// What libzmq's socket monitor (zmq_socket_monitor) reports about one socket's connections, read
// without blocking: a connection attempt that failed and is retried, a handshake that failed (with the
// ZAP status code or the ZMTP protocol error) or succeeded, a connection accepted or closed.
// Private to the ZeroMQ transport (peer/zmq/zmq_transport.h), which turns these into diagnostics.
//
// Thread-safety: none; the thread that owns the monitored socket owns the monitor (ZeroMQ sockets are
// single-threaded).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <zmq.hpp>

namespace meridian::peer {

class ZmqSocketMonitor {
 public:
  struct Event {
    int kind = 0;            // ZMQ_EVENT_*
    std::int32_t value = 0;  // a file descriptor, a ZAP status code or a ZMQ_PROTOCOL_ERROR_*, by kind
    std::string address;     // the endpoint the event is about (a listening socket's own for accepts)
  };

  // Starts monitoring `socket` for the ZMQ_EVENT_* bits of `events`, through an inproc endpoint of
  // `context`. Throws TransportError when libzmq refuses.
  ZmqSocketMonitor(zmq::context_t& context, zmq::socket_t& socket, int events);
  // Stops monitoring, then closes its own end. The monitored socket must still be open: destroy the
  // monitor first.
  ~ZmqSocketMonitor();
  ZmqSocketMonitor(const ZmqSocketMonitor&) = delete;
  ZmqSocketMonitor& operator=(const ZmqSocketMonitor&) = delete;

  // The events reported since the last call, oldest first; never blocks.
  std::vector<Event> drain();
  // The socket the events arrive on, to poll for ZMQ_POLLIN.
  zmq::socket_t& socket() { return pair_; }

 private:
  void* socket_;  // the monitored socket's handle
  zmq::socket_t pair_;
};

}  // namespace meridian::peer
