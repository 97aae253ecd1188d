// One-way throughput of large tensor messages between two processes over loopback: Meridian's
// ZmqTransport against a raw libzmq PUSH/PULL pair sending the same sizes, with and without CURVE,
// side by side in the same run (raw and Meridian alternate, repeat by repeat).
//
// Each measurement starts a fresh receiver process (this binary with --role receiver); this process
// sends. Both sides keep at most two messages in flight (the receiver acknowledges each), so neither
// implementation can queue unbounded memory. Throughput = count * size / (time from the first send
// to the last acknowledgement), after two warm-up messages.
//
// Raw pair: the sender calls zmq_send() from one reused buffer (libzmq copies it into a new message),
// the receiver zmq_msg_recv()s into a fresh message each time: the plain way to use libzmq.
// Meridian: the sender hands over a payload from take_buffer(), the receiver gives each received
// payload back with recycle(); chunking, validation (including the finite-value scan) and reassembly
// are all on the measured path.
//
// Usage: transport_throughput [--repeats R] [--chunk-kib K] [--markdown FILE]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include <spdlog/spdlog.h>

#include "peer/zmq/zmq_transport.h"

#include "error/error.h"

namespace fs = std::filesystem;
using namespace meridian::peer;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kWarmup = 2;
constexpr int kWindow = 2;

std::string self_exe() { return fs::read_symlink("/proc/self/exe").string(); }

ZmqTransportOptions transport_options(const std::string& name, bool secure, const fs::path& keydir) {
  ZmqTransportOptions o;
  o.name = name;
  o.insecure = !secure;
  if (secure) {
    o.keys = read_key_pair(keydir / name);
    o.roster = Roster::load(keydir / "roster.txt");
  }
  o.heartbeat_interval = std::chrono::milliseconds(500);
  o.heartbeat_timeout = std::chrono::milliseconds(10000);
  o.validation.max_weight = 1e6;
  return o;
}

// ---- receivers (child process) ---------------------------------------------------------------------

