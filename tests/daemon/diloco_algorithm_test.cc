// diloco as a registered algorithm (daemon/algorithms/diloco.h): its name, default shape and start-up
// line, its knobs' checks, what it sends, and its checkpoint sections (the error-feedback residuals of a
// compressed wire among them).
#include <catch2/catch.hpp>

#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/algorithms/registry.h"
#include "daemon/checkpoint/checkpoint.h"
#include "daemon/site_config.h"
#include "gossip/mix_channel.h"
#include "models/cpu_backend.h"
#include "models/model_factory.h"
#include "tests/support/temp_dir.h"

using namespace meridian::daemon;
using meridian::tests::TempDir;

namespace {

SiteConfig diloco_config() {
  SiteConfig c;
  c.name = "a";
  c.algo = "diloco";
  return c;
}

// Sets one of diloco's own options, found by its name as a flag would be.
void set_option(SiteConfig& c, std::string_view name, algorithms::OptionValue value) {
  const auto* option = algorithms::find_algorithm_option(name);
  REQUIRE(option != nullptr);
  c.algorithm_options.set(*option, value);
}

// The value of one of diloco's whole-number options.
int whole(const SiteConfig& c, std::string_view name) {
  const auto* option = algorithms::find_algorithm_option(name);
  REQUIRE(option != nullptr);
  return c.algorithm_options.whole(*option);
}

// H and τ, as --inner-steps and --overlap give them.
void set_shape(SiteConfig& c, int inner_steps, int overlap) {
  set_option(c, "inner-steps", inner_steps);
  set_option(c, "overlap", overlap);
}

std::string problems_of(const SiteConfig& c) {
  std::string all;
  for (const auto& p : site_config_problems(c)) all += p + "\n";
  return all;
}

}  // namespace

TEST_CASE("diloco is registered, picks its shape when none is given, and says it in the start-up line",
          "[daemon][config][diloco][unit]") {
  REQUIRE(algorithms::find_algorithm("diloco") != nullptr);
  CHECK(algorithms::find_algorithm("diloco")->name() == "diloco");
  SiteConfig c = diloco_config();
  apply_algorithm_defaults(c, [](std::string_view) { return false; });
  CHECK(whole(c, "inner-steps") == 32);
  CHECK(whole(c, "overlap") == kAutoShape);  // the overlap follows the network (daemon/algorithms/auto_shape.h)
  CHECK(c.exchange == "auto");               // one crossing per sync in a small federation
  CHECK(describe_algorithm(settings_of(c)) ==
        "diloco, H = 32 inner steps (momentum), overlap τ = auto, F = 1 fragment, outer lr 0.7, outer momentum 0.9 "
        "(Nesterov), wire fp32, exchange auto (direct up to 8 sites, ring above)");
  // Knobs the user gave stay.
  SiteConfig given = diloco_config();
  set_shape(given, 100, 0);
  given.exchange = "ring";
  apply_algorithm_defaults(given, [](std::string_view option) {
    return option == "inner-steps" || option == "overlap" || option == "exchange";
  });
  CHECK(whole(given, "inner-steps") == 100);
  CHECK(whole(given, "overlap") == 0);
  CHECK(given.exchange == "ring");
  set_option(given, "fragments", 4);
  set_option(given, "outer-lr", 1.0);
  set_option(given, "outer-momentum", 0.0);
  given.compression = "int8";
  given.optimizer = "adamw";
  CHECK(describe_algorithm(settings_of(given)) ==
        "diloco, H = 100 inner steps (adamw), overlap τ = 0, F = 4 fragments, outer lr 1, outer momentum 0 "
        "(Nesterov), wire int8, exchange direct");
}

TEST_CASE(
    "--exchange auto: the direct exchange up to 8 sites, the ring above; direct and compressed wires always direct",
    "[daemon][config][diloco][unit]") {
  SiteConfig c = diloco_config();
  c.exchange = "auto";
  CHECK(algorithms::direct_exchange_max_sites(settings_of(c)) == algorithms::kAutoDirectMaxSites);
  CHECK(algorithms::kAutoDirectMaxSites == 8);
  c.exchange = "ring";
  CHECK(algorithms::direct_exchange_max_sites(settings_of(c)) == 0);
  CHECK_THAT(describe_algorithm(settings_of(c)), Catch::EndsWith("exchange ring"));
  c.exchange = "direct";
  CHECK(algorithms::direct_exchange_max_sites(settings_of(c)) == std::numeric_limits<std::size_t>::max());
  // A compressed wire cannot take the ring: every view goes direct, whatever --exchange says.
  for (const char* exchange : {"ring", "auto"}) {
    c.exchange = exchange;
    c.compression = "fp16";
    CHECK(algorithms::direct_exchange_max_sites(settings_of(c)) == std::numeric_limits<std::size_t>::max());
    CHECK_THAT(describe_algorithm(settings_of(c)), Catch::EndsWith("exchange direct"));
  }
  // dts reads it too (its default stays the ring); the others refuse it.
  SiteConfig dts = diloco_config();
  dts.algo = "dts";
  dts.exchange = "auto";
  CHECK(problems_of(dts).empty());
  CHECK_THAT(describe_algorithm(settings_of(dts)),
             Catch::Contains("exchange auto (direct up to 8 sites, ring above), compensation exact"));
  SiteConfig sgp = diloco_config();
  sgp.algo = "sgp";
  sgp.exchange = "auto";
  CHECK_THAT(problems_of(sgp), Catch::Contains("--exchange: applies to dts and diloco only"));
}

