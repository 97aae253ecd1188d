#include "daemon/attached/trainer_protocol.h"

#include <nlohmann/json.hpp>

namespace meridian::daemon {
namespace {

using nlohmann::json;

const json& field(const json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end()) throw TrainerProtocolError(std::string("message without \"") + name + "\"");
  return *it;
}

std::uint64_t whole(const json& object, const char* name) {
  const auto& value = field(object, name);
  if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<std::int64_t>() >= 0))
    throw TrainerProtocolError(std::string("\"") + name + "\" is not a whole number");
  return value.get<std::uint64_t>();
}

std::string text(const json& object, const char* name) {
  const auto& value = field(object, name);
  if (!value.is_string()) throw TrainerProtocolError(std::string("\"") + name + "\" is not a string");
  return value.get<std::string>();
}

}  // namespace

TrainerMessage decode_trainer_message(const std::string& packet) {
  const json object = json::parse(packet, nullptr, false);
  if (object.is_discarded() || !object.is_object()) throw TrainerProtocolError("a packet that is not a JSON object");
  TrainerMessage m;
  const std::string op = text(object, "op");
  if (op == "hello") {
    m.op = TrainerOp::kHello;
    if (const auto version = whole(object, "version"); version != kTrainerProtocolVersion)
      throw TrainerProtocolError("trainer protocol version " + std::to_string(version) + ", this site speaks " +
                                 std::to_string(kTrainerProtocolVersion) +
                                 " (install the meridian package of this daemon's release)");
    m.steps = whole(object, "steps");
    const auto& tensors = field(object, "tensors");
    if (!tensors.is_array()) throw TrainerProtocolError("\"tensors\" is not a list");
    for (const auto& t : tensors) {
      if (!t.is_object()) throw TrainerProtocolError("a tensor that is not an object");
      AttachedTensor tensor;
      tensor.name = text(t, "name");
      tensor.dtype = text(t, "dtype");
      const auto& shape = field(t, "shape");
      if (!shape.is_array()) throw TrainerProtocolError("tensor '" + tensor.name + "': \"shape\" is not a list");
      for (const auto& d : shape) {
        if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<std::int64_t>() >= 0))
          throw TrainerProtocolError("tensor '" + tensor.name + "': a dimension is not a whole number");
        tensor.shape.push_back(d.get<std::uint64_t>());
      }
      m.tensors.push_back(std::move(tensor));
    }
  } else if (op == "step") {
    m.op = TrainerOp::kStep;
    m.step = whole(object, "step");
    if (const auto it = object.find("loss"); it != object.end() && it->is_number()) m.loss = it->get<double>();
  } else if (op == "pulled") {
    m.op = TrainerOp::kPulled;
  } else if (op == "bye") {
    m.op = TrainerOp::kBye;
  } else {
    throw TrainerProtocolError("unknown op \"" + op + "\"");
  }
  return m;
}

const char* to_string(TrainerHook hook) {
  switch (hook) {
    case TrainerHook::kGradients: return "gradients";
    case TrainerHook::kParameters: return "parameters";
    case TrainerHook::kUpdate: return "update";
  }
  return "parameters";
}

std::string encode_welcome(const std::string& site, const std::string& algorithm, TrainerHook hook,
                           std::size_t parameters) {
  return json{{"op", "welcome"},     {"version", kTrainerProtocolVersion}, {"site", site},
              {"algorithm", algorithm}, {"hook", to_string(hook)},           {"parameters", parameters}}
      .dump();
}

std::string encode_start(std::uint64_t steps, bool restore) {
  return json{{"op", "start"}, {"steps", steps}, {"restore", restore}}.dump();
}

std::string encode_pull() { return json{{"op", "pull"}}.dump(); }

std::string encode_done(bool gradients, bool parameters, bool finished) {
  return json{{"op", "done"}, {"gradients", gradients}, {"parameters", parameters}, {"finished", finished}}.dump();
}

std::string encode_error(const std::string& error, bool fatal) {
  return json{{"op", "error"}, {"error", error}, {"fatal", fatal}}.dump();
}

}  // namespace meridian::daemon
