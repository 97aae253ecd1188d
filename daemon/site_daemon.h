// One site of a federation (docs/design.md): `meridian start` builds a SiteDaemon and runs it in the
// foreground until the run ends, a signal or `meridian leave` stops it, or an error does.
//
// Threads:
//   - the trainer thread: batches, forward/backward, the algorithm's trainer side
//     (daemon/trainer_algorithm.h, made by the algorithm in daemon/algorithms/), evaluations,
//     checkpoints, the progress line and the run trail;
//   - the communication thread (the thread that calls run()): owns the mixers (gossip::MixServer over
//     one gossip::Inbox). The transport's own thread (the ZeroMQ transport's I/O thread owns the network
//     sockets, peer/zmq/zmq_transport.h) is reached through its thread-safe interface;
//   - the control thread: owns the control socket, notices signals and refreshes the network metrics,
//     so that `meridian status`, `peers` and `leave` are answered while a mix waits for a slow or
//     dead peer;
//   - the metrics server's HTTP threads, which only read the metrics registry.
// Trainer and communication thread meet only in the gossip::MixChannel (snapshots by move, errors as
// exceptions at the next wait, every wait with a deadline) and in a few atomics and one mutex-guarded
// status snapshot.
//
// Starting: training begins when the view holds --min-sites sites (default: the roster's quorum or
// size, daemon/federation/min_sites.h) and has been stable for a moment; every site then starts at the view's
// effective round and the sites agree on the last round (daemon/federation/run_plan.h: the smallest site's step
// count, so sites whose own data gives them more steps do not wait for rounds the others never start), so all run the same rounds. A site
// that joins a running federation takes its end round from a peer. A site that resumes from a checkpoint waits to be
// back in the view (one that follows a view without its previous incarnation, see peer/membership.h) and starts at that
// view's first round (sgp: or the later round its peers are mixing, seen from their first message to it, since push-sum
// waits for nobody), keeping its checkpointed model, optimizer state and data position.
//
// Stopping: on the first SIGINT/SIGTERM or `meridian leave` the trainer finishes the step in flight,
// applies or abandons outstanding mixes, writes a checkpoint, the site announces its leave, and run()
// returns 0. A normal end also writes result.json (daemon/status/run_trail.h). A site whose checkpoint is at
// its run's last round (and whose --epochs adds none) has nothing to train: it tells the members its
// run's end, then run() returns kExitRunFinishedBefore and leaves result.json and the checkpoints as
// they are, so that a service manager that restarts it does not wipe the run's result.
//
// The network: the daemon sees its federation only through peer::FederationTransport (membership,
// views, rounds, control messages, leave), made by a factory (daemon/site_daemon_transport.h): ZeroMQ
// over TCP by default, or the in-memory network, on which several daemons run as threads of one process.
//
// The implementation is split by concept (daemon/site_daemon_impl.h lists the files).
#pragma once

#include <memory>

#include "daemon/site_config.h"
#include "daemon/site_daemon_transport.h"

namespace meridian::daemon {

// run()'s exit code for a site whose run had already finished when it started (a service manager's
// restart of a finished site): nothing trained, nothing rewritten. packaging/meridian@.service names it
// in RestartPreventExitStatus; docs/operations.md lists the exit codes.
inline constexpr int kExitRunFinishedBefore = 3;

// How a daemon is embedded in its process.
struct SiteDaemonOptions {
  // Makes the site's transport; empty: make_zmq_transport (what `meridian start` runs on).
  TransportFactory transport;
  // Whether run() installs the process-wide SIGINT/SIGTERM handlers (daemon/control/shutdown_signals.h) and
  // stops on them. Off, the daemon ignores signals and stops only at the run's end, on an error or on
  // `leave` over its control socket: for several daemons in one process.
  bool handle_signals = true;
};

class SiteDaemon {
 public:
  // Validates `config` (throws SiteConfigError listing every problem, those of its algorithm included,
  // such as an optimizer dts cannot run).
  explicit SiteDaemon(const SiteConfig& config, SiteDaemonOptions options = {});
  ~SiteDaemon();
  SiteDaemon(const SiteDaemon&) = delete;
  SiteDaemon& operator=(const SiteDaemon&) = delete;

  // Runs the site; returns the process exit code (0 after a normal end or a graceful stop,
  // kExitRunFinishedBefore when the run had ended before this start). Throws
  // std::exception with a message naming the cause for a failure (data, checkpoint directory, port in
  // use, a peer-side error that reached the trainer, training that diverged).
  int run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace meridian::daemon
