#pragma once
/// @file sample_csv.hpp
/// @brief A data set's own per-sample statistics as CSV: one row per sample,
/// read into `data_spec::records`, so the planner samples batches from the
/// user's data (`"records_csv"` in a scenario's `data`, docs/planner.md).
///
/// The first line names the columns (any order, commas, no quoting; blank
/// lines and lines starting with `#` are skipped):
/// - `text_tokens` (required): text tokens of the sample;
/// - `images` (default 0): input images;
/// - the size of each input image, one of: `image_tokens` (encoder tokens
///   per image: a square image of side `patch_size x ceil(sqrt(tokens))`
///   px, so an encoder of that patch size without resizing sees at least
///   that many tokens), `image_side` (a square image of that side), or
///   `image_height` and `image_width`; required when `images` is;
/// - `generated_images` (default 0) and `generated_side` (default 512 px).
/// Every value is a non-negative integer (sizes positive); anything else is
/// `errc::parse_error` naming the line and column.
///
/// @snippet model.cpp read_sample_csv

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/model/sample.hpp"

namespace disttrain {

/// @brief How `read_sample_csv` converts image tokens to pixels.
struct sample_csv_options {
  int patch_size = 14;  ///< px per patch side for `image_tokens` (ViT-H/14, InternViT: 14)
};

namespace detail {

/// The columns `read_sample_csv` knows, in a fixed order.
enum class csv_column : std::uint8_t {
  text_tokens,
  images,
  image_tokens,
  image_side,
  image_height,
  image_width,
  generated_images,
  generated_side,
  count
};
inline constexpr std::string_view csv_column_names[] = {
    "text_tokens",  "images",      "image_tokens",     "image_side",
    "image_height", "image_width", "generated_images", "generated_side"};

inline std::vector<std::string_view> split_csv(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = line.find(',', start);
    std::string_view f =
        line.substr(start, comma == std::string_view::npos ? line.npos : comma - start);
    while (!f.empty() && (f.front() == ' ' || f.front() == '\t')) f.remove_prefix(1);
    while (!f.empty() && (f.back() == ' ' || f.back() == '\t' || f.back() == '\r'))
      f.remove_suffix(1);
    out.push_back(f);
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

inline long long csv_integer(std::string_view f, std::string_view where) {
  if (f.empty()) fail(errc::parse_error, where, "is empty");
  long long v = 0;
  for (const char c : f) {
    if (c < '0' || c > '9')
      fail(errc::parse_error, where, "expected a non-negative integer, got '", f, "'");
    v = v * 10 + (c - '0');
    if (v > 1000000000LL) fail(errc::parse_error, where, "is larger than 1e9: '", f, "'");
  }
  return v;
}

}  // namespace detail

/// @brief The samples of the CSV text in `in` (see the file comment); `source`
/// names it in errors (a file name). Ids are the row numbers from 0. Throws
/// `errc::parse_error` for a malformed line or column and
/// `invalid_argument` when there is no row.
[[nodiscard]] inline std::vector<sample> read_sample_csv(std::istream& in,
                                                         std::string_view source = "csv",
                                                         const sample_csv_options& o = {}) {
  using detail::csv_column;
  require_positive(o.patch_size, "sample_csv_options.patch_size");
  constexpr auto ncols = static_cast<std::size_t>(csv_column::count);
  std::vector<int> at(ncols, -1);  // column -> field index
  std::vector<sample> out;
  std::string line;
  std::size_t line_no = 0, fields = 0;
  bool header = false;
  while (std::getline(in, line)) {
    ++line_no;
    const std::string_view view(line);
    if (view.find_first_not_of(" \t\r") == std::string_view::npos || view.front() == '#') continue;
    const auto f = detail::split_csv(view);
    const std::string where = cat(source, ":", line_no);
    if (!header) {
      for (std::size_t i = 0; i < f.size(); ++i) {
        std::size_t c = 0;
        while (c < ncols && detail::csv_column_names[c] != f[i]) ++c;
        if (c == ncols)
          fail(errc::parse_error, where, "unknown column '", f[i],
               "' (known: text_tokens, images, image_tokens, image_side, image_height, "
               "image_width, generated_images, generated_side)");
        if (at[c] >= 0) fail(errc::parse_error, where, "column '", f[i], "' appears twice");
        at[c] = static_cast<int>(i);
      }
      if (at[0] < 0) fail(errc::parse_error, where, "has no text_tokens column");
      const bool hw = at[4] >= 0 || at[5] >= 0;
      if (hw && (at[4] < 0 || at[5] < 0))
        fail(errc::parse_error, where, "image_height and image_width go together");
      if ((at[2] >= 0) + (at[3] >= 0) + (hw ? 1 : 0) > 1)
        fail(errc::parse_error, where,
             "give one image size: image_tokens, image_side, or image_height and image_width");
      if (at[1] >= 0 && at[2] < 0 && at[3] < 0 && !hw)
        fail(errc::parse_error, where,
             "has images but no image size (image_tokens, image_side or image_height and "
             "image_width)");
      fields = f.size();
      header = true;
      continue;
    }
    if (f.size() != fields)
      fail(errc::parse_error, where, "has ", f.size(), " fields, the header ", fields);
    const auto value = [&](csv_column c, long long fallback) {
      const int i = at[static_cast<std::size_t>(c)];
      if (i < 0) return fallback;
      return detail::csv_integer(f[static_cast<std::size_t>(i)],
                                 cat(where, ".", detail::csv_column_names[static_cast<int>(c)]));
    };
    const auto positive = [&](csv_column c, long long fallback) {
      const long long v = value(c, fallback);
      if (v <= 0)
        fail(errc::parse_error, cat(where, ".", detail::csv_column_names[static_cast<int>(c)]),
             "must be > 0");
      return static_cast<int>(v);
    };
    sample s;
    s.id = out.size();
    s.text_tokens = static_cast<int>(value(csv_column::text_tokens, 0));
    const long long n = value(csv_column::images, 0);
    if (n > 0) {
      image_size im{};
      if (at[static_cast<std::size_t>(csv_column::image_tokens)] >= 0) {
        const int tokens = positive(csv_column::image_tokens, 0);
        const auto per_side = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(tokens))));
        im = image_size{per_side * o.patch_size, per_side * o.patch_size};
      } else if (at[static_cast<std::size_t>(csv_column::image_side)] >= 0) {
        const int side = positive(csv_column::image_side, 0);
        im = image_size{side, side};
      } else {
        im =
            image_size{positive(csv_column::image_height, 0), positive(csv_column::image_width, 0)};
      }
      s.images.assign(static_cast<std::size_t>(n), im);
    }
    const long long g = value(csv_column::generated_images, 0);
    if (g > 0) {
      const int side = positive(csv_column::generated_side, 512);
      s.generated.assign(static_cast<std::size_t>(g), image_size{side, side});
    }
    out.push_back(std::move(s));
  }
  if (!header) fail(errc::parse_error, source, "has no header line");
  require(!out.empty(), source, "has a header but no sample");
  return out;
}

/// @brief `read_sample_csv` of the file at `path`; `errc::invalid_argument`
/// at `path` when it cannot be opened.
[[nodiscard]] inline std::vector<sample> read_sample_csv_file(const std::string& path,
                                                              const sample_csv_options& o = {}) {
  std::ifstream f(path);
  if (!f) fail(errc::invalid_argument, path, "cannot open the file");
  return read_sample_csv(f, path, o);
}

}  // namespace disttrain
