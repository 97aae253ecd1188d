// One site's share of a direct exchange on the wire: a kCompressedShare message to one peer, its
// payload a buffer from the transport's pool. The dense and compressed contributions of
// gossip/direct_mean_mixer.h and the masked shares of privacy/secure_mean_mixer.h travel this way.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "peer/transport.h"

namespace meridian::gossip {

// What tells a share apart on the receiving side (peer::Message's fields of the same names).
struct ShareHeader {
  std::uint64_t view_id = 0;
  std::uint64_t round = 0;
  std::uint32_t tag = 0;
  std::uint32_t phase = 0;  // the encoding (gossip::Encoding), or peer::kOpaquePayloadPhase (a masked share)
  std::uint64_t total = 0;  // elements of the whole tensor
};

// Sends `values` to `to` as one kCompressedShare message at offset 0. The payload buffer comes from
// the transport's pool: a fresh model-sized buffer per message would fault in every page. Throws
// what transport.send() throws.
void send_share(peer::Transport& transport, const std::string& to, const ShareHeader& header,
                std::span<const float> values);

// Sends `payload`, a buffer the caller took from transport.take_buffer() and filled, as it is: the
// last of several peers can take the buffer the others' copies were made from.
void send_share(peer::Transport& transport, const std::string& to, const ShareHeader& header,
                std::vector<float>&& payload);

}  // namespace meridian::gossip
