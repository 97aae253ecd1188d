// `meridian start`: runs one site of a federation in the foreground (daemon/site_daemon.h).
#include <memory>

#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "cli/site_options.h"
#include "daemon/heap_retention.h"
#include "daemon/site_config.h"
#include "daemon/site_daemon.h"

namespace meridian::cli {

void add_start_command(CLI::App& app, int& exit_code, Invocation invocation) {
  auto config = std::make_shared<daemon::SiteConfig>();
  auto* cmd = app.add_subcommand("start", "Run this site: join the federation, train, checkpoint, serve metrics");
  cmd->footer(
      "Examples:\n"
      "  meridian start --config oregon.toml\n"
      "  meridian start --config ohio.toml --join tcp://oregon.example.org:7400\n"
      "  # four local sites, no keys (experiments only):\n"
      "  meridian start --name a --insecure --listen tcp://127.0.0.1:7400 --site-count 4 --site-index 0 \\\n"
      "      --algo sgp --epochs 3 --run-dir runs/a --metrics-address 127.0.0.1:9400\n"
      "  meridian start --name b --insecure --listen tcp://127.0.0.1:7401 --site-count 4 --site-index 1 \\\n"
      "      --algo sgp --epochs 3 --run-dir runs/b --metrics-address off --join tcp://127.0.0.1:7400\n"
      "\n"
      "Training starts when --min-sites sites are in the view (default: every site of the roster, or the\n"
      "quorum it states; --site-count with --insecure). A progress line\n"
      "(step, epoch, loss, accuracy, peers, staleness, bytes/s) goes to stderr; RUN_DIR/progress.jsonl gets\n"
      "one JSON line per evaluation and RUN_DIR/result.json the result at the end. A site restarted with\n"
      "the same --run-dir resumes from its newest valid checkpoint and rejoins. Ctrl-C (or SIGTERM, or\n"
      "'meridian leave') stops gracefully: checkpoint, result.json with \"completed\": false, announce the\n"
      "leave, exit 0; a second Ctrl-C exits at once. SPDLOG_LEVEL=debug in the environment shows membership and round "
      "decisions too.\n"
      "See docs/operations.md.");
  daemon::bind_site_options(*cmd, *config);
  cmd->callback([cmd, config, &exit_code, invocation] {
    (void)configure_site(*cmd, *config);
    if (invocation == Invocation::kCheck) {
      exit_code = 0;
      return;
    }
    // stdout carries the result line; logs and the progress line go to stderr.
    spdlog::set_default_logger(spdlog::stderr_color_mt("meridian"));
    spdlog::set_pattern("%H:%M:%S.%e %^%l%$ [" + config->name + "] %v");
    spdlog::cfg::load_env_levels();  // SPDLOG_LEVEL=debug (or trace, warn, ...), info when unset
    // Before any thread starts: model-sized blocks freed every step are reused, not faulted in again.
    daemon::retain_freed_heap_memory();
    daemon::SiteDaemon site(*config);
    exit_code = site.run();
  });
}

}  // namespace meridian::cli
