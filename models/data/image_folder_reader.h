// Reader for a folder of images with one subfolder per class (the layout of torchvision's
// ImageFolder): DIR/<class>/<image>.png|.jpg|.jpeg. Images are PNG or JPEG, grayscale or colour.
//
// Sizes: every image must have the same width and height. The folder's size is the one most images
// have (on a tie, the first image's in reading order); when any image differs, the whole folder is
// refused and the message lists the offenders (up to ten, and how many in all) with their sizes.
// Nothing is resized: a resize changes what the model sees in ways a site should choose itself.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "models/data/dataset.h"

namespace meridian::models::data {

struct ImageFolderOptions {
  // The class list. When set, every subfolder must be named in it (label = position); classes with no
  // subfolder are simply absent at this site. When empty, the classes are the subfolders' names in
  // text (byte) order, empty subfolders included.
  std::vector<std::string> class_names;
  // 1 (grayscale) or 3 (RGB); 0 picks 3 when any image is colour and 1 otherwise. Colour images read
  // as 1 channel are converted to luma, grayscale images read as 3 have the value in R, G and B.
  std::size_t channels = 0;
};

// Reads `dir`. Rows are ordered by class, then by file name (byte order), so the result does not
// depend on the file system's listing order. Pixels are scaled to [0, 1]; the geometry is
// (channels, height, width); Dataset::class_names is the class list; no standardization.
// Subfolders and files whose names start with '.' are ignored; files directly in `dir` are ignored.
// Throws DataError naming the folder or file: missing folder, no class subfolder, a subfolder not in
// the class list, a folder nested in a class folder, a file in a class folder that is not .png, .jpg
// or .jpeg (any case), no images at all, an unreadable or damaged image (see image_file.h), images of
// different sizes (listed as above), and channels other than 0, 1 or 3.
Dataset read_image_folder(const std::string& dir, const ImageFolderOptions& options = {});

}  // namespace meridian::models::data
