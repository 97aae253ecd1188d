#include "gossip/direct_mean_mixer.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace meridian::gossip {

DirectMeanMixer::DirectMeanMixer(Inbox& inbox, Mixer& exact, CompressionSpec spec, RoundTimeouts timeouts,
                                 std::size_t max_sites)
    : inbox_(inbox), exact_(exact), feedback_(spec), timeouts_(timeouts), max_sites_(max_sites) {}

std::optional<std::span<const float>> DirectMeanMixer::accept(const peer::Message& msg, std::size_t n) {
  if (msg.total != n || msg.phase > static_cast<std::uint32_t>(Encoding::kInt8)) return std::nullopt;
  const auto encoding = static_cast<Encoding>(msg.phase);
  if (encoding == Encoding::kDense) {
    // Dense: the payload itself once it is checked (decode would only copy it).
    if (msg.payload.size() != n) return std::nullopt;
    for (float v : msg.payload)
      if (!std::isfinite(v)) return std::nullopt;
    return std::span<const float>(msg.payload);
  }
  decoded_.resize(n);
  if (!decode(encoding, msg.payload, decoded_)) return std::nullopt;
  return std::span<const float>(decoded_);
}

MixReport DirectMeanMixer::mix(std::uint64_t step, RoundTag tag, std::span<float> data, double& weight) {
  // Dense contributions give every site the exact mean (the same bits everywhere), so the re-average
  // takes the single crossing too, dense whatever the wire: a compressed one would not be exact, and
  // the ring's 2(n − 1) crossings in a row stalled every trainer for seconds at each view change at a
  // few hundred milliseconds one way.
  const bool dense = feedback_.spec().encoding == Encoding::kDense || tag == RoundTag::kReaverage;
  if (tag != RoundTag::kMix && tag != RoundTag::kReaverage) return exact_.mix(step, tag, data, weight);
  peer::Transport& transport = inbox_.transport();
  // Past the site bound the ring's 2(n − 1)/n copies per site beat n − 1 (compressed contributions
  // cannot take the ring, so the bound is for dense ones only).
  const peer::View scheduled = transport.view_for(step);
  if (dense && scheduled.size() > max_sites_) return exact_.mix(step, tag, data, weight);
  const auto tag_value = static_cast<std::uint32_t>(tag);
  const auto kind = peer::MessageKind::kCompressedShare;
  const auto encoding = static_cast<std::uint32_t>(dense ? Encoding::kDense : feedback_.spec().encoding);
  // Rounds run in increasing step order, so older mail is what an abandoned attempt left behind.
  inbox_.discard_if([&](const peer::Message& m) { return m.kind == kind && m.round < step; });
  const std::size_t n = data.size();
  // A dense contribution is the input itself: no error feedback, nothing packed, nothing decoded.
  input_.assign(data.begin(), data.end());
  if (!dense) {
    residual_.assign(feedback_.residual().begin(), feedback_.residual().end());
    own_.resize(n);
  }
  MixReport report;
  // Re-averages after a view change key on the view announced for the step (gossip/mixer.h); left at 0,
  // every mix here looked like a change to dts and diloco whose re-average takes the ring, so they ran an
  // exact ring re-average after every compressed exchange.
  report.scheduled_view_id = scheduled.id;
  peer::View view = redo_.for_step(transport, step);
  for (;;) {
    const auto rank = view.rank_of(transport.self());
    if (!rank) {
      // The others found this site dead and run without it. As on the ring (gossip/ring_mean_round.cc),
      // it sits the mix out with its own values and trains on until a view takes it back; failing here
      // ended a live site whose heartbeats a loaded machine had delayed.
      report.view_id = view.id;
      report.sat_out = true;
      return report;
    }
    if (!dense) feedback_.compress(input_, packed_, own_);
    const std::span<const float> wire = dense ? std::span<const float>(input_) : std::span<const float>(packed_);
    const std::span<const float> own = dense ? std::span<const float>(input_) : std::span<const float>(own_);
    for (std::size_t r = 0; r < view.size(); ++r) {
      if (r == *rank) continue;
      peer::Message msg;
      msg.kind = kind;
      msg.view_id = view.id;
      msg.round = step;
      msg.tag = tag_value;
      msg.phase = encoding;
      msg.total = n;
      // From the transport's pool: a fresh model-sized buffer per message would fault in every page.
      msg.payload = transport.take_buffer(wire.size());
      std::copy(wire.begin(), wire.end(), msg.payload.begin());
      transport.send(view.at(r), std::move(msg));
    }
    // Summed in rank order on every site, so every site ends with the same bits. The first
    // contribution is copied rather than added to zero, which spares a pass and changes no value.
    auto add = [&](std::span<const float> contribution, bool first) {
      if (first) std::copy(contribution.begin(), contribution.end(), data.begin());
      else
        for (std::size_t i = 0; i < n; ++i) data[i] += contribution[i];
    };
    const auto deadline = Clock::now() + timeouts_.round_deadline();
    bool complete = true;
    for (std::size_t r = 0; r < view.size() && complete; ++r) {
      if (r == *rank) {
        add(own, r == 0);
        continue;
      }
      const std::string& from = view.at(r);
      for (;;) {
        // A member a newer announced view leaves out abandons the round at once instead of at its
        // deadline: its contribution will not come.
        auto msg = take_unless_left_out(
            inbox_,
            [&](const peer::Message& m) {
              return m.kind == kind && m.round == step && m.tag == tag_value && m.view_id == view.id && m.from == from;
            },
            view, from, deadline);
        if (!msg) {
          complete = false;
          break;
        }
        const auto contribution = accept(*msg, n);
        if (contribution) add(*contribution, r == 0);
        transport.recycle(std::move(msg->payload));
        if (contribution) break;
        ++rejected_;
      }
    }
    if (complete) {
      const float scale = 1.0f / static_cast<float>(view.size());
      for (float& v : data) v *= scale;
      report.view_id = view.id;
      return report;
    }
    ++report.abandoned;
    ++abandoned_;
    if (!dense) feedback_.set_residual(residual_);
    inbox_.discard_if(
        [&](const peer::Message& m) { return m.kind == kind && m.round == step && m.view_id <= view.id; });
    view = redo_.after_abandon(inbox_, view, timeouts_.view_change);
  }
}

}  // namespace meridian::gossip
