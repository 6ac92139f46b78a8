// data.augment: the transforms on small known images, and their hashed decisions.
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>
#include <set>

#include "mpiddp/common/error.hpp"
#include "mpiddp/data/augment.hpp"

using namespace mpiddp;

namespace {
// Pixel (c, y, x) holds 100c + 10y + x + 1, so that no pixel is zero.
std::vector<float> numbered(const ImageShape& s) {
  std::vector<float> image(s.size());
  for (std::size_t c = 0; c < s.channels; ++c)
    for (std::size_t y = 0; y < s.height; ++y)
      for (std::size_t x = 0; x < s.width; ++x)
        image[(c * s.height + y) * s.width + x] = static_cast<float>(100 * c + 10 * y + x + 1);
  return image;
}
float at(const std::vector<float>& image, const ImageShape& s, std::size_t c, std::size_t y, std::size_t x) {
  return image[(c * s.height + y) * s.width + x];
}
// What shift_image must give: out(y, x) = in(y - dy, x - dx), zero outside.
float shifted(const ImageShape& s, std::size_t c, std::ptrdiff_t y, std::ptrdiff_t x, int dx, int dy) {
  const std::ptrdiff_t sy = y - dy, sx = x - dx;
  if (sy < 0 || sx < 0 || sy >= static_cast<std::ptrdiff_t>(s.height) || sx >= static_cast<std::ptrdiff_t>(s.width))
    return 0.0f;
  return static_cast<float>(100 * c + 10 * static_cast<std::size_t>(sy) + static_cast<std::size_t>(sx) + 1);
}
std::vector<AugmentStep> steps(std::initializer_list<AugmentStep> list) { return list; }
}  // namespace

TEST_CASE("hflip reverses the columns of every row and channel", "[augment]") {
  const ImageShape s{2, 3, 4};
  std::vector<float> image = numbered(s);
  flip_columns(image.data(), s);
  for (std::size_t c = 0; c < 2; ++c)
    for (std::size_t y = 0; y < 3; ++y)
      for (std::size_t x = 0; x < 4; ++x) CHECK(at(image, s, c, y, x) == 100 * c + 10 * y + (3 - x) + 1);
  flip_columns(image.data(), s);
  CHECK(image == numbered(s));
}

TEST_CASE("a shift moves pixels, fills zeros and moves all channels together", "[augment]") {
  const ImageShape s{3, 5, 4};
  for (int dy = -4; dy <= 4; ++dy) {
    for (int dx = -3; dx <= 3; ++dx) {
      std::vector<float> image = numbered(s);
      shift_image(image.data(), s, dx, dy);
      std::size_t wrong = 0;
      for (std::size_t c = 0; c < 3; ++c)
        for (std::size_t y = 0; y < 5; ++y)
          for (std::size_t x = 0; x < 4; ++x)
            wrong += at(image, s, c, y, x) != shifted(s, c, static_cast<std::ptrdiff_t>(y),
                                                      static_cast<std::ptrdiff_t>(x), dx, dy);
      INFO("dx " << dx << " dy " << dy);
      CHECK(wrong == 0);
    }
  }
  // One case spelled out: right 1, up 2 on a 1x3x3 image.
  const ImageShape one{1, 3, 3};
  std::vector<float> image = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  shift_image(image.data(), one, 1, -2);
  CHECK(image == std::vector<float>{0, 7, 8, 0, 0, 0, 0, 0, 0});
}

TEST_CASE("decisions are a hash of (seed, epoch, index, step)", "[augment]") {
  const ImageShape s{1, 8, 8};
  const Augmenter a(steps({{AugmentKind::hflip, 0}, {AugmentKind::crop, 3}}), s, 5);
  const Augmenter same(a.steps(), s, 5), other_seed(a.steps(), s, 6);
  const int samples = 20000;
  int flips = 0, flips_next_epoch = 0, differ = 0, differ_seed = 0;
  std::set<int> dxs, dys;
  std::vector<int> dx_counts(7, 0);
  for (int i = 0; i < samples; ++i) {
    const bool f = a.flips(3, i, 0);
    flips += f;
    flips_next_epoch += a.flips(4, i, 0);
    differ += f != a.flips(4, i, 0);
    differ_seed += f != other_seed.flips(3, i, 0);
    CHECK(f == same.flips(3, i, 0));
    const Shift sh = a.shift(3, i, 1);
    const Shift again = same.shift(3, i, 1);
    CHECK((sh.dx == again.dx && sh.dy == again.dy));
    dxs.insert(sh.dx);
    dys.insert(sh.dy);
    if (sh.dx >= -3 && sh.dx <= 3) ++dx_counts[static_cast<std::size_t>(sh.dx + 3)];
  }
  // p = 0.5: 20000 draws lie within 0.5 +- 0.02 unless something is badly wrong (6 sigma).
  CHECK(std::abs(flips / double(samples) - 0.5) < 0.02);
  CHECK(std::abs(flips_next_epoch / double(samples) - 0.5) < 0.02);
  // Independent epochs and seeds: about half of the decisions change.
  CHECK(std::abs(differ / double(samples) - 0.5) < 0.02);
  CHECK(std::abs(differ_seed / double(samples) - 0.5) < 0.02);
  CHECK(dxs == std::set<int>{-3, -2, -1, 0, 1, 2, 3});
  CHECK(dys == std::set<int>{-3, -2, -1, 0, 1, 2, 3});
  for (int count : dx_counts) CHECK(std::abs(count / double(samples) - 1.0 / 7) < 0.015);

  // The same sample in another batch position, or alone, becomes the same image.
  std::vector<std::int64_t> indices = {7, 123, 7};
  Matrix batch(3, s.size());
  for (std::size_t r = 0; r < 3; ++r) {
    const auto image = numbered(s);
    std::copy(image.begin(), image.end(), batch.row(r));
  }
  a.apply(1, indices, batch);
  std::vector<float> alone = numbered(s);
  a.apply(1, 7, alone.data());
  CHECK(std::equal(alone.begin(), alone.end(), batch.row(0)));
  CHECK(std::equal(alone.begin(), alone.end(), batch.row(2)));
}

