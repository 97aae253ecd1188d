// Meridian's ring all-reduce over the ZeroMQ transport, one site per process: the Meridian side of the
// all-reduce benchmark (bench/allreduce_compare.py starts several of these next to PyTorch's gloo).
//
// Usage: meridian_bench_allreduce --name site0 --procs 4 [--bootstrap tcp://127.0.0.1:PORT]
//                               [--sizes 1000000,10000000] [--repeats 10] [--warmup 2] [--piece N]
//                               [--chunk-kib K] [--socket-buffer-kib K] [--io-threads T]
// Prints "endpoint ADDR" once bound (the other processes bootstrap from the first one), then, on the
// site that sorts first, one JSON line per size: {"impl": "meridian", "procs", "size", "seconds": [...]}
// where seconds[i] is repeat i's time on its slowest process (every repeat starts after a barrier).
#include <CLI/CLI.hpp>

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <thread>

#include "gossip/inbox.h"
#include "error/error.h"
#include "gossip/ring_allreduce.h"
#include "peer/zmq/zmq_transport.h"

using namespace meridian;
using Seconds = std::chrono::duration<double>;

namespace {

std::vector<std::size_t> parse_sizes(const std::string& text) {
  std::vector<std::size_t> sizes;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) sizes.push_back(std::stoull(item));
  return sizes;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Times Meridian's ring all-reduce among local processes over ZeroMQ on loopback."};
  std::string name, bootstrap, sizes_text = "1000000,10000000";
  std::size_t procs = 4, repeats = 10, warmup = 2, piece = gossip::RingOptions{}.max_piece;
  std::size_t chunk_kib = peer::WireLimits{}.chunk_bytes / 1024;
  // Loopback has next to no round-trip time, so a small fixed socket buffer loses no throughput and
  // keeps each byte in cache between the sender's copy into the kernel and the reader's copy out
  // (peer/zmq/zmq_transport.h, socket_buffer_bytes); 0 measures the OS's autotuned buffers instead.
  int socket_buffer_kib = 256;
  int io_threads = peer::ZmqTransportOptions{}.io_threads;
  app.add_option("--name", name, "this site's name")->required();
  app.add_option("--procs", procs, "number of processes taking part");
  app.add_option("--bootstrap", bootstrap, "endpoint of a process already running");
  app.add_option("--sizes", sizes_text, "comma-separated float counts");
  app.add_option("--repeats", repeats, "timed repeats per size");
  app.add_option("--warmup", warmup, "untimed repeats per size");
  app.add_option("--piece", piece, "floats per ring message (the pipelining grain)");
  app.add_option("--chunk-kib", chunk_kib, "payload KiB per wire chunk (ZeroMQ message)");
  app.add_option("--socket-buffer-kib", socket_buffer_kib, "kernel socket buffer per connection (0: OS default)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--io-threads", io_threads, "libzmq I/O threads per process");
  CLI11_PARSE(app, argc, argv);

  // Large message buffers (ZeroMQ's receive messages, payload vectors) would otherwise be fresh mmap()s
  // that page-fault on first touch every round; keep them in the heap and keep the heap from shrinking.
  mallopt(M_MMAP_THRESHOLD, 512 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);

  try {
    peer::ZmqTransportOptions options;
    options.name = name;
    options.insecure = true;
    options.limits.chunk_bytes = chunk_kib * 1024;  // loopback benchmark; encryption is measured elsewhere
    options.socket_buffer_bytes = socket_buffer_kib * 1024;
    options.io_threads = io_threads;
    if (!bootstrap.empty()) options.bootstrap.push_back(bootstrap);
    peer::ZmqTransport transport(options);
    std::cout << "endpoint " << transport.endpoint() << std::endl;

    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (transport.alive_members().size() < procs) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::cerr << "allreduce_bench: only " << transport.alive_members().size() << " of " << procs
                  << " processes met within 60 s\n";
        return 1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const std::vector<std::string> group = transport.alive_members();
    gossip::Inbox inbox(transport);
    gossip::RingAllReduce ring(inbox);
    std::uint64_t step = 1;
    auto run = [&](std::span<float> data) {
      gossip::Round round{0, step++, 0};
      transport.set_round(round.step);
      gossip::RingOptions ring_options;
      ring_options.max_piece = piece;
      auto status = ring.run(group, round, data, gossip::Clock::now() + std::chrono::seconds(120), ring_options);
      if (status != gossip::RoundStatus::kCompleted) throw error::PeerError("a ring round was abandoned");
    };
    std::vector<float> barrier(1);
    std::vector<float> times;
    for (std::size_t size : parse_sizes(sizes_text)) {
      std::vector<float> data(size);
      times.assign(repeats, 0.0f);
      for (std::size_t i = 0; i < warmup + repeats; ++i) {
        std::fill(data.begin(), data.end(), 1.0f);  // touches the memory outside the timed region
        run(barrier);
        auto start = std::chrono::steady_clock::now();
        run(data);
        double elapsed = Seconds(std::chrono::steady_clock::now() - start).count();
        if (i >= warmup) times[i - warmup] = static_cast<float>(elapsed);
      }
      if (size && (data.front() != static_cast<float>(procs) || data.back() != static_cast<float>(procs))) {
        std::cerr << "allreduce_bench: sum is " << data.front() << ", expected " << procs << "\n";
        return 1;
      }
      // A repeat lasts as long as its slowest process: the maximum, formed through the ring itself
      // as the sum of a vector in which each process fills only its own slots.
      auto me = static_cast<std::size_t>(std::find(group.begin(), group.end(), name) - group.begin());
      std::vector<float> all(repeats * group.size(), 0.0f);
      for (std::size_t i = 0; i < repeats; ++i) all[i * group.size() + me] = times[i];
      run(all);
      if (me == 0) {
        std::cout << "{\"impl\": \"meridian\", \"procs\": " << procs << ", \"size\": " << size << ", \"seconds\": [";
        for (std::size_t i = 0; i < repeats; ++i) {
          float worst = *std::max_element(all.begin() + i * group.size(), all.begin() + (i + 1) * group.size());
          std::cout << (i ? ", " : "") << worst;
        }
        std::cout << "]}" << std::endl;
      }
    }
    run(barrier);  // nobody leaves while another still needs its messages
    transport.leave(std::chrono::milliseconds(500));
  } catch (const std::exception& e) {
    std::cerr << "allreduce_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
