#include "peer/reassembler.h"

#include <cstring>

#include "peer/finite_copy.h"
#include "peer/opaque_payload.h"

namespace meridian::peer {

namespace {

// Whether the bytes after an opaque payload's last element are zero (the validator checked its length).
bool opaque_padding_zero(const Message& m) {
  const auto padding = opaque_padding_bytes(m.total);
  const auto bytes = std::as_bytes(std::span<const float>(m.payload));
  if (bytes.size() < padding) return false;
  for (std::uint64_t i = bytes.size() - padding; i < bytes.size(); ++i)
    if (bytes[i] != std::byte{0}) return false;
  return true;
}

}  // namespace

void Reassembler::release(Partial& p) {
  pool_.give(std::move(p.msg.payload));
  p.msg.payload = {};
}

void Reassembler::forget(const std::string& sender) {
  auto it = partial_.find(sender);
  if (it == partial_.end()) return;
  release(it->second);
  partial_.erase(it);
}

Reassembler::Result Reassembler::add(const std::string& sender, const WireHeader& h, std::span<const std::byte> payload,
                                     const PayloadSink* sink, std::span<float> copy) {
  Result result;
  auto it = partial_.find(sender);
  if (it != partial_.end() && it->second.message_id != h.message_id) {
    // The sender moved on: whatever it did not finish can never complete.
    if (!it->second.poisoned)
      result.rejections.push_back({RejectCause::kIncomplete, "message " + std::to_string(it->second.message_id) +
                                                                 " ended after " +
                                                                 std::to_string(it->second.next_index) + " of " +
                                                                 std::to_string(it->second.chunk_count) + " chunks"});
    release(it->second);
    partial_.erase(it);
    it = partial_.end();
  }

  if (it == partial_.end()) {
    Partial p;
    p.message_id = h.message_id;
    p.chunk_count = h.chunk_count;
    if (h.chunk_index != 0) {
      p.poisoned = true;
      result.rejections.push_back({RejectCause::kIncomplete, "message " + std::to_string(h.message_id) +
                                                                 " starts at chunk " + std::to_string(h.chunk_index)});
      if (h.chunk_index + 1 < h.chunk_count) partial_.emplace(sender, std::move(p));
      return result;
    }
    if (sink && h.chunk_count == 1 && h.chunk_elements == h.payload_elements && !has_opaque_payload(h.kind, h.phase)) {
      // A whole message in one frame that its receiver is waiting for: no partial state, no buffer.
      Message msg = h.to_message();
      msg.from = sender;
      if (sink->accepts(msg, h.payload_elements)) {
        if (!sink->apply(payload, copy)) {
          result.rejections.push_back(
              {RejectCause::kNonFinite, "NaN or infinity in the payload of message " + std::to_string(h.message_id)});
          return result;
        }
        result.complete = std::move(msg);
        result.sunk = true;
        return result;
      }
    }
    p.msg = h.to_message();
    p.msg.from = sender;
    p.msg.payload = pool_.take(h.payload_elements);
    it = partial_.emplace(sender, std::move(p)).first;
  }

  Partial& p = it->second;
  const bool last = h.chunk_index + 1 == h.chunk_count;
  if (p.poisoned) {
    if (last) partial_.erase(it);
    return result;
  }
  if (h.chunk_index != p.next_index || h.chunk_count != p.chunk_count || h.payload_elements != p.msg.payload.size() ||
      h.chunk_offset != p.filled) {
    result.rejections.push_back({RejectCause::kIncomplete,
                                 "message " + std::to_string(h.message_id) + " chunk " + std::to_string(h.chunk_index) +
                                     " does not follow chunk " + std::to_string(p.next_index)});
    release(p);
    p.poisoned = true;
    if (last) partial_.erase(it);
    return result;
  }
  if (has_opaque_payload(p.msg.kind, p.msg.phase)) {
    // Bytes that may form any float pattern (the first chunk's header, which the validator checked,
    // says so): copied as they are, for the receiver to check.
    if (h.chunk_elements > 0)
      std::memcpy(p.msg.payload.data() + p.filled, payload.data(), h.chunk_elements * sizeof(float));
  } else if (!copy_finite(payload.data(), p.msg.payload.data() + p.filled, h.chunk_elements)) {
    result.rejections.push_back(
        {RejectCause::kNonFinite, "NaN or infinity in the payload of message " + std::to_string(h.message_id)});
    release(p);
    p.poisoned = true;
    if (last) partial_.erase(it);
    return result;
  }
  p.filled += h.chunk_elements;
  ++p.next_index;
  if (last && has_opaque_payload(p.msg.kind, p.msg.phase) && !opaque_padding_zero(p.msg)) {
    result.rejections.push_back(
        {RejectCause::kMalformed, "opaque payload of message " + std::to_string(h.message_id) +
                                      " has padding that is not zero"});
    release(p);
    partial_.erase(it);
    return result;
  }
  if (last) {
    result.complete = std::move(p.msg);
    partial_.erase(it);
  }
  return result;
}

}  // namespace meridian::peer
