#include "gossip/push_sum_mixer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "error/error.h"
#include "gossip/exponential_graph.h"
#include "gossip/redo_view.h"
#include "gossip/robust_combine.h"

namespace meridian::gossip {

namespace {

// data ← data · f and share ← the same values, the share written with stores that bypass the cache
// where the CPU has them (SSE2). Nothing here reads the share again: the transport's copy into the
// socket does, after the link's delay, from memory anyway. Through the cache, each of its lines would
// first be fetched (a recycled buffer is long cold) and then push a line of the model out. The
// products are the same IEEE multiplications either way.
void scale_into_share(std::span<float> data, float f, float* share) {
  const std::size_t n = data.size();
  float* d = data.data();
  std::size_t i = 0;
#if defined(__SSE2__)
  for (; i < n && reinterpret_cast<std::uintptr_t>(share + i) % 16 != 0; ++i) share[i] = d[i] *= f;
  const __m128 vf = _mm_set1_ps(f);
  for (; i + 4 <= n; i += 4) {
    const __m128 v = _mm_mul_ps(_mm_loadu_ps(d + i), vf);
    _mm_storeu_ps(d + i, v);
    _mm_stream_ps(share + i, v);
  }
  // Streaming stores are weakly ordered: they are made visible before the buffer changes hands.
  _mm_sfence();
#endif
  for (; i < n; ++i) share[i] = d[i] *= f;
}

}  // namespace

PushSumMixer::PushSumMixer(Inbox& inbox, std::size_t out_peers, RoundTimeouts timeouts, RobustOptions robust,
                           CompressionSpec compression, std::uint64_t staleness, std::uint64_t graph_period)
    : inbox_(inbox),
      out_peers_(out_peers),
      graph_period_(std::max<std::uint64_t>(graph_period, 1)),
      timeouts_(timeouts),
      codec_(compression),
      staleness_(staleness),
      robust_(robust) {
  if (compression.encoding == Encoding::kTopK)
    throw error::UserError("push-sum: top-k compression is not sound for push-sum shares (use fp16 or none)");
  if (compression.encoding == Encoding::kInt8)
    throw error::UserError("push-sum: its receivers decode fp16 shares only (use fp16 or none)");
}

bool PushSumMixer::absorb(peer::Message&& m, std::span<float> data, double& weight, std::size_t sites) {
  const bool added = add(m, data, weight, sites);
  // Back to the transport, which receives the next share into this already-touched memory.
  inbox_.transport().recycle(std::move(m.payload));
  return added;
}

bool PushSumMixer::add(const peer::Message& m, std::span<float> data, double& weight, std::size_t sites) {
  if (!std::isfinite(m.weight) || m.weight <= 0.0 || m.weight > static_cast<double>(sites)) {
    ++rejected_;
    return false;
  }
  // The share as floats: the payload itself, or its fp16 decoding.
  std::span<const float> share = m.payload;
  if (m.phase != static_cast<std::uint32_t>(Encoding::kDense)) {
    decoded_.resize(data.size());
    if (m.phase != static_cast<std::uint32_t>(Encoding::kFp16) || m.total != data.size() ||
        !decode(Encoding::kFp16, m.payload, decoded_)) {
      ++rejected_;
      return false;
    }
    share = decoded_;
  } else if (m.payload.size() != data.size()) {
    ++rejected_;
    return false;
  }
  if (robust_.enabled && bound_) {
    difference_.resize(data.size());
    for (std::size_t i = 0; i < data.size(); ++i)
      difference_[i] = static_cast<float>(share[i] / m.weight) - own_model_[i];
    if (clip_norm(difference_, *bound_) < 1.0) ++clipped_;
    for (std::size_t i = 0; i < data.size(); ++i)
      data[i] += static_cast<float>(m.weight * (static_cast<double>(own_model_[i]) + difference_[i]));
  } else {
    for (std::size_t i = 0; i < data.size(); ++i) data[i] += share[i];
  }
  weight += m.weight;
  ++received_;
  return true;
}

std::size_t PushSumMixer::await_through(std::uint64_t through, std::span<float> data, double& weight,
                                        std::size_t sites) {
  const auto kind = peer::MessageKind::kPushSum;
  const auto deadline = Clock::now() + timeouts_.round_deadline();
  std::size_t missing = 0;
  while (auto due = outstanding_.oldest_through(through)) {
    // A peer that a newer view leaves out (it left or died) sends nothing more.
    auto msg = take_unless_left_out(
        inbox_, [&](const peer::Message& m) { return m.kind == kind && m.round == due->step && m.from == due->from; },
        *due->view, due->from, deadline);
    if (!msg) {
      ++missing;
      ++missing_;
      outstanding_.give_up(due->step, due->from);
      continue;
    }
    if (absorb(std::move(*msg), data, weight, sites)) outstanding_.arrived(due->step, due->from);
  }
  return missing;
}

std::size_t PushSumMixer::settle(std::span<float> data, double& weight) {
  if (!last_step_) return 0;
  const auto kind = peer::MessageKind::kPushSum;
  const std::size_t n = inbox_.transport().view_for(*last_step_).size();
  inbox_.pump(std::chrono::milliseconds(0));
  for (auto& late : inbox_.take_all([&](const peer::Message& m) { return m.kind == kind && m.round <= *last_step_; }))
    if (absorb(std::move(late), data, weight, n)) outstanding_.arrived(late.round, late.from);
  return await_through(*last_step_, data, weight, n);
}

MixReport PushSumMixer::mix(std::uint64_t step, RoundTag tag, std::span<float> data, double& weight) {
  const auto tag_value = static_cast<std::uint32_t>(tag);
  const auto kind = peer::MessageKind::kPushSum;
  peer::Transport& transport = inbox_.transport();
  peer::View view = transport.view_for(step);
  auto rank = view.rank_of(transport.self());
  if (!rank) {
    // Found dead by the others (a partition, a false death): it keeps its mass and trains on alone
    // until a view takes it back, rather than ending a live site. Shares sent to it meanwhile wait in
    // the inbox and are added at its next mix (as late shares).
    MixReport out;
    out.view_id = view.id;
    out.scheduled_view_id = view.id;
    out.sat_out = true;
    return out;
  }
  const std::size_t n = view.size();
  const std::uint64_t staleness = staleness_of_ ? staleness_of_(view) : staleness_;
  bound_.reset();
  if (robust_.enabled) {
    own_model_.resize(data.size());
    for (std::size_t i = 0; i < data.size(); ++i) own_model_[i] = static_cast<float>(data[i] / weight);
    const auto scale = scale_.on_input(tag_value, own_model_);
    // Before this site has its own scale (its first mix) nothing it could compare with is known, so
    // others' models count as its own (bound 0): every site starts from the same model, so an honest
    // peer's first share hardly differs, while a first share of garbage would otherwise go in whole.
    if (robust_.clip_factor > 0) bound_ = scale ? robust_.clip_factor * *scale : 0.0;
  }
  // With mixes every P steps, ⌊step/P⌋ walks the graph's entries one per mix (step alone could stay on
  // one entry: P = 2 with n = 4 mixes pairs only, the same pairs forever).
  const std::uint64_t entry = step / graph_period_;
  auto outs = exponential_out_peers(n, *rank, entry, out_peers_);
  auto ins = exponential_in_peers(n, *rank, entry, out_peers_);
  // The graph comes from the view in force, the same on every site. A peer that membership has
  // already dropped from a newer view is dead: nothing is sent to it (its share is kept, so no mass is
  // lost) and nothing is awaited from it.
  std::vector<bool> out_of_view(n);
  for (std::size_t r = 0; r < n; ++r) out_of_view[r] = left_out_after(transport, view, view.at(r));
  auto gone = [&](std::size_t r) { return out_of_view[r]; };
  std::size_t skipped = 0;
  for (std::size_t r : outs) skipped += gone(r) ? 1 : 0;
  // With K + 1 a power of two (K = 1, 3, 7) the shares are exact, so kept + sent = x bit for bit.
  const float share = 1.0f / static_cast<float>(outs.size() + 1);
  const double weight_share = weight / static_cast<double>(outs.size() + 1);
  const bool compressed = codec_.spec().encoding != Encoding::kDense;
  // The first dense share is written in the same pass that scales the kept one (one read of the model
  // instead of two), into a buffer the transport has touched before: a fresh model-sized vector per
  // step costs a page fault per 4 KiB, as much as the copy itself.
  std::vector<float> first_share;
  if (!compressed && skipped < outs.size()) {
    first_share = transport.take_buffer(data.size());
    scale_into_share(data, share, first_share.data());
  } else {
    for (float& v : data) v *= share;
  }
  weight = weight_share;
  if (compressed) {
    decoded_.resize(data.size());
    codec_.encode(data, packed_, decoded_);
  }
  std::size_t sent = 0;
  for (std::size_t peer_rank : outs) {
    if (gone(peer_rank)) continue;
    peer::Message msg;
    msg.kind = kind;
    msg.view_id = view.id;
    msg.round = step;
    msg.tag = tag_value;
    msg.total = data.size();
    msg.weight = weight_share;
    if (compressed) {
      msg.phase = static_cast<std::uint32_t>(codec_.spec().encoding);
      msg.payload = transport.take_buffer(packed_.size());
      std::copy(packed_.begin(), packed_.end(), msg.payload.begin());
    } else if (sent == 0) {
      msg.payload = std::move(first_share);
    } else {
      msg.payload = transport.take_buffer(data.size());
      std::copy(data.begin(), data.end(), msg.payload.begin());
    }
    transport.send(view.at(peer_rank), std::move(msg));
    ++sent;
  }
  // From here decoded_ holds what rounding cut from one sent share.
  if (compressed)
    for (std::size_t i = 0; i < data.size(); ++i) decoded_[i] = data[i] - decoded_[i];
  if (skipped > 0) {
    // Kept share plus the unsent ones (exact when skipped + 1 is a power of two, like the shares).
    for (float& v : data) v *= static_cast<float>(skipped + 1);
    weight = weight_share * static_cast<double>(skipped + 1);
  }
  if (compressed && sent > 0) {
    // What rounding cut from each sent share stays home, so no mass is lost.
    const auto copies = static_cast<float>(sent);
    for (std::size_t i = 0; i < data.size(); ++i) data[i] += copies * decoded_[i];
  }
  MixReport report;
  report.view_id = view.id;
  report.scheduled_view_id = view.id;
  std::vector<std::string> expected;
  for (std::size_t from_rank : ins)
    if (!gone(from_rank)) expected.push_back(view.at(from_rank));
  outstanding_.expect(step, view, std::move(expected));
  // Shares already here: with τ = 0 those of older steps that came after their round gave up on them
  // (still mass, add it now); with τ ≥ 1 also this step's and the in-flight steps', whatever arrived.
  // An in-peer a newer view leaves out is not waited for, but the share it sent for this step before it
  // went is mass like any other. A site that ends its run sends its last step's share before it leaves,
  // so that share is here when its leave is: adding it gives the bits of a run where nobody left yet,
  // whichever site finishes first.
  std::vector<std::string> gone_ins;
  for (std::size_t from_rank : ins)
    if (gone(from_rank)) gone_ins.push_back(view.at(from_rank));
  const auto gone_in = [&](const std::string& from) { return std::ranges::find(gone_ins, from) != gone_ins.end(); };
  if (staleness > 0 || !gone_ins.empty()) inbox_.pump(std::chrono::milliseconds(0));
  for (auto& early : inbox_.take_all([&](const peer::Message& m) {
         return m.kind == kind && (m.round < step || (m.round == step && (staleness > 0 || gone_in(m.from))));
       }))
    if (absorb(std::move(early), data, weight, n)) outstanding_.arrived(early.round, early.from);
  // Wait for the shares of steps ≤ step − τ, oldest step first, each step's in-peers in graph order.
  if (step >= staleness) report.missing = static_cast<std::uint32_t>(await_through(step - staleness, data, weight, n));
  last_step_ = step;
  if (robust_.enabled) {
    for (std::size_t i = 0; i < data.size(); ++i) own_model_[i] = static_cast<float>(data[i] / weight);
    scale_.on_output(tag_value, own_model_);
  }
  return report;
}

}  // namespace meridian::gossip
