#include <catch2/catch.hpp>

#include "error/error.h"
#include "peer/link_spec.h"

using namespace meridian::peer;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

TEST_CASE("link specs parse every field and unit", "[peer][wan][link_spec][unit]") {
  const LinkSpec s = parse_link_spec("latency=120ms,jitter=10ms,bandwidth=50mbit,loss=0.001");
  CHECK(s.latency == 120ms);
  CHECK(s.jitter == 10ms);
  CHECK(s.bandwidth_bits_per_s == 50e6);
  CHECK(s.loss == 0.001);

  CHECK(parse_link_spec("latency=250us").latency == 250us);
  CHECK(parse_link_spec("latency=1.5s").latency == 1500ms);
  CHECK(parse_link_spec("latency=0.5ms").latency == 500us);
  CHECK(parse_link_spec(" jitter = 2ms , latency=3ms ").latency == 3ms);
  CHECK(parse_link_spec("bandwidth=9600bit").bandwidth_bits_per_s == 9600);
  CHECK(parse_link_spec("bandwidth=512kbit").bandwidth_bits_per_s == 512e3);
  CHECK(parse_link_spec("bandwidth=1.5Gbit").bandwidth_bits_per_s == 1.5e9);
  CHECK(parse_link_spec("loss=0.1%").loss == Approx(0.001));
  CHECK(parse_link_spec("loss=0").loss == 0);

  CHECK(parse_link_spec("").is_none());
  CHECK(parse_link_spec("  ").is_none());
  CHECK_FALSE(s.is_none());
  CHECK(parse_link_spec(s.to_string()) == s);
  CHECK(parse_link_spec(parse_link_spec("latency=250us,jitter=1s").to_string()) ==
        parse_link_spec("latency=250us,jitter=1s"));
  CHECK(LinkSpec{}.to_string().empty());
  CHECK(s.to_string() == "latency=120ms,jitter=10ms,bandwidth=50mbit,loss=0.001");
  CHECK(parse_link_spec("bandwidth=9600bit,latency=1500us").to_string() == "latency=1500us,bandwidth=9600bit");
  CHECK(parse_link_spec("bandwidth=1.5gbit").to_string() == "bandwidth=1500mbit");
}

TEST_CASE("bad link specs name the field and show a valid example", "[peer][wan][link_spec][unit]") {
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c :
       {Case{"latency=120", "latency \"120\" needs a unit: us, ms or s"},
        Case{"latency=120min", "latency unit \"min\" is unknown"},
        Case{"latency=fast", "latency \"fast\" is not a number"}, Case{"latency=-5ms", "latency must not be negative"},
        Case{"jitter=10", "jitter \"10\" needs a unit"},
        Case{"bandwidth=50", "bandwidth \"50\" needs a unit: bit, kbit, mbit or gbit"},
        Case{"bandwidth=50mb", "bandwidth unit \"mb\" is unknown"},
        Case{"bandwidth=0mbit", "leave bandwidth out for an unlimited link"},
        Case{"loss=1", "loss \"1\" is outside [0, 1)"}, Case{"loss=-0.1", "loss \"-0.1\" is outside [0, 1)"},
        Case{"loss=high", "loss \"high\" is not a probability"},
        Case{"delay=5ms", "unknown field \"delay\"; known fields are latency, jitter, bandwidth and loss"},
        Case{"latency=5ms,latency=6ms", "latency is given twice"},
        Case{"latency", "field \"latency\" is not key=value"}, Case{"latency=5ms,,loss=0", "empty field"},
        Case{"latency=5ms,", "empty field"}}) {
    INFO(c.text);
    CHECK_THROWS_AS(parse_link_spec(c.text), meridian::error::UserError);
    CHECK_THROWS_WITH(parse_link_spec(c.text), Contains(c.says) && Contains(std::string("\"") + c.text + "\""));
  }
  CHECK_THROWS_WITH(parse_link_spec("latency=120"), Contains("e.g. latency=120ms"));
  CHECK_THROWS_WITH(parse_link_spec("bandwidth=50"), Contains("e.g. bandwidth=50mbit"));
}
