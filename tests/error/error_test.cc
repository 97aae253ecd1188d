#include "error/error.h"

#include <catch2/catch.hpp>

#include <new>
#include <stdexcept>
#include <string>

#include "cli/algorithm_run.h"
#include "cli/progress_log.h"
#include "cli/site_result.h"
#include "daemon/checkpoint/checkpoint.h"
#include "daemon/checkpoint/checkpoint_model.h"
#include "daemon/control/control_client.h"
#include "daemon/control/control_protocol.h"
#include "daemon/control/control_server.h"
#include "daemon/metrics/metrics_server.h"
#include "daemon/site_config.h"
#include "error/exit_code.h"
#include "gossip/round.h"
#include "models/data/dataset.h"
#include "models/device.h"
#include "models/model_file.h"
#include "peer/transport.h"

namespace {

using meridian::error::enforce;
using meridian::error::Error;
using meridian::error::InternalError;
using meridian::error::PeerError;
using meridian::error::Tier;
using meridian::error::UserError;

Tier tier_of_thrown(void (*thrower)()) {
  try {
    thrower();
  } catch (const Error& e) {
    return e.tier();
  }
  FAIL("nothing was thrown");
  return Tier::kInternal;
}

}  // namespace

TEST_CASE("each error tier is caught as an Error that names its tier", "[error][unit]") {
  CHECK(tier_of_thrown([] { throw UserError("bad flag"); }) == Tier::kUser);
  CHECK(tier_of_thrown([] { throw PeerError("peer went away"); }) == Tier::kPeer);
  CHECK(tier_of_thrown([] { throw InternalError("broken invariant"); }) == Tier::kInternal);
  CHECK(meridian::error::tier_name(Tier::kUser) == "user");
  CHECK(meridian::error::tier_name(Tier::kPeer) == "peer");
  CHECK(meridian::error::tier_name(Tier::kInternal) == "internal");
}

TEST_CASE("errors stay std::runtime_errors with their message", "[error][unit]") {
  try {
    throw UserError("--algo: unknown value 'sgd2'");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) == "--algo: unknown value 'sgd2'");
  }
}

TEST_CASE("enforce throws an internal error that names the file and line, and only when false", "[error][unit]") {
  CHECK_NOTHROW(enforce(true, "never shown"));
  try {
    enforce(false, "sizes differ");
    FAIL("enforce(false) did not throw");
  } catch (const InternalError& e) {
    const std::string what = e.what();
    // The path is relative to the repository in a normal build; a compiler launcher that passes relative
    // paths (ccache with a base directory) may leave a "../" prefix.
    CHECK(what.find("tests/error/error_test.cc:") != std::string::npos);
    CHECK(what.find("tests/error/error_test.cc:") < 8);
    CHECK(what.find(": sizes differ") != std::string::npos);
    CHECK(e.tier() == Tier::kInternal);
  }
}

TEST_CASE("Meridian's exception classes carry the tier docs/design.md gives them", "[error][unit]") {
  using meridian::error::Tier;
  const auto tier = [](const Error& e) { return e.tier(); };
  CHECK(tier(meridian::daemon::SiteConfigError("x")) == Tier::kUser);
  CHECK(tier(meridian::daemon::CheckpointError("x")) == Tier::kUser);
  CHECK(tier(meridian::daemon::CheckpointModelError("x")) == Tier::kUser);
  CHECK(tier(meridian::daemon::NoDaemonError("x")) == Tier::kUser);
  CHECK(tier(meridian::daemon::ControlServerError("x")) == Tier::kUser);
  CHECK(tier(meridian::daemon::MetricsServerError("x")) == Tier::kUser);
  CHECK(tier(meridian::models::DeviceError("x")) == Tier::kUser);
  CHECK(tier(meridian::models::data::DataError("x")) == Tier::kUser);
  CHECK(tier(meridian::daemon::ControlProtocolError("x")) == Tier::kPeer);
  CHECK(tier(meridian::peer::TransportError("x")) == Tier::kPeer);
  CHECK(tier(meridian::gossip::MixError("x")) == Tier::kPeer);
  CHECK(tier(meridian::cli::SiteResultError("x")) == Tier::kPeer);
  CHECK(tier(meridian::cli::ProgressLogError("x")) == Tier::kPeer);
  CHECK(tier(meridian::models::ModelFileError("x")) == Tier::kUser);
  CHECK(tier(meridian::cli::SimulationFailed("x")) == Tier::kPeer);
  CHECK(tier(meridian::cli::SimulationInterrupted("x")) == Tier::kUser);
}

TEST_CASE("each tier exits with its own status, and an unclassified exception as internal", "[error][unit]") {
  using meridian::error::Tier;
  using meridian::error::exit_code;
  CHECK(exit_code(Tier::kUser) == 78);
  CHECK(exit_code(Tier::kPeer) == 69);
  CHECK(exit_code(Tier::kInternal) == 70);
  CHECK(meridian::error::tier_of(meridian::error::UserError("x")) == Tier::kUser);
  CHECK(meridian::error::tier_of(meridian::gossip::MixError("x")) == Tier::kPeer);
  CHECK(meridian::error::tier_of(meridian::error::InternalError("x")) == Tier::kInternal);
  CHECK(meridian::error::tier_of(std::runtime_error("x")) == Tier::kInternal);
  CHECK(meridian::error::tier_of(std::bad_alloc()) == Tier::kInternal);
}
