// The `meridian` command: one binary, one subcommand per task (CLI11). An error that ends a command
// exits with its tier's status (error/exit_code.h).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <new>
#include <string>

#include "cli/commands.h"
#include "error/exit_code.h"

namespace {

// What went wrong, in words: std::bad_alloc's own text names only its type.
std::string message_of(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e)) return std::string("out of memory (") + e.what() + ")";
  return e.what();
}

}  // namespace

int main(int argc, char** argv) {
  namespace error = meridian::error;
  CLI::App app{
      "Meridian: train one model across far-apart sites without moving their data.\n"
      "Run 'meridian <command> --help' for the options and an example of each command."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "meridian 0.1.0");
  int exit_code = 0;
  meridian::cli::register_commands(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    const error::Tier tier = error::tier_of(e);
    std::fprintf(stderr, "meridian: %s: %s\n", tier == error::Tier::kInternal ? "internal error" : "error",
                 message_of(e).c_str());
    return error::exit_code(tier);
  } catch (...) {
    std::fprintf(stderr, "meridian: internal error: an exception that is not a std::exception\n");
    return error::kExitInternal;
  }
  return exit_code;
}
