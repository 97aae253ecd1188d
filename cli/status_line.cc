#include "cli/status_line.h"

#include <unistd.h>

namespace meridian::cli {

StatusLine::StatusLine(std::FILE* stream, double plain_interval_seconds)
    : stream_(stream), terminal_(::isatty(::fileno(stream)) == 1), plain_interval_(plain_interval_seconds) {}

StatusLine::~StatusLine() {
  if (line_open_) std::fputc('\n', stream_);
}

void StatusLine::update(const std::string& text) {
  if (terminal_) {
    std::fprintf(stream_, "\r\033[K%s", text.c_str());
    std::fflush(stream_);
    line_open_ = true;
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (last_plain_.time_since_epoch().count() != 0 &&
      std::chrono::duration<double>(now - last_plain_).count() < plain_interval_)
    return;
  last_plain_ = now;
  std::fprintf(stream_, "%s\n", text.c_str());
  std::fflush(stream_);
}

void StatusLine::print(const std::string& text) {
  if (terminal_ && line_open_) std::fputs("\r\033[K", stream_);
  line_open_ = false;
  // Off a terminal, the next progress line waits a full interval after a permanent line.
  last_plain_ = std::chrono::steady_clock::now();
  std::fprintf(stream_, "%s\n", text.c_str());
  std::fflush(stream_);
}

}  // namespace meridian::cli
