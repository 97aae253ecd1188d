// The `meridian ...` commands that docs/ shows, read from the Markdown and parsed by the real command
// line with Invocation::kCheck (cli/commands.h): each command reads and checks its options as it would
// before running, so an example with an option, a value or a combination the CLI refuses fails here.
//
// What counts as an example: a line of a fenced code block, or an inline code span, that starts with
// `meridian ` (or a path ending in /meridian), with backslash continuations joined and a leading "$ "
// prompt dropped. Shell comments and redirections end it. Left out, because they are templates rather
// than commands: anything with a placeholder (an all-capitals word such as FILE or X, or one of
// [ ] < > | … ... $ *). A bare `meridian COMMAND` names the command in prose; only its existence is
// checked. Stand-ins for what an example refers to on the reader's machine: the file after --config is
// a site configuration naming the site, the one after --checkpoint an existing file, and a `start`
// fragment without --name or --config gets --name example. The example lines of each command's --help
// footer are checked the same way.
//
// The same pages (docs/, recursively, and README.md) name no absolute path but the system locations a
// reader types on their own machine: a path of the machine a page was written on is no use to anyone.
#include <catch2/catch.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "tests/support/build_paths.h"
#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using meridian::cli::Invocation;

struct Example {
  std::string where;  // docs/x.md:LINE
  std::string text;
};

// Splits a shell command line into words (single and double quotes group; no expansion), stopping at
// a comment or a redirection, pipe, background or list operator.
std::vector<std::string> shell_words(const std::string& line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote != 0) {
      if (c == quote) quote = 0;
      else word += c;
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
      continue;
    }
    if (!in_word &&
        (c == '#' || c == '&' || c == ';' || c == '>' || (c == '2' && i + 1 < line.size() && line[i + 1] == '>')))
      break;
    if (!in_word && c == '|' && (i + 1 >= line.size() || std::isspace(static_cast<unsigned char>(line[i + 1])))) break;
    word += c;
    in_word = true;
  }
  if (in_word) words.push_back(word);
  return words;
}

bool is_placeholder(const std::string& word) {
  if (word.find_first_of("[]<>|$*") != std::string::npos) return true;
  if (word.find("...") != std::string::npos || word.find("\xE2\x80\xA6") != std::string::npos) return true;  // …
  const bool has_upper = std::any_of(word.begin(), word.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
  const bool has_lower = std::any_of(word.begin(), word.end(), [](char c) { return c >= 'a' && c <= 'z'; });
  return has_upper && !has_lower;
}

std::vector<Example> doc_examples() {
  static const std::regex command(R"(^(\S*/)?meridian\s.*)");
  static const std::regex inline_span(R"(`((\S*/)?meridian [^`]*)`)");
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(fs::path(meridian::tests::source_dir()) / "docs"))
    if (entry.path().extension() == ".md") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  std::vector<Example> out;
  for (const auto& file : files) {
    std::ifstream in(file);
    std::string line, pending;
    bool fenced = false;
    int number = 0, pending_line = 0;
    const std::string name = "docs/" + file.filename().string();
    while (std::getline(in, line)) {
      ++number;
      const auto first = line.find_first_not_of(" \t");
      const std::string trimmed = first == std::string::npos ? "" : line.substr(first);
      if (trimmed.starts_with("```")) {
        fenced = !fenced;
        pending.clear();
        continue;
      }
      if (fenced) {
        if (pending.empty()) pending_line = number;
        pending += trimmed;
        if (!pending.empty() && pending.back() == '\\') {
          pending.back() = ' ';
          continue;
        }
        std::string text = pending.starts_with("$ ") ? pending.substr(2) : pending;
        pending.clear();
        if (std::regex_match(text, command)) out.push_back({name + ":" + std::to_string(pending_line), text});
        continue;
      }
      for (std::sregex_iterator it(line.begin(), line.end(), inline_span), end; it != end; ++it)
        out.push_back({name + ":" + std::to_string(number), (*it)[1].str()});
    }
  }
  return out;
}

// Absolute paths a reader types on their own machine: the system locations of the Filesystem
// Hierarchy Standard that an installed site uses (its configuration, data, state, logs and backups, the
// distribution's programs and libraries, CUDA under /opt or /usr/local) and the kernel's views of
// devices and processes, plus the conventional placeholder /path/to/. Anything else (a home directory,
// /root, /tmp, a workspace such as /work) is a path of one machine.
const std::vector<std::string>& readers_paths() {
  static const std::vector<std::string> prefixes = {
      "/etc/",     "/usr/",        "/opt/", "/srv/", "/var/lib/", "/var/log/", "/var/backups/", "/run/",
      "/dev/",     "/proc/",       "/sys/", "/lib/", "/lib64/",   "/bin/",     "/sbin/",        "/path/to/"};
  return prefixes;
}

