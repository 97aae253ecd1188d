#include "models/data/image_file.h"

#include <csetjmp>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>

#include <jpeglib.h>
#include <png.h>

#include "models/checked_size.h"
#include "models/data/dataset.h"

namespace meridian::models::data {

namespace {

[[noreturn]] void unreadable(const std::string& path, const std::string& reason) {
  throw DataError(path + ": unreadable image: " + reason);
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) unreadable(path, "cannot open the file");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) unreadable(path, "read error");
  return bytes;
}

// The bytes of the decoded image `info` describes, checked before they are allocated: a header of a few
// bytes can declare 4 billion pixels. The bound is the most values a model takes per sample.
std::size_t decoded_bytes(const std::string& path, const ImageInfo& info, std::size_t channels) {
  const auto bytes = product_within({info.width, info.height, channels}, kMaxSampleValues);
  if (!bytes) {
    unreadable(path, std::to_string(info.width) + "x" + std::to_string(info.height) + " pixels of " +
                         std::to_string(channels) + " channels is more than the limit of " +
                         std::to_string(kMaxSampleValues) + " values per image");
  }
  return *bytes;
}

bool is_png(const std::string& b) {
  return b.size() >= 8 && png_sig_cmp(reinterpret_cast<png_const_bytep>(b.data()), 0, 8) == 0;
}
bool is_jpeg(const std::string& b) { return b.size() >= 3 && b.compare(0, 3, "\xFF\xD8\xFF") == 0; }

// libpng's simplified API reports errors through the png_image's message instead of longjmp.
struct PngImage {
  png_image image{};
  PngImage() { image.version = PNG_IMAGE_VERSION; }
  ~PngImage() { png_image_free(&image); }
  PngImage(const PngImage&) = delete;
  PngImage& operator=(const PngImage&) = delete;
};

ImageInfo begin_png(PngImage& png, const std::string& path, const std::string& bytes) {
  if (png_image_begin_read_from_memory(&png.image, bytes.data(), bytes.size()) == 0)
    unreadable(path, png.image.message);
  return {png.image.width, png.image.height, (png.image.format & PNG_FORMAT_FLAG_COLOR) != 0};
}

std::vector<unsigned char> decode_png(const std::string& path, const std::string& bytes, std::size_t channels,
                                      ImageInfo& info) {
  PngImage png;
  info = begin_png(png, path, bytes);
  png.image.format = channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
  std::vector<unsigned char> pixels(decoded_bytes(path, info, channels));
  if (pixels.size() != PNG_IMAGE_SIZE(png.image)) unreadable(path, "libpng's image size differs from the header's");
  const png_color black{0, 0, 0};
  if (png_image_finish_read(&png.image, &black, pixels.data(), 0, nullptr) == 0) unreadable(path, png.image.message);
  return pixels;
}

// libjpeg reports errors through a callback that must not return: it longjmps back to the decoding
// function. The functions that set the jump point hold no C++ object with a destructor between the
// setjmp and libjpeg's frames, so the jump skips nothing that needs cleaning up.
struct JpegErrors {
  jpeg_error_mgr manager;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_fail(j_common_ptr cinfo) {
  auto* errors = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, errors->message);
  std::longjmp(errors->jump, 1);
}

// Warnings (level -1) are how libjpeg reports a truncated or corrupt scan that it patched over with
// gray: treated as errors, so a damaged file is refused rather than trained on.
void jpeg_message(j_common_ptr cinfo, int level) {
  if (level < 0) jpeg_fail(cinfo);
}

struct JpegResult {
  bool ok = false;
  ImageInfo info;
  bool cmyk = false;
};

// Decodes into `pixels` (resized by the caller's second call) or only reads the header when `pixels`
// is null. Returns ok = false with errors.message set on failure.
JpegResult run_jpeg(const std::string& bytes, std::size_t channels, unsigned char* pixels, std::size_t capacity,
                    JpegErrors& errors) {
  JpegResult result;
  jpeg_decompress_struct cinfo;
  cinfo.err = jpeg_std_error(&errors.manager);
  errors.manager.error_exit = jpeg_fail;
  errors.manager.emit_message = jpeg_message;
  if (setjmp(errors.jump) != 0) {
    // `result` may have been changed since setjmp, so a fresh one (ok = false) reports the failure.
    jpeg_destroy_decompress(&cinfo);
    return JpegResult{};
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  result.info = {cinfo.image_width, cinfo.image_height, cinfo.num_components != 1};
  result.cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  if (pixels != nullptr && !result.cmyk) {
    cinfo.out_color_space = channels == 3 ? JCS_RGB : JCS_GRAYSCALE;
    jpeg_start_decompress(&cinfo);
    const std::size_t stride = std::size_t{cinfo.output_width} * channels;
    if (stride * cinfo.output_height > capacity) {
      jpeg_destroy_decompress(&cinfo);
      return result;
    }
    while (cinfo.output_scanline < cinfo.output_height) {
      JSAMPROW row = pixels + std::size_t{cinfo.output_scanline} * stride;
      jpeg_read_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_decompress(&cinfo);
  }
  jpeg_destroy_decompress(&cinfo);
  result.ok = true;
  return result;
}

ImageInfo probe_jpeg(const std::string& path, const std::string& bytes) {
  JpegErrors errors{};
  const JpegResult r = run_jpeg(bytes, 1, nullptr, 0, errors);
  if (!r.ok) unreadable(path, errors.message);
  if (r.cmyk) unreadable(path, "CMYK JPEG (expected grayscale or RGB)");
  return r.info;
}

std::vector<unsigned char> decode_jpeg(const std::string& path, const std::string& bytes, std::size_t channels,
                                       ImageInfo& info) {
  info = probe_jpeg(path, bytes);
  std::vector<unsigned char> pixels(decoded_bytes(path, info, channels));
  JpegErrors errors{};
  const JpegResult r = run_jpeg(bytes, channels, pixels.data(), pixels.size(), errors);
  if (!r.ok) unreadable(path, errors.message[0] != '\0' ? errors.message : "decoded size differs from the header's");
  return pixels;
}

[[noreturn]] void refuse_other(const std::string& path, const std::string& bytes) {
  if (bytes.empty()) unreadable(path, "the file is empty");
  unreadable(path, "neither PNG nor JPEG (judged by its first bytes)");
}

}  // namespace

ImageInfo probe_image(const std::string& path) {
  const std::string bytes = read_bytes(path);
  if (is_png(bytes)) {
    PngImage png;
    return begin_png(png, path, bytes);
  }
  if (is_jpeg(bytes)) return probe_jpeg(path, bytes);
  refuse_other(path, bytes);
}

std::vector<unsigned char> decode_image(const std::string& path, std::size_t channels, ImageInfo* info) {
  if (channels != 1 && channels != 3) {
    throw DataError(path + ": cannot decode to " + std::to_string(channels) + " channels (expected 1 or 3)");
  }
  const std::string bytes = read_bytes(path);
  ImageInfo local;
  ImageInfo& out = info != nullptr ? *info : local;
  if (is_png(bytes)) return decode_png(path, bytes, channels, out);
  if (is_jpeg(bytes)) return decode_jpeg(path, bytes, channels, out);
  refuse_other(path, bytes);
}

}  // namespace meridian::models::data
