// `meridian init`: writes a commented site configuration that `meridian start --config FILE` reads.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string_view>

#include "cli/commands.h"
#include "daemon/site_config.h"
#include "error/error.h"
#include "peer/roster.h"

namespace meridian::cli {
namespace {

// The host name, made into a valid site name, so that a config written on a machine names it.
std::string default_site_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') return "site";
  std::string name(host);
  name = name.substr(0, name.find('.'));
  std::replace_if(
      name.begin(), name.end(),
      [](char c) { return !std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-'; }, '-');
  return name.empty() ? "site" : name.substr(0, 64);
}

// What is left to do before `meridian start --config OUT` for the site of `config` (paths as seen from
// here): its keys when they do not exist yet, the roster when it is missing, lacks this site or does
// not parse; then the start.
std::string next_steps(const daemon::SiteConfig& config, const std::string& out) {
  namespace fs = std::filesystem;
  std::string steps;
  const auto then = [&](const std::string& step) { steps += (steps.empty() ? "" : ", then ") + step; };
  if (!config.insecure) {
    const fs::path keys(config.key_dir);
    if (!fs::exists(keys / "public.key") || !fs::exists(keys / "secret.key"))
      then("create keys with 'meridian keygen --out " + config.key_dir + "'");
    if (!fs::exists(config.roster)) {
      then("list the sites in " + config.roster +
           " (one 'NAME PUBLIC_KEY ADDRESS' line each; 'quorum = N' lets training start with N of them)");
    } else {
      try {
        if (!peer::Roster::load(config.roster).by_name(config.name))
          then("add '" + config.name + "' with its public key to " + config.roster);
      } catch (const error::UserError& e) {
        then("fix the roster (" + std::string(e.what()) + ")");
      }
    }
  }
  then("run 'meridian start --config " + out + "'");
  return steps;
}

struct InitOptions {
  daemon::SiteConfig config;
  std::string out;
  bool force = false;
};

}  // namespace

void add_init_command(CLI::App& app, int& exit_code, Invocation invocation) {
  auto* cmd = app.add_subcommand("init", "Write a commented configuration file for this site");
  cmd->footer(
      "Every option of 'meridian start' may be given here and is written into the file.\n"
      "Example:\n"
      "  meridian init --name oregon --algo sgp --join tcp://ohio.example.org:7400 --out oregon.toml\n"
      "  meridian start --config oregon.toml\n");
  auto options = std::make_shared<InitOptions>();
  daemon::bind_site_options(*cmd, options->config);
  cmd->add_option("--out", options->out, "Write the file here (default: print it on standard output)")
      ->type_name("FILE");
  cmd->add_flag("--force", options->force, "Overwrite --out if it exists");
  cmd->callback([cmd, options, &exit_code, invocation] {
    daemon::apply_site_config_file(*cmd, options->config);
    daemon::apply_algorithm_defaults(*cmd, options->config);
    auto& config = options->config;
    if (config.name.empty()) config.name = default_site_name();
    daemon::validate_site_config(config);
    // A template may leave the address for later, but not silently: `start` refuses the file until then.
    const auto unreachable = daemon::unreachable_address_problem(config);
    if (invocation == Invocation::kCheck) {
      exit_code = 0;
      return;
    }
    if (unreachable) std::cerr << "note: " << *unreachable << " ('meridian start' refuses the file until it is set)\n";
    const std::filesystem::path out_dir = std::filesystem::path(options->out).parent_path();
    if (!options->out.empty()) {
      // The file's relative paths count from its folder (daemon/site_config.h): the paths given here
      // (or by a template) are rewritten to name the same files from there; defaults stay next to it.
      const bool template_given = cmd->get_option("--config")->count() > 0;
      config = daemon::rebase_site_paths(config, {}, out_dir, [cmd, template_given](std::string_view name) {
        return template_given || cmd->get_option("--" + std::string(name))->count() > 0;
      });
    }
    const std::string text = daemon::render_site_config(config);
    if (options->out.empty()) {
      std::cout << text;
      exit_code = 0;
      return;
    }
    if (std::filesystem::exists(options->out) && !options->force) {
      throw error::UserError(options->out + " already exists (pass --force to overwrite it)");
    }
    std::ofstream file(options->out, std::ios::trunc);
    file << text;
    file.close();
    if (!file) throw error::UserError("cannot write " + options->out + ": " + std::strerror(errno));
    std::cout << "wrote " << options->out << " for site '" << config.name << "'\n"
              << "next: " << next_steps(daemon::rebase_site_paths(config, out_dir, {}), options->out) << "\n";
    exit_code = 0;
  });
}

}  // namespace meridian::cli
