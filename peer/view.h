// A view: the members of the federation for a range of rounds. Ranks are positions in the sorted
// member list, so every site derives the same ranks from the same view without asking anyone.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "peer/pace.h"

namespace meridian::peer {

struct View {
  std::uint64_t id = 0;               // increases by one with every change
  std::uint64_t effective_round = 0;  // first round (training step) this view is in force
  std::vector<std::string> members;   // sorted, no duplicates
  Pace pace;                          // the figures its automatic shapes come from (zero: none)

  // Builds a view from any list of names (sorts and removes duplicates).
  static View of(std::vector<std::string> names, std::uint64_t id = 0, std::uint64_t effective_round = 0,
                 Pace pace = {}) {
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    return View{id, effective_round, std::move(names), pace};
  }

  std::size_t size() const { return members.size(); }

  // Rank of `name` in this view, or nullopt when it is not a member.
  std::optional<std::size_t> rank_of(const std::string& name) const {
    auto it = std::lower_bound(members.begin(), members.end(), name);
    if (it == members.end() || *it != name) return std::nullopt;
    return static_cast<std::size_t>(it - members.begin());
  }

  const std::string& at(std::size_t rank) const { return members.at(rank); }

  friend bool operator==(const View&, const View&) = default;
};

}  // namespace meridian::peer
