#include <catch2/catch.hpp>

#include "error/error.h"
#include "peer/wan_model.h"

using namespace meridian::peer;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

TEST_CASE("world4 has the one-way latencies of docs/wan-emulation.md", "[peer][wan][world4][unit]") {
  const WanModel w = parse_wan_spec("world4");
  REQUIRE(w.regions() == 4);
  CHECK(w.region_name(0) == "oregon");
  CHECK(w.region_name(1) == "ohio");
  CHECK(w.region_name(2) == "london");
  CHECK(w.region_name(3) == "tokyo");
  struct Pair {
    const char* a;
    const char* b;
    std::chrono::milliseconds one_way;
  };
  for (const Pair& p : {Pair{"oregon", "ohio", 50ms}, Pair{"oregon", "tokyo", 100ms}, Pair{"oregon", "london", 135ms},
                        Pair{"ohio", "london", 85ms}, Pair{"ohio", "tokyo", 155ms}, Pair{"london", "tokyo", 277ms}}) {
    INFO(p.a << " - " << p.b);
    CHECK(w.link(p.a, p.b).latency == p.one_way);
    CHECK(w.link(p.b, p.a).latency == p.one_way);
    CHECK(w.link(p.a, p.b).bandwidth_bits_per_s == 0);
  }
  for (std::size_t r = 0; r < 4; ++r) CHECK(w.link(r, r).latency == 1ms);
  CHECK(w.emulates());
  CHECK(w.spec() == "world4");
  // Sites of a simulation go round the regions.
  CHECK(w.region_of_site(0) == 0);
  CHECK(w.region_of_site(3) == 3);
  CHECK(w.region_of_site(5) == 1);
  CHECK(w.region_name(w.region_of_site(6)) == "london");
  CHECK(w.region_index("tokyo") == 3u);
  CHECK_FALSE(w.region_index("paris"));
  CHECK_THROWS_WITH(w.link("oregon", "paris"), Contains("unknown region \"paris\"") && Contains("oregon, ohio"));
  CHECK_THROWS_AS(w.link(0, 4), meridian::error::InternalError);
}

TEST_CASE("world4 takes jitter, bandwidth and loss for every link but keeps its latencies",
          "[peer][wan][world4][unit]") {
  const WanModel w = parse_wan_spec("world4,bandwidth=20mbit,jitter=5ms,loss=0.01");
  for (std::size_t a = 0; a < 4; ++a) {
    for (std::size_t b = 0; b < 4; ++b) {
      CHECK(w.link(a, b).bandwidth_bits_per_s == 20e6);
      CHECK(w.link(a, b).jitter == 5ms);
      CHECK(w.link(a, b).loss == 0.01);
    }
  }
  CHECK(w.link("london", "tokyo").latency == 277ms);
  CHECK(w.spec() == "world4,jitter=5ms,bandwidth=20mbit,loss=0.01");
  CHECK(parse_wan_spec(w.spec()).link(1, 2) == w.link(1, 2));
  CHECK_THROWS_WITH(parse_wan_spec("world4,latency=5ms"), Contains("world4 fixes the latency"));
  CHECK_THROWS_WITH(parse_wan_spec("world4,bandwidth=20"), Contains("bandwidth \"20\" needs a unit"));
  CHECK_THROWS_WITH(parse_wan_spec("world4 bandwidth=20mbit"), Contains("expected a comma after world4"));
  CHECK_THROWS_WITH(parse_wan_spec("world5"), Contains("unknown preset \"world5\" (known: world4)"));
}

TEST_CASE("a plain link spec applies to every link; an empty one emulates nothing", "[peer][wan][unit]") {
  const WanModel u = parse_wan_spec("latency=120ms,jitter=10ms");
  CHECK(u.regions() == 1);
  CHECK(u.region_of_site(7) == 0);
  CHECK(u.link(0, 0).latency == 120ms);
  CHECK(u.emulates());
  CHECK(u.spec() == "latency=120ms,jitter=10ms");

  const WanModel none = parse_wan_spec("");
  CHECK_FALSE(none.emulates());
  CHECK(none.link(0, 0).is_none());
  CHECK_FALSE(WanModel().emulates());
  CHECK_THROWS_AS(parse_wan_spec("latency=fast"), meridian::error::UserError);
}
