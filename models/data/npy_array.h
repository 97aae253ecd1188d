// One array in NumPy's .npy format (format versions 1.0, 2.0 and 3.0): the magic "\x93NUMPY", a
// version, a header length, a Python dict literal {'descr': '<f4', 'fortran_order': False,
// 'shape': (3, 4)} and the raw elements. Used for .npy files and for the entries of an .npz archive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace meridian::models::data {

struct NpyArray {
  std::string descr;               // the dtype as the header spells it ('<f4', '|u1', '<U7'), for messages
  char kind = 0;                   // 'f' float, 'i' signed, 'u' unsigned, 'b' bool, 'U' UTF-32 text, 'S' bytes
  std::size_t item_size = 0;       // bytes per element
  bool big_endian = false;         // only meaningful when item_size > 1 and kind is numeric or 'U'
  std::vector<std::size_t> shape;  // () for a scalar
  std::string data;                // the elements in C order, item_size bytes each

  std::size_t count() const;       // product of shape (1 for a scalar)
  std::string shape_text() const;  // "(3, 4)", "(5,)" as NumPy prints it
};

// Parses a whole .npy byte string. `where` names the source in messages ("data/x.npy", or
// "data/train.npz: array 'x'"). Throws DataError "<where>: ..." for: a wrong magic, an unknown format
// version, a header cut short, a header that is not the dict NumPy writes (missing or malformed
// 'descr', 'fortran_order' or 'shape'), a structured or object dtype, fortran_order True (save with
// np.ascontiguousarray), and element bytes that differ from what shape and dtype announce (a
// truncated file, or extra bytes).
// Takes the bytes by value so that a caller handing over its buffer (std::move) gets the elements
// without a second copy of a large array.
NpyArray parse_npy(std::string bytes, const std::string& where);

}  // namespace meridian::models::data
