// The Debian package (packaging/): packaging/build-deb builds it from the test's `meridian` binary, its
// control file names the libraries the binary needs and its files are where the unit expects them, and
// `systemd-analyze verify` accepts meridian@.service in a root unpacked from it. Installing it into a
// bare Debian root and running a site from it is `make deb-check` (packaging/check-deb): debootstrap
// takes minutes the first time.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "tests/support/build_paths.h"
#include "tests/support/child_process.h"
#include "tests/support/file_contents.h"
#include "tests/support/temp_dir.h"

using Catch::Matchers::Contains;
using meridian::tests::run_command;
namespace fs = std::filesystem;

namespace {

const fs::path kSource = meridian::tests::source_dir();

bool have(const std::string& program) {
  return run_command({"sh", "-c", "command -v " + program + " > /dev/null"}).exit_code == 0;
}

}  // namespace

TEST_CASE("make deb's package holds the binary, the unit, the user and the docs, and its unit verifies",
          "[packaging][process]") {
  if (!have("dpkg-shlibdeps") || !have("systemd-analyze")) {
    WARN("SKIPPED: dpkg-dev or systemd is not installed (scripts/install-deps deb)");
    return;
  }
  meridian::tests::TempDir dir;
  // build-deb reads the binary from a build folder: the test's own, through a link.
  const auto build = dir.path() / "build";
  fs::create_directories(build);
  fs::create_symlink(meridian::tests::meridian_binary(), build / "meridian");
  const auto built = run_command({(kSource / "packaging" / "build-deb").string(), build.string()});
  INFO(built.output);
  REQUIRE(built.exit_code == 0);
  const auto debs = [&] {
    std::vector<fs::path> found;
    for (const auto& e : fs::directory_iterator(build))
      if (e.path().extension() == ".deb") found.push_back(e.path());
    return found;
  }();
  REQUIRE(debs.size() == 1);
  CHECK_THAT(debs[0].filename().string(), Catch::StartsWith("meridian_0.") && Catch::EndsWith(".deb"));

  const auto control = run_command({"dpkg-deb", "--field", debs[0].string()});
  INFO(control.output);
  REQUIRE(control.exit_code == 0);
  CHECK_THAT(control.output,
             Contains("Package: meridian") && Contains("libzmq5") && Contains("libprotobuf") && Contains("libc6 (>="));

  const auto root = dir.path() / "root";
  REQUIRE(run_command({"dpkg-deb", "--extract", debs[0].string(), root.string()}).exit_code == 0);
  for (const auto* file :
       {"usr/bin/meridian", "lib/systemd/system/meridian@.service", "usr/lib/sysusers.d/meridian.conf",
        "usr/share/doc/meridian/deploy.md", "usr/share/doc/meridian/operations.md", "usr/share/doc/meridian/export.md",
        "usr/share/doc/meridian/copyright", "usr/lib/python3/dist-packages/meridian_torch.py"}) {
    INFO(file);
    CHECK(fs::exists(root / file));
  }
  const auto control_dir = dir.path() / "control";
  REQUIRE(run_command({"dpkg-deb", "--control", debs[0].string(), control_dir.string()}).exit_code == 0);
  CHECK_THAT(meridian::tests::file_contents(control_dir / "postinst"), Contains("useradd --system"));

  // The unit: one instance per site config, run as the package's user, the finished run's exit code
  // neither restarted nor a failure.
  const std::string unit = meridian::tests::file_contents(root / "lib/systemd/system/meridian@.service");
  CHECK_THAT(unit, Contains("ExecStart=/usr/bin/meridian start --config /etc/meridian/%i.toml") &&
                       Contains("User=meridian") && Contains("StateDirectory=meridian/%i") &&
                       Contains("RestartPreventExitStatus=3") && Contains("SuccessExitStatus=3") &&
                       Contains("NoNewPrivileges=yes") && Contains("ProtectSystem=strict") &&
                       Contains("PrivateTmp=yes"));
  // The targets and slices every unit depends on come with systemd itself: this machine's, as an
  // installed system has them.
  const auto system_units = root / "usr/lib/systemd/system";
  fs::create_directories(system_units);
  for (const auto& e : fs::directory_iterator("/lib/systemd/system"))
    if (e.path().extension() == ".target" || e.path().extension() == ".slice")
      fs::copy(e.path(), system_units / e.path().filename(), fs::copy_options::copy_symlinks);
  const auto verify =
      run_command({"systemd-analyze", "verify", "--root=" + root.string(), "meridian@riverside.service"});
  INFO(verify.output);
  CHECK(verify.exit_code == 0);
  CHECK(verify.output.find("meridian") == std::string::npos);  // no warning names the unit or its file

  // The check has teeth: without the binary the unit does not verify.
  fs::remove(root / "usr/bin/meridian");
  const auto without =
      run_command({"systemd-analyze", "verify", "--root=" + root.string(), "meridian@riverside.service"});
  CHECK(without.exit_code != 0);
  CHECK_THAT(without.output, Contains("/usr/bin/meridian is not executable"));
}

TEST_CASE("the packaging scripts pass shellcheck", "[packaging][process]") {
  if (!have("shellcheck")) {
    WARN("SKIPPED: shellcheck is not installed (apt install shellcheck)");
    return;
  }
  const auto r = run_command(
      {"shellcheck", (kSource / "packaging" / "build-deb").string(), (kSource / "packaging" / "check-deb").string(),
       (kSource / "packaging" / "postinst").string(), (kSource / "packaging" / "postrm").string()});
  INFO(r.output);
  CHECK(r.exit_code == 0);
}
