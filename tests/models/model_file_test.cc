// Model files (models/model_file.h) and the built-in ResNets: valid files build the network they describe
// (the example files included), the fingerprint covers every setting, and each broken file gets a
// message that names its line and the problem.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "error/error.h"
#include "models/cpu_backend.h"
#include "models/model_factory.h"
#include "models/model_file.h"
#include "tests/support/build_paths.h"

using namespace meridian::models;

namespace {

std::unique_ptr<Model> parse(const std::string& text, Shape input = {1, 8, 8}, std::size_t classes = 3) {
  return parse_model_file(text, "test.model", input, classes, std::make_shared<CpuBackend>(), 1);
}

// The message parse() throws for `text`.
std::string problem(const std::string& text, Shape input = {1, 8, 8}) {
  try {
    parse(text, input);
  } catch (const ModelFileError& e) {
    return e.what();
  }
  return "no error";
}

std::string example(const std::string& name) {
  return std::string(meridian::tests::source_dir()) + "/examples/models/" + name;
}

}  // namespace

TEST_CASE("a model file describes a network layer by layer, residual blocks included", "[models][model-file][unit]") {
  auto model = parse(R"(# a comment line
model tiny
conv2d 4 kernel=3 padding=1   # trailing comment
batch_norm momentum=0.2 eps=1e-3
relu
residual
  conv2d 4 kernel=3 padding=1
  batch_norm
end
residual
  conv2d 6 kernel=3 stride=2 padding=1
shortcut
  conv2d 6 kernel=1 stride=2
  group_norm 3
end
gelu
avg_pool 2
global_avg_pool
dropout 0.25
linear 5
sigmoid
linear 5
tanh
linear classes
)");
  CHECK(model->kind() == "tiny");
  CHECK(model->fingerprint() ==
        "tiny|in=1x8x8|conv2d(1->4,k3,s1,p1)|batch_norm2d(4,momentum=0.2,eps=0.001)|relu|"
        "residual(body=[conv2d(4->4,k3,s1,p1)|batch_norm2d(4,momentum=0.1,eps=1e-05)],shortcut=identity)|"
        "residual(body=[conv2d(4->6,k3,s2,p1)],shortcut=[conv2d(4->6,k1,s2,p0)|group_norm(3,6,eps=1e-05)])|gelu|"
        "avg_pool2d(k2,s2)|global_avg_pool|dropout(0.25)|linear(6->5)|sigmoid|linear(5->5)|tanh|linear(5->3)|"
        "classes=3|params=" +
            std::to_string(model->parameter_count()) + "|state=16");
  // It trains: one step on a batch of two.
  std::vector<float> x(2 * 64, 0.5f);
  x[3] = -1.0f;
  const std::vector<std::int32_t> labels{0, 2};
  CHECK(std::isfinite(model->forward_backward(x.data(), labels.data(), 2)));
}

TEST_CASE("the fingerprint changes with every setting of a model file", "[models][model-file][unit]") {
  const std::string base =
      "conv2d 4 kernel=3 padding=1\nbatch_norm\nrelu\nglobal_avg_pool\ndropout 0.5\nlinear classes\n";
  const std::string fingerprint = parse(base)->fingerprint();
  for (const std::string changed :
       {"conv2d 4 kernel=3 padding=0\nbatch_norm\nrelu\nglobal_avg_pool\ndropout 0.5\nlinear classes\n",
        "conv2d 4 kernel=3 padding=1\nbatch_norm momentum=0.3\nrelu\nglobal_avg_pool\ndropout 0.5\nlinear classes\n",
        "conv2d 4 kernel=3 padding=1\nbatch_norm eps=1e-4\nrelu\nglobal_avg_pool\ndropout 0.5\nlinear classes\n",
        "conv2d 4 kernel=3 padding=1\nbatch_norm\ngelu\nglobal_avg_pool\ndropout 0.5\nlinear classes\n",
        "conv2d 4 kernel=3 padding=1\nbatch_norm\nrelu\nglobal_avg_pool\ndropout 0.4\nlinear classes\n",
        "model other\nconv2d 4 kernel=3 padding=1\nbatch_norm\nrelu\nglobal_avg_pool\ndropout 0.5\nlinear classes\n"}) {
    INFO(changed);
    CHECK(parse(changed)->fingerprint() != fingerprint);
  }
}

