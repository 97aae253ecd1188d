// The suite's tiers, which `make test-fast` and any selection by cost rely on: every test case names
// exactly one of
//   [unit]     in this process alone: no child process, no socket to another site;
//   [cluster]  several sites or transports in this process, over loopback sockets or the in-memory network;
//   [process]  starts real processes (the meridian binary, scripts, other tools, network namespaces).
// Hidden cases ("[.name]") are tools run by name, such as the seed-corpus writer; they carry no tier so
// that selecting a tier never runs them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <string>
#include <vector>

TEST_CASE("every test case carries exactly one tier tag: unit or cluster or process", "[tests][unit]") {
  constexpr std::array<const char*, 3> kTiers = {"unit", "cluster", "process"};
  const auto& cases = Catch::getAllTestCasesSorted(*Catch::getCurrentContext().getConfig());
  REQUIRE(cases.size() > 1);  // the registry holds the suite, not only this case
  std::vector<std::string> wrong;
  for (const auto& c : cases) {
    const auto tiers = std::count_if(c.lcaseTags.begin(), c.lcaseTags.end(), [&](const std::string& tag) {
      return std::find(kTiers.begin(), kTiers.end(), tag) != kTiers.end();
    });
    if (tiers != (c.isHidden() ? 0 : 1))
      wrong.push_back(c.lineInfo.file + std::string(":") + std::to_string(c.lineInfo.line) + " \"" + c.name + "\" " +
                      c.tagsAsString());
  }
  std::string list;
  for (const auto& w : wrong) list += "\n  " + w;
  INFO("cases without exactly one tier tag (hidden cases: none):" << list);
  CHECK(wrong.empty());
}
