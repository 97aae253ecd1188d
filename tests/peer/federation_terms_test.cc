// Federation terms: the comparison (which field differs, both values named), their trip in a hello,
// and the refusal between two real ZeroMQ transports with CurveZMQ on loopback.
#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <thread>

#include "peer/curve_keys.h"
#include "peer/federation_terms.h"
#include "peer/wire_codec.h"
#include "peer/zmq/zmq_transport.h"
#include "tests/support/eventually.h"

using namespace meridian::peer;
using namespace std::chrono_literals;

namespace {

const FederationTerms kOurs{{"model", "mlp|in=2x1x1|linear(2->8)"}, {"algorithm", "sgp, K = 1 out-peer(s), tau = 1"}};

using meridian::tests::eventually;

}  // namespace

TEST_CASE("equal terms agree, whatever their order", "[peer][terms][unit]") {
  CHECK_FALSE(compare_terms(kOurs, kOurs));
  CHECK_FALSE(compare_terms(kOurs, FederationTerms{kOurs[1], kOurs[0]}));
  CHECK_FALSE(compare_terms({}, {}));
}

TEST_CASE("the first differing field is named with both values", "[peer][terms][unit]") {
  FederationTerms theirs = kOurs;
  theirs[1].value = "allreduce";
  const auto m = compare_terms(kOurs, theirs);
  REQUIRE(m);
  CHECK(*m == TermsMismatch{"algorithm", "sgp, K = 1 out-peer(s), tau = 1", "allreduce"});
  CHECK(refusal_reason("alpha", *m) ==
        "alpha refuses this site: algorithm differs (alpha: sgp, K = 1 out-peer(s), tau = 1; this site: allreduce)");
  CHECK(refusal_log_detail("beta", *m) ==
        "refused at join: algorithm differs (this site: sgp, K = 1 out-peer(s), tau = 1; beta: allreduce)");

  // Our order decides which difference is named first.
  theirs[0].value = "mlp|in=2x1x1|linear(2->16)";
  CHECK(compare_terms(kOurs, theirs)->field == "model");
}

TEST_CASE("a differing term is named by its display where both sides have one, by its value where the displays agree",
          "[peer][terms][unit]") {
  const FederationTerms ours{{"model", "mlp|in=784x1x1|linear(784->256)|relu", "mlp 784-256 (200,960 parameters)"}};
  FederationTerms theirs{{"model", "cnn|in=1x28x28|conv2d(1->6,k5,s1,p2)", "cnn 1x28x28-6x28x28 (156 parameters)"}};
  const auto m = compare_terms(ours, theirs);
  REQUIRE(m);
  CHECK(*m == TermsMismatch{"model", "mlp 784-256 (200,960 parameters)", "cnn 1x28x28-6x28x28 (156 parameters)"});
  CHECK(refusal_reason("alpha", *m) ==
        "alpha refuses this site: model differs (alpha: mlp 784-256 (200,960 "
        "parameters); this site: cnn 1x28x28-6x28x28 (156 parameters))");
  // Equal displays leave out what differs (here the activation): the values say it.
  theirs = {{"model", "mlp|in=784x1x1|linear(784->256)|gelu", "mlp 784-256 (200,960 parameters)"}};
  CHECK(*compare_terms(ours, theirs) ==
        TermsMismatch{"model", "mlp|in=784x1x1|linear(784->256)|relu", "mlp|in=784x1x1|linear(784->256)|gelu"});
  // A peer without a display (an older version) is named by its value, and so are we.
  theirs = {{"model", "cnn|in=1x28x28|conv2d(1->6,k5,s1,p2)"}};
  CHECK(compare_terms(ours, theirs)->ours == "mlp|in=784x1x1|linear(784->256)|relu");
  // Displays are never compared: equal values with other displays agree.
  theirs = {{"model", ours[0].value, "something else"}};
  CHECK_FALSE(compare_terms(ours, theirs));
}

TEST_CASE("a field only one side announces is a difference", "[peer][terms][unit]") {
  FederationTerms more = kOurs;
  more.push_back({"optimizer", "adam"});
  CHECK(*compare_terms(kOurs, more) == TermsMismatch{"optimizer", "(not announced)", "adam"});
  CHECK(*compare_terms(more, kOurs) == TermsMismatch{"optimizer", "adam", "(not announced)"});
  // A peer that announces nothing (an older version) differs from a site that has terms.
  CHECK(compare_terms(kOurs, {})->theirs == "(not announced)");
}

