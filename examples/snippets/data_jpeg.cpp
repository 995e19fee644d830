// The JPEG examples of the data part (data/image.hpp, data/jpeg.hpp): built
// and run as snippets.data_jpeg when disttrain::jpeg (libturbojpeg) exists.
// See snippets.hpp for the layout.
#include <cstdint>
#include <vector>

#include "disttrain/data/image.hpp"
#include "disttrain/data/jpeg.hpp"
#include "snippets.hpp"

namespace {

using snippets::check;

// A 64 x 48 RGB gradient.
std::vector<std::uint8_t> gradient_pixels() {
  std::vector<std::uint8_t> p(64 * 48 * 3);
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = static_cast<std::uint8_t>(i % 251);
  return p;
}

void image() {
  const auto bytes =
      disttrain::encode_jpeg({640, 480, 3, std::vector<std::uint8_t>(640 * 480 * 3, 128)});
  //! [image]
  disttrain::image_u8 img = disttrain::decode_jpeg(bytes, "sample 3.image");
  auto small = disttrain::resize_bilinear(img, 224, 224);
  std::vector<float> patches = disttrain::patchify(small, 14);  // 256 patches x 14*14*3
  //! [image]
  check(img.width == 640 && small.width == 224, "decoded and resized");
  check(patches.size() == 256 * 14 * 14 * 3, "256 patches of 14 x 14 x 3");
}

void jpeg() {
  const std::vector<std::uint8_t> pixels = gradient_pixels();
  //! [jpeg]
  disttrain::image_u8 img{64, 48, 3, pixels};
  auto bytes = disttrain::encode_jpeg(img, 90);
  auto back = disttrain::decode_jpeg(bytes, "sample 3.image");  // 64x48 RGB
  //! [jpeg]
  check(back.width == 64 && back.height == 48 && back.channels == 3, "64x48 RGB");
}

}  // namespace

int main() {
  snippets::runner r("data_jpeg");
  r.run("image", image);
  r.run("jpeg", jpeg);
  return r.finish();
}
