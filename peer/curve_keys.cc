#include "peer/curve_keys.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "error/error.h"

namespace meridian::peer {

namespace fs = std::filesystem;

namespace {

std::string first_key_line(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw error::UserError("cannot read key file " + file.string() + ": " + std::strerror(errno));
  std::string line;
  while (std::getline(in, line)) {
    auto start = line.find_first_not_of(" \t\r");
    if (start == std::string::npos || line[start] == '#') continue;
    auto end = line.find_last_not_of(" \t\r");
    return line.substr(start, end - start + 1);
  }
  throw error::UserError("key file " + file.string() + " holds no key");
}

void write_file(const fs::path& file, const std::string& text, mode_t mode) {
  // Create with the final mode so the secret is never briefly world-readable.
  const std::string tmp = file.string() + ".tmp";
  ::unlink(tmp.c_str());
  std::FILE* f = nullptr;
  {
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL, mode);
    if (fd < 0) throw error::UserError("cannot create " + tmp + ": " + std::strerror(errno));
    f = ::fdopen(fd, "w");
    if (!f) {
      ::close(fd);
      throw error::UserError("cannot open " + tmp + ": " + std::strerror(errno));
    }
  }
  const bool ok =
      std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  std::fclose(f);
  ::chmod(tmp.c_str(), mode);  // the umask may have narrowed the public file's mode
  if (!ok || std::rename(tmp.c_str(), file.c_str()) != 0)
    throw error::UserError("cannot write " + file.string() + ": " + std::strerror(errno));
}

}  // namespace

bool is_z85_key(std::string_view key) {
  if (key.size() != 40) return false;
  std::array<std::uint8_t, 32> raw{};
  const std::string z(key);
  return zmq_z85_decode(raw.data(), z.c_str()) != nullptr;
}

CurveKeyPair generate_curve_key_pair() {
  std::array<char, 41> pub{}, sec{};
  if (zmq_curve_keypair(pub.data(), sec.data()) != 0)
    throw error::InternalError(std::string("cannot generate a CurveZMQ key pair: ") + zmq_strerror(zmq_errno()) +
                               " (libzmq built without CURVE?)");
  return {pub.data(), sec.data()};
}

void write_key_pair(const CurveKeyPair& keys, const fs::path& dir, bool overwrite) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw error::UserError("cannot create key directory " + dir.string() + ": " + ec.message());
  const fs::path secret = dir / "secret.key", pub = dir / "public.key";
  if (!overwrite && fs::exists(secret))
    throw error::UserError(secret.string() + " already exists; refusing to overwrite a site's identity");
  write_file(secret, "# Meridian CurveZMQ secret key. Keep this file private (mode 0600).\n" + keys.secret_key + "\n",
             0600);
  write_file(pub, "# Meridian CurveZMQ public key. Put it in the federation's roster.\n" + keys.public_key + "\n",
             0644);
}

CurveKeyPair read_key_pair(const fs::path& dir) {
  const fs::path secret = dir / "secret.key";
  struct stat st {};
  if (::stat(secret.c_str(), &st) != 0)
    throw error::UserError("cannot read secret key " + secret.string() + ": " + std::strerror(errno) +
                           " (create one with 'meridian keygen --out " + dir.string() + "')");
  if (st.st_mode & (S_IRWXG | S_IRWXO))
    throw error::UserError("secret key " + secret.string() + " is accessible by group or others; run chmod 600 on it");
  CurveKeyPair keys;
  keys.secret_key = first_key_line(secret);
  if (!is_z85_key(keys.secret_key))
    throw error::UserError("secret key " + secret.string() + " is not a 40-character Z85 CurveZMQ key");
  std::array<char, 41> pub{};
  if (zmq_curve_public(pub.data(), keys.secret_key.c_str()) != 0)
    throw error::UserError("cannot derive the public key from " + secret.string());
  keys.public_key = pub.data();
  return keys;
}

}  // namespace meridian::peer
