#include "gossip/share_message.h"

#include <algorithm>

namespace meridian::gossip {

void send_share(peer::Transport& transport, const std::string& to, const ShareHeader& header,
                std::span<const float> values) {
  std::vector<float> payload = transport.take_buffer(values.size());
  std::copy(values.begin(), values.end(), payload.begin());
  send_share(transport, to, header, std::move(payload));
}

void send_share(peer::Transport& transport, const std::string& to, const ShareHeader& header,
                std::vector<float>&& payload) {
  peer::Message msg;
  msg.kind = peer::MessageKind::kCompressedShare;
  msg.view_id = header.view_id;
  msg.round = header.round;
  msg.tag = header.tag;
  msg.phase = header.phase;
  msg.total = header.total;
  msg.payload = std::move(payload);
  transport.send(to, std::move(msg));
}

}  // namespace meridian::gossip
