// Checks of docker/ that need no Docker engine: the site files and compose.yml agree, every file the
// Dockerfiles copy exists, the runtime stage's package list covers every library the binary loads, the
// scripts pass shellcheck, and the entrypoint reports missing keys and roster by name.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "tests/support/temp_dir.h"
#include "tests/docker/federation_sites.h"
#include "tests/docker/namespace_network.h"
#include "tests/support/build_paths.h"
#include "tests/support/child_process.h"
#include "tests/support/file_contents.h"

using meridian::tests::load_federation_sites;
using meridian::tests::run_command;
namespace fs = std::filesystem;

namespace {

const fs::path kSource = meridian::tests::source_dir();

// The text of a file the docker set-up must have.
std::string read_text(const fs::path& path) {
  REQUIRE(fs::is_regular_file(path));
  return meridian::tests::file_contents(path);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// compose.yml's services as "service -> its lines", for the few facts the test compares.
std::map<std::string, std::vector<std::string>> compose_services(const std::string& text) {
  std::map<std::string, std::vector<std::string>> services;
  bool in_services = false;
  std::string current;
  static const std::regex service_line(R"(^  ([a-z0-9_-]+):\s*$)");
  for (const auto& line : lines_of(text)) {
    if (!line.empty() && line[0] != ' ' && line[0] != '#') {
      in_services = line.rfind("services:", 0) == 0;
      current.clear();
      continue;
    }
    if (!in_services) continue;
    std::smatch m;
    if (std::regex_match(line, m, service_line)) {
      current = m[1];
      services[current];
    } else if (!current.empty()) {
      services[current].push_back(line);
    }
  }
  return services;
}

bool has_line(const std::vector<std::string>& lines, const std::string& wanted) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) {
    const auto first = l.find_first_not_of(' ');
    return first != std::string::npos && l.substr(first) == wanted;
  });
}

}  // namespace

TEST_CASE("the demo site files are four valid sites of one world4 federation", "[docker][unit]") {
  const auto sites = load_federation_sites();
  REQUIRE(sites.size() == 4);
  std::set<std::string> regions;
  for (std::size_t i = 0; i < sites.size(); ++i) {
    const auto& s = sites[i];
    INFO(s.file.string());
    CHECK(meridian::daemon::site_config_problems(s.config).empty());
    CHECK(s.file.stem() == s.config.name);
    CHECK(s.config.site_index == static_cast<int>(i));
    CHECK(s.config.site_count == 4);
    CHECK(s.config.wan == "world4");
    CHECK_FALSE(s.config.insecure);
    regions.insert(s.config.region);
    // Every site can bootstrap from every other, so no single site is needed to start the federation.
    std::set<std::string> others;
    for (const auto& o : sites)
      if (o.config.name != s.config.name) others.insert(o.config.listen);
    CHECK(std::set<std::string>(s.config.join.begin(), s.config.join.end()) == others);
  }
  CHECK(regions == std::set<std::string>{"oregon", "ohio", "london", "tokyo"});
}

TEST_CASE("compose.yml runs each site file at the address the file listens on", "[docker][unit]") {
  const auto text = read_text(kSource / "docker" / "compose.yml");
  const auto services = compose_services(text);
  const auto sites = load_federation_sites();
  REQUIRE(services.size() == sites.size());
  for (const auto& s : sites) {
    INFO("site " << s.config.name);
    REQUIRE(services.count(s.config.name) == 1);
    const auto& lines = services.at(s.config.name);
    CHECK(has_line(lines, "ipv4_address: " + s.host));
    CHECK(has_line(lines, "- ./sites/" + s.config.name + ".toml:/etc/meridian/site.toml:ro"));
    CHECK(has_line(lines, "- ./federation/" + s.config.name + "/keys:/etc/meridian/keys:ro"));
    CHECK(has_line(lines, "- ./federation/" + s.config.name + "/run:/var/lib/meridian"));
    // The subnet of the bridge network holds every site's address (a /24 by its first three octets).
    const auto subnet = s.host.substr(0, s.host.rfind('.')) + ".0/24";
    CHECK(text.find("- subnet: " + subnet) != std::string::npos);
  }
}

TEST_CASE("every file the Dockerfiles copy from the repository exists", "[docker][unit]") {
  for (const char* name : {"Dockerfile", "Dockerfile.cuda"}) {
    INFO(name);
    std::size_t copies = 0;
    for (const auto& line : lines_of(read_text(kSource / "docker" / name))) {
      if (line.rfind("COPY ", 0) != 0 || line.find("--from=") != std::string::npos) continue;
      std::istringstream words(line.substr(5));
      std::vector<std::string> args;
      for (std::string w; words >> w;) args.push_back(w);
      REQUIRE(args.size() >= 2);
      for (std::size_t i = 0; i + 1 < args.size(); ++i) {
        INFO(line);
        CHECK(fs::exists(kSource / args[i]));
        ++copies;
      }
    }
    CHECK(copies >= 3);  // install-deps, the source tree, the entrypoint
  }
  // `COPY . .` copies the repository: the demo's key pairs and any secret key must stay out of images.
  const auto ignored = lines_of(read_text(kSource / ".dockerignore"));
  for (const char* pattern : {"docker/federation/", "**/secret.key", "build/"}) {
    INFO(".dockerignore: " << pattern);
    CHECK(std::find(ignored.begin(), ignored.end(), pattern) != ignored.end());
  }
  // The build stages run these from the copied tree.
  for (const char* script : {"scripts/install-deps", "docker/runtime-packages", "docker/entrypoint.sh"}) {
    INFO(script);
    struct stat st {};
    REQUIRE(::stat((kSource / script).c_str(), &st) == 0);
    CHECK((st.st_mode & S_IXUSR) != 0);
  }
}