TEST_CASE("diloco's automatic overlap counts the crossings of the exchange the view's size picks, and names it",
          "[daemon][config][diloco][auto_shape][unit]") {
  SiteConfig c = diloco_config();
  apply_algorithm_defaults(c, [](std::string_view) { return false; });  // τ auto, exchange auto
  const auto settings = settings_of(c);
  auto backend = std::make_shared<meridian::models::CpuBackend>();
  auto model = meridian::models::make_model("logreg", meridian::models::Shape{1, 2, 2}, 3, {}, backend, 7);
  meridian::gossip::MixChannel channel;
  meridian::models::ScheduleConfig schedule;
  auto trainer = algorithms::find_algorithm("diloco")->make_trainer(
      algorithms::TrainerContext{settings, *model, backend, channel, schedule});
  // A 100 ms round trip and 10 ms steps: one crossing of 50 ms, covered 1.5 times in 8 steps.
  const meridian::peer::Pace pace{100'000, 10'000};
  std::vector<std::string> names;
  for (int i = 0; i < 9; ++i) names.push_back("s" + std::to_string(i));
  trainer->adopt_view(0, meridian::peer::View::of({names.begin(), names.begin() + 8}, 1, 0, pace));
  REQUIRE(trainer->chosen_shape().has_value());
  CHECK(trainer->chosen_shape()->delay == 8);
  CHECK(trainer->chosen_shape()->text == "overlap τ = 8 over the direct exchange");
  // A ninth site: the ring's 2(n − 1) = 16 crossings ask for 120 steps, clamped at H = 32.
  trainer->adopt_view(100, meridian::peer::View::of(names, 2, 100, pace));
  CHECK(trainer->chosen_shape()->delay == 32);
  CHECK(trainer->chosen_shape()->text == "overlap τ = 32 over the ring");
  CHECK(trainer->chosen_shape()->from_round == 100);
  // A fixed exchange is not named: it never changes.
  c.exchange = "direct";
  const auto fixed = settings_of(c);
  auto direct = algorithms::find_algorithm("diloco")->make_trainer(
      algorithms::TrainerContext{fixed, *model, backend, channel, schedule});
  direct->adopt_view(0, meridian::peer::View::of(names, 1, 0, pace));
  CHECK(direct->chosen_shape()->text == "overlap τ = 8");
}

TEST_CASE("diloco's knobs are checked, and refused for the algorithms that do not read them",
          "[daemon][config][diloco][unit]") {
  SiteConfig c = diloco_config();
  set_shape(c, 8, 9);
  set_option(c, "fragments", 9);
  set_option(c, "outer-lr", 0.0);
  set_option(c, "outer-momentum", 1.0);
  const auto all = problems_of(c);
  CHECK_THAT(all, Catch::Contains("--overlap: diloco's overlap τ = 9 exceeds --inner-steps H = 8"));
  CHECK_THAT(all, Catch::Contains("--fragments: 9 must be in [1, --inner-steps 8]"));
  CHECK_THAT(all, Catch::Contains("--outer-lr: must be positive"));
  CHECK_THAT(all, Catch::Contains("--outer-momentum: must be in [0, 1)"));

  SiteConfig topk = diloco_config();
  topk.compression = "topk:0.01";
  CHECK_THAT(problems_of(topk), Catch::Contains("--compression"));
  for (const char* wire : {"none", "fp16", "int8"}) {
    SiteConfig ok = diloco_config();
    ok.compression = wire;
    INFO(wire);
    CHECK(problems_of(ok).empty());
  }

  SiteConfig other;
  other.name = "a";
  other.algo = "allreduce";
  set_option(other, "fragments", 2);
  set_option(other, "outer-lr", 1.0);
  set_shape(other, 8, 2);
  other.compression = "int8";
  const auto refused = problems_of(other);
  CHECK_THAT(refused, Catch::Contains("--inner-steps: applies to diloco and diloco-gossip only"));
  CHECK_THAT(refused, Catch::Contains("--overlap: applies to diloco and diloco-gossip only"));
  CHECK_THAT(refused, Catch::Contains("--fragments: applies to diloco only (this site runs allreduce)"));
  CHECK_THAT(refused, Catch::Contains("--outer-lr: applies to diloco and diloco-gossip only"));
  CHECK_THAT(refused, Catch::Contains("--compression: int8 applies to dts and diloco only"));
}

