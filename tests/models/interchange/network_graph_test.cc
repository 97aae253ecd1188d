// Reading networks back from model fingerprints: every built-in architecture and the example model
// files give a graph whose parameter and state counts and output shape are the model's own, and
// fingerprints that do not describe a network are refused naming what is wrong.
#include <catch2/catch.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "models/cpu_backend.h"
#include "models/interchange/network_graph.h"
#include "models/model_factory.h"
#include "tests/support/build_paths.h"

using meridian::models::Shape;
using meridian::models::interchange::NetworkGraphError;
using meridian::models::interchange::parse_network_graph;

TEST_CASE("every model Meridian builds reads back from its fingerprint", "[unit][export]") {
  auto backend = std::make_shared<meridian::models::CpuBackend>(1);
  const std::string examples = std::string(meridian::tests::source_dir()) + "/examples/models/";
  const std::vector<std::string> kinds{"logreg",
                                       "mlp",
                                       "mlp-bn",
                                       "cnn",
                                       "resnet8",
                                       examples + "small-resnet.model",
                                       examples + "groupnorm-cnn.model",
                                       examples + "resnet8.model"};
  for (const auto& kind : kinds) {
    for (const Shape input : {Shape{1, 28, 28}, Shape{3, 32, 32}}) {
      const auto model = meridian::models::make_model(kind, input, 10, {}, backend, 1);
      INFO(model->fingerprint());
      const auto graph = parse_network_graph(model->fingerprint());
      CHECK(graph.kind == model->kind());
      CHECK(graph.input == input);
      CHECK(graph.classes == 10);
      CHECK(graph.parameter_count == model->parameter_count());
      CHECK(graph.state_count == model->state_count());
      REQUIRE(graph.layers.size() == model->layer_count());
      for (std::size_t i = 0; i < graph.layers.size(); ++i) {
        CHECK(graph.layers[i].input == model->layer(i).input_shape());
        CHECK(graph.layers[i].output == model->layer(i).output_shape());
      }
    }
  }
}

TEST_CASE("a residual block's body and shortcut are read with their offsets", "[unit][export]") {
  const auto graph = parse_network_graph(
      "r|in=2x4x4|residual(body=[conv2d(2->3,k3,s2,p1)|batch_norm2d(3,momentum=0.1,eps=1e-05)],"
      "shortcut=[conv2d(2->3,k1,s2,p0)])|flatten|linear(12->2)|classes=2|params=" +
      std::to_string((3 * 2 * 9 + 3) + 6 + (3 * 2 + 3) + (12 * 2 + 2)) + "|state=6");
  REQUIRE(graph.layers.size() == 3);
  const auto& block = graph.layers[0];
  CHECK(block.op == "residual");
  CHECK(block.output == Shape{3, 2, 2});
  REQUIRE(block.body.size() == 2);
  REQUIRE(block.shortcut.size() == 1);
  CHECK(block.body[1].parameter_offset == 57);
  CHECK(block.body[1].eps == 1e-5f);
  CHECK(block.shortcut[0].parameter_offset == 63);
  CHECK(graph.layers[2].parameter_offset == 72);
}

TEST_CASE("fingerprints that describe no network are refused with the reason", "[unit][export]") {
  const auto refused = [](const std::string& fingerprint, const std::string& reason) {
    INFO(fingerprint);
    try {
      (void)parse_network_graph(fingerprint);
      FAIL("accepted");
    } catch (const NetworkGraphError& e) {
      CHECK(std::string(e.what()).find(reason) != std::string::npos);
      CHECK(std::string(e.what()).find(fingerprint) != std::string::npos);
    }
  };
  refused("mlp", "not of the form");
  refused("m|in=1x2x2|flatten|swish|linear(4->2)|classes=2|params=10", "unknown layer 'swish'");
  refused("m|in=1x2x2|flatten|linear(5->2)|classes=2|params=12", "expects 5 inputs but its input is 4x1x1");
  refused("m|in=1x2x2|flatten|linear(4->2)|classes=3|params=10", "gives 2 outputs, not 3 classes");
  refused("m|in=1x2x2|flatten|linear(4->2)|classes=2|params=11", "the fingerprint says 11 and 0");
  refused("m|in=1x2x2|conv2d(1->2,k5,s1,p0)|flatten|linear(2->2)|classes=2|params=1", "does not fit its input");
  refused(
      "m|in=1x2x2|residual(body=[conv2d(1->2,k1,s1,p0)],shortcut=identity)|flatten|linear(8->2)|classes=2|"
      "params=22",
      "identity shortcut needs the body to keep the shape");
  refused("m|in=1x2x2|residual(body=[flatten|classes=2|params=0", "unbalanced brackets");
}
