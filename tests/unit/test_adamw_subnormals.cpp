// The CPU's AdamW (a screened float loop, and a software path for the lanes where
// a subnormal could appear) against the plain loop of float operations, bit for
// bit: on values from every range (zeros of both signs, subnormals, the few
// smallest ones where moments of units that stopped firing stay, the edges of the
// normal range, ordinary, huge, infinite), with the coefficients of ordinary
// and of odd settings, and over the steps in which moments decay through the
// subnormal range to 0, as those of units that no longer fire do.
#include <catch2/catch.hpp>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "mpiddp/optim/optimizer.hpp"
#include "ops/update/cpu_adamw.hpp"

using mpiddp::ew::AdamWCoefficients;

namespace {

struct State {
  std::vector<float> p, g, m, v;
};

// One value from a range picked at random, each range as likely as the others.
float draw(std::mt19937& rng, bool nonnegative, bool finite) {
  std::uniform_int_distribution<int> range(0, finite ? 9 : 10);
  std::uniform_real_distribution<double> unit(1.0, 2.0);
  std::uniform_int_distribution<std::uint32_t> mantissa(1, 0x7fffffu);
  std::uniform_int_distribution<int> binade(-40, 0);
  double x = 0.0;
  switch (range(rng)) {
    case 0: x = 0.0; break;
    case 1: x = std::bit_cast<float>(mantissa(rng)); break;                        // subnormal
    case 2: x = 0x1p-126 * unit(rng); break;                                         // just above FLT_MIN
    case 3: x = std::ldexp(unit(rng), -126 + binade(rng) + 40); break;              // 2^-126 .. 2^-86
    case 4: x = std::ldexp(unit(rng), -100 + binade(rng) / 8); break;                // around 2^-102
    case 5: x = std::ldexp(unit(rng), -30 + binade(rng) / 2); break;                 // small
    case 6: x = std::ldexp(unit(rng), -12 + binade(rng) / 4); break;                 // ordinary
    case 7: x = std::ldexp(unit(rng), 20 + binade(rng) / 4); break;                  // large
    case 8: x = std::ldexp(unit(rng), 60); break;                                    // huge
    case 9: x = std::bit_cast<float>(mantissa(rng) % 8 + 1); break;                  // 1 to 8 times 2^-149
    default: x = std::numeric_limits<float>::infinity(); break;
  }
  float f = static_cast<float>(x);
  if (!nonnegative && (rng() & 1)) f = -f;
  return f;
}

State random_state(std::size_t n, std::mt19937& rng, bool finite) {
  State s;
  for (std::size_t i = 0; i < n; ++i) {
    s.p.push_back(draw(rng, false, finite));
    s.g.push_back(draw(rng, false, finite));
    s.m.push_back(draw(rng, false, finite));
    s.v.push_back(draw(rng, true, finite));
  }
  return s;
}

AdamWCoefficients coefficients(double lr, double beta1, double beta2, double eps, double weight_decay, int step) {
  return mpiddp::adamw_coefficients(lr, beta1, beta2, eps, weight_decay, step);
}

std::uint32_t bits(float x) { return std::bit_cast<std::uint32_t>(x); }

// Same bits, or both NaN (which NaN a sum of two NaNs keeps depends on the operand
// order the compiler chose, in either loop).
int differences(const std::vector<float>& a, const std::vector<float>& b) {
  int count = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (bits(a[i]) != bits(b[i]) && !(std::isnan(a[i]) && std::isnan(b[i]))) ++count;
  return count;
}

using Update = void (*)(float*, const float*, float*, float*, std::size_t, const AdamWCoefficients&);

// `update` and the plain loop from the same state: how many elements differ.
int compare(Update update, const State& start, const AdamWCoefficients& k) {
  State mine = start, plain = start;
  update(mine.p.data(), mine.g.data(), mine.m.data(), mine.v.data(), mine.p.size(), k);
  mpiddp::cpu::adamw_update_plain(plain.p.data(), plain.g.data(), plain.m.data(), plain.v.data(), plain.p.size(), k);
  return differences(mine.p, plain.p) + differences(mine.m, plain.m) + differences(mine.v, plain.v);
}

// No setting gives this, but the update must still be the float rule's: inf x 0 is
// NaN, so a stuck moment is not kept.
AdamWCoefficients with_infinite_one_minus_beta1(AdamWCoefficients k) {
  k.one_minus_beta1 = std::numeric_limits<float>::infinity();
  return k;
}

std::vector<AdamWCoefficients> coefficient_sets() {
  return {
      coefficients(1e-3, 0.9, 0.999, 1e-8, 1e-4, 1),     // the first step
      coefficients(1e-3, 0.9, 0.999, 1e-8, 1e-4, 1000),  // the MLP's
      coefficients(2e-9, 0.9, 0.999, 1e-8, 1e-4, 7000),  // the end of a cosine schedule
      coefficients(0.1, 0.5, 0.9, 1e-3, 0.0, 3),         // no weight decay
      coefficients(1e-3, 0.0, 0.0, 0.0, 0.5, 5),         // betas 0, eps 0
      coefficients(1e-30, 0.999, 0.999999, 1e-30, 1e10, 2),
      coefficients(1e-40, 0.9, 0.999, 1e-45, 0.0, 4),    // a subnormal step size and eps
      with_infinite_one_minus_beta1(coefficients(1e-3, 0.9, 0.999, 1e-8, 1e-4, 1000)),
  };
}

}  // namespace

