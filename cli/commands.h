// The subcommands of `meridian`. Each lives in its own cli/<name>_command.cc and registers itself
// with one add_*_command call; its callback runs the command and stores the process exit code in
// `exit_code`. A command reports failures by throwing std::exception (main prints "error: what()"
// and exits 1) or by setting a non-zero exit code after printing its own message.
//
// With Invocation::kCheck the commands only read and check their options (the configuration each would
// run with, every problem listed in the exception it throws) and do nothing else: no file, socket,
// process or training. The test that keeps the example commands in docs/ honest parses them this way.
#pragma once

#include <CLI/CLI.hpp>

namespace meridian::cli {

enum class Invocation { kRun, kCheck };

void register_commands(CLI::App& app, int& exit_code, Invocation invocation = Invocation::kRun);

void add_keygen_command(CLI::App& app, int& exit_code);
void add_peer_node_command(CLI::App& app, int& exit_code);
void add_init_command(CLI::App& app, int& exit_code, Invocation invocation = Invocation::kRun);
void add_status_command(CLI::App& app, int& exit_code);
void add_peers_command(CLI::App& app, int& exit_code);
void add_leave_command(CLI::App& app, int& exit_code);
void add_roster_command(CLI::App& app, int& exit_code, Invocation invocation = Invocation::kRun);
void add_devices_command(CLI::App& app, int& exit_code);
void add_train_command(CLI::App& app, int& exit_code);
void add_start_command(CLI::App& app, int& exit_code, Invocation invocation = Invocation::kRun);
void add_eval_command(CLI::App& app, int& exit_code);
void add_export_command(CLI::App& app, int& exit_code);
void add_simulate_command(CLI::App& app, int& exit_code, Invocation invocation = Invocation::kRun);

}  // namespace meridian::cli
