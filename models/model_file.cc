#include "models/model_file.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "models/activation.h"
#include "models/average_pool2d.h"
#include "models/batch_norm.h"
#include "models/conv2d.h"
#include "models/dropout.h"
#include "models/flatten.h"
#include "models/global_average_pool.h"
#include "models/group_norm.h"
#include "models/layer_sequence.h"
#include "models/linear.h"
#include "models/max_pool2d.h"
#include "models/relu.h"
#include "models/residual_network.h"

namespace meridian::models {
namespace {

// One statement: `op arg... key=value...`.
struct Statement {
  std::size_t line = 0;
  std::string op;
  std::vector<std::string> args;
  std::map<std::string, std::string> options;
};

// What each statement accepts: how many positional arguments (at least, at most), their names for
// messages, and the options.
struct Grammar {
  std::size_t min_args, max_args;
  std::string usage;
  std::vector<std::string> options;
};

const std::map<std::string, Grammar>& grammar() {
  static const std::map<std::string, Grammar> table{
      {"model", {1, 1, "model NAME", {}}},
      {"conv2d", {1, 1, "conv2d CHANNELS kernel=K [stride=S] [padding=P]", {"kernel", "stride", "padding"}}},
      {"linear", {1, 1, "linear FEATURES|classes", {}}},
      {"batch_norm", {0, 0, "batch_norm [momentum=M] [eps=E]", {"momentum", "eps"}}},
      {"group_norm", {1, 1, "group_norm GROUPS [eps=E]", {"eps"}}},
      {"relu", {0, 0, "relu", {}}},
      {"gelu", {0, 0, "gelu", {}}},
      {"tanh", {0, 0, "tanh", {}}},
      {"sigmoid", {0, 0, "sigmoid", {}}},
      {"max_pool", {1, 1, "max_pool WINDOW [stride=S]", {"stride"}}},
      {"avg_pool", {1, 1, "avg_pool WINDOW [stride=S]", {"stride"}}},
      {"global_avg_pool", {0, 0, "global_avg_pool", {}}},
      {"flatten", {0, 0, "flatten", {}}},
      {"dropout", {1, 1, "dropout P", {}}},
      {"residual", {0, 0, "residual", {}}},
      {"shortcut", {0, 0, "shortcut", {}}},
      {"end", {0, 0, "end", {}}},
      {"basic_block", {1, 1, "basic_block CHANNELS [stride=S]", {"stride"}}},
  };
  return table;
}

std::string known_statements() {
  std::string names;
  for (const auto& [name, g] : grammar()) names += (names.empty() ? "" : ", ") + name;
  return names;
}

class Parser {
 public:
  Parser(std::string_view text, std::string source, std::size_t classes)
      : source_(std::move(source)), classes_(classes) {
    std::size_t number = 0;
    std::size_t start = 0;
    while (start <= text.size()) {
      const std::size_t end = std::min(text.find('\n', start), text.size());
      ++number;
      read_statement(text.substr(start, end - start), number);
      start = end + 1;
    }
  }

  const std::string& name() const { return name_; }

  // The top level: every statement to the end of the file.
  std::vector<std::unique_ptr<Layer>> parse_network(Shape input) {
    if (next_ < statements_.size() && statements_[next_].op == "model") name_ = statements_[next_++].args[0];
    Shape shape = input;
    auto layers = parse_block(shape, nullptr);
    if (layers.empty()) fail_file("describes no layers");
    if (!(shape == Shape{classes_, 1, 1}))
      fail(last_layer_line_, "the last layer outputs " + shape.to_string() + ", not the " + std::to_string(classes_) +
                                 " classes of the data; end with 'linear classes'");
    return layers;
  }

 private:
  [[noreturn]] void fail(std::size_t line, const std::string& problem) const {
    throw ModelFileError(source_ + ":" + std::to_string(line) + ": " + problem);
  }
  [[noreturn]] void fail_file(const std::string& problem) const { throw ModelFileError(source_ + ": " + problem); }

  void read_statement(std::string_view raw, std::size_t number) {
    std::string text(raw.substr(0, raw.find('#')));
    std::istringstream words(text);
    Statement s;
    s.line = number;
    if (!(words >> s.op)) return;  // blank or comment
    const auto rule = grammar().find(s.op);
    if (rule == grammar().end())
      fail(number, "unknown statement '" + s.op + "' (expected one of " + known_statements() + ")");
    const Grammar& g = rule->second;
    std::string word;
    while (words >> word) {
      const auto eq = word.find('=');
      if (eq == std::string::npos) {
        s.args.push_back(word);
        continue;
      }
      const std::string key = word.substr(0, eq);
      if (std::find(g.options.begin(), g.options.end(), key) == g.options.end())
        fail(number, s.op + ": unknown option '" + key + "' (usage: " + g.usage + ")");
      if (s.options.count(key) != 0) fail(number, s.op + ": option '" + key + "' given twice");
      s.options[key] = word.substr(eq + 1);
    }
    if (s.args.size() < g.min_args || s.args.size() > g.max_args)
      fail(number, s.op + " takes " + std::to_string(g.min_args) +
                       (g.max_args != g.min_args ? " or " + std::to_string(g.max_args) : std::string()) + " argument" +
                       (g.max_args == 1 ? "" : "s") + ", got " + std::to_string(s.args.size()) + " (usage: " + g.usage +
                       ")");
    if (s.op == "model" && !statements_.empty()) fail(number, "'model' must be the first statement");
    statements_.push_back(std::move(s));
  }

