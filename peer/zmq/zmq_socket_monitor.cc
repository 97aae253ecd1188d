#include "peer/zmq/zmq_socket_monitor.h"

#include <atomic>
#include <cstring>

#include "peer/transport.h"

namespace meridian::peer {

namespace {

// Inproc names are per context; a process-wide counter keeps them apart however many transports run.
std::string next_monitor_endpoint() {
  static std::atomic<std::uint64_t> next{0};
  return "inproc://meridian-socket-monitor-" + std::to_string(next.fetch_add(1));
}

}  // namespace

ZmqSocketMonitor::ZmqSocketMonitor(zmq::context_t& context, zmq::socket_t& socket, int events)
    : socket_(socket.handle()), pair_(context, zmq::socket_type::pair) {
  const auto endpoint = next_monitor_endpoint();
  if (zmq_socket_monitor(socket_, endpoint.c_str(), events) != 0)
    throw TransportError(std::string("cannot monitor a socket's connections: ") + zmq_strerror(zmq_errno()));
  pair_.set(zmq::sockopt::linger, 0);
  pair_.connect(endpoint);
}

ZmqSocketMonitor::~ZmqSocketMonitor() {
  // Stopped before our end closes: libzmq would otherwise keep writing events nobody reads.
  zmq_socket_monitor(socket_, nullptr, 0);
}

std::vector<ZmqSocketMonitor::Event> ZmqSocketMonitor::drain() {
  std::vector<Event> out;
  while (true) {
    // Each event is two frames: 2 bytes of event kind and 4 of value, then the endpoint.
    zmq::message_t head;
    if (!pair_.recv(head, zmq::recv_flags::dontwait)) return out;
    zmq::message_t address;
    if (!head.more() || !pair_.recv(address, zmq::recv_flags::none)) return out;
    if (head.size() < sizeof(std::uint16_t) + sizeof(std::int32_t)) continue;
    std::uint16_t kind = 0;
    std::int32_t value = 0;
    std::memcpy(&kind, head.data(), sizeof kind);
    std::memcpy(&value, static_cast<const char*>(head.data()) + sizeof kind, sizeof value);
    out.push_back(Event{kind, value, address.to_string()});
  }
}

}  // namespace meridian::peer