// The absolute paths of two or more components in `line` that start a word (after a space, a quote,
// a backtick, a bracket or one of = , : ;), so that a URL's path (http://host/metrics) and a fraction
// (1/n) are not taken for one, and that lie outside readers_paths().
std::vector<std::string> foreign_absolute_paths(const std::string& line) {
  static const std::regex path(R"((?:^|[\s`"'(\[=,:;])(/[A-Za-z0-9_.~+-]+(?:/[A-Za-z0-9_.~+*{}-]*)+))");
  std::vector<std::string> out;
  for (std::sregex_iterator it(line.begin(), line.end(), path), end; it != end; ++it) {
    const std::string found = (*it)[1].str();
    const auto& allowed = readers_paths();
    if (std::none_of(allowed.begin(), allowed.end(), [&](const std::string& p) { return found.starts_with(p); }))
      out.push_back(found);
  }
  return out;
}

// Every Markdown page under docs/ and README.md, relative to the source tree, sorted.
std::vector<fs::path> doc_pages() {
  const fs::path root = meridian::tests::source_dir();
  std::vector<fs::path> pages = {"README.md"};
  for (const auto& entry : fs::recursive_directory_iterator(root / "docs"))
    if (entry.is_regular_file() && entry.path().extension() == ".md") pages.push_back(fs::relative(entry.path(), root));
  std::sort(pages.begin(), pages.end());
  return pages;
}

// Parses `words` (without the program name) as `meridian` does, checking instead of running. Throws what
// the parse or the check throws.
void check_command_line(std::vector<std::string> words) {
  CLI::App app{"meridian"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "meridian");
  int exit_code = 0;
  meridian::cli::register_commands(app, exit_code, Invocation::kCheck);
  std::reverse(words.begin(), words.end());  // CLI11 takes a vector in reverse order
  try {
    app.parse(words);
  } catch (const CLI::Success&) {
    // --version, --help: nothing to check.
  }
}

// Stand-ins for the files examples name, and what the examples were.
struct Checker {
  meridian::tests::TempDir tmp;
  fs::path site_file = tmp.path() / "site.toml";
  fs::path some_file = tmp.path() / "file";
  std::size_t checked = 0, mentions = 0, templates = 0;

  Checker() {
    std::ofstream(site_file) << "name = \"example\"\n";
    std::ofstream(some_file) << "";
  }

  void check(const Example& example) {
    auto words = shell_words(example.text);
    REQUIRE_FALSE(words.empty());
    words.erase(words.begin());  // the program
    if (std::any_of(words.begin(), words.end(), is_placeholder)) {
      ++templates;
      return;
    }
    INFO(example.where << ": " << example.text);
    if (words.size() == 1 && !words[0].starts_with("-")) {
      CLI::App app;
      int exit_code = 0;
      meridian::cli::register_commands(app, exit_code, Invocation::kCheck);
      CHECK_NOTHROW(app.get_subcommand(words[0]));
      ++mentions;
      return;
    }
    bool named = false;
    for (std::size_t i = 0; i + 1 < words.size(); ++i) {
      if (words[i] == "--config") words[i + 1] = site_file.string();
      if (words[i] == "--checkpoint") words[i + 1] = some_file.string();
      // Data paths are resolved at the configuration check: any folder stands for an image folder.
      if (words[i] == "--train" || words[i] == "--test" || words[i] == "--site-train")
        words[i + 1] = tmp.path().string();
      if (words[i] == "--config" || words[i] == "--name") named = true;
    }
    if (words[0] == "start" && !named) words.insert(words.end(), {"--name", "example"});
    CHECK_NOTHROW(check_command_line(words));
    ++checked;
  }
};

// The example lines of every command's --help footer ("  meridian ..."), continuations joined.
std::vector<Example> help_examples() {
  CLI::App app;
  int exit_code = 0;
  meridian::cli::register_commands(app, exit_code, Invocation::kCheck);
  std::vector<Example> out;
  for (const auto* command : app.get_subcommands({})) {
    std::istringstream footer(command->get_footer());
    std::string line, pending;
    while (std::getline(footer, line)) {
      const auto first = line.find_first_not_of(' ');
      if (first == std::string::npos) continue;
      pending += line.substr(first);
      if (pending.back() == '\\') {
        pending.back() = ' ';
        continue;
      }
      if (pending.starts_with("meridian ")) out.push_back({"meridian " + command->get_name() + " --help", pending});
      pending.clear();
    }
  }
  return out;
}

}  // namespace

