// Agreement at join, through real `meridian start` processes on 127.0.0.1: a site whose federation
// terms (model, algorithm and its shape, optimizer where the algorithm carries it, data schema) differ
// from the site it joins is refused at once. The joiner exits non-zero with the refusing site's reason,
// naming the field and both values; the refusing site logs the same and keeps waiting for a proper
// peer. Nobody hangs: each test waits for the joiner to exit on its own.
#include <catch2/catch.hpp>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "error/exit_code.h"
#include "tests/daemon/site_process.h"
#include "tests/support/small_table.h"
#include "tests/support/start_args.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using meridian::tests::eventually_from_process;
using meridian::tests::SiteProcess;
using meridian::tests::TempDir;
using meridian::tests::StartArgs;

namespace {

// A table with the given header (a label column "label" among them) and 40 rows of small numbers.
fs::path write_columns(const fs::path& dir, const std::string& name, const std::vector<std::string>& header) {
  fs::create_directories(dir);
  const fs::path file = dir / name;
  std::ofstream out(file);
  for (std::size_t c = 0; c < header.size(); ++c) out << (c ? "," : "") << header[c];
  out << "\n";
  for (int i = 0; i < 40; ++i) {
    for (std::size_t c = 0; c < header.size(); ++c)
      out << (c ? "," : "")
          << (header[c] == "label" ? (i % 2 ? "benign" : "malignant") : std::to_string((i * (c + 3)) % 11));
    out << "\n";
  }
  return file;
}

StartArgs args_for(const std::string& name, int index, const fs::path& table) {
  return StartArgs(name)
      .site(index, 2)
      .csv(table)
      .mlp(8)
      .set("--epochs", 1)
      .set("--batch", 8)
      .set("--seed", 3)
      .set("--heartbeat-interval", "0.2")
      .set("--join-timeout", 600);
}

struct Outcome {
  int joiner_exit = 0;
  std::string joiner_log;
  std::string refuser_log;
};

// alpha starts with `alpha_args`, beta joins it with `beta_args`; returns once beta exited (alpha
// is then stopped).
Outcome join(const fs::path& root, const StartArgs& alpha_args, StartArgs beta_args) {
  SiteProcess alpha(root / "alpha", alpha_args);
  const std::string endpoint = alpha.endpoint();
  REQUIRE_FALSE(endpoint.empty());
  SiteProcess beta(root / "beta", beta_args.join(endpoint));
  Outcome out;
  // The hang guard is generous; a refused joiner exits within a heartbeat or two.
  out.joiner_exit = beta.wait_exit(std::chrono::seconds(300));
  out.joiner_log = beta.log();
  REQUIRE(eventually_from_process([&] { return alpha.log().find("refused at join") != std::string::npos || alpha.exited(); }));
  CHECK_FALSE(alpha.exited());  // the refusing site carries on, waiting for a proper peer
  alpha.signal(SIGINT);
  CHECK(alpha.wait_exit() == 0);
  out.refuser_log = alpha.log();
  return out;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a site running another --algo is refused at join, with both algorithms named", "[daemon][join][process]") {
  TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path(), "t.csv", {"cat", "dog"});
  const auto o = join(dir.path(), args_for("alpha", 0, table).set("--algo", "sgp"),
                      args_for("beta", 1, table).set("--algo", "allreduce"));
  INFO("joiner:\n" << o.joiner_log << "\nrefuser:\n" << o.refuser_log);
  CHECK(o.joiner_exit == meridian::error::kExitUser);
  CHECK(contains(o.joiner_log, "alpha refuses this site: algorithm differs (alpha: sgp, K = "));
  CHECK(contains(o.joiner_log, "; this site: allreduce)"));
  CHECK_FALSE(contains(o.joiner_log, "gave up after --join-timeout"));
  CHECK(contains(o.refuser_log, "refused at join: algorithm differs (this site: sgp, K = "));
  CHECK(contains(o.refuser_log, "; beta: allreduce)"));
  CHECK_FALSE(contains(o.refuser_log, "member 'beta' is alive"));
}