TEST_CASE("diloco's and diloco-gossip's old spellings --period and --delay set H and τ for one more release",
          "[daemon][config][diloco][unit]") {
  for (const char* algo : {"diloco", "diloco-gossip"}) {
    INFO(algo);
    SiteConfig c = diloco_config();
    c.algo = algo;
    c.period = 64;
    c.delay = 4;
    apply_algorithm_defaults(c, [](std::string_view option) { return option == "period" || option == "delay"; });
    CHECK(whole(c, "inner-steps") == 64);
    CHECK(whole(c, "overlap") == 4);
    // Back at their defaults, which neither reads: a file written from this configuration says it once.
    CHECK(c.period == SiteConfig{}.period);
    CHECK(c.delay == SiteConfig{}.delay);
    CHECK(problems_of(c).empty());
    CHECK(describe_algorithm(settings_of(c)).find("H = 64 inner steps (momentum), overlap τ = 4") != std::string::npos);
  }
  // --delay auto is --overlap auto; the new spelling wins where both are given.
  SiteConfig c = diloco_config();
  c.delay = kAutoShape;
  c.period = 64;
  set_option(c, "inner-steps", 16);
  apply_algorithm_defaults(
      c, [](std::string_view option) { return option == "period" || option == "delay" || option == "inner-steps"; });
  CHECK(whole(c, "overlap") == kAutoShape);
  CHECK(whole(c, "inner-steps") == 16);
  // dts keeps its D and P.
  SiteConfig dts = diloco_config();
  dts.algo = "dts";
  dts.period = 8;
  dts.delay = 1;
  apply_algorithm_defaults(dts, [](std::string_view option) { return option == "period" || option == "delay"; });
  CHECK(dts.period == 8);
  CHECK(dts.delay == 1);
  CHECK_FALSE(dts.algorithm_options.differs_from_default(*algorithms::find_algorithm_option("inner-steps")));
}

TEST_CASE("diloco sends fragments and (θ_g, m), and pins the model's length only with one fragment",
          "[daemon][config][diloco][unit]") {
  const auto& diloco = *algorithms::find_algorithm("diloco");
  SiteConfig c = diloco_config();
  CHECK(diloco.wire_limits(settings_of(c)).pin_model_elements);
  CHECK(diloco.wire_limits(settings_of(c)).max_model_multiple == 2);
  set_option(c, "inner-steps", 8);
  set_option(c, "fragments", 4);
  CHECK_FALSE(diloco.wire_limits(settings_of(c)).pin_model_elements);
  CHECK(diloco.buffer_sizes(settings_of(c), 1000).channel_elements == 2000);
}

TEST_CASE("diloco's checkpoint holds θ_g and the outer momentum, and a restore puts them back",
          "[daemon][checkpoint][diloco][unit]") {
  SiteConfig c = diloco_config();
  set_shape(c, 4, 0);
  const auto settings = settings_of(c);
  auto backend = std::make_shared<meridian::models::CpuBackend>();
  auto model = meridian::models::make_model("logreg", meridian::models::Shape{1, 2, 2}, 3, {}, backend, 7);
  meridian::gossip::MixChannel channel;
  meridian::models::ScheduleConfig schedule;
  const algorithms::TrainerContext context{settings, *model, backend, channel, schedule};
  auto trainer = algorithms::find_algorithm("diloco")->make_trainer(context);
  const std::size_t n = model->parameters().size();

  auto section = [&](const std::string& name) -> std::vector<float> {
    for (const auto& s : trainer->checkpoint_state())
      if (s.name == name) return {s.values.begin(), s.values.end()};
    return {};
  };
  // At the start θ_g is the parameters and m is zero.
  const std::vector<float> params(model->parameters().begin(), model->parameters().end());
  CHECK(section("diloco-global") == params);
  CHECK(section("diloco-outer-momentum") == std::vector<float>(n, 0.0f));

  Checkpoint cp;
  cp.parameters.assign(n, 0.5f);
  cp.optimizer_state.push_back({"optimizer", std::vector<float>(n, 0.25f)});  // the momentum optimizer's u
  cp.optimizer_state.push_back({"diloco-global", std::vector<float>(n, 1.5f)});
  cp.optimizer_state.push_back({"diloco-outer-momentum", std::vector<float>(n, -2.0f)});
  trainer->restore(cp);
  CHECK(section("diloco-global") == std::vector<float>(n, 1.5f));
  CHECK(section("diloco-outer-momentum") == std::vector<float>(n, -2.0f));
  CHECK(section("optimizer") == std::vector<float>(n, 0.25f));

  cp.optimizer_state.pop_back();
  CHECK_THROWS_AS(trainer->restore(cp), CheckpointError);
  cp.optimizer_state.push_back({"diloco-outer-momentum", std::vector<float>(n + 1, 0.0f)});
  CHECK_THROWS_AS(trainer->restore(cp), CheckpointError);
}