  // A whole number >= `least` from `text`, named `what` in messages.
  std::size_t count(const Statement& s, const std::string& what, const std::string& text, std::size_t least) const {
    std::size_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size() || value < least)
      fail(s.line, s.op + ": " + what + " must be a whole number >= " + std::to_string(least) + ", got '" + text + "'");
    return value;
  }
  std::size_t option_count(const Statement& s, const std::string& key, std::size_t fallback, std::size_t least) const {
    const auto at = s.options.find(key);
    return at == s.options.end() ? fallback : count(s, key, at->second, least);
  }
  float number(const Statement& s, const std::string& what, const std::string& text) const {
    float value = 0.0f;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size())
      fail(s.line, s.op + ": " + what + " must be a number, got '" + text + "'");
    return value;
  }
  float option_number(const Statement& s, const std::string& key, float fallback) const {
    const auto at = s.options.find(key);
    return at == s.options.end() ? fallback : number(s, key, at->second);
  }

  // Statements up to `end` or `shortcut` (returned through `terminator`, which is null at the top level,
  // where neither may appear) or the end of the file. `shape` is the input and becomes the output.
  std::vector<std::unique_ptr<Layer>> parse_block(Shape& shape, const Statement** terminator) {
    std::vector<std::unique_ptr<Layer>> layers;
    while (next_ < statements_.size()) {
      const Statement& s = statements_[next_++];
      if (s.op == "end" || s.op == "shortcut") {
        if (terminator == nullptr) fail(s.line, "'" + s.op + "' outside a residual block");
        *terminator = &s;
        return layers;
      }
      if (s.op == "model") fail(s.line, "'model' must be the first statement");
      layers.push_back(make_layer(s, shape));
      shape = layers.back()->output_shape();
      last_layer_line_ = s.line;
    }
    if (terminator != nullptr) *terminator = nullptr;
    return layers;
  }

  std::unique_ptr<Layer> make_layer(const Statement& s, Shape shape) {
    try {
      return build(s, shape);
    } catch (const ModelFileError&) {
      throw;
    } catch (const error::UserError& e) {
      fail(s.line, e.what());  // a layer's own check (a kernel that does not fit, ...)
    }
  }

  std::unique_ptr<Layer> build(const Statement& s, Shape shape) {
    const bool image = shape.height * shape.width > 1;
    if (s.op == "conv2d") {
      if (s.options.count("kernel") == 0)
        fail(s.line, "conv2d: kernel=K is missing (usage: " + grammar().at("conv2d").usage + ")");
      return std::make_unique<Conv2d>(shape, count(s, "channels", s.args[0], 1), option_count(s, "kernel", 0, 1),
                                      option_count(s, "stride", 1, 1), option_count(s, "padding", 0, 0),
                                      InitScheme::he);
    }
    if (s.op == "linear") {
      if (image)
        fail(s.line, "linear needs flat input but gets " + shape.to_string() +
                         " images; put 'flatten' or 'global_avg_pool' before it");
      if (s.args[0] == "classes") return std::make_unique<Linear>(shape.size(), classes_, InitScheme::xavier);
      return std::make_unique<Linear>(shape.size(), count(s, "features", s.args[0], 1), InitScheme::he);
    }
    if (s.op == "batch_norm")
      return std::make_unique<BatchNorm>(shape, option_number(s, "momentum", 0.1f), option_number(s, "eps", 1e-5f));
    if (s.op == "group_norm")
      return std::make_unique<GroupNorm>(shape, count(s, "groups", s.args[0], 1), option_number(s, "eps", 1e-5f));
    if (s.op == "relu") return std::make_unique<Relu>(shape);
    if (s.op == "gelu") return std::make_unique<ActivationLayer>(shape, Activation::gelu);
    if (s.op == "tanh") return std::make_unique<ActivationLayer>(shape, Activation::tanh);
    if (s.op == "sigmoid") return std::make_unique<ActivationLayer>(shape, Activation::sigmoid);
    if (s.op == "max_pool" || s.op == "avg_pool") {
      if (!image) fail(s.line, s.op + " needs images but gets the flat " + shape.to_string());
      const std::size_t window = count(s, "window", s.args[0], 1), stride = option_count(s, "stride", window, 1);
      if (s.op == "max_pool") return std::make_unique<MaxPool2d>(shape, window, stride);
      return std::make_unique<AveragePool2d>(shape, window, stride);
    }
    if (s.op == "global_avg_pool") return std::make_unique<GlobalAveragePool>(shape);
    if (s.op == "flatten") return std::make_unique<Flatten>(shape);
    if (s.op == "dropout") return std::make_unique<Dropout>(shape, number(s, "p", s.args[0]));
    if (s.op == "basic_block") {
      if (!image) fail(s.line, "basic_block needs images but gets the flat " + shape.to_string());
      return make_basic_block(shape, count(s, "channels", s.args[0], 1), option_count(s, "stride", 1, 1));
    }
    return residual(s, shape);  // the grammar leaves no other statement here
  }