TEST_CASE("runtime-packages names an installed Debian package for every library meridian loads", "[docker][process]") {
  const auto script = (kSource / "docker" / "runtime-packages").string();
  std::vector<std::string> argv{script};
  // A CUDA build on a machine whose toolkit came from NVIDIA's runfile (/usr/local/cuda) loads libraries
  // that dpkg does not know. The script refuses those by name; the CPU image is built without CUDA, so
  // the rest of the check covers the Debian libraries only.
  if (run_command({"ldd", meridian::tests::meridian_binary()}).output.find("/usr/local/cuda") != std::string::npos) {
    const auto refused = run_command({script, meridian::tests::meridian_binary()});
    CHECK(refused.exit_code != 0);
    CHECK(refused.output.find("no Debian package holds /usr/local/cuda") != std::string::npos);
    argv.insert(argv.end(), {"--exclude", "^/usr/local/cuda"});
  }
  argv.push_back(meridian::tests::meridian_binary());
  const auto r = run_command(argv);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto packages = lines_of(r.output);
  const std::set<std::string> listed(packages.begin(), packages.end());
  CHECK(listed.count("libzmq5") == 1);
  CHECK(listed.count("libc6") == 1);
  for (const auto& p : packages) {
    INFO(p);
    const auto q = run_command({"dpkg-query", "-W", "-f=${Status}", p});
    CHECK(q.output == "install ok installed");
  }
  // A binary that needs a library no package holds is refused by name.
  const auto missing = run_command({script, "/nonexistent/meridian"});
  CHECK(missing.exit_code != 0);
  CHECK(missing.output.find("/nonexistent/meridian") != std::string::npos);
}

TEST_CASE("the docker scripts pass shellcheck", "[docker][process]") {
  if (run_command({"sh", "-c", "command -v shellcheck"}).exit_code != 0) {
    WARN("SKIPPED: shellcheck is not installed (apt install shellcheck)");
    return;
  }
  const auto r = run_command(
      {"shellcheck", (kSource / "docker" / "entrypoint.sh").string(), (kSource / "docker" / "make-federation").string(),
       (kSource / "docker" / "runtime-packages").string(), (kSource / "docker" / "check-runtime-stage").string()});
  INFO(r.output);
  CHECK(r.exit_code == 0);
}

TEST_CASE("the entrypoint names a missing key pair or roster and passes other commands through", "[docker][process]") {
  meridian::tests::TempDir dir;
  const auto entrypoint = (kSource / "docker" / "entrypoint.sh").string();
  const auto bin_dir = fs::path(meridian::tests::meridian_binary()).parent_path().string();
  auto run = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv{"env",
                                  "PATH=" + bin_dir + ":/usr/bin:/bin",
                                  "MERIDIAN_KEY_DIR=" + (dir.path() / "keys").string(),
                                  "MERIDIAN_ROSTER=" + (dir.path() / "roster.txt").string(),
                                  "MERIDIAN_RUN_DIR=" + (dir.path() / "run").string(),
                                  "MERIDIAN_CONFIG=" + (dir.path() / "site.toml").string(),
                                  entrypoint};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_command(argv);
  };

  auto r = run({});
  CHECK(r.exit_code == 78);
  CHECK(r.output.find("no key pair in " + (dir.path() / "keys").string()) != std::string::npos);

  // Any other command reaches meridian unchanged: here keygen creates the missing key pair.
  r = run({"keygen", "--out", (dir.path() / "keys").string()});
  INFO(r.output);
  REQUIRE(r.exit_code == 0);

  r = run({"start"});
  CHECK(r.exit_code == 78);
  CHECK(r.output.find("no roster at " + (dir.path() / "roster.txt").string()) != std::string::npos);
}

TEST_CASE("the Dockerfiles' HEALTHCHECK is a status command meridian accepts", "[docker][process]") {
  meridian::tests::TempDir dir;
  const auto bin_dir = fs::path(meridian::tests::meridian_binary()).parent_path().string();
  for (const char* name : {"Dockerfile", "Dockerfile.cuda"}) {
    INFO(name);
    const auto lines = lines_of(read_text(kSource / "docker" / name));
    const auto at =
        std::find_if(lines.begin(), lines.end(), [](const std::string& l) { return l.rfind("HEALTHCHECK ", 0) == 0; });
    REQUIRE(at != lines.end());
    REQUIRE(at + 1 != lines.end());
    // The instruction continues on the next line: "  CMD <shell command>".
    const auto cmd_at = (at + 1)->find("CMD ");
    REQUIRE(cmd_at != std::string::npos);
    const auto command = (at + 1)->substr(cmd_at + 4);
    CHECK(command.find("meridian status") != std::string::npos);
    // No daemon runs at the run directory: the command fails naming the socket (a flag the CLI does not
    // know would name the flag instead), and the instruction turns any failure into 1, which Docker reads
    // as "unhealthy" (it reserves the other codes).
    const auto r = run_command(
        {"env", "PATH=" + bin_dir + ":/usr/bin:/bin", "MERIDIAN_RUN_DIR=" + dir.path().string(), "sh", "-c", command});
    INFO(r.output);
    CHECK(r.exit_code == 1);
    CHECK(r.output.find((dir.path() / "control.sock").string()) != std::string::npos);
  }
}
