// bench/bench_wan.py --report-only on a fixed raw.json: the tables of docs/results.md are computed
// from simulate's JSON the way the document says (efficiency = local s/step ÷ algorithm s/step, accuracy
// difference against allreduce, spread over repeats), and the plots are written.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/support/build_paths.h"
#include "tests/support/file_contents.h"
#include "tests/support/temp_dir.h"

namespace {

std::string row(const std::string& algo, double sps, double acc) {
  std::ostringstream o;
  o << R"({"algo": ")" << algo << R"(", "sites": 4, "test_accuracy": )" << acc << R"(, "mean_site_accuracy": )" << acc
    << R"(, "seconds_per_step": )" << sps
    << R"(, "seconds_to_target": null, "bytes_sent_per_site": 2000000, "bytes_received_per_site": 2000000,)"
    << R"( "steps_per_site": 40, "rounds_abandoned": 0, "wall_seconds": 12})";
  return o.str();
}

std::string record(const std::string& label, const std::string& rows, const std::string& more) {
  return R"({"label": ")" + label + R"(", "sites": 4, "algos": [], "command": "meridian simulate x",)" +
         R"( "started": 1790000000, "seconds": 30, "load_before": [2.5, 2, 2], "load_after": [3.5, 3, 3],)" +
         R"( "status": 0, "result": {"results": [)" + rows + "]}" + more + "}";
}

}  // namespace

TEST_CASE("bench-wan's report computes efficiency, spread and accuracy differences from simulate's JSON",
          "[bench][process]") {
  if (std::system("python3 -c 'import json' >/dev/null 2>&1") != 0) {
    WARN("SKIPPED: python3 is not installed");
    return;
  }
  const meridian::tests::TempDir tmp;
  const auto& dir = tmp.path();
  {
    std::ofstream raw(dir / "raw.json");
    raw << R"({"meta": {"commit": "abc1234", "plan": "quick"}, "e1": [)"
        << record("s4-local-r0", row("local", 0.05, 0.5), "") << ","
        << record("s4-l100-r0", row("allreduce", 0.5, 0.5) + "," + row("dts:delay=8:period=8", 0.0625, 0.5),
                  R"(, "latency_ms": 100, "repeat": 0)")
        << "," << record("s4-local-r1", row("local", 0.05, 0.5), "") << ","
        << record("s4-l100-r1", row("allreduce", 0.25, 0.5) + "," + row("dts:delay=8:period=8", 0.05, 0.5),
                  R"(, "latency_ms": 100, "repeat": 1)")
        << R"(], "e4": [)"
        << record("ablation",
                  row("allreduce", 0.1, 0.80) + "," + row("dts:delay=8:period=4:compensation=off", 0.1, 0.765), "")
        << "]}";
  }
  const std::string command = "python3 " + std::string(meridian::tests::source_dir()) +
                              "/bench/bench_wan.py --quick --report-only --out " + dir.string() + " --doc " +
                              (dir / "results.md").string() + " >/dev/null 2>&1";
  REQUIRE(std::system(command.c_str()) == 0);
  const std::string doc = meridian::tests::file_contents(dir / "results.md");
  INFO(doc);
  // local 50 ms; allreduce 500 and 250 ms -> efficiency 0.10 and 0.20, median 0.15; dts 62.5 and 50 ms.
  CHECK(doc.find("| 100 ms | 2.0 |") != std::string::npos);
  CHECK(doc.find("375 (250–500) ms, eff. 0.15 (0.10–0.20)") != std::string::npos);
  CHECK(doc.find("eff. 0.90 (0.80–1.00) `delay=8:period=8`") != std::string::npos);
  CHECK(doc.find("| `dts:delay=8:period=4:compensation=off` | 76.5% | 76.5% | -3.5 pt |") != std::string::npos);
  CHECK(doc.find("Load average 2.5 before, 3.5 after") != std::string::npos);
  CHECK(doc.find("_Not run in this plan._") != std::string::npos);  // experiments 2, 3, 5, 6
  CHECK(doc.find("QUICK variant") != std::string::npos);
  const std::string svg = meridian::tests::file_contents(dir / "results" / "latency-efficiency-4.svg");
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find("allreduce") != std::string::npos);
}
