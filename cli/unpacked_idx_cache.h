// An unpacked copy of gzip-compressed IDX files (Fashion-MNIST as Debian ships it) for `simulate`.
// Each of N local sites would otherwise inflate the same 30 MB of gzip at its start, once per
// algorithm: about 0.25 s of CPU per site, so with 4 sites on 2 cores about a second of every
// algorithm's start-up. The copy lives in a per-user cache directory named after the source files'
// directory, sizes and modification times (a changed file gets a new copy). It is written under a
// temporary name and renamed when complete, so a crash never leaves a partial copy that looks whole;
// the sites still check every file they read.
#pragma once

#include <filesystem>
#include <string>

namespace meridian::cli {

// $XDG_CACHE_HOME/meridian, else $HOME/.cache/meridian; empty when neither variable is set.
std::filesystem::path default_cache_root();

// The directory the sites should read the IDX files from: under `cache_root`, an unpacked copy of the
// four gzip files of the MNIST layout in `data_dir` ({train,t10k}-{images-idx3,labels-idx1}-ubyte.gz),
// made now when it is missing. Returns `data_dir` itself, with the reason in `note`, when there is
// nothing to unpack (a file is absent or not gzip: the sites then read and report what is there) or
// the copy cannot be made (no cache root, an unwritable or full disk, a corrupt gzip stream). Never
// throws for those; `note` is left empty when the copy is used.
std::filesystem::path unpacked_idx_dir(const std::filesystem::path& data_dir, const std::filesystem::path& cache_root,
                                       std::string& note);

}  // namespace meridian::cli
