#include "peer/zmq/zap_handler.h"

#include <spdlog/spdlog.h>

#include <array>
#include <string>
#include <vector>

namespace meridian::peer {

ZapHandler::ZapHandler(zmq::context_t& context, const Roster& roster)
    : roster_(roster), socket_(context, zmq::socket_type::rep) {
  socket_.set(zmq::sockopt::linger, 0);
  socket_.bind("inproc://zeromq.zap.01");
}

void ZapHandler::handle() {
  std::vector<zmq::message_t> request;
  while (true) {
    zmq::message_t part;
    if (!socket_.recv(part, zmq::recv_flags::dontwait)) {
      if (request.empty()) return;
      continue;  // the rest of a multipart message is already queued; this does not spin
    }
    const bool more = part.more();
    request.push_back(std::move(part));
    if (!more) break;
  }
  // version, request id, domain, address, identity, mechanism, credentials...
  std::string status = "400", text = "not in the roster", user;
  if (request.size() >= 6 && request[0].to_string_view() == "1.0") {
    const auto mechanism = request[5].to_string_view();
    if (mechanism == "CURVE" && request.size() >= 7 && request[6].size() == 32) {
      std::array<char, 41> z85{};
      zmq_z85_encode(z85.data(), static_cast<const std::uint8_t*>(request[6].data()), 32);
      if (roster_.by_key(z85.data())) {
        status = "200";
        text = "OK";
        // The key itself, not the name: every message on the connection carries it, so the receiver
        // checks it against the roster in force then, not as it was at the handshake.
        user = z85.data();
      } else if (logged_.size() < 1024 && logged_.insert(z85.data()).second) {
        spdlog::warn("refused a CURVE connection from {}: public key {} is not in the roster (logged once per key)",
                     request[3].to_string(), z85.data());
      }
    } else {
      text = "only CURVE is accepted";
      spdlog::warn("refused a {} connection from {}: only CURVE is accepted", std::string(mechanism),
                   request[3].to_string());
    }
  } else {
    text = "malformed ZAP request";
  }
  (status == "200" ? admitted_ : denied_)++;
  const std::string request_id = request.size() > 1 ? request[1].to_string() : std::string();
  socket_.send(zmq::buffer(std::string_view("1.0")), zmq::send_flags::sndmore);
  socket_.send(zmq::buffer(request_id), zmq::send_flags::sndmore);
  socket_.send(zmq::buffer(status), zmq::send_flags::sndmore);
  socket_.send(zmq::buffer(text), zmq::send_flags::sndmore);
  socket_.send(zmq::buffer(user), zmq::send_flags::sndmore);
  socket_.send(zmq::str_buffer(""), zmq::send_flags::none);
}

}  // namespace meridian::peer
