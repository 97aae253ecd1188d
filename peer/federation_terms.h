// Federation terms: what must be equal on every site of a federation for its rounds to mean anything —
// the model, the algorithm and its shape, the optimizer where the algorithm carries its state, the data
// schema. Each site announces its terms in its hello; a site refuses a peer whose terms differ, answers
// it with the reason (naming the field and both values), and never admits it (peer/zmq/zmq_transport.h).
// What goes into the terms is the daemon's choice (daemon/federation/federation_terms.h); here they are
// named text fields, compared as text.
//
// Thread-safety: plain values; the functions are pure.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace meridian::peer {

struct Term {
  std::string name;   // short field name, e.g. "model", "algorithm"
  std::string value;  // canonical text; equal text means equal terms
  // The value in words for people ("mlp 784-256-128-10 (235,146 parameters)"), shown instead of the
  // value where two sites' values differ and their displays do too; empty: the value is shown.
  // compare_terms() never compares it.
  std::string display = {};
  // What makes the values equal, added to a refusal over this field ("declare the full class list at
  // every site with --classes"); empty: nothing is added. Never compared, never sent: a refusal
  // carries the refusing site's hint in its text.
  std::string hint = {};
  friend bool operator==(const Term&, const Term&) = default;
};

// In the order the site lists them; a field name appears at most once.
using FederationTerms = std::vector<Term>;

// The first field in which two sites' terms differ, with both values as people read them: the
// displays where both sides have one and they differ, the values otherwise. A field one side lacks has
// the value "(not announced)" on that side.
struct TermsMismatch {
  std::string field;
  std::string ours;
  std::string theirs;
  std::string hint = {};  // our term's hint
  friend bool operator==(const TermsMismatch&, const TermsMismatch&) = default;
};

// nullopt when `theirs` has exactly the fields of `ours` with equal values (order does not matter).
// Our fields are checked first, in our order, then fields only they announce.
std::optional<TermsMismatch> compare_terms(const FederationTerms& ours, const FederationTerms& theirs);

// What the refused site reads: "alpha refuses this site: algorithm differs (alpha: sgp, K = 1;
// this site: allreduce)", followed by ": " and the hint when there is one. `refuser` is the refusing site's name; `m` is from the refuser's side.
std::string refusal_reason(const std::string& refuser, const TermsMismatch& m);

// What the refusing site logs: "refused at join: algorithm differs (this site: sgp, K = 1; gamma:
// allreduce)", followed by ": " and the hint when there is one.
std::string refusal_log_detail(const std::string& refused, const TermsMismatch& m);

}  // namespace meridian::peer
