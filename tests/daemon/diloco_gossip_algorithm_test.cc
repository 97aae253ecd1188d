// diloco-gossip as a registered algorithm (daemon/algorithms/diloco_gossip.h): its name, default shape
// and start-up line, the checks of its knobs, what it sends, and the push-sum weight in its checkpoint.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <string>

#include "daemon/algorithms/registry.h"
#include "daemon/site_config.h"
#include "error/error.h"
#include "gossip/mix_channel.h"
#include "models/cpu_backend.h"
#include "models/model_factory.h"
#include "peer/view.h"

using namespace meridian::daemon;

namespace {

SiteConfig gossip_site() {
  SiteConfig c;
  c.name = "a";
  c.algo = "diloco-gossip";
  return c;
}

// One of diloco's whole-number options, which diloco-gossip reads too.
const algorithms::AlgorithmOption& option(std::string_view name) {
  const auto* declared = algorithms::find_algorithm_option(name);
  REQUIRE(declared != nullptr);
  return *declared;
}

// H and τ, as --inner-steps and --overlap give them.
void set_shape(SiteConfig& c, int inner_steps, int overlap) {
  c.algorithm_options.set(option("inner-steps"), inner_steps);
  c.algorithm_options.set(option("overlap"), overlap);
}

std::string problems_in(const SiteConfig& c) {
  std::string all;
  for (const auto& p : site_config_problems(c)) all += p + "\n";
  return all;
}

// A diloco-gossip trainer on a small CPU model, with everything it borrows.
struct GossipTrainer {
  explicit GossipTrainer(const SiteConfig& config) : settings(settings_of(config)) {
    trainer = algorithms::find_algorithm("diloco-gossip")
                  ->make_trainer(algorithms::TrainerContext{settings, *model, backend, channel, {}});
  }
  // The checkpoint section called `name`, empty when there is none.
  std::vector<float> section(std::string_view name) const {
    const auto sections = trainer->checkpoint_state();
    const auto at = std::find_if(sections.begin(), sections.end(), [&](const auto& s) { return s.name == name; });
    return at == sections.end() ? std::vector<float>{} : std::vector<float>(at->values.begin(), at->values.end());
  }

  SiteSettings settings;
  std::shared_ptr<meridian::models::CpuBackend> backend = std::make_shared<meridian::models::CpuBackend>();
  std::unique_ptr<meridian::models::Model> model =
      meridian::models::make_model("logreg", meridian::models::Shape{1, 2, 2}, 3, {}, backend, 7);
  meridian::gossip::MixChannel channel;
  std::unique_ptr<TrainerAlgorithm> trainer;
};

}  // namespace

TEST_CASE("diloco-gossip is registered, takes diloco's shape and outer knobs, and says it in the start-up line",
          "[daemon][config][diloco-gossip][unit]") {
  const auto* algorithm = algorithms::find_algorithm("diloco-gossip");
  REQUIRE(algorithm != nullptr);
  CHECK(algorithm->name() == "diloco-gossip");
  CHECK_FALSE(algorithm->peers_wait_for_rejoin());  // push-sum goes on without a site that left
  SiteConfig c = gossip_site();
  apply_algorithm_defaults(c, [](std::string_view) { return false; });
  CHECK(c.algorithm_options.whole(option("inner-steps")) == 32);
  CHECK(c.algorithm_options.whole(option("overlap")) == 2);
  CHECK(describe_algorithm(settings_of(c)) ==
        "diloco-gossip, H = 32 inner steps (momentum), overlap τ = 2, outer lr 0.7, outer momentum 0.9 (Nesterov), "
        "push-sum outer average to K = 1 out-peer, wire fp32");
  // --outer-lr and --outer-momentum are diloco's declarations, read by both, and listed once.
  const auto* outer_lr = algorithms::find_algorithm_option("outer-lr");
  REQUIRE(outer_lr != nullptr);
  CHECK(algorithm->declares(*outer_lr));
  CHECK(algorithms::find_algorithm("diloco")->declares(*outer_lr));
  std::size_t listed = 0;
  for (const auto* option : algorithms::all_algorithm_options()) listed += option == outer_lr ? 1 : 0;
  CHECK(listed == 1);

  SiteConfig given = gossip_site();
  set_shape(given, 16, 4);
  given.out_peers = 2;
  given.optimizer = "adamw";
  given.compression = "fp16";
  given.algorithm_options.set(*outer_lr, 1.0);
  given.algorithm_options.set(*algorithms::find_algorithm_option("outer-momentum"), 0.0);
  apply_algorithm_defaults(given, [](std::string_view name) { return name == "inner-steps" || name == "overlap"; });
  CHECK(problems_in(given).empty());
  CHECK(describe_algorithm(settings_of(given)) ==
        "diloco-gossip, H = 16 inner steps (adamw), overlap τ = 4, outer lr 1, outer momentum 0 (Nesterov), "
        "push-sum outer average to K = 2 out-peers, wire fp16");
  // One model length of numerators per share, nothing else.
  CHECK(algorithm->wire_limits(settings_of(given)).pin_model_elements);
  CHECK(algorithm->wire_limits(settings_of(given)).max_model_multiple == 1);
  CHECK_FALSE(algorithm->wire_limits(settings_of(given)).carries_state);
}