TEST_CASE("the meridian commands shown in docs/ parse and pass the configuration checks", "[cli][docs][unit]") {
  Checker checker;
  for (const auto& example : doc_examples()) checker.check(example);
  INFO(checker.checked << " checked, " << checker.mentions << " mentions, " << checker.templates << " templates");
  // docs/ holds dozens of complete commands (simulate.md, results.md, operations.md, deploy.md); finding
  // few means the extraction broke, not that the docs are right.
  CHECK(checker.checked >= 25);
  CHECK(checker.mentions >= 10);
}

TEST_CASE("the examples in every command's --help parse and pass the configuration checks", "[cli][docs][unit]") {
  Checker checker;
  for (const auto& example : help_examples()) checker.check(example);
  INFO(checker.checked << " checked, " << checker.templates << " templates");
  CHECK(checker.checked >= 15);
}

TEST_CASE("the check path refuses what the configuration refuses, naming the option", "[cli][docs][unit]") {
  const auto error_of = [](std::vector<std::string> words) {
    try {
      check_command_line(std::move(words));
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK_THAT(error_of({"simulate", "--algo", "sgp", "--tau", "0"}), Catch::Contains("--tau"));
  CHECK_THAT(error_of({"simulate", "--algo", "sgp", "--delay", "2"}), Catch::Contains("--delay: sgp overlaps"));
  CHECK_THAT(error_of({"start", "--name", "a", "--algo", "dts", "--optimizer", "adam"}),
             Catch::Contains("dts is its own optimizer"));
  CHECK_THAT(error_of({"init", "--name", "a", "--grid", "2by2"}), Catch::Contains("--grid"));
  CHECK_THAT(error_of({"start", "--no-such-flag"}), Catch::Contains("no-such-flag"));
  CHECK(error_of({"simulate", "--sites", "4", "--algo", "dsync:grid=2x2", "--insecure"}).empty());
  CHECK(shell_words("meridian start --config a.toml   # comment") ==
        std::vector<std::string>{"meridian", "start", "--config", "a.toml"});
  CHECK(shell_words("meridian simulate --json > out.json") ==
        std::vector<std::string>{"meridian", "simulate", "--json"});
  CHECK(is_placeholder("FILE"));
  CHECK(is_placeholder("mlp|cnn"));
  CHECK_FALSE(is_placeholder("--algo"));
}

TEST_CASE("the docs name no absolute path outside the repository but system locations", "[cli][docs][unit]") {
  // The detector itself: paths of one machine are found, a reader's system paths and URLs are not.
  CHECK(foreign_absolute_paths("raw outputs in /work/bw16/e1/001-s4-local-r0") ==
        std::vector<std::string>{"/work/bw16/e1/001-s4-local-r0"});
  CHECK(foreign_absolute_paths("`--out /tmp/bw1/e1`, (see /root/notes.txt)") ==
        std::vector<std::string>{"/tmp/bw1/e1", "/root/notes.txt"});
  CHECK(foreign_absolute_paths("--train=/home/ana/scans/train") == std::vector<std::string>{"/home/ana/scans/train"});
  CHECK(foreign_absolute_paths("`--train /usr/share/datasets/fashion-mnist` and /etc/meridian/site.toml").empty());
  CHECK(foreign_absolute_paths("/var/lib/meridian/control.sock, /dev/shm/x, /proc/PID/status").empty());
  CHECK(foreign_absolute_paths("curl http://127.0.0.1:9100/metrics; tcp://10.0.0.2:5555, 1/n of a/b/c").empty());

  const fs::path root = meridian::tests::source_dir();
  std::size_t pages = 0;
  for (const auto& page : doc_pages()) {
    ++pages;
    std::ifstream in(root / page);
    std::string line;
    for (int number = 1; std::getline(in, line); ++number)
      for (const auto& path : foreign_absolute_paths(line))
        FAIL_CHECK(page.string() << ":" << number << ": " << path);
  }
  INFO(pages << " pages read");
  CHECK(pages >= 15);  // README.md and docs/: finding few means the walk broke
}
