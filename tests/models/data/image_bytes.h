// Writes PNG and JPEG files in tests with libpng (simplified API) and libjpeg-turbo.
#pragma once

#include <cstddef>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include <jpeglib.h>
#include <png.h>

namespace meridian::tests {

// `pixels` is (height, width, channels) with channels 1 (gray), 2 (gray + alpha), 3 (RGB) or 4 (RGBA).
inline void write_png(const std::string& path, std::size_t width, std::size_t height, std::size_t channels,
                      const std::vector<unsigned char>& pixels) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  image.width = static_cast<png_uint_32>(width);
  image.height = static_cast<png_uint_32>(height);
  image.format = channels == 1   ? PNG_FORMAT_GRAY
                 : channels == 2 ? PNG_FORMAT_GA
                 : channels == 3 ? PNG_FORMAT_RGB
                                 : PNG_FORMAT_RGBA;
  if (png_image_write_to_file(&image, path.c_str(), 0, pixels.data(), 0, nullptr) == 0) {
    throw std::runtime_error("png write failed for " + path + ": " + image.message);
  }
}

// `pixels` is (height, width, channels) with channels 1 (gray) or 3 (RGB); quality 100.
inline void write_jpeg(const std::string& path, std::size_t width, std::size_t height, std::size_t channels,
                       const std::vector<unsigned char>& pixels) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) throw std::runtime_error("cannot write " + path);
  jpeg_compress_struct cinfo;
  jpeg_error_mgr errors;
  cinfo.err = jpeg_std_error(&errors);
  jpeg_create_compress(&cinfo);
  jpeg_stdio_dest(&cinfo, file);
  cinfo.image_width = static_cast<JDIMENSION>(width);
  cinfo.image_height = static_cast<JDIMENSION>(height);
  cinfo.input_components = static_cast<int>(channels);
  cinfo.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, 100, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<unsigned char*>(pixels.data()) + std::size_t{cinfo.next_scanline} * width * channels;
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::fclose(file);
}

}  // namespace meridian::tests