TEST_CASE("diloco-gossip's knobs are checked: τ ≤ H, no fragments, no int8", "[daemon][config][diloco-gossip][unit]") {
  SiteConfig c = gossip_site();
  set_shape(c, 8, 9);
  c.compression = "int8";
  c.algorithm_options.set(*algorithms::find_algorithm_option("fragments"), 2);
  c.algorithm_options.set(*algorithms::find_algorithm_option("outer-momentum"), 1.0);
  const auto all = problems_in(c);
  CHECK_THAT(all, Catch::Contains("--overlap: diloco-gossip's overlap τ = 9 exceeds --inner-steps H = 8"));
  CHECK_THAT(all, Catch::Contains("--fragments: applies to diloco only (this site runs diloco-gossip)"));
  CHECK_THAT(all, Catch::Contains("--compression: int8 applies to dts and diloco only"));
  CHECK_THAT(all, Catch::Contains("--outer-momentum: must be in [0, 1)"));
}

TEST_CASE("diloco-gossip's checkpoint holds diloco's sections and the push-sum weight, and a restore puts them back",
          "[daemon][checkpoint][diloco-gossip][unit]") {
  SiteConfig c = gossip_site();
  set_shape(c, 4, 0);
  GossipTrainer t(c);
  const std::size_t n = t.model->parameters().size();
  CHECK(t.section("diloco-push-sum-weight") == std::vector<float>{1.0f});
  // The parameters are θ itself, not a numerator: the checkpoint's own push-sum weight, by which a
  // loader divides them, stays 1.
  CHECK(t.trainer->push_sum_weight() == 1.0);

  Checkpoint cp;
  cp.parameters.assign(n, 0.5f);
  cp.optimizer_state = {{"optimizer", std::vector<float>(n, 0.25f)},
                        {"diloco-global", std::vector<float>(n, 1.5f)},
                        {"diloco-outer-momentum", std::vector<float>(n, -2.0f)}};
  t.trainer->restore(cp);  // a diloco checkpoint: no weight, w stays 1
  CHECK(t.section("diloco-global") == std::vector<float>(n, 1.5f));
  CHECK(t.section("diloco-push-sum-weight") == std::vector<float>{1.0f});
  cp.optimizer_state.push_back({"diloco-push-sum-weight", std::vector<float>{0.75f}});
  t.trainer->restore(cp);
  CHECK(t.section("diloco-push-sum-weight") == std::vector<float>{0.75f});
  cp.optimizer_state.back().values = {-1.0f};
  CHECK_THROWS_AS(t.trainer->restore(cp), meridian::error::UserError);
  cp.optimizer_state.back().values = {1.0f, 1.0f};
  CHECK_THROWS_AS(t.trainer->restore(cp), CheckpointError);
}

TEST_CASE("diloco-gossip with --overlap auto takes its overlap from the view's pace, counting one crossing per share",
          "[daemon][config][diloco-gossip][auto_shape][unit]") {
  SiteConfig c = gossip_site();
  c.algorithm_options.set(option("overlap"), kAutoShape);
  apply_algorithm_defaults(c, [](std::string_view name) { return name == "overlap"; });
  CHECK(problems_in(c).empty());
  const auto* algorithm = algorithms::find_algorithm("diloco-gossip");
  CHECK(algorithm->shape_from_network(settings_of(c)));  // the views carry the pace it follows
  SiteConfig fixed = gossip_site();  // its default overlap, τ = 2
  apply_algorithm_defaults(fixed, [](std::string_view) { return false; });
  CHECK_FALSE(algorithm->shape_from_network(settings_of(fixed)));
  CHECK(describe_algorithm(settings_of(c)).find("overlap τ = auto,") != std::string::npos);

  GossipTrainer site(c);
  // A 100 ms round trip and 10 ms steps: one crossing of 50 ms, covered 1.5 times in 8 steps (the
  // ring's 2(n − 1) crossings with 4 sites would ask for 45).
  const auto view = meridian::peer::View::of({"a", "b", "c", "d"}, 1, 0, meridian::peer::Pace{100'000, 10'000});
  site.trainer->adopt_view(0, view);
  const auto shape = site.trainer->chosen_shape();
  REQUIRE(shape.has_value());
  CHECK(shape->delay == 8);
}