TEST_CASE("terms and a refusal travel in the hello; oversized terms do not decode", "[peer][terms][wire][unit]") {
  HelloInfo hello{"alpha", "tcp://127.0.0.1:7000", "", 5, 9, kOurs, "beta refuses this site: ..."};
  hello.terms[0].display = "mlp 2-8 (24 parameters)";
  const auto back = decode_hello(encode_hello(hello));
  REQUIRE(std::holds_alternative<HelloInfo>(back));
  CHECK(std::get<HelloInfo>(back) == hello);

  HelloInfo plain{"alpha", "tcp://127.0.0.1:7000", "", 5, 9, {}, {}};
  CHECK(std::get<HelloInfo>(decode_hello(encode_hello(plain))) == plain);

  HelloInfo huge = plain;
  huge.terms.push_back({"model", std::string(64 * 1024, 'x')});
  CHECK(std::holds_alternative<Rejection>(decode_hello(encode_hello(huge))));
  HelloInfo unnamed = plain;
  unnamed.terms.push_back({"", "x"});
  CHECK(std::holds_alternative<Rejection>(decode_hello(encode_hello(unnamed))));
}

TEST_CASE("a secure site refuses a joiner with other terms; the joiner hears why and is never a member",
          "[peer][terms][zmq][cluster]") {
  std::map<std::string, CurveKeyPair> keys{{"alpha", generate_curve_key_pair()}, {"beta", generate_curve_key_pair()}};
  Roster roster;
  for (const auto& [name, pair] : keys) roster.add({name, pair.public_key, ""});
  auto options = [&](const std::string& name, FederationTerms terms, std::uint64_t fingerprint) {
    ZmqTransportOptions o;
    o.name = name;
    o.keys = keys.at(name);
    o.roster = roster;
    o.heartbeat_interval = 50ms;
    o.heartbeat_timeout = 10s;
    o.validation.model_fingerprint = fingerprint;
    o.terms = std::move(terms);
    return o;
  };
  FederationTerms other = kOurs;
  other[0].value = "mlp|in=2x1x1|linear(2->16)";
  // Another model also means another header fingerprint: the terms are still compared and named.
  ZmqTransport alpha(options("alpha", kOurs, 1));
  auto beta_options = options("beta", other, 2);
  beta_options.bootstrap = {"alpha@" + alpha.endpoint()};
  ZmqTransport beta(std::move(beta_options));

  REQUIRE(eventually([&] { return beta.refusal().has_value(); }));
  CHECK(*beta.refusal() ==
        "alpha refuses this site: model differs (alpha: mlp|in=2x1x1|linear(2->8); this site: "
        "mlp|in=2x1x1|linear(2->16))");
  CHECK(alpha.rejections().count(RejectCause::kTerms) >= 1);
  CHECK(alpha.rejections().count(RejectCause::kFingerprint) == 0);
  CHECK(alpha.alive_members() == std::vector<std::string>{"alpha"});
  CHECK(beta.alive_members() == std::vector<std::string>{"beta"});
  CHECK_FALSE(alpha.refusal());
}

TEST_CASE("sites with equal terms meet as before", "[peer][terms][zmq][cluster]") {
  ZmqTransportOptions a_options;
  a_options.name = "alpha";
  a_options.insecure = true;
  a_options.heartbeat_interval = 50ms;
  a_options.heartbeat_timeout = 10s;
  a_options.terms = kOurs;
  ZmqTransport alpha(a_options);
  ZmqTransportOptions b_options = a_options;
  b_options.name = "beta";
  b_options.bootstrap = {alpha.endpoint()};
  ZmqTransport beta(std::move(b_options));
  const std::vector<std::string> both{"alpha", "beta"};
  REQUIRE(eventually([&] { return alpha.alive_members() == both && beta.alive_members() == both; }));
  CHECK(alpha.rejections().count(RejectCause::kTerms) == 0);
  CHECK_FALSE(beta.refusal());
}
