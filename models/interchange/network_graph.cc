#include "models/interchange/network_graph.h"

#include <charconv>
#include <cstdlib>
#include <string_view>

namespace meridian::models::interchange {
namespace {

// Parses the layer descriptions of one fingerprint; every error quotes that fingerprint.
class Parser {
 public:
  explicit Parser(const std::string& fingerprint) : fingerprint_(fingerprint) {}

  [[noreturn]] void fail(const std::string& problem) const {
    throw NetworkGraphError("model fingerprint '" + fingerprint_ + "': " + problem);
  }

  // Splits `text` at the '|' that are not inside brackets or parentheses (residual blocks nest).
  std::vector<std::string_view> split_top_level(std::string_view text) const {
    std::vector<std::string_view> parts;
    int depth = 0;
    std::size_t start = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
      const char c = text[i];
      if (c == '(' || c == '[') ++depth;
      if (c == ')' || c == ']') --depth;
      if (depth < 0) fail("unbalanced brackets");
      if (c == '|' && depth == 0) {
        parts.push_back(text.substr(start, i - start));
        start = i + 1;
      }
    }
    if (depth != 0) fail("unbalanced brackets");
    parts.push_back(text.substr(start));
    return parts;
  }

  std::size_t count(std::string_view text, std::string_view what) const {
    std::size_t value = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || ptr != text.data() + text.size() || text.empty())
      fail(std::string(what) + ": '" + std::string(text) + "' is not a whole number");
    return value;
  }

  float real(std::string_view text, std::string_view what) const {
    // strtof rather than from_chars: GCC 12's float from_chars is complete, but strtof reads what
    // number_text writes on every standard library.
    const std::string copy(text);
    char* end = nullptr;
    const float value = std::strtof(copy.c_str(), &end);
    if (copy.empty() || end != copy.c_str() + copy.size()) fail(std::string(what) + ": '" + copy + "' is not a number");
    return value;
  }

  Shape shape(std::string_view text) const {
    const auto x1 = text.find('x');
    const auto x2 = text.find('x', x1 == std::string_view::npos ? x1 : x1 + 1);
    if (x1 == std::string_view::npos || x2 == std::string_view::npos) fail("'" + std::string(text) + "' is no shape");
    return {count(text.substr(0, x1), "input shape"), count(text.substr(x1 + 1, x2 - x1 - 1), "input shape"),
            count(text.substr(x2 + 1), "input shape")};
  }

  // "k5" → 5 (the letter is checked).
  std::size_t tagged(std::string_view text, char tag, std::string_view layer) const {
    if (text.empty() || text.front() != tag)
      fail(std::string(layer) + ": expected '" + tag + "...' but found '" + std::string(text) + "'");
    return count(text.substr(1), layer);
  }

  // "name=value" → value (the name is checked).
  std::string_view named(std::string_view text, std::string_view name, std::string_view layer) const {
    if (text.substr(0, name.size() + 1) != std::string(name) + "=")
      fail(std::string(layer) + ": expected '" + std::string(name) + "=...' but found '" + std::string(text) + "'");
    return text.substr(name.size() + 1);
  }

  // Parses a layer sequence starting at `input`, placing parameters and state from the given offsets
  // (advanced past the sequence).
  std::vector<LayerNode> sequence(const std::vector<std::string_view>& items, Shape input, std::size_t& parameters,
                                  std::size_t& state) const {
    std::vector<LayerNode> layers;
    for (const auto item : items) {
      layers.push_back(layer(item, input, parameters, state));
      input = layers.back().output;
    }
    return layers;
  }

