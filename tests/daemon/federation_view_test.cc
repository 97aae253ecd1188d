// The federation view's pieces in-process: the summary a site sends its peers (encoding, what a
// hostile body gets), the view kept from them (rows, members leaving, curves that keep spanning the
// run), the status page rendered from it, and the control protocol's federation and roster messages.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "daemon/control/control_protocol.h"
#include "daemon/federation/federation_view.h"
#include "daemon/status/status_page.h"

using namespace meridian::daemon;
using Catch::Matchers::Contains;
using Clock = std::chrono::steady_clock;

namespace {

SiteRow summary(const std::string& state, std::uint64_t step, std::optional<double> loss,
                std::optional<double> accuracy) {
  SiteRow r;
  r.state = state;
  r.step = step;
  r.epoch = step / 10;
  r.train_loss = loss;
  r.test_accuracy = accuracy;
  r.samples_per_second = loss ? std::optional<double>(1234.5) : std::nullopt;
  r.push_sum_weight = 0.75;
  r.staleness = 2;
  return r;
}

meridian::peer::Message from(const std::string& site, const SiteRow& row) {
  auto m = summary_message(row);
  m.from = site;
  return m;
}

}  // namespace

TEST_CASE("a site's summary survives its encoding, unmeasured values included", "[unit][daemon][federation]") {
  for (const auto& row : {summary("training", 1200, 0.4321, 0.8125), summary("joining", 0, std::nullopt, std::nullopt),
                          summary("stopped", 7, 0.5, std::nullopt)}) {
    const auto body = encode_summary(row);
    INFO(body);
    CHECK(body.size() < 120);
    const auto back = decode_summary(body);
    REQUIRE(back);
    CHECK(back->state == row.state);
    CHECK(back->step == row.step);
    CHECK(back->epoch == row.epoch);
    CHECK(back->train_loss.has_value() == row.train_loss.has_value());
    if (row.train_loss) CHECK(*back->train_loss == Approx(*row.train_loss));
    CHECK(back->test_accuracy.has_value() == row.test_accuracy.has_value());
    CHECK(back->samples_per_second.has_value() == row.samples_per_second.has_value());
    CHECK(back->push_sum_weight == Approx(0.75));
    CHECK(back->staleness == 2);
  }
  CHECK(encode_summary(summary("joining", 0, std::nullopt, std::nullopt)) ==
        "summary state=joining step=0 epoch=0 loss=- acc=- sps=- w=0.75 stale=2");
}

TEST_CASE("anything but a well-formed summary is ignored", "[unit][daemon][federation]") {
  const std::string good = "summary state=training step=5 epoch=0 loss=0.5 acc=- sps=10 w=1 stale=0";
  REQUIRE(decode_summary(good));
  for (const std::string& bad :
       std::vector<std::string>{"", "summary", "plan steps=4 end=0",
                                "summary state=exploding step=5 epoch=0 loss=0.5 acc=- sps=10 w=1 stale=0",
                                "summary state=training step=-5 epoch=0 loss=0.5 acc=- sps=10 w=1 stale=0",
                                "summary state=training step=5 epoch=0 loss=half acc=- sps=10 w=1 stale=0",
                                "summary state=training step=5 epoch=0 loss=0.5 acc=- sps=10 w=- stale=0",
                                "summary state=training step=5 epoch=0 loss=0.5 acc=- sps=10 w=1 stale=0 extra=1",
                                "summary state=training epoch=0 step=5 loss=0.5 acc=- sps=10 w=1 stale=0",
                                "summary state=training step=5 epoch=0 loss=0.5 acc=- sps=10 w=1 stale=", good + " "}) {
    INFO(bad);
    CHECK_FALSE(decode_summary(bad));
  }
  FederationView view("alpha", Clock::now());
  meridian::peer::Message plan;
  plan.kind = meridian::peer::MessageKind::kControl;
  plan.tag = 0x706c616e;
  plan.body = "plan steps=4 end=0";
  plan.from = "beta";
  CHECK_FALSE(view.note(plan, Clock::now()));
  CHECK(view.rows(Clock::now()).empty());
}

TEST_CASE("the view shows this site first, then every member by name; a site that left goes",
          "[unit][daemon][federation]") {
  const auto t0 = Clock::now();
  FederationView view("beta", t0);
  view.note_self(summary("training", 100, 0.5, 0.7), t0);
  REQUIRE(view.note(from("gamma", summary("training", 98, 0.6, std::nullopt)), t0));
  REQUIRE(view.note(from("alpha", summary("training", 101, 0.4, 0.75)), t0 + std::chrono::seconds(1)));
  view.keep_only({"alpha", "gamma", "delta"}, {"gamma"});

  const auto rows = view.rows(t0 + std::chrono::seconds(3));
  REQUIRE(rows.size() == 4);
  CHECK(rows[0].site == "beta");
  CHECK(rows[0].self);
  CHECK(rows[0].last_heard_seconds == 0.0);
  CHECK(rows[1].site == "alpha");
  CHECK(rows[1].state == "training");
  CHECK(rows[1].step == 101);
  CHECK(*rows[1].last_heard_seconds == Approx(2.0));
  CHECK(rows[2].site == "delta");
  CHECK(rows[2].state == "unheard");
  CHECK_FALSE(rows[2].last_heard_seconds);
  CHECK(rows[3].site == "gamma");
  CHECK(rows[3].state == "dead");
  CHECK_FALSE(rows[3].test_accuracy);

  // gamma left (or was taken out of the roster): it leaves the view; this site always stays.
  view.keep_only({"alpha"}, {});
  const auto after = view.rows(t0 + std::chrono::seconds(4));
  REQUIRE(after.size() == 2);
  CHECK(after[0].site == "beta");
  CHECK(after[1].site == "alpha");
}

