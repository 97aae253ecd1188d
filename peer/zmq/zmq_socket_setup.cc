// Setting up the ZeroMQ transport's sockets: the listening ROUTER (CURVE server with the ZAP handler in
// secure mode), a DEALER per peer (CURVE client), and the connections to the bootstrap sites.
#include <algorithm>
#include <functional>

#include "peer/zmq/zmq_io_loop.h"

#include "error/error.h"
#include "peer/site_address.h"

namespace meridian::peer {

namespace {

// With more than one libzmq I/O thread, the first one serves the connections peers open to this site
// (everything received) and the others the connections this site opens (everything sent), so that
// a relay's receive and send copies never wait for each other (ZMQ_AFFINITY is a bit mask of threads).
constexpr std::uint64_t kIncomingIoThreads = 1;

std::uint64_t wall_clock_ms() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

}  // namespace

ZmqTransport::IoLoop::IoLoop(ZmqTransport& t)
    : t_(t),
      opt_(t.options_),
      ctx_(t.options_.io_threads),
      router_(ctx_, zmq::socket_type::router),
      validator_(t.options_.validation),
      reassembler_(t.pool_),
      emulator_(t.options_.wan_seed ^ std::hash<std::string>{}(t.options_.name)) {
  if (opt_.wan.regions() > 1) {
    region_ = opt_.wan.region_index(opt_.region);
    if (!region_) {
      std::string known;
      for (std::size_t i = 0; i < opt_.wan.regions(); ++i) known += (i ? ", " : "") + opt_.wan.region_name(i);
      throw error::UserError("region '" + opt_.region + "' is not in the WAN model '" + opt_.wan.spec() +
                             "' (regions: " + known + ")");
    }
  }
  router_.set(zmq::sockopt::linger, 0);
  if (opt_.io_threads > 1) router_.set(zmq::sockopt::affinity, kIncomingIoThreads);
  // Set before bind: libzmq applies it to each connection the listener accepts.
  if (opt_.socket_buffer_bytes > 0) router_.set(zmq::sockopt::rcvbuf, opt_.socket_buffer_bytes);
  // No legitimate frame is larger than a header or a whole payload at the receive caps; libzmq drops a
  // connection that announces a larger one before buffering it, so a member cannot make us allocate
  // gigabytes only for decode_header to refuse them afterwards.
  {
    const std::uint64_t payload_cap =
        std::min<std::uint64_t>(opt_.limits.max_payload_elements, INT64_MAX / 8) * sizeof(float);
    router_.set(zmq::sockopt::maxmsgsize,
                static_cast<std::int64_t>(std::max<std::uint64_t>(opt_.limits.max_header_bytes, payload_cap)));
  }
  if (secure()) {
    zap_.emplace(ctx_, *opt_.roster);
    router_.set(zmq::sockopt::curve_server, true);
    router_.set(zmq::sockopt::curve_secretkey, opt_.keys->secret_key);
    router_.set(zmq::sockopt::zap_domain, "meridian");
  }
  try {
    router_.bind(opt_.listen);
  } catch (const zmq::error_t& e) {
    throw TransportError("cannot listen on '" + opt_.listen + "': " + e.what());
  }
  t_.endpoint_ = opt_.advertise.empty() ? router_.get(zmq::sockopt::last_endpoint) : opt_.advertise;
  if (t_.endpoint_.find("://0.0.0.0:") != std::string::npos || t_.endpoint_.find("://[::]:") != std::string::npos)
    throw error::UserError("listening on all interfaces (" + t_.endpoint_ +
                           "): also set the advertised address peers should connect to, e.g. "
                           "tcp://10.0.0.1:7000");
  // Peers refuse any other form in a hello, so this site could never be reached at it.
  if (auto problem = site_address_problem(t_.endpoint_))
    throw error::UserError("the address peers should connect to, '" + t_.endpoint_ + "', is not one: " + *problem);
  // The membership starts once the bound endpoint (our advertised address) is known.
  std::function<bool(const std::string&)> admissible = is_valid_site_name;
  if (secure()) admissible = [&r = *opt_.roster](const std::string& n) { return r.by_name(n) != nullptr; };
  driver_.emplace(MembershipConfig{opt_.name, t_.endpoint_, opt_.region,
                                   opt_.incarnation ? opt_.incarnation : wall_clock_ms(), opt_.heartbeat_timeout,
                                   opt_.view_lead_rounds, std::move(admissible), opt_.terms, opt_.agree_pace,
                                   opt_.hearsay_view_interval},
                  MembershipTiming{opt_.heartbeat_interval, opt_.heartbeat_timeout, opt_.heartbeat_deadline},
                  static_cast<MembershipPort&>(*this), Clock::now());
  if (secure()) watch_listener();
  open_bootstraps();
  t_.views_ = membership().views_in_force();
  t_.views_held_ = membership().views();
}

ZmqTransport::IoLoop::~IoLoop() {
  // Sockets must close before the context terminates; linger was set per socket.
  links_.clear();
  bootstraps_.clear();
  refusal_links_.clear();
  zap_.reset();
  listener_monitor_.reset();  // before the socket it watches
  router_.close();
  ctx_.close();
}

void ZmqTransport::IoLoop::open_bootstraps() {
  for (const auto& spec : opt_.bootstrap) {
    std::string name, address = spec;
    if (auto at = spec.find('@'); at != std::string::npos && spec.find("://") > at) {
      name = spec.substr(0, at);
      address = spec.substr(at + 1);
    }
    if (secure() && name.empty()) {
      const auto* entry = opt_.roster->by_address(address);
      if (!entry)
        throw error::UserError("bootstrap '" + spec +
                               "': no roster entry lists this address, so its key is unknown; write it as "
                               "NAME@" +
                               address);
      name = entry->name;
    }
    if (secure() && !opt_.roster->by_name(name))
      throw error::UserError("bootstrap '" + spec + "': site '" + name + "' is not in the roster");
    if (auto problem = site_address_problem(address))
      throw error::UserError("bootstrap '" + spec + "': " + *problem);
    if (name == opt_.name || address == t_.endpoint_) continue;
    std::unique_ptr<ZmqSocketMonitor> monitor;
    auto dealer = open_dealer(address, name, &monitor);
    if (!dealer) throw error::UserError("bootstrap '" + spec + "': libzmq cannot connect to " + address);
    Bootstrap& b = bootstraps_.emplace_back();
    b.name = name;
    b.link = Link{address, std::move(*dealer), {}, false};
    b.monitor = std::move(monitor);
  }
}

const std::string& ZmqTransport::IoLoop::dial_address(const std::string& name, const std::string& announced) const {
  if (secure())
    if (const auto* entry = opt_.roster->by_name(name); entry && !entry->address.empty()) return entry->address;
  return announced;
}

std::optional<zmq::socket_t> ZmqTransport::IoLoop::open_dealer(const std::string& address,
                                                               const std::string& server_name,
                                                               std::unique_ptr<ZmqSocketMonitor>* monitor) {
  zmq::socket_t s(ctx_, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::sndhwm, opt_.send_high_water_mark);
  if (opt_.io_threads > 1) s.set(zmq::sockopt::affinity, ~kIncomingIoThreads);
  if (opt_.socket_buffer_bytes > 0) s.set(zmq::sockopt::sndbuf, opt_.socket_buffer_bytes);
  if (secure()) {
    s.set(zmq::sockopt::curve_serverkey, opt_.roster->by_name(server_name)->public_key);
    s.set(zmq::sockopt::curve_publickey, opt_.keys->public_key);
    s.set(zmq::sockopt::curve_secretkey, opt_.keys->secret_key);
  }
  if (monitor) *monitor = watch(s);
  try {
    s.connect(address);
  } catch (const zmq::error_t& e) {
    if (monitor) monitor->reset();  // before the socket it watches closes
    reject(RejectCause::kAddress, server_name,
           "libzmq cannot connect to '" + address + "' (" + e.what() + "): not dialed");
    return std::nullopt;
  }
  return s;
}

}  // namespace meridian::peer
