// The declaration an attached trainer sends (daemon/attached/attached_model.h, daemon/attached/trainer_protocol.h):
// element counts, the fingerprint the federation compares, and each kind of bad declaration refused
// with the tensor at fault named.
#include <catch2/catch.hpp>

#include <string>

#include "daemon/attached/attached_model.h"
#include "daemon/attached/trainer_protocol.h"

using meridian::daemon::AttachedModelError;
using meridian::daemon::AttachedTensor;
using meridian::daemon::attached_model_of;
using meridian::daemon::decode_trainer_message;
using meridian::daemon::TrainerOp;
using meridian::daemon::TrainerProtocolError;

TEST_CASE("an attached model's declaration gives its size, fingerprint and summary", "[daemon][attached][unit]") {
  const auto model = attached_model_of({AttachedTensor{"fc.weight", {10, 784}, "float32"},
                                        AttachedTensor{"fc.bias", {10}, "bfloat16"}, AttachedTensor{"scale", {}, "float64"}});
  CHECK(model.parameters == 7851);
  CHECK(model.tensors[0].elements == 7840);
  CHECK(model.tensors[2].elements == 1);
  CHECK(model.fingerprint() == "attached|fc.weight:10x784:float32|fc.bias:10:bfloat16|scale:scalar:float64|params=7851");
  CHECK(model.summary() == "attached model, 3 tensors (7,851 parameters)");
}

TEST_CASE("a bad declaration is refused naming the tensor", "[daemon][attached][unit]") {
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(attached_model_of({}), Contains("declared no parameter tensors"));
  CHECK_THROWS_WITH(attached_model_of({{"w", {2}, "int64"}}), Contains("parameter 'w': dtype 'int64' is not float32"));
  CHECK_THROWS_WITH(attached_model_of({{"w", {2}, "float32"}, {"w", {3}, "float32"}}),
                    Contains("parameter 'w': declared twice"));
  CHECK_THROWS_WITH(attached_model_of({{"a|b", {2}, "float32"}}), Contains("may not contain '|' or ':'"));
  CHECK_THROWS_WITH(attached_model_of({{"", {2}, "float32"}}), Contains("has no name"));
  CHECK_THROWS_WITH(attached_model_of({{"w", {0, 5}, "float32"}}), Contains("hold no elements"));
  // Sizes are multiplied with overflow checks before anything is allocated for them.
  CHECK_THROWS_WITH(attached_model_of({{"w", {1ull << 40, 1ull << 40}, "float32"}}), Contains("is too large"));
  CHECK_THROWS_AS(attached_model_of({{"w", {1ull << 31}, "float32"}, {"v", {1ull << 31}, "float32"}, {"u", {2}, "float32"}}),
                  AttachedModelError);
}

TEST_CASE("the trainer's messages decode, and malformed ones are refused", "[daemon][attached][unit]") {
  const auto hello = decode_trainer_message(
      R"({"op": "hello", "version": 1, "steps": 30, "tensors": [{"name": "w", "shape": [2, 3], "dtype": "float32"}]})");
  CHECK(hello.op == TrainerOp::kHello);
  CHECK(hello.steps == 30);
  REQUIRE(hello.tensors.size() == 1);
  CHECK(hello.tensors[0].shape == std::vector<std::uint64_t>{2, 3});
  const auto step = decode_trainer_message(R"({"op": "step", "step": 4, "loss": 0.5})");
  CHECK(step.op == TrainerOp::kStep);
  CHECK(step.step == 4);
  CHECK(step.loss == 0.5);
  CHECK_FALSE(decode_trainer_message(R"({"op": "step", "step": 4, "loss": null})").loss.has_value());

  using Catch::Matchers::Contains;
  CHECK_THROWS_AS(decode_trainer_message(""), TrainerProtocolError);
  CHECK_THROWS_AS(decode_trainer_message("[1, 2]"), TrainerProtocolError);
  CHECK_THROWS_WITH(decode_trainer_message(R"({"op": "jump"})"), Contains("unknown op \"jump\""));
  CHECK_THROWS_WITH(decode_trainer_message(R"({"op": "step", "step": -1})"), Contains("\"step\" is not a whole number"));
  CHECK_THROWS_WITH(decode_trainer_message(R"({"op": "hello", "version": 2, "steps": 1, "tensors": []})"),
                    Contains("trainer protocol version 2, this site speaks 1"));
  CHECK_THROWS_WITH(
      decode_trainer_message(R"({"op": "hello", "version": 1, "steps": 1, "tensors": [{"name": "w", "shape": [-2], "dtype": "float32"}]})"),
      Contains("tensor 'w': a dimension is not a whole number"));
}
