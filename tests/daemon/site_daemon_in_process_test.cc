// Whole site daemons as threads of the test process, on the in-memory network (peer/in_memory_federation.h)
// instead of TCP: the same set-up, start protocol, training loop, checkpoints and control socket as
// `meridian start`, with every site's transport made by daemon::in_memory_transport. Training to the end,
// a graceful leave, a site joining a running federation, and a refusal at join. The multi-process tests
// (site_daemon_test.cc) cover what only processes show: signals, exit codes, TCP and CurveZMQ.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "daemon/checkpoint/checkpoint.h"
#include "daemon/checkpoint/checkpoint_model.h"
#include "daemon/control/control_client.h"
#include "daemon/site_daemon.h"
#include "models/data/idx_reader.h"
#include "peer/in_memory_transport.h"
#include "tests/daemon/site_process.h"
#include "tests/support/fashion_mnist.h"
#include "tests/support/file_contents.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using meridian::daemon::ControlClient;
using meridian::daemon::SiteConfig;
using meridian::daemon::SiteDaemon;
using meridian::daemon::SiteDaemonOptions;
using meridian::tests::eventually_from_process;
using meridian::tests::TempDir;

namespace {

const std::string kFashionMnist = meridian::tests::fashion_mnist_dir().string();


const meridian::models::data::Dataset& test_set() {
  static const auto data = meridian::models::data::load_fashion_mnist(kFashionMnist, false);
  return data;
}

// One site of `count` (its part `index` of Fashion-MNIST), logistic regression on one thread, no metrics
// server; its run directory (checkpoints, control socket, result) is ROOT/NAME.
SiteConfig site_config(const fs::path& root, const std::string& name, int index, int count, double epochs) {
  SiteConfig c;
  c.name = name;
  c.run_dir = (root / name).string();
  c.insecure = true;
  c.listen = "tcp://127.0.0.1:0";  // not read on the in-memory network
  c.metrics_address = "off";
  c.device = "cpu";
  c.threads = 1;
  c.site_index = index;
  c.site_count = count;
  c.model = "logreg";
  c.algo = "allreduce";
  c.optimizer = "momentum";
  c.lr = 0.05;
  c.epochs = epochs;
  c.eval_every = 1000000;  // only the final evaluation
  c.seed = 7;
  c.heartbeat_interval = 0.1;
  // Deaths are not what these tests are about: a starved thread must never look like one.
  c.heartbeat_timeout = 30;
  c.checkpoint_interval = 3600;
  c.join_timeout = 60;  // a hang guard: a site that never sees its peers fails instead of waiting
  return c;
}

// A SiteDaemon running on a thread of its own.
class SiteThread {
 public:
  SiteThread(const SiteConfig& config, const std::shared_ptr<meridian::peer::InMemoryNetwork>& network,
             std::vector<std::string> bootstrap)
      : run_dir_(config.run_dir),
        daemon_(std::make_unique<SiteDaemon>(
            config, SiteDaemonOptions{meridian::daemon::in_memory_transport(network, std::move(bootstrap)), false})) {
    thread_ = std::thread([this] {
      try {
        exit_code_ = daemon_->run();
      } catch (const std::exception& e) {
        error_ = e.what();
        exit_code_ = 1;
      }
      done_ = true;
    });
  }
  SiteThread(const SiteThread&) = delete;
  SiteThread& operator=(const SiteThread&) = delete;
  ~SiteThread() { (void)wait(); }

  bool done() const { return done_; }
  // Waits for run() to return; its exit code (1 when it threw: error() says why). Hang guard: after
  // `guard` the site is asked to leave over its control socket, which a site stuck waiting still answers.
  int wait(std::chrono::seconds guard = std::chrono::seconds(300)) {
    if (!eventually_from_process([&] { return done(); }, guard) && !done()) {
      try {
        (void)control().leave();
      } catch (const std::exception&) {
      }
    }
    if (thread_.joinable()) thread_.join();
    return exit_code_;
  }
  const std::string& error() const { return error_; }

