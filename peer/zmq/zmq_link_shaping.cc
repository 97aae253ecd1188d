// Link shaping in the ZeroMQ transport: when a queued message may leave, under the WAN emulation
// (peer/link_emulator.h, per destination region) and the emulated partitions
// (peer/partition_schedule.h).
#include <spdlog/spdlog.h>

#include "peer/printable_text.h"
#include "peer/zmq/zmq_io_loop.h"

namespace meridian::peer {

bool ZmqTransport::IoLoop::cut_off(const std::string& to, Clock::time_point now) const {
  return !to.empty() && !opt_.partitions.empty() && partition_origin_ &&
         opt_.partitions.cuts(opt_.name, to,
                              std::chrono::duration_cast<std::chrono::microseconds>(now - *partition_origin_));
}

std::optional<ZmqTransport::IoLoop::Clock::time_point> ZmqTransport::IoLoop::due_time(const std::string& to,
                                                                                      MessageKind kind,
                                                                                      std::size_t bytes,
                                                                                      Clock::time_point now) {
  if (cut_off(to, now)) return std::nullopt;           // an emulated partition drops everything, membership included
  if (!opt_.wan.emulates() || to.empty()) return now;  // bootstrap links: name (and region) unknown yet
  const LinkSpec* spec = nullptr;
  if (opt_.wan.regions() == 1) {
    spec = &opt_.wan.link(0, 0);
  } else {
    const auto* record = membership().find(to);
    if (!record) return now;  // not introduced yet: only its hello travels unemulated
    const auto theirs = opt_.wan.region_index(record->region);
    if (!theirs) {
      if (unknown_region_logged_.insert(to).second)
        spdlog::warn(
            "'{}': peer '{}' announces region '{}', which the WAN model '{}' does not have; its link is "
            "not emulated",
            opt_.name, to, printable_text(record->region), opt_.wan.spec());
      return now;
    }
    spec = &opt_.wan.link(*region_, *theirs);
  }
  std::optional<Clock::time_point> due;
  if (is_mixer_kind(kind) || spec->loss == 0) {
    due = emulator_.schedule(to, *spec, bytes, now);
  } else {
    LinkSpec lossless = *spec;
    lossless.loss = 0;
    due = emulator_.schedule(to, lossless, bytes, now);
  }
  if (due && opt_.on_emulated_send) opt_.on_emulated_send(EmulatedSend{to, kind, bytes, now, *due});
  return due;
}

}  // namespace meridian::peer
