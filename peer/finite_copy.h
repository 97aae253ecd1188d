// Copying received floats out of a network buffer while checking that every one is finite: the one
// pass both the reassembler and the payload sink make over a payload before it may touch a model.
#pragma once

#include <cstddef>

namespace meridian::peer {

// Copies `n` floats from `src` (any alignment) into `dst` and returns whether all of them are finite.
// `dst` is written even when the answer is false; callers discard it then. Null pointers are allowed
// when n == 0. Thread safety: pure function.
bool copy_finite(const std::byte* src, float* dst, std::size_t n);

}  // namespace meridian::peer
