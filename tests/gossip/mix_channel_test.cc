#include <catch2/catch.hpp>

#include <stdexcept>
#include <thread>

#include "gossip/mix_channel.h"
#include "gossip/mix_server.h"
#include "peer/transport.h"

using namespace meridian::gossip;
using namespace std::chrono_literals;

namespace {

// Doubles the data, or throws for step 13: stands in for a mixer on the communication thread.
class Doubler final : public Mixer {
 public:
  MixReport mix(std::uint64_t step, RoundTag, std::span<float> data, double& weight) override {
    if (step == 13) throw meridian::peer::TransportError("socket closed under us");
    for (float& v : data) v *= 2.0f;
    weight *= 2.0;
    return MixReport{7, 0, 0};
  }
};

}  // namespace

TEST_CASE("mix channel: results by (step, tag) while the trainer goes on, errors reach the trainer",
          "[gossip][channel][unit]") {
  MixChannel channel;
  Doubler doubler;
  MixServer server(channel, doubler, doubler);
  {
    MixThread comm(channel, server);
    channel.submit(MixJob{1, RoundTag::kMix, {1.0f, 2.0f}, 0.5});
    channel.submit(MixJob{1, RoundTag::kReaverage, {5.0f}, 1.0});
    channel.submit(MixJob{2, RoundTag::kMix, {3.0f}, 1.0});
    // Picked up out of submission order, by key.
    MixResult second = channel.wait(2, RoundTag::kMix, 10s);
    CHECK(second.data == std::vector<float>{6.0f});
    MixResult first = channel.wait(1, RoundTag::kMix, 10s);
    CHECK(first.data == std::vector<float>{2.0f, 4.0f});
    CHECK(first.weight == 1.0);
    CHECK(first.report.view_id == 7);
    CHECK(channel.wait(1, RoundTag::kReaverage, 10s).data == std::vector<float>{10.0f});
    CHECK_FALSE(channel.poll(3, RoundTag::kMix));
    CHECK_THROWS_AS(channel.wait(3, RoundTag::kMix, 20ms), MixError);  // nothing submitted: a deadline, no hang

    channel.submit(MixJob{13, RoundTag::kMix, {1.0f}, 1.0});
    CHECK_THROWS_AS(channel.wait(13, RoundTag::kMix, 10s), meridian::peer::TransportError);
    CHECK_THROWS_AS(channel.submit(MixJob{14, RoundTag::kMix, {1.0f}, 1.0}), meridian::peer::TransportError);
  }
  MixChannel closed;
  closed.close();
  CHECK_THROWS_AS(closed.submit(MixJob{}), MixError);
  CHECK_THROWS_AS(closed.wait(0, RoundTag::kMix, 10s), MixError);
}

TEST_CASE("mix channel recycles buffers instead of allocating new ones", "[gossip][channel][unit]") {
  MixChannel channel;
  CHECK(channel.buffer().capacity() == 0);
  std::vector<float> big(1000);
  const float* storage = big.data();
  channel.recycle(std::move(big));
  std::vector<float> again = channel.buffer();
  CHECK(again.data() == storage);
  CHECK(again.capacity() >= 1000);
}

TEST_CASE("mix channel adds up the time the trainer waits on it, and only that", "[gossip][channel][unit]") {
  using Clock = std::chrono::steady_clock;
  MixChannel channel(1);
  CHECK(channel.trainer_waited() == Clock::duration::zero());

  // A full queue: submit() waits out its timeout, all of which counts.
  channel.submit(MixJob{1, RoundTag::kMix, {1.0f}, 1.0});
  auto before = channel.trainer_waited();
  CHECK_THROWS_AS(channel.submit(MixJob{2, RoundTag::kMix, {1.0f}, 1.0}, 20ms), MixError);
  CHECK(channel.trainer_waited() - before >= 20ms);

  // A result that never comes: the whole timeout counts; a poll does not wait and adds nothing.
  before = channel.trainer_waited();
  CHECK_THROWS_AS(channel.wait(5, RoundTag::kMix, 20ms), MixError);
  CHECK(channel.trainer_waited() - before >= 20ms);
  before = channel.trainer_waited();
  CHECK_FALSE(channel.poll(5, RoundTag::kMix));
  CHECK(channel.trainer_waited() == before);

  // A result the communication side posts: no more than the call lasted counts.
  std::thread comm([&] {
    auto job = channel.next(10s);
    REQUIRE(job);
    channel.complete(MixResult{job->step, job->tag, std::move(job->data), job->weight, {}});
  });
  before = channel.trainer_waited();
  const auto called = Clock::now();
  const MixResult r = channel.wait(1, RoundTag::kMix, 10s);
  const auto returned = Clock::now();
  comm.join();
  CHECK(r.step == 1);
  CHECK(channel.trainer_waited() - before <= returned - called);
}
