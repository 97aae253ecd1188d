// std::source_location for clang before 15 on libstdc++: libstdc++'s <source_location> defines the class
// only when the compiler has __builtin_source_location, which clang gained in version 15. The fuzz build
// (clang, `make fuzz`) force-includes this header so that error/error.h compiles with the clang Debian
// ships; it builds the class from the older builtins that give the caller's file, function and line.
#pragma once

#include <source_location>

#ifndef __cpp_lib_source_location
namespace std {

struct source_location {
  static constexpr source_location current(const char* file = __builtin_FILE(),
                                           const char* function = __builtin_FUNCTION(),
                                           unsigned line = __builtin_LINE(), unsigned column = __builtin_COLUMN()) noexcept {
    source_location here;
    here.file_ = file;
    here.function_ = function;
    here.line_ = line;
    here.column_ = column;
    return here;
  }
  constexpr const char* file_name() const noexcept { return file_; }
  constexpr const char* function_name() const noexcept { return function_; }
  constexpr unsigned line() const noexcept { return line_; }
  constexpr unsigned column() const noexcept { return column_; }

 private:
  const char* file_ = "";
  const char* function_ = "";
  unsigned line_ = 0;
  unsigned column_ = 0;
};

}  // namespace std
#endif