  LayerNode layer(std::string_view text, Shape input, std::size_t& parameters, std::size_t& state) const {
    LayerNode node;
    node.input = input;
    node.output = input;
    node.parameter_offset = parameters;
    node.state_offset = state;
    const auto open = text.find('(');
    const std::string name(text.substr(0, open));
    std::string_view args;
    if (open != std::string_view::npos) {
      if (text.back() != ')') fail("layer '" + std::string(text) + "' does not end with ')'");
      args = text.substr(open + 1, text.size() - open - 2);
    }
    // Comma-separated arguments (no layer but residual nests, and it is parsed apart).
    std::vector<std::string_view> a;
    for (std::size_t start = 0; open != std::string_view::npos && name != "residual";) {
      const auto comma = args.find(',', start);
      a.push_back(args.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    const auto want_args = [&](std::size_t n) {
      if (a.size() != n)
        fail("layer '" + std::string(text) + "' has " + std::to_string(a.size()) + " settings, expected " +
             std::to_string(n));
    };
    const auto want_channels = [&](std::size_t c) {
      if (input.channels != c)
        fail("layer '" + std::string(text) + "' expects " + std::to_string(c) + " channels but its input is " +
             input.to_string());
    };
    if (name == "flatten" || name == "relu" || name == "gelu" || name == "tanh" || name == "sigmoid" ||
        name == "global_avg_pool") {
      want_args(0);
      node.op = name;
      if (name == "flatten") node.output = {input.size(), 1, 1};
      if (name == "global_avg_pool") node.output = {input.channels, 1, 1};
    } else if (name == "dropout") {
      want_args(1);
      node.op = name;
      node.p = real(a[0], "dropout");
    } else if (name == "linear") {
      want_args(1);
      node.op = name;
      const auto arrow = a[0].find("->");
      if (arrow == std::string_view::npos) fail("layer '" + std::string(text) + "' has no 'IN->OUT'");
      const std::size_t in = count(a[0].substr(0, arrow), "linear");
      node.out_channels = count(a[0].substr(arrow + 2), "linear");
      if (in != input.size())
        fail("layer '" + std::string(text) + "' expects " + std::to_string(in) + " inputs but its input is " +
             input.to_string());
      node.output = {node.out_channels, 1, 1};
      node.parameter_count = in * node.out_channels + node.out_channels;
    } else if (name == "conv2d") {
      want_args(4);
      node.op = name;
      const auto arrow = a[0].find("->");
      if (arrow == std::string_view::npos) fail("layer '" + std::string(text) + "' has no 'IN->OUT'");
      want_channels(count(a[0].substr(0, arrow), "conv2d"));
      node.out_channels = count(a[0].substr(arrow + 2), "conv2d");
      node.kernel = tagged(a[1], 'k', "conv2d");
      node.stride = tagged(a[2], 's', "conv2d");
      node.padding = tagged(a[3], 'p', "conv2d");
      if (node.stride == 0 || input.height + 2 * node.padding < node.kernel ||
          input.width + 2 * node.padding < node.kernel)
        fail("layer '" + std::string(text) + "' does not fit its input " + input.to_string());
      node.output = {node.out_channels, (input.height + 2 * node.padding - node.kernel) / node.stride + 1,
                     (input.width + 2 * node.padding - node.kernel) / node.stride + 1};
      node.parameter_count = node.out_channels * input.channels * node.kernel * node.kernel + node.out_channels;
    } else if (name == "batch_norm1d" || name == "batch_norm2d") {
      want_args(3);
      node.op = "batch_norm";
      want_channels(count(a[0], name));
      node.momentum = real(named(a[1], "momentum", name), name);
      node.eps = real(named(a[2], "eps", name), name);
      node.parameter_count = 2 * input.channels;
      node.state_count = 2 * input.channels;
    } else if (name == "group_norm") {
      want_args(3);
      node.op = name;
      node.groups = count(a[0], name);
      want_channels(count(a[1], name));
      node.eps = real(named(a[2], "eps", name), name);
      if (node.groups == 0 || input.channels % node.groups != 0)
        fail("layer '" + std::string(text) + "': the groups do not divide the channels");
      node.parameter_count = 2 * input.channels;
    } else if (name == "max_pool2d" || name == "avg_pool2d") {
      want_args(2);
      node.op = name;
      node.kernel = tagged(a[0], 'k', name);
      node.stride = tagged(a[1], 's', name);
      if (node.stride == 0 || node.kernel == 0 || input.height < node.kernel || input.width < node.kernel)
        fail("layer '" + std::string(text) + "' does not fit its input " + input.to_string());
      node.output = {input.channels, (input.height - node.kernel) / node.stride + 1,
                     (input.width - node.kernel) / node.stride + 1};
    } else if (name == "residual") {
      node.op = name;
      residual(node, args, text, parameters, state);
      return node;
    } else {
      fail("unknown layer '" + std::string(text) + "'");
    }
    parameters += node.parameter_count;
    state += node.state_count;
    return node;
  }

  // "body=[...],shortcut=[...]" or "body=[...],shortcut=identity".
  void residual(LayerNode& node, std::string_view args, std::string_view text, std::size_t& parameters,
                std::size_t& state) const {
    const auto bracketed = [&](std::string_view from) {
      if (from.empty() || from.front() != '[') fail("layer '" + std::string(text) + "': expected '['");
      int depth = 0;
      for (std::size_t i = 0; i < from.size(); ++i) {
        if (from[i] == '[' || from[i] == '(') ++depth;
        if (from[i] == ']' || from[i] == ')') --depth;
        if (depth == 0) return from.substr(0, i + 1);
      }
      fail("layer '" + std::string(text) + "': unbalanced brackets");
    };
    const std::string_view body_text = bracketed(named(args, "body", "residual"));
    const std::string_view rest = args.substr(5 + body_text.size());
    if (rest.empty() || rest.front() != ',') fail("layer '" + std::string(text) + "': expected ',shortcut=...'");
    const std::string_view shortcut_text = named(rest.substr(1), "shortcut", "residual");
    node.body = sequence(split_top_level(body_text.substr(1, body_text.size() - 2)), node.input, parameters, state);
    node.output = node.body.back().output;
    if (shortcut_text != "identity") {
      if (bracketed(shortcut_text).size() != shortcut_text.size())
        fail("layer '" + std::string(text) + "': unexpected text after the shortcut");
      node.shortcut =
          sequence(split_top_level(shortcut_text.substr(1, shortcut_text.size() - 2)), node.input, parameters, state);
      if (node.shortcut.back().output != node.output)
        fail("layer '" + std::string(text) + "': the shortcut's output differs from the body's");
    } else if (node.input != node.output) {
      fail("layer '" + std::string(text) + "': an identity shortcut needs the body to keep the shape");
    }
    node.parameter_count = parameters - node.parameter_offset;
    node.state_count = state - node.state_offset;
  }

 private:
  const std::string& fingerprint_;
};

}  // namespace

NetworkGraph parse_network_graph(const std::string& fingerprint) {
  Parser parser(fingerprint);
  auto parts = parser.split_top_level(fingerprint);
  NetworkGraph graph;
  // KIND, in=..., at least one layer, classes=..., params=...
  if (parts.size() < 5 || parts[1].substr(0, 3) != "in=") parser.fail("not of the form KIND|in=CxHxW|...|params=P");
  graph.kind = std::string(parts[0]);
  graph.input = parser.shape(parts[1].substr(3));
  std::size_t stated_state = 0;
  if (parts.back().substr(0, 6) == "state=") {
    stated_state = parser.count(parts.back().substr(6), "state");
    parts.pop_back();
  }
  const std::size_t stated_parameters = parser.count(parser.named(parts.back(), "params", "the end"), "params");
  parts.pop_back();
  graph.classes = parser.count(parser.named(parts.back(), "classes", "the end"), "classes");
  parts.pop_back();
  const std::vector<std::string_view> layers(parts.begin() + 2, parts.end());
  if (layers.empty()) parser.fail("no layers");
  graph.layers = parser.sequence(layers, graph.input, graph.parameter_count, graph.state_count);
  if (graph.layers.back().output.size() != graph.classes)
    parser.fail("the last layer gives " + std::to_string(graph.layers.back().output.size()) + " outputs, not " +
                std::to_string(graph.classes) + " classes");
  if (graph.parameter_count != stated_parameters || graph.state_count != stated_state)
    parser.fail("the layers hold " + std::to_string(graph.parameter_count) + " parameters and " +
                std::to_string(graph.state_count) + " state values, the fingerprint says " +
                std::to_string(stated_parameters) + " and " + std::to_string(stated_state));
  return graph;
}

}  // namespace meridian::models::interchange
