// An option that one algorithm declares for itself (diloco's --fragments, --outer-lr, --outer-momentum),
// and the values a configuration gives such options.
//
// The algorithm declares each option once, in its own .cc, and lists it in Algorithm::options(); the
// registry (daemon/algorithms/registry.h) collects them. From the declarations alone the configuration
// makes the `meridian start` flag --NAME with its help, the config-file key NAME with its comment in
// `meridian init`'s file, simulate's shared flag and its --algo knob ALGO:NAME=VALUE, and the checks: the
// value's type (a whole or a real number), its own range, and the refusal of a value other than the
// default for an algorithm that does not declare it. The knobs several algorithms read (--delay,
// --period, --compression, ...) stay fields of SiteConfig.
//
// Names are unique among every algorithm's options and the shared ones (tests/daemon/algorithm_option_test.cc
// checks it). Past the configuration boundary an option is known by its declaration, never by its name:
// OptionValues is keyed by the declaration's address.
//
// Thread-safety: a declaration is a constant; OptionValues is a value type (no sharing).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace meridian::daemon::algorithms {

// An option's value: a whole number (int) or a real one (double). The declared default's alternative is
// the option's type.
using OptionValue = std::variant<int, double>;

// "auto" in a whole-number option that takes it (AlgorithmOption::takes_auto): the algorithm chooses the
// value at run time (diloco's --overlap, daemon/algorithms/auto_shape.h).
inline constexpr int kAutoOptionValue = -1;

struct AlgorithmOption {
  std::string_view name;   // the flag without "--", the config-file key and the simulate knob
  std::string_view help;   // `meridian start --help` and the comment above the key in `meridian init`'s file
  std::string_view brief;  // simulate's shorter help line for its shared flag
  OptionValue default_value;
  // The value's own range, judged alone, for a site that runs the declaring algorithm: "" when the
  // value is fine, else the problem as it follows "--NAME: " (e.g. "must be positive (e.g. 0.7)").
  // Null: every value of the type is fine. A check that needs other options (--fragments ≤ --period)
  // belongs in Algorithm::check.
  std::string (*range)(const OptionValue& value) = nullptr;
  // A whole-number option that also takes "auto", held as kAutoOptionValue.
  bool takes_auto = false;

  bool is_whole() const { return std::holds_alternative<int>(default_value); }
};

// `text` as a value of `option`'s type (the whole text: "4x" is no number; "auto" where it takes it), or
// nullopt.
std::optional<OptionValue> parse_option_value(const AlgorithmOption& option, std::string_view text);

// `value` as parse_option_value reads it back: "auto", "4", "0.7".
std::string option_value_text(const AlgorithmOption& option, const OptionValue& value);

// "whole number", "whole number or auto" or "number", for messages about a value that did not parse.
std::string_view option_type_words(const AlgorithmOption& option);

// For an option's old spelling that an algorithm still reads for one release (diloco's --period, now
// --inner-steps): prints on stderr, once per process and old name, that --OLD is deprecated for
// `readers` and that --NEW (`replacement`) replaces it. Thread-safe.
void warn_renamed_option(std::string_view old_name, const AlgorithmOption& replacement, std::string_view readers);

// The values a configuration gives the algorithms' own options. An option not set holds its declared
// default, and setting the default is the same as not setting it, so two configurations with the same
// values compare equal however they were written.
class OptionValues {
 public:
  const OptionValue& get(const AlgorithmOption& option) const;
  // get() for an option of that type; throws error::InternalError for an option of the other type.
  int whole(const AlgorithmOption& option) const;
  double real(const AlgorithmOption& option) const;
  // Sets `option` to `value`, converted to the option's type (an int for a real option becomes a
  // double; a double for a whole option throws error::InternalError).
  void set(const AlgorithmOption& option, OptionValue value);
  // Whether `option` holds a value other than its default.
  bool differs_from_default(const AlgorithmOption& option) const { return values_.contains(&option); }

  bool operator==(const OptionValues&) const = default;

 private:
  std::map<const AlgorithmOption*, OptionValue> values_;  // only values other than the default
};

}  // namespace meridian::daemon::algorithms