  std::unique_ptr<Layer> residual(const Statement& s, Shape input) {
    // Blocks nest by recursion: the depth is bounded so that no file can exhaust the stack.
    if (depth_ == kMaxNesting)
      fail(s.line, "residual blocks nested more than " + std::to_string(kMaxNesting) + " deep");
    ++depth_;
    auto block = residual_block(s, input);
    --depth_;
    return block;
  }

  std::unique_ptr<Layer> residual_block(const Statement& s, Shape input) {
    Shape body_shape = input;
    const Statement* terminator = nullptr;
    auto body = parse_block(body_shape, &terminator);
    if (terminator == nullptr) fail(s.line, "residual block without 'end'");
    if (body.empty()) fail(terminator->line, "the residual block of line " + std::to_string(s.line) + " has no body");
    std::unique_ptr<LayerSequence> shortcut;
    if (terminator->op == "shortcut") {
      const Statement& section = *terminator;
      Shape shortcut_shape = input;
      auto layers = parse_block(shortcut_shape, &terminator);
      if (terminator == nullptr) fail(s.line, "residual block without 'end'");
      if (terminator->op == "shortcut")
        fail(terminator->line, "a second 'shortcut' in the residual block of line " + std::to_string(s.line));
      if (layers.empty()) fail(section.line, "empty shortcut: leave the section out for the identity");
      if (!(shortcut_shape == body_shape))
        fail(section.line,
             "the shortcut outputs " + shortcut_shape.to_string() + " but the body outputs " + body_shape.to_string());
      shortcut = std::make_unique<LayerSequence>(std::move(layers));
    } else if (!(body_shape == input)) {
      fail(terminator->line, "the body of the residual block of line " + std::to_string(s.line) + " turns " +
                                 input.to_string() + " into " + body_shape.to_string() +
                                 ", so the identity shortcut does not fit; add a 'shortcut' section");
    }
    return std::make_unique<ResidualBlock>(std::make_unique<LayerSequence>(std::move(body)), std::move(shortcut));
  }

  std::string source_;
  std::size_t classes_;
  std::vector<Statement> statements_;
  std::size_t next_ = 0;
  std::size_t last_layer_line_ = 0;
  std::string name_;
  static constexpr std::size_t kMaxNesting = 32;
  std::size_t depth_ = 0;  // residual blocks open around the statement being read
};

// The model `text` describes; `default_name` is its kind without a `model` line.
std::unique_ptr<Model> build_model(std::string_view text, const std::string& source, const std::string& default_name,
                                   Shape input, std::size_t classes, std::shared_ptr<Backend> backend,
                                   std::uint64_t seed) {
  Parser parser(text, source, classes);
  auto layers = parser.parse_network(input);
  try {
    return std::make_unique<Model>(parser.name().empty() ? default_name : parser.name(), std::move(layers), classes,
                                   std::move(backend), seed);
  } catch (const error::UserError& e) {
    throw ModelFileError(source + ": " + e.what());  // the model's own checks: its total size, ...
  }
}

}  // namespace

std::unique_ptr<Model> parse_model_file(std::string_view text, const std::string& source, Shape input,
                                        std::size_t classes, std::shared_ptr<Backend> backend, std::uint64_t seed) {
  return build_model(text, source, source, input, classes, std::move(backend), seed);
}

std::unique_ptr<Model> load_model_file(const std::filesystem::path& path, Shape input, std::size_t classes,
                                       std::shared_ptr<Backend> backend, std::uint64_t seed) {
  std::ifstream in(path);
  if (!in) throw ModelFileError(path.string() + ": cannot read the model file");
  std::ostringstream text;
  text << in.rdbuf();
  return build_model(text.str(), path.string(), path.stem().string(), input, classes, std::move(backend), seed);
}

}  // namespace meridian::models
