// The `meridian` command: one binary, one subcommand per task (CLI11).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "cli/commands.h"

int main(int argc, char** argv) {
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
    std::fprintf(stderr, "meridian: error: %s\n", e.what());
    return 1;
  }
  return exit_code;
}
