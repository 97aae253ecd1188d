// The site's end of the local channel to its attached trainer (daemon/attached/attached_trainer.h): a Unix
// socket of packets (SOCK_SEQPACKET) in the run directory, mode 0600 inside that private directory,
// over which one trainer process at a time talks to the site (daemon/attached/trainer_protocol.h) and receives
// the shared segment's descriptor (SCM_RIGHTS).
//
// Only this daemon's user may attach: the socket's directory and mode keep others out, and the peer's
// credentials (SO_PEERCRED) are checked as well. A connection while a trainer is attached, or from
// another user, is answered with an error packet and closed, and counted; the attached trainer is not
// disturbed.
//
// Ownership: owns the listening socket, the trainer's connection and the socket file (removed by the
// destructor). Thread-safety: one thread (the site's trainer thread).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>

#include "error/error.h"

namespace meridian::daemon {

class TrainerChannelError : public error::UserError {
 public:
  using error::UserError::UserError;
};

// Why a trainer or one of its messages was refused: the cause label of
// meridian_trainer_refusals_total.
enum class TrainerRefusal {
  kBusy,          // a second trainer while one is attached
  kOtherUser,     // a process of another user
  kBadMessage,    // a packet that is not the protocol's, or not the one expected now
  kModel,         // a declaration that does not fit (shape, dtype, names, the site's session)
  kNonFinite,     // NaN or Inf in what the trainer put in the segment
  kSilent,        // no message within the deadline
  kDisconnected,  // the trainer closed the channel (or died) before the run's end
};
inline constexpr std::size_t kTrainerRefusalCount = 7;
const char* to_string(TrainerRefusal cause);

// Whether the site is stopping; waits return soon after it turns true.
using StopCheck = std::function<bool()>;

class TrainerChannel {
 public:
  // Called for every refusal, with its cause and the message the trainer was given.
  using OnRefusal = std::function<void(TrainerRefusal, const std::string& message)>;

  // Listens on `path`, in a directory that must be private (daemon/files/private_directory.h). A socket
  // file left there by a killed daemon is replaced (the run directory's lock says none runs). Throws
  // TrainerChannelError naming the path when it is too long for a Unix socket, exists and is not a
  // socket, or cannot be bound or restricted to mode 0600.
  TrainerChannel(std::filesystem::path path, OnRefusal on_refusal);
  TrainerChannel(const TrainerChannel&) = delete;
  TrainerChannel& operator=(const TrainerChannel&) = delete;
  ~TrainerChannel();

  const std::filesystem::path& path() const { return path_; }
  bool attached() const { return connection_ >= 0; }
  pid_t trainer_pid() const { return trainer_pid_; }

  struct Received {
    enum class Kind { kPacket, kTimeout, kStopped, kClosed } kind = Kind::kTimeout;
    std::string packet;
  };
  // The attached trainer's next packet; without one attached, the first connection of this user is
  // attached first. Returns kTimeout at `deadline` (one already past looks once, without waiting), kStopped soon after `stopped()` turns true, kClosed when
  // the trainer closed the channel (it is then detached). Other connections are refused meanwhile.
  Received receive(std::chrono::steady_clock::time_point deadline, const StopCheck& stopped);
  // Sends one packet to the attached trainer, with `fd` as ancillary data when it is not -1. Throws
  // TrainerChannelError when no trainer is attached or it is gone (it is then detached).
  void send(const std::string& packet, int fd = -1);
  // Closes the trainer's connection (a refused trainer, the run's end); the socket keeps listening.
  void detach();

  // Whether `cause` ends the attachment: the site closes the channel after it.
  static bool fatal(TrainerRefusal cause);

 private:
  void accept_pending();
  void refuse(int fd, TrainerRefusal cause, const std::string& message);

  std::filesystem::path path_;
  OnRefusal on_refusal_;
  int listener_ = -1;
  int connection_ = -1;
  pid_t trainer_pid_ = 0;
};

}  // namespace meridian::daemon
