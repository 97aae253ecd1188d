// One line of live progress that rewrites itself on a terminal ("\r" and erase to the end of the
// line). When the stream is not a terminal (a log file, CI), it prints a plain line at most every
// `plain_interval_seconds` instead, so logs show progress without thousands of lines.
// Not thread-safe.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace meridian::cli {

class StatusLine {
 public:
  explicit StatusLine(std::FILE* stream, double plain_interval_seconds = 15);
  // Ends an unfinished line so that later output starts on a new line.
  ~StatusLine();
  StatusLine(const StatusLine&) = delete;
  StatusLine& operator=(const StatusLine&) = delete;

  // Shows `text` (a terminal: at once, replacing the line; otherwise when the interval has passed).
  void update(const std::string& text);
  // Prints `text` as a permanent line (replacing the live one on a terminal); off a terminal the next
  // update() is shown one interval later.
  void print(const std::string& text);

 private:
  std::FILE* stream_;
  bool terminal_;
  bool line_open_ = false;
  double plain_interval_;
  std::chrono::steady_clock::time_point last_plain_{};
};

}  // namespace meridian::cli
