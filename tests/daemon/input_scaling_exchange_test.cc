// The messages of the input scaling agreement: exact in both directions, and anything else is not one.
#include <catch2/catch.hpp>

#include <string>

#include "daemon/federation/input_scaling_exchange.h"

using namespace meridian::daemon;
using meridian::models::data::FeatureMoments;
using meridian::models::data::Standardization;

TEST_CASE("moments and scalings travel exactly and a malformed body is not one", "[daemon][normalization][unit]") {
  const FeatureMoments m{1234, {0.1, -1e300, 3.0}, {1.0 / 3.0, 0.0, 2e-300}, {}};
  CHECK(decode_moments(encode_moments(m)) == m);
  const Standardization s{{0.1f, -2.5f}, {1.0f / 3.0f, 7e-30f}};
  const auto back = decode_scaling(encode_scaling(s));
  REQUIRE(back);
  CHECK(back->mean == s.mean);
  CHECK(back->stddev == s.stddev);

  FeatureMoments gaps{10, {1.5, 2.5}, {0.25, 0.5}, {3, 0}};
  CHECK(encode_moments(gaps).ends_with(" missing 3 0"));
  CHECK(decode_moments(encode_moments(gaps)) == gaps);

  for (const std::string body :
       {"moments 3 1 1 1 missing", "moments 3 1 1 1 missing 4", "moments 3 1 1 1 missing 1 1",
        "moments 3 1 1 1 gaps 1", "", "moments", "moments 3", "moments 3 2 0x1p+0 0x1p+0", "moments 3 1 1 -1", "moments 3 1 1 1 extra",
        "moments -3 1 1 1", "moments 3 1 nan 1", "plan steps=3 end=0", "moments3 1 1 1"}) {
    INFO(body);
    CHECK_FALSE(decode_moments(body));
  }
  for (const std::string body :
       {"scaling 0", "scaling 1 0 0", "scaling 1 0 -1", "scaling 1 1e39 1", "scaling 2 0 1", "scaling 1 0 1 2"}) {
    INFO(body);
    CHECK_FALSE(decode_scaling(body));
  }
}

TEST_CASE("a site that agreed answers later moments with its scaling", "[daemon][normalization][unit]") {
  ScalingExchange exchange;
  auto from = [](std::string name, meridian::peer::Message m) {
    m.from = std::move(name);
    return m;
  };
  const FeatureMoments m{10, {5.0}, {2.0}, {}};
  auto noted = exchange.note(from("ohio", moments_message(m)));
  CHECK(noted.recognized);
  CHECK_FALSE(noted.reply);  // nothing agreed yet
  CHECK(exchange.moments().at("ohio") == m);

  const Standardization agreed{{0.5f}, {2.0f}};
  exchange.agree(agreed);
  noted = exchange.note(from("utah", moments_message(m)));
  REQUIRE(noted.reply);
  CHECK(noted.reply->tag == kScalingTag);
  CHECK(decode_scaling(noted.reply->body)->mean == agreed.mean);

  CHECK_FALSE(exchange.heard_scaling());
  CHECK(exchange.note(from("utah", scaling_message(agreed))).recognized);
  CHECK(exchange.heard_scaling()->stddev == agreed.stddev);

  meridian::peer::Message other;
  other.kind = meridian::peer::MessageKind::kControl;
  other.tag = kMomentsTag;
  other.body = "moments x";
  CHECK_FALSE(exchange.note(other).recognized);
}