TEST_CASE("broken model files get a message naming the line and the problem", "[models][model-file][unit]") {
  CHECK(problem("relu\nconvolution 3\n") ==
        "test.model:2: unknown statement 'convolution' (expected one of avg_pool, basic_block, batch_norm, conv2d, "
        "dropout, end, flatten, gelu, global_avg_pool, group_norm, linear, max_pool, model, relu, residual, "
        "shortcut, sigmoid, tanh)");
  CHECK(problem("conv2d 4 kernal=3\n") ==
        "test.model:1: conv2d: unknown option 'kernal' (usage: conv2d CHANNELS kernel=K [stride=S] [padding=P])");
  CHECK(problem("\n\nconv2d 4 padding=1\n") ==
        "test.model:3: conv2d: kernel=K is missing (usage: conv2d CHANNELS kernel=K [stride=S] [padding=P])");
  CHECK(problem("conv2d four kernel=3\n") == "test.model:1: conv2d: channels must be a whole number >= 1, got 'four'");
  CHECK(problem("conv2d 4 kernel=3 stride=0\n") == "test.model:1: conv2d: stride must be a whole number >= 1, got '0'");
  CHECK(problem("conv2d 4 kernel=11\n") == "test.model:1: conv2d: kernel 11 does not fit input 1x8x8 with padding 0");
  CHECK(problem("batch_norm momentum=fast\n") == "test.model:1: batch_norm: momentum must be a number, got 'fast'");
  CHECK(problem("batch_norm momentum=2\n") == "test.model:1: batch_norm: momentum 2 is outside [0, 1]");
  CHECK(problem("relu\ndropout\n") == "test.model:2: dropout takes 1 argument, got 0 (usage: dropout P)");
  CHECK(problem("relu 3\n") == "test.model:1: relu takes 0 arguments, got 1 (usage: relu)");
  CHECK(problem("conv2d 4 kernel=3\nlinear classes\n") ==
        "test.model:2: linear needs flat input but gets 4x6x6 images; put 'flatten' or 'global_avg_pool' before it");
  CHECK(problem("conv2d 4 kernel=3\ngroup_norm 3\n") == "test.model:2: group_norm: 3 groups do not divide 4 channels");
  CHECK(problem("flatten\nlinear 7\n") ==
        "test.model:2: the last layer outputs 7x1x1, not the 3 classes of the data; end with 'linear classes'");
  CHECK(problem("# nothing\n") == "test.model: describes no layers");
  CHECK(problem("relu\nmodel late\n") == "test.model:2: 'model' must be the first statement");
  CHECK(problem("relu\nend\n") == "test.model:2: 'end' outside a residual block");
  CHECK(problem("residual\n  relu\nflatten\nlinear classes\n") == "test.model:1: residual block without 'end'");
  CHECK(problem("relu\nresidual\nend\n") == "test.model:3: the residual block of line 2 has no body");
  CHECK(problem("residual\n  conv2d 2 kernel=1\nend\n") ==
        "test.model:3: the body of the residual block of line 1 turns 1x8x8 into 2x8x8, so the identity shortcut "
        "does not fit; add a 'shortcut' section");
  CHECK(problem("residual\n  conv2d 2 kernel=1\nshortcut\n  conv2d 2 kernel=1 stride=2\nend\n") ==
        "test.model:3: the shortcut outputs 2x4x4 but the body outputs 2x8x8");
  CHECK(problem("flatten\nmax_pool 2\n") == "test.model:2: max_pool needs images but gets the flat 64x1x1");
  CHECK(problem("conv2d 2 kernel=3 kernel=3\n") == "test.model:1: conv2d: option 'kernel' given twice");
}

TEST_CASE("--model takes a built-in name or the path of a model file", "[models][model-file][unit]") {
  auto backend = std::make_shared<CpuBackend>();
  CHECK(make_model(example("small-resnet.model"), {1, 28, 28}, 10, {}, backend, 1)->kind() == "small-resnet");
  try {
    make_model("resnet9", {1, 28, 28}, 10, {}, backend, 1);
    FAIL("no error");
  } catch (const meridian::error::UserError& e) {
    CHECK(std::string(e.what()) ==
          "unknown model 'resnet9' (expected logreg, mlp, mlp-bn, cnn, resnet8, resnet20, or the path of a model "
          "file, see docs/models.md)");
  }
}

TEST_CASE("every example model file builds for 1x28x28 and 3x32x32 images", "[models][model-file][unit]") {
  auto backend = std::make_shared<CpuBackend>();
  for (const std::string name : {"resnet8.model", "small-resnet.model", "tabular-mlp.model", "groupnorm-cnn.model"}) {
    for (const Shape input : {Shape{1, 28, 28}, Shape{3, 32, 32}}) {
      INFO(name << " on " << input.to_string());
      auto model = load_model_file(example(name), input, 10, backend, 1);
      CHECK(model->classes() == 10);
    }
  }
}

TEST_CASE("resnet8 and resnet20 are He et al.'s CIFAR ResNets for any input size", "[models][model-file][unit]") {
  auto backend = std::make_shared<CpuBackend>();
  // Parameter and running-statistic counts of the same networks in torch (bench/torch_train_throughput.py's
  // resnet(), whose convolutions have biases as Meridian's do).
  struct Case {
    const char* name;
    Shape input;
    std::size_t parameters, state;
  };
  for (const Case& c : {Case{"resnet8", {1, 28, 28}, 78090, 672}, Case{"resnet20", {1, 28, 28}, 272970, 1568},
                        Case{"resnet8", {3, 32, 32}, 78378, 672}, Case{"resnet20", {3, 32, 32}, 273258, 1568}}) {
    INFO(c.name << " on " << c.input.to_string());
    auto model = make_model(c.name, c.input, 10, {}, backend, 1);
    CHECK(model->parameter_count() == c.parameters);
    CHECK(model->state_count() == c.state);
  }
  // The example file that spells resnet8 out is the same network, fingerprint and all.
  CHECK(load_model_file(example("resnet8.model"), {1, 28, 28}, 10, backend, 1)->fingerprint() ==
        make_model("resnet8", {1, 28, 28}, 10, {}, backend, 1)->fingerprint());
  auto mlp_bn = make_model("mlp-bn", {20, 1, 1}, 4, {}, backend, 1);
  CHECK(mlp_bn->fingerprint() ==
        "mlp-bn|in=20x1x1|flatten|linear(20->256)|batch_norm1d(256,momentum=0.1,eps=1e-05)|relu|dropout(0.2)|"
        "linear(256->128)|batch_norm1d(128,momentum=0.1,eps=1e-05)|relu|dropout(0.2)|linear(128->4)|classes=4|"
        "params=39556|state=768");
}
