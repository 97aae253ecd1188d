// Test helper shared by the randomized decoder test and the libFuzzer target: feeds one raw input
// through the whole receive pipeline that runs before anything touches a model (decode_header,
// membership body decoders, validator, reassembler).
//
// Input format (also the format of the seed corpus in tests/fuzz/corpus/wire_decoder/):
//   2 bytes little-endian header length L, L bytes header frame, then the payload frame (absent when
//   no bytes follow).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "peer/buffer_pool.h"
#include "peer/message_validator.h"
#include "peer/reassembler.h"
#include "peer/wire_codec.h"

namespace meridian::tests {

inline std::string wire_input(const std::string& header, const std::string* payload) {
  std::string out;
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>((header.size() >> 8) & 0xff));
  out += header;
  if (payload) out += *payload;
  return out;
}

class WirePipeline {
 public:
  WirePipeline() : validator_(policy()), reassembler_(pool_) { validator_.advance_round(50); }

  static peer::WireLimits limits() {
    peer::WireLimits l;
    l.max_header_bytes = 16 * 1024;
    l.max_payload_elements = 1 << 12;  // keeps a hostile length from allocating much
    l.chunk_bytes = 256;
    return l;
  }
  static peer::ValidationPolicy policy() {
    peer::ValidationPolicy p;
    p.model_fingerprint = 0xabcdef;
    p.rounds_behind = 16;
    p.rounds_ahead = 64;
    return p;
  }

  // Returns true when the input produced a complete message.
  bool feed(const std::uint8_t* data, std::size_t size) {
    if (size < 2) return false;
    const std::size_t len = std::min<std::size_t>(size - 2, data[0] | (std::size_t{data[1]} << 8));
    std::span<const std::byte> header(reinterpret_cast<const std::byte*>(data + 2), len);
    std::optional<std::size_t> payload_bytes;
    if (size > 2 + len) payload_bytes = size - 2 - len;
    auto decoded = peer::decode_header(header, payload_bytes, limits());
    const auto* h = std::get_if<peer::WireHeader>(&decoded);
    if (!h) return false;
    (void)peer::decode_hello(h->body);
    (void)peer::decode_members(h->body);
    (void)peer::decode_heartbeat(h->body);
    (void)peer::decode_leave(h->body);
    if (validator_.check("fuzz", *h)) return false;
    if (!peer::is_mixer_kind(h->kind)) return false;
    auto result =
        reassembler_.add("fuzz", *h, {reinterpret_cast<const std::byte*>(data + 2 + len), payload_bytes.value_or(0)});
    if (!result.complete) return false;
    validator_.accept("fuzz", *result.complete);
    pool_.give(std::move(result.complete->payload));
    return true;
  }

 private:
  peer::BufferPool pool_;
  peer::MessageValidator validator_;
  peer::Reassembler reassembler_;
};

}  // namespace meridian::tests