  ControlClient control() const { return ControlClient((run_dir_ / "control.sock").string()); }
  // The site's status over its control socket; nullopt when it does not answer (not up yet, or gone).
  std::optional<meridian::daemon::StatusReport> status() const {
    try {
      return control().status();
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  std::optional<std::vector<meridian::daemon::PeerReport>> peers() const {
    try {
      return control().peers();
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  // Whether the site trains and has done at least `steps` steps (false once it stopped).
  bool training_past(std::uint64_t steps) const {
    const auto s = done() ? std::nullopt : status();
    return s && s->state == "training" && s->step >= steps;
  }

  nlohmann::json result() const {
    return nlohmann::json::parse(meridian::tests::file_contents(run_dir_ / "result.json"));
  }
  fs::path final_checkpoint() const { return result()["final_checkpoint"].get<std::string>(); }
  std::vector<float> final_parameters() const {
    return meridian::daemon::read_checkpoint_file(final_checkpoint()).parameters;
  }

 private:
  fs::path run_dir_;
  std::unique_ptr<SiteDaemon> daemon_;
  std::atomic<bool> done_{false};
  int exit_code_ = -1;
  std::string error_;
  std::thread thread_;
};

// Sites s0, s1, ... of `count` on `net`, site i configured by `config_of(i)`; all but s0 join s0.
std::vector<std::unique_ptr<SiteThread>> start_sites(int count,
                                                     const std::shared_ptr<meridian::peer::InMemoryNetwork>& net,
                                                     const std::function<SiteConfig(int)>& config_of) {
  std::vector<std::unique_ptr<SiteThread>> sites;
  for (int i = 0; i < count; ++i)
    sites.push_back(std::make_unique<SiteThread>(config_of(i), net,
                                                 i == 0 ? std::vector<std::string>{} : std::vector<std::string>{"s0"}));
  return sites;
}

}  // namespace

TEST_CASE("three in-process sites train to the end: allreduce replicas are bit-identical and learn",
          "[cluster][daemon][in-process]") {
  MERIDIAN_SKIP_WITHOUT_FASHION_MNIST();
  TempDir dir;
  auto net = meridian::peer::InMemoryNetwork::create({});
  auto sites = start_sites(3, net, [&](int i) { return site_config(dir.path(), "s" + std::to_string(i), i, 3, 0.1); });
  for (auto& s : sites) {
    const int rc = s->wait();
    INFO(s->error());
    REQUIRE(rc == 0);
  }
  std::vector<fs::path> files;
  for (auto& s : sites) {
    const auto r = s->result();
    CHECK(r["completed"] == true);
    CHECK(r["algo"] == "allreduce");
    // A tenth of an epoch of a third of the 60000 rows in batches of 64.
    CHECK(r["steps"].get<int>() == 31);
    CHECK(r["rounds_abandoned"].get<int>() == 0);
    // The mixing went over the in-memory network.
    CHECK(r["bytes_sent"].get<std::uint64_t>() > 0);
    CHECK(r["bytes_received"].get<std::uint64_t>() > 0);
    files.push_back(s->final_checkpoint());
  }
  const auto reference = meridian::daemon::read_checkpoint_file(files[0]);
  for (std::size_t i = 1; i < files.size(); ++i) {
    const auto other = meridian::daemon::read_checkpoint_file(files[i]);
    CHECK(other.step == reference.step);
    CHECK(other.parameters == reference.parameters);  // bit for bit
  }
  // Ten classes: an untrained model is near 0.1.
  const double accuracy = meridian::daemon::evaluate_checkpoints(files, test_set()).evaluation.accuracy;
  INFO("accuracy " << accuracy);
  CHECK(accuracy > 0.6);
}

TEST_CASE("a site leaves gracefully over its control socket; the others finish in the smaller view",
          "[cluster][daemon][in-process][control]") {
  MERIDIAN_SKIP_WITHOUT_FASHION_MNIST();
  TempDir dir;
  auto net = meridian::peer::InMemoryNetwork::create({});
  auto sites = start_sites(3, net, [&](int i) {
    // Two epochs of a third: 624 steps, long after the leave.
    auto c = site_config(dir.path(), "s" + std::to_string(i), i, 3, 2);
    // The leave costs the survivors one round deadline: the round after it waits for the leaver until
    // then, and is redone in the view without it (gossip/average_mixer.h).
    c.round_timeout = 5;
    return c;
  });
  auto& leaver = *sites[2];
  REQUIRE(eventually_from_process([&] { return leaver.training_past(5) || leaver.done(); }));
  REQUIRE_FALSE(leaver.done());
  const auto leave = leaver.control().leave();
  CHECK(leave.accepted);
  {
    const int rc = leaver.wait();
    INFO(leaver.error());
    REQUIRE(rc == 0);
  }
  // The leaver stopped early, with a checkpoint of where it stopped.
  const auto stopped = leaver.result();
  CHECK(stopped["completed"] == false);
  CHECK(stopped["steps"].get<int>() >= 5);
  CHECK(stopped["steps"].get<int>() < 624);
  const auto left_at = meridian::daemon::read_checkpoint_file(leaver.final_checkpoint()).step;

  for (int i = 0; i < 2; ++i) {
    const int rc = sites[static_cast<std::size_t>(i)]->wait();
    INFO(sites[static_cast<std::size_t>(i)]->error());
    REQUIRE(rc == 0);
  }
  // The survivors ran every round, the last ones in a view of two (allreduce waits for every member of
  // the view in force: without the leave in their view they could not have finished), and re-averaged
  // at the view change, so that they end bit-identical.
  for (int i = 0; i < 2; ++i) {
    const auto r = sites[static_cast<std::size_t>(i)]->result();
    CHECK(r["completed"] == true);
    CHECK(r["steps"].get<int>() == 624);
  }
  CHECK(sites[0]->final_parameters() == sites[1]->final_parameters());
  CHECK(meridian::daemon::read_checkpoint_file(sites[0]->final_checkpoint()).step > left_at);
  CHECK(sites[0]->final_parameters() != leaver.final_parameters());
}

TEST_CASE("a site joins a running in-process federation: the others take it into their view",
          "[cluster][daemon][in-process][membership]") {
  MERIDIAN_SKIP_WITHOUT_FASHION_MNIST();
  TempDir dir;
  auto net = meridian::peer::InMemoryNetwork::create({});
  // The data is split in three, but two sites are enough to start. Forty epochs of a third (12480
  // steps) leave the late site time to load its data and join long before the run's end.
  auto config = [&](const std::string& name, int index) {
    auto c = site_config(dir.path(), name, index, 3, 40);
    c.min_sites = 2;
    return c;
  };
  SiteThread s0(config("s0", 0), net, {});
  SiteThread s1(config("s1", 1), net, {"s0"});
  std::optional<meridian::daemon::StatusReport> before;
  REQUIRE(eventually_from_process([&] { return s0.training_past(1) || s0.done(); }));
  REQUIRE((before = s0.status()));
  CHECK(before->peers_alive == 2);

  SiteThread late(config("s2", 2), net, {"s1"});
  // s0 hears of s2 through s1 and puts it in a new view.
  bool in_view = false;
  std::uint64_t view_id = 0;
  REQUIRE(eventually_from_process([&] {
    if (s0.done()) return true;
    const auto peers = s0.peers();
    const auto status = s0.status();
    if (!peers || !status) return false;
    for (const auto& p : *peers)
      if (p.name == "s2") in_view = p.state == "alive" && p.rank.has_value();
    view_id = status->view_id;
    return in_view;
  }));
  CHECK(in_view);
  CHECK(view_id > before->view_id);

  for (auto* s : {&s0, &s1, &late}) {
    const int rc = s->wait();
    INFO(s->error());
    REQUIRE(rc == 0);
  }
  const auto first = s0.result();
  const auto joined = late.result();
  CHECK(first["completed"] == true);
  CHECK(joined["completed"] == true);
  CHECK(first["steps"].get<int>() == 12480);
  // The late site took the run's end round from its peers, so it ran fewer steps and ended with them.
  CHECK(joined["steps"].get<int>() < first["steps"].get<int>());
  CHECK(meridian::daemon::read_checkpoint_file(late.final_checkpoint()).step ==
        meridian::daemon::read_checkpoint_file(s0.final_checkpoint()).step);
  // From the view that took it in, allreduce mixed all three (re-averaging at the change): had the
  // others not taken it in, it would have trained alone and ended elsewhere.
  const auto reference = s0.final_parameters();
  CHECK(s1.final_parameters() == reference);
  CHECK(late.final_parameters() == reference);
}

TEST_CASE("an in-process site with another model is refused at join and stops with both sides named",
          "[cluster][daemon][in-process][config]") {
  MERIDIAN_SKIP_WITHOUT_FASHION_MNIST();
  TempDir dir;
  auto net = meridian::peer::InMemoryNetwork::create({});
  SiteThread s0(site_config(dir.path(), "s0", 0, 2, 0.1), net, {});
  auto other = site_config(dir.path(), "s1", 1, 2, 0.1);
  other.model = "mlp";
  other.widths = {32};
  SiteThread s1(other, net, {"s0"});
  CHECK(s1.wait() == 1);
  INFO(s1.error());
  CHECK(s1.error().find("s0 refuses this site") != std::string::npos);
  CHECK(s1.error().find("logreg") != std::string::npos);
  CHECK(s1.error().find("mlp") != std::string::npos);
  // s0 never admitted it: it still waits for a second site, and a leave stops it cleanly.
  std::optional<meridian::daemon::StatusReport> waiting;
  REQUIRE(eventually_from_process([&] { return (waiting = s0.status()).has_value() || s0.done(); }));
  REQUIRE(waiting);
  CHECK(waiting->state == "joining");
  CHECK(waiting->peers_alive == 1);
  CHECK(s0.control().leave().accepted);
  CHECK(s0.wait() == 0);
  CHECK_FALSE(fs::exists(dir.path() / "s0" / "result.json"));  // it never trained
}

namespace {

// Two in-process sites of `algo` on an MLP with batch norm; their final checkpoints.
std::vector<fs::path> train_batch_norm_pair(const fs::path& root, const std::string& algo) {
  auto net = meridian::peer::InMemoryNetwork::create({});
  auto sites = start_sites(2, net, [&](int i) {
    auto c = site_config(root, "s" + std::to_string(i), i, 2, 0.1);
    c.model = "mlp-bn";
    c.widths = {16};
    c.algo = algo;
    // dsync (D = 0): a re-average after every step too, so that the sites end equal whatever the parity
    // of the last step (a row step mixes both sites of the 1×2 grid, a column step neither).
    c.reaverage_every = 1;
    return c;
  });
  std::vector<fs::path> out;
  for (auto& s : sites) {
    const int rc = s->wait();
    INFO(s->error());
    REQUIRE(rc == 0);
    REQUIRE(s->result()["completed"] == true);
    out.push_back(s->final_checkpoint());
  }
  return out;
}

}  // namespace

TEST_CASE("allreduce and dsync average batch norm's statistics: two in-process sites end with the same bits",
          "[cluster][daemon][in-process][norm-state]") {
  MERIDIAN_SKIP_WITHOUT_FASHION_MNIST();
  // allreduce averages them with every gradient; dsync with the parameters in every group mean and
  // re-average, whose ring gives every site the same bits. Each site's own batches would leave them
  // apart otherwise (the parameters agree either way).
  for (const std::string algo : {"allreduce", "dsync"}) {
    INFO(algo);
    TempDir dir;
    const auto files = train_batch_norm_pair(dir.path(), algo);
    const auto a = meridian::daemon::read_checkpoint_file(files[0]);
    const auto b = meridian::daemon::read_checkpoint_file(files[1]);
    CHECK(a.parameters == b.parameters);
    REQUIRE_FALSE(a.model_state.empty());
    CHECK(a.model_state == b.model_state);
    // Trained statistics, not the initial running means 0 and variances 1.
    CHECK(std::any_of(a.model_state.begin(), a.model_state.end(), [](float v) { return v != 0.0f && v != 1.0f; }));
    // The checkpoints rebuild the model with its statistics: the averaged model learnt.
    const double accuracy = meridian::daemon::evaluate_checkpoints(files, test_set()).evaluation.accuracy;
    INFO("accuracy " << accuracy);
    CHECK(accuracy > 0.6);
  }
}

TEST_CASE("sgp keeps batch norm's statistics local: two in-process sites end with their own",
          "[cluster][daemon][in-process][norm-state]") {
  MERIDIAN_SKIP_WITHOUT_FASHION_MNIST();
  // SGP's reference implementation gossips parameters only (docs/algorithms.md, "Normalization
  // statistics"): each site's running statistics follow its own batches, so two sites that saw different
  // rows end with different statistics, trained ones both.
  TempDir dir;
  const auto files = train_batch_norm_pair(dir.path(), "sgp");
  const auto a = meridian::daemon::read_checkpoint_file(files[0]);
  const auto b = meridian::daemon::read_checkpoint_file(files[1]);
  REQUIRE_FALSE(a.model_state.empty());
  REQUIRE(a.model_state.size() == b.model_state.size());
  CHECK(a.model_state != b.model_state);
  for (const auto* state : {&a.model_state, &b.model_state}) {
    CHECK(std::any_of(state->begin(), state->end(), [](float v) { return v != 0.0f && v != 1.0f; }));
  }
}

TEST_CASE("in-process dts sites with --delay auto run the same measured shape from the same round",
          "[cluster][daemon][in-process][auto_shape]") {
  MERIDIAN_SKIP_WITHOUT_FASHION_MNIST();
  TempDir dir;
  auto net = meridian::peer::InMemoryNetwork::create({});
  auto sites = start_sites(3, net, [&](int i) {
    SiteConfig c = site_config(dir.path(), "s" + std::to_string(i), i, 3, 50);  // far longer than the test: it leaves
    c.algo = "dts";
    c.delay = meridian::daemon::kAutoShape;
    c.exchange = "direct";
    c.slowdown = 3;
    return c;
  });
  // Every site reports the shape it runs; once the network is measured they all run the same one,
  // switched to at the same round.
  std::optional<meridian::daemon::StatusReport> first;
  const bool agreed = eventually_from_process([&] {
    std::vector<meridian::daemon::StatusReport> reports;
    for (auto& s : sites) {
      auto r = s->status();
      if (!r || !r->shape_round_trip_seconds) return false;
      reports.push_back(*r);
    }
    first = reports.front();
    return std::all_of(reports.begin(), reports.end(), [&](const auto& r) {
      return r.shape == first->shape && r.shape_since_round == first->shape_since_round &&
             r.shape_round_trip_seconds == first->shape_round_trip_seconds &&
             r.shape_step_seconds == first->shape_step_seconds;
    });
  });
  for (auto& s : sites) {
    try {
      (void)s->control().leave();
    } catch (const std::exception&) {
    }
  }
  for (auto& s : sites) {
    const int rc = s->wait();
    INFO(s->error());
    CHECK(rc == 0);
  }
  REQUIRE(agreed);
  INFO("shape " << first->shape << " since round " << first->shape_since_round.value_or(0));
  CHECK(first->shape.rfind("D = ", 0) == 0);
  CHECK(first->shape_since_round.value_or(0) > 0);
  CHECK(*first->shape_step_seconds > 0);
}