TEST_CASE("a dts site with another delay is refused at join, with both shapes named", "[daemon][join][process]") {
  TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path(), "t.csv", {"cat", "dog"});
  const auto o = join(dir.path(), args_for("alpha", 0, table).set("--algo", "dts").set("--delay", 1),
                      args_for("beta", 1, table).set("--algo", "dts").set("--delay", 2));
  INFO("joiner:\n" << o.joiner_log << "\nrefuser:\n" << o.refuser_log);
  CHECK(o.joiner_exit == meridian::error::kExitUser);
  CHECK(contains(o.joiner_log, "alpha refuses this site: algorithm differs (alpha: dts, D = 1, "));
  CHECK(contains(o.joiner_log, "; this site: dts, D = 2, "));
  CHECK(contains(o.refuser_log, "refused at join: algorithm differs (this site: dts, D = 1, "));
  CHECK(contains(o.refuser_log, "; beta: dts, D = 2, "));
}

TEST_CASE("a dts site with --delay auto and one with a fixed delay are refused at join, with both shapes named",
          "[daemon][join][auto_shape][process]") {
  TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path(), "t.csv", {"cat", "dog"});
  const auto o = join(dir.path(), args_for("alpha", 0, table).set("--algo", "dts").set("--delay", "auto"),
                      args_for("beta", 1, table).set("--algo", "dts").set("--delay", 4));
  INFO("joiner:\n" << o.joiner_log << "\nrefuser:\n" << o.refuser_log);
  CHECK(o.joiner_exit == meridian::error::kExitUser);
  CHECK(contains(o.joiner_log, "alpha refuses this site: algorithm differs (alpha: dts, D = auto, P = 8·D "));
  CHECK(contains(o.joiner_log, "; this site: dts, D = 4, P = 1, "));
  CHECK(contains(o.refuser_log, "refused at join: algorithm differs (this site: dts, D = auto, P = 8·D "));
  CHECK(contains(o.refuser_log, "; beta: dts, D = 4, P = 1, "));
}

TEST_CASE("an sgp site with a fixed tau joining one with --tau auto is refused, with both named",
          "[daemon][join][auto_shape][process]") {
  TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path(), "t.csv", {"cat", "dog"});
  const auto o = join(dir.path(), args_for("alpha", 0, table).set("--algo", "sgp").set("--tau", 3),
                      args_for("beta", 1, table).set("--algo", "sgp").set("--tau", "auto"));
  INFO("joiner:\n" << o.joiner_log << "\nrefuser:\n" << o.refuser_log);
  CHECK(o.joiner_exit == meridian::error::kExitUser);
  CHECK(contains(o.joiner_log, "alpha refuses this site: algorithm differs (alpha: sgp, K = 1 out-peer(s), tau = 3"));
  CHECK(contains(o.joiner_log, "; this site: sgp, K = 1 out-peer(s), tau = auto (chosen from the network)"));
  CHECK(contains(o.refuser_log, "; beta: sgp, K = 1 out-peer(s), tau = auto"));
}

TEST_CASE("a site with another model is refused at join, with both architectures named", "[daemon][join][process]") {
  TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path(), "t.csv", {"cat", "dog"});
  const auto o =
      join(dir.path(), args_for("alpha", 0, table).set("--widths", 8), args_for("beta", 1, table).set("--widths", 16));
  INFO("joiner:\n" << o.joiner_log << "\nrefuser:\n" << o.refuser_log);
  CHECK(o.joiner_exit == meridian::error::kExitUser);
  // The architectures in words (Model::summary), not their fingerprints.
  CHECK(contains(o.joiner_log,
                 "alpha refuses this site: model differs (alpha: mlp 2-8-2 (42 parameters); this site: "
                 "mlp 2-16-2 (82 parameters))"));
  CHECK(contains(o.refuser_log,
                 "refused at join: model differs (this site: mlp 2-8-2 (42 parameters); beta: mlp "
                 "2-16-2 (82 parameters))"));
}

