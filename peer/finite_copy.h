// Checking that received floats are finite, in a network buffer or while copying them out of it: the
// pass the reassembler and the payload sink make over a payload before it may touch a model.
#pragma once

#include <cstddef>

namespace meridian::peer {

// Copies `n` floats from `src` (any alignment) into `dst` and returns whether all of them are finite.
// `dst` is written even when the answer is false; callers discard it then. Null pointers are allowed
// when n == 0. Thread safety: pure function.
bool copy_finite(const std::byte* src, float* dst, std::size_t n);

// Whether all `n` floats at `src` (any alignment) are finite, reading them without copying. Null `src`
// is allowed when n == 0. Thread safety: pure function.
bool all_finite(const std::byte* src, std::size_t n);

}  // namespace meridian::peer
