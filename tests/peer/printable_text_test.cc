// Peer-supplied text reduced to printable characters before it is logged (peer/printable_text.h):
// no forged log lines, no terminal escapes, bounded length.
#include <catch2/catch.hpp>

#include <string>

#include "peer/printable_text.h"

using meridian::peer::printable_text;

TEST_CASE("peer text keeps printable ASCII and writes every other byte as \\xHH", "[peer][log][unit]") {
  CHECK(printable_text("model differs (mlp 2-8; this site: mlp 2-16)") == "model differs (mlp 2-8; this site: mlp 2-16)");
  CHECK(printable_text("x\n2026-01-01 [info] forged line") == "x\\x0a2026-01-01 [info] forged line");
  CHECK(printable_text("\x1b[2J\x1b]0;title\x07") == "\\x1b[2J\\x1b]0;title\\x07");
  CHECK(printable_text(std::string("a\0b", 3)) == "a\\x00b");
  CHECK(printable_text("caf\xc3\xa9\x7f") == "caf\\xc3\\xa9\\x7f");
  // A backslash is doubled, so that "\x0a" in the output always means an escaped byte.
  CHECK(printable_text("\\x0a") == "\\\\x0a");
  CHECK(printable_text(std::string(20, 'a'), 8) == "aaaaaaaa...");
  CHECK(printable_text(std::string(8, 'a'), 8) == "aaaaaaaa");
  CHECK(printable_text("") == "");
  const auto out = printable_text(std::string(16384, '\n'), 16384);
  CHECK(out.size() == 4 * 16384);
  CHECK(out.find('\n') == std::string::npos);
}