TEST_CASE("apply runs the steps in order with their own decisions", "[augment]") {
  const ImageShape s{2, 6, 5};
  const Augmenter a(steps({{AugmentKind::crop, 2}, {AugmentKind::hflip, 0}}), s, 9);
  for (std::int64_t i = 0; i < 50; ++i) {
    std::vector<float> image = numbered(s), expected = numbered(s);
    a.apply(2, i, image.data());
    const Shift sh = a.shift(2, i, 0);
    shift_image(expected.data(), s, sh.dx, sh.dy);
    if (a.flips(2, i, 1)) flip_columns(expected.data(), s);
    CHECK(image == expected);
  }
}

TEST_CASE("augmentation needs image samples and a crop that fits", "[augment]") {
  const auto shape = augment_image_shape(steps({{AugmentKind::crop, 27}}), {28, 28}, "d");
  CHECK((shape.channels == 1 && shape.height == 28 && shape.width == 28));
  const auto rgb = augment_image_shape(steps({{AugmentKind::hflip, 0}}), {3, 32, 24}, "d");
  CHECK((rgb.channels == 3 && rgb.height == 32 && rgb.width == 24));
  CHECK_THROWS_WITH(augment_image_shape(steps({{AugmentKind::hflip, 0}}), {784}, "/data/train"),
                    Catch::Contains("/data/train: key 'data.augment'") && Catch::Contains("[784]"));
  CHECK_THROWS_WITH(augment_image_shape(steps({{AugmentKind::crop, 24}}), {3, 32, 24}, "d"),
                    Catch::Contains("key 'data.augment': crop(24)") && Catch::Contains("below 24"));
  CHECK_THROWS_AS(augment_image_shape(steps({{AugmentKind::hflip, 0}}), {2, 3, 4, 5}, "d"), InputError);
}

TEST_CASE("erase(P): RandomErasing's boxes, in the share of samples P, zeroing every channel", "[augment]") {
  const ImageShape s{2, 28, 28};
  const Augmenter a(steps({{AugmentKind::erase, 0, 0.3}}), s, 11);
  const Augmenter same(a.steps(), s, 11);
  const int samples = 20000;
  int erased = 0;
  double area_share = 0.0;
  std::set<std::size_t> tops, lefts, heights;
  for (int i = 0; i < samples; ++i) {
    const Box box = a.erasure(2, i, 0);
    const Box again = same.erasure(2, i, 0);
    CHECK((box.top == again.top && box.left == again.left && box.height == again.height && box.width == again.width));
    if (box.height == 0) continue;
    ++erased;
    // Inside the image, smaller than it on both sides (torchvision's condition).
    CHECK((box.height < 28 && box.width < 28 && box.top + box.height <= 28 && box.left + box.width <= 28));
    // 2-33% of the area before rounding each side to a whole pixel; aspect 0.3-3.3 likewise.
    const double share = double(box.height * box.width) / (28 * 28);
    CHECK((share > 0.012 && share < 0.37));
    const double aspect = double(box.height) / double(box.width);
    CHECK((aspect > 0.2 && aspect < 5.0));
    area_share += share;
    tops.insert(box.top);
    lefts.insert(box.left);
    heights.insert(box.height);
  }
  // p = 0.3 (every box here fits within 10 tries): within 0.3 +- 0.02 (6 sigma).
  CHECK(std::abs(erased / double(samples) - 0.3) < 0.02);
  // The mean share of a uniform draw in [0.02, 0.33] is 0.175; rounding and the
  // boxes that do not fit move it by little.
  CHECK(std::abs(area_share / erased - 0.175) < 0.02);
  CHECK(tops.size() > 20);
  CHECK(lefts.size() > 20);
  CHECK(heights.size() > 15);

  // apply zeroes exactly the box, in every channel, and nothing else.
  for (std::int64_t i = 0; i < 40; ++i) {
    std::vector<float> image = numbered(s);
    a.apply(5, i, image.data());
    const Box box = a.erasure(5, i, 0);
    for (std::size_t c = 0; c < 2; ++c)
      for (std::size_t y = 0; y < 28; ++y)
        for (std::size_t x = 0; x < 28; ++x) {
          const bool inside = y >= box.top && y < box.top + box.height && x >= box.left && x < box.left + box.width;
          CHECK(at(image, s, c, y, x) == (inside ? 0.0f : float(100 * c + 10 * y + x + 1)));
        }
  }
}