TEST_CASE("a site whose data names other classes is refused at join, with both class lists named",
          "[daemon][join][process]") {
  TempDir dir;
  const auto pets = meridian::tests::write_small_table(dir.path() / "a", "t.csv", {"cat", "dog"});
  const auto fruit = meridian::tests::write_small_table(dir.path() / "b", "t.csv", {"apple", "pear"});
  const auto o = join(dir.path(), args_for("alpha", 0, pets), args_for("beta", 1, fruit));
  INFO("joiner:\n" << o.joiner_log << "\nrefuser:\n" << o.refuser_log);
  CHECK(o.joiner_exit == meridian::error::kExitUser);
  CHECK(contains(o.joiner_log,
                 "alpha refuses this site: data differs (alpha: input 2, 2 classes (cat, dog); "
                 "this site: input 2, 2 classes (apple, pear))"));
  CHECK(contains(o.refuser_log,
                 "refused at join: data differs (this site: input 2, 2 classes (cat, dog); "
                 "beta: input 2, 2 classes (apple, pear))"));
}

TEST_CASE("an allreduce site with another optimizer is refused at join, with both optimizers named",
          "[daemon][join][process]") {
  TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path(), "t.csv", {"cat", "dog"});
  const auto o = join(dir.path() / "allreduce",
                      args_for("alpha", 0, table).set("--algo", "allreduce").set("--optimizer", "momentum"),
                      args_for("beta", 1, table).set("--algo", "allreduce").set("--optimizer", "adam"));
  INFO("joiner:\n" << o.joiner_log << "\nrefuser:\n" << o.refuser_log);
  CHECK(o.joiner_exit == meridian::error::kExitUser);
  CHECK(contains(o.joiner_log, "alpha refuses this site: optimizer differs (alpha: momentum 0.9; this site: adam)"));
  CHECK(contains(o.refuser_log, "refused at join: optimizer differs (this site: momentum 0.9; beta: adam)"));
}

TEST_CASE("a site whose table has its columns in another order is admitted, its columns matched by name",
          "[daemon][join][data][process]") {
  TempDir dir;
  const auto ours = write_columns(dir.path() / "a", "t.csv", {"age", "bmi", "glucose", "label"});
  const auto theirs = write_columns(dir.path() / "b", "t.csv", {"glucose", "label", "bmi", "age"});
  SiteProcess alpha(dir.path() / "alpha", args_for("alpha", 0, ours).site(0, 1).set("--min-sites", 2));
  const std::string endpoint = alpha.endpoint();
  REQUIRE_FALSE(endpoint.empty());
  SiteProcess beta(dir.path() / "beta",
                   args_for("beta", 1, theirs).site(0, 1).set("--min-sites", 2).join(endpoint));
  const int beta_exit = beta.wait_exit(std::chrono::seconds(300));
  const int alpha_exit = alpha.wait_exit(std::chrono::seconds(300));
  INFO("alpha:\n" << alpha.log() << "\nbeta:\n" << beta.log());
  CHECK(beta_exit == 0);
  CHECK(alpha_exit == 0);
  CHECK_FALSE(contains(alpha.log(), "refused at join"));
  CHECK(contains(beta.log(), "input scaling agreed over 2 sites"));
}

TEST_CASE("a site whose table has an extra column is refused at join over its columns, not the test file",
          "[daemon][join][data][process]") {
  TempDir dir;
  const auto ours = write_columns(dir.path() / "a", "t.csv", {"age", "bmi", "label"});
  const auto theirs = write_columns(dir.path() / "b", "t.csv", {"age", "bmi", "weight", "label"});
  const auto o = join(dir.path(), args_for("alpha", 0, ours).site(0, 1).set("--min-sites", 2),
                      args_for("beta", 1, theirs).site(0, 1).set("--min-sites", 2));
  INFO("joiner:\n" << o.joiner_log << "\nrefuser:\n" << o.refuser_log);
  CHECK(o.joiner_exit == meridian::error::kExitUser);
  CHECK(contains(o.joiner_log,
                 "alpha refuses this site: columns differs (alpha: [age, bmi]; this site: [age, bmi, weight])"));
  CHECK(contains(o.refuser_log, "refused at join: columns differs (this site: [age, bmi]; beta: [age, bmi, weight])"));
  CHECK(contains(o.joiner_log, "leave extra ones out with --ignore-columns"));
}