TEST_CASE("AdamW on the CPU gives the plain float loop's bits on values from every range", "[optim][subnormal]") {
  const unsigned seed = 20261206;
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  int set = 0;
  for (const AdamWCoefficients& k : coefficient_sets()) {
    INFO("coefficient set " << set++);
    for (const bool finite : {true, false}) {
      const State start = random_state(4099, rng, finite);  // not a whole number of blocks or lines
      CHECK(compare(mpiddp::cpu::adamw_update, start, k) == 0);
      CHECK(compare(mpiddp::cpu::adamw_update_emulated, start, k) == 0);
    }
  }
}

TEST_CASE("AdamW on the CPU keeps the plain loop's bits while moments decay through the subnormal range",
          "[optim][subnormal]") {
  // A quarter of the weights get gradient 0 from step 50 on (units that stopped
  // firing): their first moments pass through the subnormal range to 0 within
  // about 1 000 steps, the second moments stay normal longer.
  const unsigned seed = 7;
  INFO("seed " << seed);
  std::mt19937 rng(seed);
  std::normal_distribution<float> gradient(0.0f, 1e-3f);
  const std::size_t n = 1000;
  State mine;
  for (std::size_t i = 0; i < n; ++i) mine.p.push_back(gradient(rng) * 100.0f);
  mine.m.assign(n, 0.0f);
  mine.v.assign(n, 0.0f);
  mine.g.assign(n, 0.0f);
  State plain = mine;
  int differing_steps = 0, subnormal_moments = 0;
  for (int step = 1; step <= 1500; ++step) {
    for (std::size_t i = 0; i < n; ++i) mine.g[i] = plain.g[i] = (step > 50 && i % 4 == 0) ? 0.0f : gradient(rng);
    const double lr = 1e-3 * 0.5 * (1.0 + std::cos(3.141592653589793 * step / 1500.0));  // cosine to 0
    const AdamWCoefficients k = coefficients(lr, 0.9, 0.999, 1e-8, 1e-4, step);
    mpiddp::cpu::adamw_update(mine.p.data(), mine.g.data(), mine.m.data(), mine.v.data(), n, k);
    mpiddp::cpu::adamw_update_plain(plain.p.data(), plain.g.data(), plain.m.data(), plain.v.data(), n, k);
    if (differences(mine.p, plain.p) + differences(mine.m, plain.m) + differences(mine.v, plain.v) != 0)
      ++differing_steps;
    for (float x : mine.m) subnormal_moments += std::fpclassify(x) == FP_SUBNORMAL;
  }
  CHECK(differing_steps == 0);
  CHECK(subnormal_moments > 0);  // the case this test is for did occur
}
