// Who reaches whom, as a site knows it from its own report and its peers': the causes it names for
// sites that do not reach each other, and the reports' encoding.
#include <catch2/catch.hpp>

#include "daemon/federation/reachability.h"

using namespace meridian::daemon;
using Catch::Matchers::Contains;

namespace {

meridian::peer::Message from(const std::string& site, const ReachReport& report) {
  auto m = reach_message(report);
  m.from = site;
  return m;
}

}  // namespace

TEST_CASE("a reach report survives its encoding; anything else is refused", "[daemon][reach][unit]") {
  for (const ReachReport& r : {ReachReport{}, ReachReport{{"a", "b"}, {}, {"c"}}, ReachReport{{"a"}, {"x", "y"}, {}}})
    CHECK(decode_reach(encode_reach(r)) == r);
  CHECK(encode_reach({{"a", "b"}, {"c"}, {}}) == "reach members=a,b unlisted=c refused_by=");
  for (const std::string bad : {"", "reach", "reach members=a", "reach members=a, unlisted= refused_by=",
                                "reach members=a b unlisted= refused_by=", "reach members=a\n unlisted= refused_by=",
                                "summary members= unlisted= refused_by=", "reach members=a unlisted=b/c refused_by="})
    CHECK_FALSE(decode_reach(bad));
}

TEST_CASE("a roster that lacks a member names the cause wherever its site reports it", "[daemon][reach][unit]") {
  // northclinic's roster lacks riverside; stmarys and riverside list all three. riverside joined through
  // northclinic, whose handshake refused its key.
  const ReachReport north{{"northclinic", "stmarys"}, {"riverside"}, {}};
  const ReachReport river{{"riverside", "stmarys"}, {}, {"northclinic"}};
  const ReachReport marys{{"northclinic", "riverside", "stmarys"}, {}, {}};

  SECTION("at stmarys, from both reports") {
    Reachability here("stmarys", std::set<std::string>{"northclinic", "riverside", "stmarys"});
    CHECK(here.causes(marys).empty());  // nothing heard yet: nothing to say
    REQUIRE(here.note(from("northclinic", north)));
    REQUIRE(here.note(from("riverside", river)));
    const auto causes = here.causes(marys);
    REQUIRE(causes.size() == 1);
    CHECK_THAT(causes[0], Contains("riverside is not reachable from northclinic: "));
    CHECK_THAT(causes[0], Contains("northclinic's roster does not list riverside (as northclinic reports)"));
    CHECK_THAT(causes[0], Contains("northclinic refused riverside's key (as riverside reports)"));
    CHECK(here.unlisted().empty());
  }
  SECTION("at northclinic, whose roster lacks it") {
    Reachability here("northclinic", std::set<std::string>{"northclinic", "stmarys"});
    REQUIRE(here.note(from("stmarys", marys)));
    const auto unlisted = here.unlisted();
    REQUIRE(unlisted.size() == 1);
    CHECK(unlisted.at("riverside") == std::set<std::string>{"stmarys"});
    const auto own = here.own_report({"northclinic", "stmarys"}, {});
    CHECK(own.unlisted == std::vector<std::string>{"riverside"});
    const auto causes = here.causes(own);
    REQUIRE(causes.size() == 1);
    CHECK(causes[0] == "riverside is not reachable from here: this site's roster does not list riverside");
  }
  SECTION("at riverside, refused") {
    Reachability here("riverside", std::set<std::string>{"northclinic", "riverside", "stmarys"});
    REQUIRE(here.note(from("stmarys", marys)));
    const auto causes = here.causes(river);
    REQUIRE(causes.size() == 1);
    CHECK(causes[0] == "this site is not reachable from northclinic: northclinic refused this site's key");
  }
  SECTION("a member this site does not reach, with no cause known") {
    Reachability here("riverside", std::set<std::string>{"northclinic", "riverside", "stmarys"});
    REQUIRE(here.note(from("stmarys", marys)));
    const auto causes = here.causes({{"riverside", "stmarys"}, {}, {}});
    REQUIRE(causes.size() == 1);
    CHECK_THAT(causes[0], Contains("northclinic is a member at stmarys but has not reached this site; no cause is "
                                   "known here (is the key this site's roster lists for northclinic its current one?"));
  }
  SECTION("a site that left says nothing any more") {
    Reachability here("stmarys", std::nullopt);
    REQUIRE(here.note(from("northclinic", north)));
    here.keep_only({"riverside"});
    CHECK(here.causes(marys).empty());
    CHECK(here.unlisted().empty());  // no roster (--insecure): every name is admissible
  }
}