TEST_CASE("a site with the classes in another order is refused at join, with both lists named",
          "[daemon][join][data][process]") {
  TempDir dir;
  const auto table = write_columns(dir.path(), "t.csv", {"age", "label"});
  const auto o = join(dir.path(),
                      args_for("alpha", 0, table)
                          .set("--dataset", "fashion-mnist")
                          .set("--train", table)
                          .set("--classes", "benign,malignant"),
                      args_for("beta", 1, table)
                          .set("--dataset", "fashion-mnist")
                          .set("--train", table)
                          .set("--classes", "malignant,benign"));
  INFO("joiner:\n" << o.joiner_log << "\nrefuser:\n" << o.refuser_log);
  CHECK(o.joiner_exit == meridian::error::kExitUser);
  CHECK(contains(o.joiner_log,
                 "alpha refuses this site: data differs (alpha: input 1, 2 classes (benign, malignant); "
                 "this site: input 1, 2 classes (malignant, benign))"));
  CHECK(contains(o.refuser_log,
                 "refused at join: data differs (this site: input 1, 2 classes (benign, malignant); "
                 "beta: input 1, 2 classes (malignant, benign))"));
  // The fix is named although the refusing site declared its list: the joiner reads the refuser's fix.
  CHECK(contains(o.joiner_log, "give every site the same full class list with --classes a,b,c"));
}

TEST_CASE("a site that scales its inputs otherwise is refused at join, with both scalings named",
          "[daemon][join][data][process]") {
  TempDir dir;
  const auto table = write_columns(dir.path(), "t.csv", {"age", "bmi", "label"});
  SECTION("none against the federation's") {
    const auto o = join(dir.path(), args_for("alpha", 0, table).set("--normalize", "none"), args_for("beta", 1, table));
    INFO("joiner:\n" << o.joiner_log << "\nrefuser:\n" << o.refuser_log);
    CHECK(o.joiner_exit == meridian::error::kExitUser);
    CHECK(contains(o.joiner_log,
                   "alpha refuses this site: normalization differs (alpha: none; "
                   "this site: from the federation, per feature)"));
    CHECK(contains(o.refuser_log,
                   "refused at join: normalization differs (this site: none; "
                   "beta: from the federation, per feature)"));
  }
  SECTION("other given values") {
    const auto o = join(dir.path(), args_for("alpha", 0, table).set("--input-mean", "50,25").set("--input-std", "10,5"),
                        args_for("beta", 1, table).set("--input-mean", "50,25").set("--input-std", "10,4"));
    INFO("joiner:\n" << o.joiner_log << "\nrefuser:\n" << o.refuser_log);
    CHECK(o.joiner_exit == meridian::error::kExitUser);
    CHECK(contains(o.joiner_log,
                   "alpha refuses this site: normalization differs (alpha: given, per feature: mean 50, 25; std 10, 5; "
                   "this site: given, per feature: mean 50, 25; std 10, 4)"));
  }
}

TEST_CASE("a site without DP-SGD is refused at join by a DP-SGD site, with both privacy settings named",
          "[daemon][join][process][dp]") {
  TempDir dir;
  const auto table = meridian::tests::write_small_table(dir.path(), "t.csv", {"cat", "dog"});
  const auto o = join(dir.path(),
                      args_for("alpha", 0, table)
                          .set("--algo", "allreduce")
                          .set("--dp-epsilon", 3)
                          .set("--dp-delta", "1e-5")
                          .set("--dp-clip", 1),
                      args_for("beta", 1, table).set("--algo", "allreduce"));
  INFO("joiner:\n" << o.joiner_log << "\nrefuser:\n" << o.refuser_log);
  CHECK(o.joiner_exit == meridian::error::kExitUser);
  CHECK(contains(o.joiner_log,
                 "alpha refuses this site: privacy differs (alpha: DP-SGD epsilon 3, delta 1e-05, clip 1; this site: "
                 "none)"));
  CHECK(contains(o.refuser_log,
                 "refused at join: privacy differs (this site: DP-SGD epsilon 3, delta 1e-05, clip 1; beta: none)"));
}