TEST_CASE(
    "diloco's checkpoint holds the wire's error-feedback residuals; old checkpoints resume, wrong ones are refused",
    "[daemon][checkpoint][diloco][compression][unit]") {
  auto backend = std::make_shared<meridian::models::CpuBackend>();
  auto model = meridian::models::make_model("logreg", meridian::models::Shape{1, 2, 2}, 3, {}, backend, 7);
  meridian::gossip::MixChannel channel;
  meridian::models::ScheduleConfig schedule;
  const std::size_t n = model->parameters().size();
  auto make = [&](const std::string& wire) {
    SiteConfig c = diloco_config();
    set_shape(c, 4, 0);
    c.compression = wire;
    const auto settings = settings_of(c);
    return algorithms::find_algorithm("diloco")->make_trainer(
        algorithms::TrainerContext{settings, *model, backend, channel, schedule});
  };
  auto section = [](const TrainerAlgorithm& trainer, const std::string& name) -> std::optional<std::vector<float>> {
    for (const auto& s : trainer.checkpoint_state())
      if (s.name == name) return std::vector<float>{s.values.begin(), s.values.end()};
    return std::nullopt;
  };
  // What a resuming site reads: the sections diloco always writes, and the residuals when given.
  auto checkpoint = [&](std::optional<std::vector<float>> residuals) {
    Checkpoint cp;
    cp.parameters.assign(n, 0.5f);
    cp.optimizer_state.push_back({"optimizer", std::vector<float>(n, 0.25f)});
    cp.optimizer_state.push_back({"diloco-global", std::vector<float>(n, 1.5f)});
    cp.optimizer_state.push_back({"diloco-outer-momentum", std::vector<float>(n, -2.0f)});
    if (residuals) cp.optimizer_state.push_back({"diloco-residuals", *residuals});
    return cp;
  };
  std::vector<float> held(n);
  for (std::size_t i = 0; i < n; ++i) held[i] = 0.001f * static_cast<float>(i + 1);

  for (const char* wire : {"fp16", "int8"}) {
    INFO(wire);
    auto trainer = make(wire);
    // Nothing held back before the first sync.
    CHECK(section(*trainer, "diloco-residuals") == std::vector<float>(n, 0.0f));
    // Saved, written to a file and read back, restored: the same values.
    TempDir dir;
    auto written = checkpoint(held);
    written.model_fingerprint = model->fingerprint();
    written.algorithm = "diloco";
    REQUIRE_FALSE(write_checkpoint_file(dir.path() / "cp.mrdn", written.view()));
    trainer->restore(read_checkpoint_file(dir.path() / "cp.mrdn", model->fingerprint()));
    CHECK(section(*trainer, "diloco-residuals") == held);
    CHECK(section(*trainer, "diloco-global") == std::vector<float>(n, 1.5f));

    // A checkpoint from before the residuals were saved still resumes, with them at zero.
    auto fresh = make(wire);
    fresh->restore(checkpoint(std::nullopt));
    CHECK(section(*fresh, "diloco-residuals") == std::vector<float>(n, 0.0f));
    CHECK(section(*fresh, "diloco-outer-momentum") == std::vector<float>(n, -2.0f));

    // One of another length is refused, naming the section and both lengths.
    std::vector<float> longer = held;
    longer.push_back(0.5f);
    CHECK_THROWS_MATCHES(
        make(wire)->restore(checkpoint(longer)), CheckpointError,
        Catch::Matchers::Message("checkpoint section 'diloco-residuals' (diloco's error-feedback "
                                 "residuals) holds " +
                                 std::to_string(n + 1) + " values, this model needs " + std::to_string(n)));
  }

  // An fp32 wire keeps none: no section, and one in the checkpoint is not used.
  auto dense = make("none");
  CHECK_FALSE(section(*dense, "diloco-residuals"));
  dense->restore(checkpoint(held));
  CHECK_FALSE(section(*dense, "diloco-residuals"));
  CHECK(section(*dense, "diloco-global") == std::vector<float>(n, 1.5f));
}
