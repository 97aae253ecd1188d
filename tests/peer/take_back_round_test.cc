// Where the views take a returning site back (peer/take_back_round.h), over explicit view histories:
// the round of the first view with the site after one without it, also when newer views (a new pace
// for the same members) are announced on top of it before the site hears of any.
#include <catch2/catch.hpp>

#include <vector>

#include "peer/take_back_round.h"

using meridian::peer::Pace;
using meridian::peer::take_back_round;
using meridian::peer::View;

namespace {

// The views of one federation, oldest first, and the view in force at a round as a transport answers.
struct History {
  std::vector<View> views;
  View view_for(std::uint64_t round) const {
    View in_force;
    for (const auto& v : views)
      if (v.effective_round <= round) in_force = v;
    return in_force;
  }
  std::optional<std::uint64_t> take_back(const std::string& name, std::uint64_t since_round) const {
    return take_back_round(views.back(), name, since_round, [this](std::uint64_t r) { return view_for(r); });
  }
};

// s2 was in view 1, was killed after its checkpoint at round 241, left out by view 2 and taken back by
// view 3.
History killed_and_taken_back() {
  return History{
      {View::of({"s0", "s1", "s2"}, 1, 66), View::of({"s0", "s1"}, 2, 323), View::of({"s0", "s1", "s2"}, 3, 442)}};
}

}  // namespace

TEST_CASE("the view that takes a restarted site back starts where its peers wait for it", "[unit][peer][membership]") {
  const auto history = killed_and_taken_back();
  CHECK(history.take_back("s2", 241) == 442u);
  // The survivors were never left out: no view takes them back.
  CHECK_FALSE(history.take_back("s0", 241).has_value());
}

TEST_CASE("newer views on top of the take-back view leave the rejoin at the take-back view's round",
          "[unit][peer][membership]") {
  auto history = killed_and_taken_back();
  // A new pace for the same members, then another, announced before s2 settled on any view.
  history.views.push_back(View::of({"s0", "s1", "s2"}, 4, 524, Pace{33729, 1822}));
  history.views.push_back(View::of({"s0", "s1", "s2"}, 5, 641, Pace{15727, 1822}));
  CHECK(history.take_back("s2", 241) == 442u);
}

TEST_CASE("a view that left the site out before its checkpoint is not a take-back", "[unit][peer][membership]") {
  // s2 joined late (view 2 took it in), ran, checkpointed at round 300 and restarted; nobody has left its
  // old incarnation out since, so the views it hears of do not take it back yet.
  History history{{View::of({"s0", "s1"}, 1, 66), View::of({"s0", "s1", "s2"}, 2, 120),
                   View::of({"s0", "s1", "s2"}, 3, 400, Pace{20000, 2000})}};
  CHECK_FALSE(history.take_back("s2", 300).has_value());
  // Once a view leaves it out after round 300, the next one with it takes it back.
  history.views.push_back(View::of({"s0", "s1"}, 4, 480));
  history.views.push_back(View::of({"s0", "s1", "s2"}, 5, 560));
  history.views.push_back(View::of({"s0", "s1", "s2"}, 6, 640, Pace{30000, 2000}));
  CHECK(history.take_back("s2", 300) == 560u);
}

TEST_CASE("no take-back round from a view without the site or with a history not known that far back",
          "[unit][peer][membership]") {
  auto history = killed_and_taken_back();
  history.views.push_back(View::of({"s0", "s1"}, 4, 524));
  CHECK_FALSE(history.take_back("s2", 241).has_value());
  // Only the newest view known (a site that heard of nothing older): the walk cannot tell.
  const History only_latest{{View::of({"s0", "s1", "s2"}, 5, 700)}};
  CHECK_FALSE(only_latest.take_back("s2", 241).has_value());
}