int raw_receiver(bool secure, const fs::path& keydir, int total, const std::string& ack_endpoint) {
  zmq::context_t ctx;
  zmq::socket_t pull(ctx, zmq::socket_type::pull), ack(ctx, zmq::socket_type::push);
  if (secure) {
    const auto keys = read_key_pair(keydir / "rx");
    pull.set(zmq::sockopt::curve_server, true);
    pull.set(zmq::sockopt::curve_secretkey, keys.secret_key);
  }
  pull.bind("tcp://127.0.0.1:*");
  ack.connect(ack_endpoint);
  std::printf("%s\n", pull.get(zmq::sockopt::last_endpoint).c_str());
  std::fflush(stdout);
  for (int i = 0; i < total; ++i) {
    zmq::message_t m;
    if (!pull.recv(m)) return 1;
    ack.send(zmq::str_buffer("k"), zmq::send_flags::none);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return 0;
}

int meridian_receiver(bool secure, const fs::path& keydir, int total) {
  ZmqTransport t(transport_options("rx", secure, keydir));
  std::printf("%s\n", t.endpoint().c_str());
  std::fflush(stdout);
  for (int i = 0; i < total; ++i) {
    auto m = t.receive(std::chrono::seconds(60));
    if (!m) return 1;
    t.recycle(std::move(m->payload));
    Message ack;
    ack.kind = MessageKind::kControl;
    t.send(m->from, std::move(ack));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  return 0;
}

// ---- senders (this process) ------------------------------------------------------------------------

struct Child {
  pid_t pid;
  FILE* out;
};

Child spawn_receiver(const std::vector<std::string>& args) {
  int p[2];
  if (::pipe(p) != 0) throw meridian::error::InternalError("pipe");
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(p[1], STDOUT_FILENO);
    ::close(p[0]);
    ::close(p[1]);
    std::vector<std::string> a{self_exe(), "--role", "receiver"};
    a.insert(a.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& s : a) argv.push_back(s.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(p[1]);
  return {pid, ::fdopen(p[0], "r")};
}

std::string read_line(FILE* f) {
  char buf[512];
  if (!std::fgets(buf, sizeof buf, f)) throw meridian::error::PeerError("receiver did not start");
  std::string s(buf);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

void finish(Child& c) {
  int status = 0;
  ::waitpid(c.pid, &status, 0);
  std::fclose(c.out);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw meridian::error::PeerError("receiver failed");
}

// Returns bytes per second.
double run_raw(bool secure, const fs::path& keydir, std::size_t bytes, int count) {
  zmq::context_t ctx;
  zmq::socket_t push(ctx, zmq::socket_type::push), ack(ctx, zmq::socket_type::pull);
  ack.bind("tcp://127.0.0.1:*");
  const int total = kWarmup + count;
  Child c = spawn_receiver({"--impl", "raw", "--secure", secure ? "1" : "0", "--keys", keydir.string(), "--count",
                            std::to_string(total), "--ack", ack.get(zmq::sockopt::last_endpoint)});
  const std::string endpoint = read_line(c.out);
  if (secure) {
    const auto tx = read_key_pair(keydir / "tx");
    push.set(zmq::sockopt::curve_serverkey, read_key_pair(keydir / "rx").public_key);
    push.set(zmq::sockopt::curve_publickey, tx.public_key);
    push.set(zmq::sockopt::curve_secretkey, tx.secret_key);
  }
  push.connect(endpoint);
  std::vector<char> buf(bytes, 1);
  Clock::time_point start;
  int acked = 0;
  for (int i = 0; i < total; ++i) {
    if (i == kWarmup) {
      while (acked < kWarmup) {
        zmq::message_t a;
        (void)ack.recv(a);
        ++acked;
      }
      start = Clock::now();
    }
    push.send(zmq::buffer(buf.data(), buf.size()), zmq::send_flags::none);
    while (i + 1 - acked >= kWindow) {
      zmq::message_t a;
      (void)ack.recv(a);
      ++acked;
    }
  }
  while (acked < total) {
    zmq::message_t a;
    (void)ack.recv(a);
    ++acked;
  }
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  finish(c);
  return static_cast<double>(bytes) * count / secs;
}

std::size_t g_chunk_bytes = WireLimits{}.chunk_bytes;

double run_meridian(bool secure, const fs::path& keydir, std::size_t bytes, int count) {
  const int total = kWarmup + count;
  Child c = spawn_receiver({"--impl", "meridian", "--secure", secure ? "1" : "0", "--keys", keydir.string(), "--count",
                            std::to_string(total)});
  const std::string endpoint = read_line(c.out);
  auto o = transport_options("tx", secure, keydir);
  o.bootstrap = {"rx@" + endpoint};
  o.limits.chunk_bytes = g_chunk_bytes;
  ZmqTransport t(std::move(o));
  while (t.alive_members().size() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const std::size_t n = bytes / sizeof(float);
  Clock::time_point start;
  int acked = 0;
  auto wait_ack = [&] {
    if (!t.receive_control(std::chrono::seconds(60))) throw meridian::error::PeerError("no acknowledgement");
    ++acked;
  };
  for (int i = 0; i < total; ++i) {
    if (i == kWarmup) {
      while (acked < kWarmup) wait_ack();
      start = Clock::now();
    }
    Message m;
    m.kind = MessageKind::kReduceChunk;
    m.round = static_cast<std::uint64_t>(i);
    m.total = n;
    m.payload = t.take_buffer(n);
    t.send("rx", std::move(m));
    while (i + 1 - acked >= kWindow) wait_ack();
  }
  while (acked < total) wait_ack();
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  finish(c);
  return static_cast<double>(bytes) * count / secs;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  // The insecure-mode warning would repeat for every measurement; the table says which mode ran.
  spdlog::set_level(spdlog::level::err);
  std::vector<std::string> args(argv + 1, argv + argc);
  auto arg = [&](const std::string& name, const std::string& def) {
    auto it = std::find(args.begin(), args.end(), name);
    return it != args.end() && it + 1 != args.end() ? *(it + 1) : def;
  };
  if (arg("--role", "") == "receiver") {
    const bool secure = arg("--secure", "0") == "1";
    const int total = std::stoi(arg("--count", "0"));
    if (arg("--impl", "") == "raw") return raw_receiver(secure, arg("--keys", ""), total, arg("--ack", ""));
    return meridian_receiver(secure, arg("--keys", ""), total);
  }

  const int repeats = std::stoi(arg("--repeats", "5"));
  g_chunk_bytes = std::stoul(arg("--chunk-kib", std::to_string(g_chunk_bytes / 1024))) * 1024;
  const std::string markdown = arg("--markdown", "");
  const fs::path keydir = fs::temp_directory_path() / ("meridian-bench-keys-" + std::to_string(::getpid()));
  Roster roster;
  for (const char* name : {"tx", "rx"}) {
    const auto k = generate_curve_key_pair();
    write_key_pair(k, keydir / name, true);
    roster.add({name, k.public_key, ""});
  }
  std::ofstream(keydir / "roster.txt") << roster.to_text();

  struct Row {
    std::string mode;
    std::size_t mb;
    double raw, meridian;
  };
  std::vector<Row> rows;
  for (bool secure : {false, true}) {
    for (std::size_t mb : {4, 40}) {
      const std::size_t bytes = mb * 1000 * 1000;
      const int count = mb == 4 ? 40 : 8;
      std::vector<double> raw, ours;
      for (int r = 0; r < repeats; ++r) {
        raw.push_back(run_raw(secure, keydir, bytes, count));
        ours.push_back(run_meridian(secure, keydir, bytes, count));
      }
      rows.push_back({secure ? "CURVE" : "plain TCP", mb, median(raw), median(ours)});
      std::printf("%-9s %3zu MB  raw libzmq %8.1f MB/s  meridian %8.1f MB/s  ratio %.2f\n", rows.back().mode.c_str(),
                  mb, rows.back().raw / 1e6, rows.back().meridian / 1e6, rows.back().meridian / rows.back().raw);
      std::fflush(stdout);
    }
  }
  fs::remove_all(keydir);

  if (!markdown.empty()) {
    std::ofstream md(markdown);
    md << "| mode | message | raw libzmq PUSH/PULL (MB/s) | Meridian ZmqTransport (MB/s) | Meridian / raw |\n";
    md << "|---|---|---|---|---|\n";
    for (const auto& r : rows) {
      char line[256];
      std::snprintf(line, sizeof line, "| %s | %zu MB | %.0f | %.0f | %.2f |\n", r.mode.c_str(), r.mb, r.raw / 1e6,
                    r.meridian / 1e6, r.meridian / r.raw);
      md << line;
    }
  }
  return 0;
}
