// `meridian init`: writes a commented site configuration that `meridian start --config FILE` reads.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cli/commands.h"
#include "cli/site_options.h"
#include "daemon/algorithms/registry.h"
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
// not parse; then the start: for a file where the Debian package's unit reads it
// (/etc/meridian/NAME.toml, packaging/meridian@.service), the service's instance NAME, since started
// by hand there the site would keep its run directory under /etc/meridian, apart from the service's.
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
  const fs::path file = fs::absolute(out).lexically_normal();
  if (file.parent_path() == "/etc/meridian" && file.extension() == ".toml") {
    then("start the service: 'systemctl enable --now meridian@" + file.stem().string() +
         "' (it runs as user meridian, who must be able to read the key pair and the data; its log: "
         "'journalctl -u meridian@" +
         file.stem().string() + "')");
  } else {
    then("run 'meridian start --config " + out + "'");
  }
  return steps;
}

// Which of the algorithm knobs (the shared ones only some algorithms read, and those an algorithm
// declares) the file leaves as comments, with the note that says why: those `algorithm` does not read,
// and those it reads that were not given, whose value it picks itself. Reading the file back leaves
// them at their defaults, so that changing `algo` in the file gives the new algorithm's own defaults
// rather than the old one's shape. `given` says whether an option was given (flag or template).
std::function<std::optional<std::string>(std::string_view)> algorithm_knob_comments(
    const daemon::algorithms::Algorithm& algorithm, std::function<bool(std::string_view)> given) {
  namespace algorithms = daemon::algorithms;
  return [&algorithm, given = std::move(given)](std::string_view option) -> std::optional<std::string> {
    const auto* declared = algorithms::find_algorithm_option(option);
    const bool shared = std::find(algorithms::kAlgorithmKnobs.begin(), algorithms::kAlgorithmKnobs.end(), option) !=
                        algorithms::kAlgorithmKnobs.end();
    if (declared == nullptr && !shared) return std::nullopt;
    const auto reads = [&](const algorithms::Algorithm& a) {
      return declared != nullptr ? a.declares(*declared) : a.reads(option);
    };
    const std::string name(algorithm.name());
    if (reads(algorithm)) {
      if (given(option)) return std::nullopt;
      return "left to " + name + ", which runs this value; write the key to set it";
    }
    std::string readers;
    for (const auto* a : algorithms::all_algorithms())
      if (reads(*a)) readers += (readers.empty() ? "" : ", ") + std::string(a->name());
    return "not read by " + name + (readers.empty() ? std::string() : " (read by " + readers + ")");
  };
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
    auto& config = options->config;
    (void)configure_site(*cmd, config, [](daemon::SiteConfig& c) {
      if (c.name.empty()) c.name = default_site_name();
    });
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
    const auto given = [cmd](std::string_view name) {
      const CLI::Option* option = cmd->get_option_no_throw("--" + std::string(name));
      return option != nullptr && option->count() > 0;
    };
    const std::string text = daemon::render_site_config(
        config, algorithm_knob_comments(*daemon::algorithms::find_algorithm(config.algo), given));
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
