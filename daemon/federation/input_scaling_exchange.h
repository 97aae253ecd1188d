// How the sites of a federation agree on one input scaling before training (--normalize federation,
// the default for tables; models/data/normalization_spec.h), without a row leaving its site.
//
// Each site sends the moments of its unscaled training part (models/data/feature_moments.h: count, and
// per feature or channel the sum and the sum of squared deviations) as a peer::MessageKind::kControl
// message (tag kMomentsTag) to every member of its starting view, again each second until it has
// agreed. Once it holds the moments of every member, it combines them in the order of the members'
// names, so every site computes the same scaling to the bit. A site that already trains answers a
// site's moments with the scaling in force (tag kScalingTag), which that site then takes: a site
// joining a running federation uses the federation's values. The agreement runs in
// daemon/normalization_agreement.cc.
//
// Bodies are text; numbers travel as C99 hexadecimal floating point ("%a"), exact in both directions:
//   "moments COUNT GROUPS SUM M2 SUM M2 ... [missing N N ...]"      "scaling WIDTH MEAN STD MEAN STD ..."
// where the missing counts (one per group) come only when the part has missing values
// (models/data/feature_moments.h); the scaling's means are then what every site fills them with.
// Decoding never throws: a body that is not exactly of this form is not a message of this exchange.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "models/data/feature_moments.h"
#include "models/data/standardization.h"
#include "peer/message.h"

namespace meridian::daemon {

inline constexpr std::uint32_t kMomentsTag = 0x6d6d6e74;  // "mmnt"
inline constexpr std::uint32_t kScalingTag = 0x73636c65;  // "scle"

std::string encode_moments(const models::data::FeatureMoments& moments);
std::optional<models::data::FeatureMoments> decode_moments(const std::string& body);
std::string encode_scaling(const models::data::Standardization& scaling);
std::optional<models::data::Standardization> decode_scaling(const std::string& body);

peer::Message moments_message(const models::data::FeatureMoments& moments);
peer::Message scaling_message(const models::data::Standardization& scaling);

// What the sites sent, newest per site, and the scaling this site uses once agreed.
// Thread-safety: every method may be called from any thread (the control thread notes, the trainer
// reads and agrees).
class ScalingExchange {
 public:
  struct Noted {
    bool recognized = false;             // `msg` belongs to this exchange
    std::optional<peer::Message> reply;  // the scaling in force, for a site that sent its moments
  };
  // Records a moments or scaling message from msg.from.
  Noted note(const peer::Message& msg);
  std::map<std::string, models::data::FeatureMoments> moments() const;
  // The scaling a site that trains answered with; nullopt before one did.
  std::optional<models::data::Standardization> heard_scaling() const;
  // The scaling this site uses from now on; sites that send their moments later are answered with it.
  void agree(models::data::Standardization scaling);

 private:
  mutable std::mutex mu_;
  std::map<std::string, models::data::FeatureMoments> moments_;
  std::optional<models::data::Standardization> heard_;
  std::optional<models::data::Standardization> agreed_;
};

}  // namespace meridian::daemon