TEST_CASE("a site's curve stays bounded and keeps spanning the whole run", "[unit][daemon][federation]") {
  const auto t0 = Clock::now();
  FederationView view("alpha", t0);
  const int seconds = 5000;
  for (int s = 0; s <= seconds; ++s)
    view.note_self(summary("training", static_cast<std::uint64_t>(s), 1.0 / (1 + s), std::nullopt),
                   t0 + std::chrono::seconds(s));
  const auto curve = view.curves().at("alpha");
  CHECK(curve.size() <= FederationView::kCurvePoints);
  CHECK(curve.size() > FederationView::kCurvePoints / 4);
  CHECK(curve.front().seconds < 20);
  CHECK(curve.back().seconds > 0.95 * seconds);
  for (std::size_t i = 1; i < curve.size(); ++i) CHECK(curve[i].seconds > curve[i - 1].seconds);
}

TEST_CASE("the status page shows every site, the links and a curve per site", "[unit][daemon][federation]") {
  const auto t0 = Clock::now();
  FederationView view("alpha", t0);
  for (int s = 0; s < 5; ++s) {
    view.note_self(summary("training", 10u * s, 2.0 - 0.3 * s, 0.5 + 0.05 * s), t0 + std::chrono::seconds(s));
    REQUIRE(view.note(from("beta<x>", summary("training", 10u * s, 2.1 - 0.3 * s, 0.45 + 0.05 * s)),
                      t0 + std::chrono::seconds(s)));
  }
  StatusPage page;
  page.self = "alpha";
  page.algorithm = "sgp";
  page.sites = view.rows(t0 + std::chrono::seconds(5));
  PeerReport link;
  link.name = "beta<x>";
  link.address = "tcp://127.0.0.1:7401";
  link.state = "alive";
  link.rtt_seconds = 0.0021;
  link.bytes_sent = 2048;
  page.links = {link};
  page.curves = view.curves();
  page.progress = "40 of 200 rounds (20.0%), about 8 s left";
  page.notes = {"gamma is a member at beta but this site's roster (r<1>.txt) does not list it"};
  const auto html = render_status_page(page);
  CHECK_THAT(html, Contains("<p id=\"progress\">Run: 40 of 200 rounds (20.0%), about 8 s left</p>"));
  CHECK_THAT(html, Contains("<ul id=\"notes\">\n<li>gamma is a member at beta but this site&#39;s roster "
                            "(r&lt;1&gt;.txt) does not list it</li>"));
  CHECK_THAT(html, Contains("<table id=\"sites\">"));
  CHECK_THAT(html,
             Contains("<tr data-site=\"alpha\" class=\"self\"><td>alpha (this site)</td><td>training</td><td>40"));
  // Names are escaped wherever they appear.
  CHECK_THAT(html, Contains("<tr data-site=\"beta&lt;x&gt;\""));
  CHECK(html.find("beta<x>") == std::string::npos);
  CHECK_THAT(html, Contains("<tr data-peer=\"beta&lt;x&gt;\"><td>beta&lt;x&gt;</td><td>alive</td>"));
  CHECK_THAT(html, Contains("2.1 ms"));
  CHECK_THAT(html, Contains("<svg id=\"loss-chart\""));
  CHECK_THAT(html, Contains("<polyline data-site=\"alpha\""));
  CHECK_THAT(html, Contains("<svg id=\"accuracy-chart\""));
  CHECK_THAT(html, Contains("http-equiv=\"refresh\""));
  // Self-contained: nothing is fetched from elsewhere.
  CHECK(html.find("src=") == std::string::npos);
  CHECK(html.find("<link") == std::string::npos);
  CHECK(html.find("<script") == std::string::npos);

  StatusPage empty;
  empty.self = "alpha";
  CHECK_THAT(render_status_page(empty), Contains("no measurement yet"));
  CHECK(render_status_page(empty).find("id=\"progress\"") == std::string::npos);  // before the rounds are agreed
  CHECK(render_status_page(empty).find("id=\"notes\"") == std::string::npos);
}

TEST_CASE("federation and roster requests and replies round-trip the control protocol", "[unit][daemon][control]") {
  CHECK(decode_request(encode_request(ControlCommand::kFederation)) == ControlCommand::kFederation);
  RosterChange add{RosterChange::Action::kAdd, "epsilon", std::string(40, 'a'), "tcp://10.0.0.5:7400"};
  const auto request = decode_control_request(encode_roster_request(add));
  CHECK(request.command == ControlCommand::kRoster);
  CHECK(request.roster == add);
  CHECK_THROWS_WITH(decode_control_request(R"({"version":1,"command":"roster","roster":{"action":"purge"}})"),
                    Contains("unknown roster action 'purge'"));
  CHECK_THROWS_WITH(decode_control_request(R"({"version":1,"command":"roster"})"), Contains("no \"roster\""));

  std::vector<SiteRow> rows{summary("training", 3, 0.5, std::nullopt), summary("joining", 0, std::nullopt, 0.9)};
  rows[0].site = "alpha";
  rows[0].self = true;
  rows[0].last_heard_seconds = 0.0;
  rows[1].site = "beta";
  CHECK(decode_federation_reply(encode_federation_reply(rows)) == rows);

  RosterReport report{"added epsilon", "/etc/meridian/roster.txt", {{"alpha", std::string(40, 'b'), ""}}};
  CHECK(decode_roster_reply(encode_roster_reply(report)) == report);
  CHECK_THROWS_WITH(decode_roster_reply(encode_error_reply("site 'x' is not in roster r")),
                    Contains("the daemon says: site 'x' is not in roster r"));
}
