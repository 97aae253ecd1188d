#include "daemon/attached/trainer_channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "daemon/files/private_directory.h"
#include "daemon/attached/trainer_protocol.h"

namespace meridian::daemon {
namespace {

using Clock = std::chrono::steady_clock;

// The protocol's packets are small; a hello lists one entry per tensor. Anything larger is refused.
constexpr std::size_t kMaxPacketBytes = std::size_t{4} << 20;

}  // namespace

const char* to_string(TrainerRefusal cause) {
  switch (cause) {
    case TrainerRefusal::kBusy: return "busy";
    case TrainerRefusal::kOtherUser: return "other_user";
    case TrainerRefusal::kBadMessage: return "bad_message";
    case TrainerRefusal::kModel: return "model";
    case TrainerRefusal::kNonFinite: return "non_finite";
    case TrainerRefusal::kSilent: return "silent";
    case TrainerRefusal::kDisconnected: return "disconnected";
  }
  return "unknown";
}

bool TrainerChannel::fatal(TrainerRefusal cause) {
  return cause != TrainerRefusal::kNonFinite && cause != TrainerRefusal::kBusy && cause != TrainerRefusal::kOtherUser;
}

TrainerChannel::TrainerChannel(std::filesystem::path path, OnRefusal on_refusal)
    : path_(std::move(path)), on_refusal_(std::move(on_refusal)) {
  const auto fail = [&](const std::string& what, int err) {
    return TrainerChannelError("trainer socket " + path_.string() + ": " + what +
                               (err != 0 ? std::string(": ") + std::strerror(err) : std::string()));
  };
  sockaddr_un address{};
  if (path_.string().size() >= sizeof(address.sun_path))
    throw fail("the path is longer than a Unix socket allows; choose a shorter --run-dir", 0);
  std::filesystem::path parent = path_.parent_path();
  if (parent.empty()) parent = ".";
  // Only this daemon's user reaches the socket: its directory is private, and the file is made 0600
  // (fchmod before bind would not reach the file; bind follows the umask, which the directory covers).
  make_private_directory(parent, "trainer socket directory");
  struct stat existing {};
  if (::lstat(path_.c_str(), &existing) == 0) {
    if (!S_ISSOCK(existing.st_mode)) throw fail("the path exists and is not a socket; remove it", 0);
    ::unlink(path_.c_str());  // left by a killed daemon: this run directory's lock is ours
  }
  listener_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listener_ < 0) throw fail("cannot make a socket", errno);
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path_.c_str(), sizeof(address.sun_path) - 1);
  if (::bind(listener_, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 ||
      ::chmod(path_.c_str(), 0600) != 0 || ::listen(listener_, 4) != 0) {
    const int err = errno;
    ::close(listener_);
    ::unlink(path_.c_str());
    throw fail("cannot listen on it", err);
  }
}

TrainerChannel::~TrainerChannel() {
  detach();
  if (listener_ >= 0) ::close(listener_);
  ::unlink(path_.c_str());
}

void TrainerChannel::detach() {
  if (connection_ >= 0) ::close(connection_);
  connection_ = -1;
  trainer_pid_ = 0;
}

void TrainerChannel::refuse(int fd, TrainerRefusal cause, const std::string& message) {
  const std::string packet = encode_error(message, true);
  (void)::send(fd, packet.data(), packet.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  // Closed with its hello unread, the socket would reset the connection and the trainer would lose
  // the error before reading it: its first packet is taken (waiting a moment for it) and dropped first.
  pollfd pending{fd, POLLIN, 0};
  if (::poll(&pending, 1, 200) > 0) (void)::recv(fd, nullptr, 0, MSG_TRUNC | MSG_DONTWAIT);
  ::close(fd);
  if (on_refusal_) on_refusal_(cause, message);
}

void TrainerChannel::accept_pending() {
  for (;;) {
    const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN: none pending (or a transient error; the next poll retries)
    ucred peer{};
    socklen_t length = sizeof(peer);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0 || peer.uid != ::geteuid()) {
      refuse(fd, TrainerRefusal::kOtherUser,
             "this site's trainer must run as its daemon's user (uid " + std::to_string(::geteuid()) + ")");
      continue;
    }
    if (connection_ >= 0) {
      refuse(fd, TrainerRefusal::kBusy,
             "this site already has a trainer attached (pid " + std::to_string(trainer_pid_) +
                 "); one trainer per site: stop it first, or start another site");
      continue;
    }
    connection_ = fd;
    trainer_pid_ = peer.pid;
  }
}

TrainerChannel::Received TrainerChannel::receive(Clock::time_point deadline, const StopCheck& stopped) {
  std::vector<char> buffer;
  for (bool looked = false;; looked = true) {
    if (stopped()) return {Received::Kind::kStopped, {}};
    const auto now = Clock::now();
    // A deadline already past still looks once, without waiting: the site polls between rounds.
    if (now >= deadline && looked) return {Received::Kind::kTimeout, {}};
    // Short slices, so that a stop is noticed soon whatever the deadline.
    const auto slice =
        std::clamp<Clock::duration>(deadline - now, Clock::duration::zero(), std::chrono::milliseconds(100));
    pollfd fds[2] = {{listener_, POLLIN, 0}, {connection_, POLLIN, 0}};
    const int waited = static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(slice).count());
    if (::poll(fds, connection_ >= 0 ? 2 : 1, waited) < 0 && errno != EINTR)
      throw TrainerChannelError(std::string("trainer socket: poll failed: ") + std::strerror(errno));
    if (fds[0].revents & POLLIN) accept_pending();
    if (connection_ < 0 || (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    // The packet's size first, so that an oversized one is refused rather than cut.
    const ssize_t size = ::recv(connection_, nullptr, 0, MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT);
    if (size < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (size <= 0) {
      detach();
      return {Received::Kind::kClosed, {}};
    }
    if (static_cast<std::size_t>(size) > kMaxPacketBytes) {
      (void)::recv(connection_, nullptr, 0, MSG_TRUNC | MSG_DONTWAIT);
      return {Received::Kind::kPacket, {}};  // an empty packet decodes as a bad message
    }
    buffer.resize(static_cast<std::size_t>(size));
    const ssize_t got = ::recv(connection_, buffer.data(), buffer.size(), MSG_DONTWAIT);
    if (got <= 0) {
      detach();
      return {Received::Kind::kClosed, {}};
    }
    return {Received::Kind::kPacket, std::string(buffer.data(), static_cast<std::size_t>(got))};
  }
}

void TrainerChannel::send(const std::string& packet, int fd) {
  if (connection_ < 0) throw TrainerChannelError("no trainer is attached");
  iovec data{const_cast<char*>(packet.data()), packet.size()};
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    message.msg_control = control;
    message.msg_controllen = sizeof(control);
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(header), &fd, sizeof(int));
  }
  if (::sendmsg(connection_, &message, MSG_NOSIGNAL) != static_cast<ssize_t>(packet.size())) {
    const int err = errno;
    detach();
    throw TrainerChannelError(std::string("the trainer is gone: ") + std::strerror(err));
  }
}

}  // namespace meridian::daemon
