// The sink-and-forward path of the ZeroMQ transport: a validated mixer message is reassembled from its
// chunks and, while a caller runs the loop with a PayloadSink (peer/payload_sink.h), combined straight
// from libzmq's receive frame into the caller's memory; a relaying sink then sends the result on in
// that same frame, without a copy. Otherwise the whole message goes to the inbox.
#include "peer/zmq/zmq_io_loop.h"

namespace meridian::peer {

void ZmqTransport::IoLoop::receive_mixer(const std::string& name, const WireHeader& h, std::size_t bytes_in) {
  // The caller's sink takes a message only while no earlier one waits for it to be taken. A relayed
  // result is written over the received frame, which then goes out again as it is: that needs a
  // frame aligned for floats that fits one chunk of ours (otherwise the message takes the inbox
  // path and the sink is applied from a pooled buffer, see ZmqTransport::take_from).
  const PayloadSink* sink = sunk_ ? nullptr : sink_;
  std::span<float> relay_frame;
  if (sink && sink->relay) {
    if (bytes_in > opt_.limits.chunk_bytes || reinterpret_cast<std::uintptr_t>(pay_.data()) % alignof(float) != 0)
      sink = nullptr;
    else if (bytes_in > 0 && (!sink->addend.empty() || sink->scale != 1.0f))
      relay_frame = {static_cast<float*>(pay_.data()), bytes_in / sizeof(float)};  // else it is the result
  }
  auto result = reassembler_.add(name, h, {static_cast<const std::byte*>(pay_.data()), bytes_in}, sink, relay_frame);
  for (const auto& r : result.rejections) reject(r.cause, name, r.detail);
  if (!result.complete) return;
  validator_.accept(name, *result.complete);
  ++stats_.messages_received;
  if (result.sunk) {
    if (sink->relay) relay(*sink->relay, std::move(pay_), bytes_in / sizeof(float));
    sunk_ = std::move(*result.complete);
    delivered_ = true;
  } else {
    deliver(std::move(*result.complete));
  }
}

void ZmqTransport::IoLoop::relay(const PayloadSink::Relay& r, zmq::message_t&& frame, std::size_t elements) {
  // Like handle_send, for a payload that is already a libzmq frame (the received one, overwritten with
  // the result): it leaves as it is, one chunk, without a copy.
  if (is_mixer_kind(r.header.kind)) advance_round(r.header.round);
  const auto now = Clock::now();
  Link* link = r.to != opt_.name && membership().is_alive(r.to) ? ensure_link(r.to) : nullptr;
  if (!link) {
    if (r.to == opt_.name) {
      Message self = r.header;
      self.from = opt_.name;
      const auto* p = static_cast<const float*>(frame.data());
      self.payload.assign(p, p + elements);
      deliver(std::move(self));
      return;
    }
    ++stats_.dropped_unreachable;
    dirty_ = true;
    return;
  }
  auto chunks = encode_message(r.header, opt_.validation.model_fingerprint, next_message_id_++, opt_.limits, elements);
  const auto& c = chunks.front();  // the caller checked that the frame fits one chunk
  const std::size_t bytes = c.header.size() + elements * sizeof(float);
  const auto delivered = due_time(r.to, r.header.kind, bytes, now);
  if (!delivered) {
    ++stats_.emulated_lost;
    dirty_ = true;
    return;
  }
  Outgoing o;
  o.due = *delivered;
  o.header = zmq::message_t(c.header.data(), c.header.size());
  o.bytes = bytes;
  if (elements > 0) {
    o.payload = std::move(frame);
    o.has_payload = true;
  }
  link->queue.push_back(std::move(o));
  // Out at once, as a send() would go: the caller may next take mail already in the inbox, which
  // does not run the loop.
  flush(now);
}

}  // namespace meridian::peer
