// Peer-supplied text reduced to printable characters before it is logged (peer/printable_text.h):
// no forged log lines, no terminal escapes, bounded length.
#include <catch2/catch.hpp>

#include <string>

#include "peer/printable_text.h"

using meridian::peer::printable_text;

TEST_CASE("peer text keeps printable characters and writes every other byte as \\xHH", "[peer][log][unit]") {
  CHECK(printable_text("model differs (mlp 2-8; this site: mlp 2-16)") == "model differs (mlp 2-8; this site: mlp 2-16)");
  CHECK(printable_text("x\n2026-01-01 [info] forged line") == "x\\x0a2026-01-01 [info] forged line");
  CHECK(printable_text("\x1b[2J\x1b]0;title\x07") == "\\x1b[2J\\x1b]0;title\\x07");
  CHECK(printable_text(std::string("a\0b", 3)) == "a\\x00b");
  // Well-formed UTF-8 stays (terms say "P = 8\u00b7D"); DEL, malformed sequences and characters that
  // change how text displays (C1 controls, line separators, bidirectional overrides) do not.
  CHECK(printable_text("P = 8\xc2\xb7" "D, caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x94\x91") ==
        "P = 8\xc2\xb7" "D, caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x94\x91");
  CHECK(printable_text("a\x7f") == "a\\x7f");
  CHECK(printable_text("\xc3") == "\\xc3");                  // cut short
  CHECK(printable_text("\xc0\xaf") == "\\xc0\\xaf");          // overlong '/'
  CHECK(printable_text("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a surrogate
  CHECK(printable_text("\xc2\x9b" "31m") == "\\xc2\\x9b" "31m");  // C1 CSI
  CHECK(printable_text("ok\xe2\x80\xa8" "forged") == "ok\\xe2\\x80\\xa8" "forged");  // line separator
  CHECK(printable_text("\xe2\x80\xae" "txt.exe") == "\\xe2\\x80\\xae" "txt.exe");  // right-to-left override
  // A backslash is doubled, so that "\x0a" in the output always means an escaped byte.
  CHECK(printable_text("\\x0a") == "\\\\x0a");
  CHECK(printable_text(std::string(20, 'a'), 8) == "aaaaaaaa...");
  CHECK(printable_text(std::string(8, 'a'), 8) == "aaaaaaaa");
  CHECK(printable_text("") == "");
  const auto out = printable_text(std::string(16384, '\n'), 16384);
  CHECK(out.size() == 4 * 16384);
  CHECK(out.find('\n') == std::string::npos);
}
