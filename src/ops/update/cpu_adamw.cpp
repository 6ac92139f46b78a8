// AdamW on the CPU without subnormal stalls, bit for bit elementwise.hpp's rule.
//
// Why: weights whose gradient stays 0 (units that no longer fire) keep a first
// moment that decays by beta1 every step into the subnormal range, where it ends
// stuck at a few times 2^-149 for good (b1 m rounds back to m). On Intel CPUs a
// vector instruction that reads or writes a subnormal float waits for a microcode
// assist (100+ cycles): over the Fashion-MNIST MLP's 15 epochs that made AdamW up
// to 2.9 times its own cost, and the whole run about 20% slower than with
// subnormals flushed to zero. Flushing (FTZ/DAZ) would change results, and PyTorch
// keeps gradual underflow, so the same bits must come out.
//
// How, a cache line (16 lanes) at a time: integer tests on the bits of the moments
// and the gradient find the lanes that could meet a subnormal. A clean line runs
// the float rule as it is. A flagged line runs it with zeros in those lanes' place,
// then settles them: a stuck first moment (the common case) needs nothing more than
// its own bits back; another small moment with gradient 0 has only its own chain
// emulated; anything else has every operation emulated. Emulated means: the same
// operations in double precision, each result rounded to float's grid (gradual
// underflow included) by arithmetic that never holds a float subnormal. Rounding
// the double result of one +, -, *, / or sqrt of floats to float gives the
// correctly rounded float (53 >= 2 * 24 + 2 bits; in the subnormal range a sum of
// floats is exact and a quotient is never near a rounding midpoint), so every path
// gives the float rule's bits. The tests only decide speed: a lane they let
// through runs the float rule itself, as the plain loop does, and one that still
// meets a subnormal (a tiny parameter, a cancellation, a huge second moment: no
// training makes these) only pays the stall.
#include "cpu_adamw.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "mpiddp/common/simd.hpp"

namespace mpiddp::cpu {
namespace {

constexpr std::uint32_t kMagnitude = 0x7fffffffu;
constexpr std::uint32_t kSmallestNormal = 0x00800000u;  // FLT_MIN's bits
constexpr std::uint32_t kInfinity = 0x7f800000u;

// ---- the screen ----

// Bit patterns of magnitudes: a nonzero input below its limit could make a
// subnormal product on its way (each limit is at least FLT_MIN's, so subnormal
// inputs are caught too).
struct Screen {
  std::uint32_t m, grad, v;
  std::uint32_t stuck;  // first moments M 2^-149 with 1 <= M <= stuck are stuck (stuck_limit)
};

// The bits of the smallest float >= limit, kept within [FLT_MIN, infinity].
std::uint32_t magnitude_limit(double limit) {
  if (!(limit > 0x1p-126)) return kSmallestNormal;  // (NaN too: then only subnormals)
  if (limit >= 0x1p128) return kInfinity;
  float f = static_cast<float>(limit);
  if (static_cast<double>(f) < limit) f = std::nextafter(f, INFINITY);
  return std::max(std::bit_cast<std::uint32_t>(f), kSmallestNormal);
}
// |x| >= this keeps |c x| normal: FLT_MIN / |c|, with a margin for rounding.
std::uint32_t factor_limit(double c) {
  return c == 0.0 ? kSmallestNormal : magnitude_limit(0x1p-126 * (1.0 + 0x1p-20) / std::fabs(c));
}
bool normal_or_zero(float c) { return c == 0.0f || (std::isfinite(c) && std::fabs(c) >= 0x1p-126f); }

// A first moment m = M 2^-149 whose gradient is 0 is stuck when b1 m rounds back to
// m (M (1 - b1) < 1/2, or = 1/2 with M even: M <= 4 for b1 = 0.9): moments of units
// that stopped firing end there and stay for good. If also step m <= 2^-150, the
// step's quotient is +-0 and the parameter's update is the float rule's with m = 0.
// The largest such M (0: none), from exact double arithmetic (b1 M and step M have
// at most 47 bits).
std::uint32_t stuck_limit(const ew::AdamWCoefficients& k) {
  const double b1 = k.beta1, step = k.step_size;
  if (!(b1 >= 0.5 && b1 < 1.0) || !(step >= 0.0)) return 0;
  const auto stuck = [&](double mantissa) {
    const double gap = mantissa - b1 * mantissa;
    return (gap < 0.5 || (gap == 0.5 && std::fmod(mantissa, 2.0) == 0.0)) && step * mantissa <= 0.5;
  };
  constexpr double kMost = 0x7fffff;  // subnormal mantissas
  double last = std::min(kMost, std::floor(std::min(0.5 / (1.0 - b1), step > 0.0 ? 0.5 / step : kMost)));
  while (last > 0.0 && !stuck(last)) last -= 1.0;
  while (last < kMost && stuck(last + 1.0)) last += 1.0;
  return static_cast<std::uint32_t>(last);
}

Screen screen_for(const ew::AdamWCoefficients& k) {
  Screen s{};
  // m in b1 m, and in step (b1 m) when the gradient is 0 (the decaying moments).
  s.m = std::max(factor_limit(k.beta1), factor_limit(static_cast<double>(k.beta1) * k.step_size));
  // g in (1-b1) g, (1-b2) g and ((1-b2) g) g >= (1-b2) g^2 (1 - 2^-24)^2 (the margin covers it).
  s.grad = std::max(factor_limit(k.one_minus_beta1), factor_limit(k.one_minus_beta2));
  if (k.one_minus_beta2 != 0.0f)
    s.grad = std::max(s.grad, magnitude_limit(std::sqrt(0x1p-126 / std::fabs(static_cast<double>(k.one_minus_beta2))) *
                                              (1.0 + 0x1p-20)));
  s.v = factor_limit(k.beta2);
  // A subnormal coefficient (a learning rate or eps below about 1e-38) would stall
  // every lane, and an infinite one breaks the stuck moments' shortcut (inf x 0 is
  // NaN): then every lane with a nonzero finite moment or gradient takes the
  // software path, still exact.
  const bool usual = normal_or_zero(k.beta1) && normal_or_zero(k.one_minus_beta1) && normal_or_zero(k.beta2) &&
                     normal_or_zero(k.one_minus_beta2) && normal_or_zero(k.step_size) && normal_or_zero(k.eps) &&
                     normal_or_zero(k.decay) && normal_or_zero(k.inv_sqrt_bias2);
  if (!usual) s.m = s.grad = s.v = kInfinity;
  s.stuck = usual ? stuck_limit(k) : 0;
  return s;
}

// ---- the software path: eight lanes to a vector, in double precision ----

// Vectors pass between the helpers below by value; they are always inlined, so
// the calling convention GCC warns about (-Wpsabi, reported at the end of the file)
// never applies.
#pragma GCC diagnostic ignored "-Wpsabi"
typedef double Wide8 __attribute__((vector_size(8 * sizeof(double))));
typedef std::int64_t WideBits8 __attribute__((vector_size(8 * sizeof(std::int64_t))));
constexpr std::int64_t kWideMagnitude = 0x7fffffffffffffff;

__attribute__((always_inline)) inline Wide8 splat(double x) { return Wide8{} + x; }
// Float bits to their exact values as doubles; subnormals through integers, so the
// hardware never converts a float subnormal.
__attribute__((always_inline)) inline Wide8 value_of(IntLanes8 b) {
  const IntLanes8 a = b & static_cast<std::int32_t>(kMagnitude);
  const IntLanes8 small = a < static_cast<std::int32_t>(kSmallestNormal);
  const Lanes8 as_float = reinterpret_cast<Lanes8>(small ? IntLanes8{} + 0x3f800000 : a);  // 1.0f where small
  const Wide8 normal = __builtin_convertvector(as_float, Wide8);
  const Wide8 tiny = __builtin_convertvector(small ? a : IntLanes8{}, Wide8) * 0x1p-149;
  const Wide8 magnitude = __builtin_convertvector(small, WideBits8) ? tiny : normal;
  const WideBits8 sign = __builtin_convertvector(b, WideBits8) & ~kWideMagnitude;
  return reinterpret_cast<Wide8>(reinterpret_cast<WideBits8>(magnitude) | sign);
}
// x rounded to the nearest float (ties to even, gradual underflow), as a double.
// Below 2^-126, adding 2^-97 leaves float's subnormal spacing (2^-149) as the
// double's last place, so the sum rounds onto float's grid.
__attribute__((always_inline)) inline Wide8 to_float(Wide8 x) {
  const WideBits8 bits = reinterpret_cast<WideBits8>(x);
  const Wide8 a = reinterpret_cast<Wide8>(bits & kWideMagnitude);
  const WideBits8 small = a < 0x1p-126;
  const WideBits8 on_grid = reinterpret_cast<WideBits8>((a + 0x1p-97) - 0x1p-97) | (bits & ~kWideMagnitude);
  const Wide8 normal = __builtin_convertvector(__builtin_convertvector(small ? splat(1.0) : x, Lanes8), Wide8);
  return small ? reinterpret_cast<Wide8>(on_grid) : normal;
}
// The float bits of x, a value on float's grid.
__attribute__((always_inline)) inline IntLanes8 bits_of(Wide8 x) {
  const WideBits8 bits = reinterpret_cast<WideBits8>(x);
  const Wide8 a = reinterpret_cast<Wide8>(bits & kWideMagnitude);
  const WideBits8 small = a < 0x1p-126;
  const IntLanes8 tiny = __builtin_convertvector((small ? a : Wide8{}) * 0x1p149, IntLanes8);
  const IntLanes8 sign = __builtin_convertvector(bits >> 32, IntLanes8) & static_cast<std::int32_t>(0x80000000u);
  const IntLanes8 normal = reinterpret_cast<IntLanes8>(__builtin_convertvector(small ? splat(1.0) : x, Lanes8));
  return __builtin_convertvector(small, IntLanes8) ? (tiny | sign) : normal;
}
__attribute__((always_inline)) inline Wide8 square_root(Wide8 x) {
  Wide8 r;
  for (int j = 0; j < 8; ++j) r[j] = __builtin_sqrt(x[j]);
  return r;
}

struct WideCoefficients {  // the float coefficients, exactly, as doubles
  double decay, beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, inv_sqrt_bias2, eps;
};
WideCoefficients widen(const ew::AdamWCoefficients& k) {
  return {k.decay, k.beta1, k.one_minus_beta1, k.beta2, k.one_minus_beta2, k.step_size, k.inv_sqrt_bias2, k.eps};
}

__attribute__((always_inline)) inline Wide8 wide(Lanes8 x) { return __builtin_convertvector(x, Wide8); }

// elementwise.hpp's adamw_update with every float operation emulated, on eight
// lanes given as float bits; the results' bits replace p, m and v.
__attribute__((always_inline)) inline void emulate_all(IntLanes8 pb, IntLanes8 gb, IntLanes8 mb, IntLanes8 vb,
                                                       IntLanes8& p_out, IntLanes8& m_out, IntLanes8& v_out,
                                                       const WideCoefficients& k) {
  const Wide8 g = value_of(gb);
  const Wide8 mi = to_float(to_float(k.beta1 * value_of(mb)) + to_float(k.one_minus_beta1 * g));
  const Wide8 vi = to_float(to_float(k.beta2 * value_of(vb)) + to_float(to_float(k.one_minus_beta2 * g) * g));
  const Wide8 denom = to_float(to_float(to_float(square_root(vi)) * k.inv_sqrt_bias2) + k.eps);
  const Wide8 pi = to_float(to_float(value_of(pb) * k.decay) - to_float(to_float(k.step_size * mi) / denom));
  p_out = bits_of(pi), m_out = bits_of(mi), v_out = bits_of(vi);
}

// The same rule for lanes whose gradient is +-0 and whose second moment is clear of
// the subnormal range, given the float rule's own results for them (`denom`, and
// `shrunk` = parameter * decay): only the first moment's chain is emulated (b1 m,
// then step m', its quotient, the difference).
// Adding the gradient's +-0 term is exact, in float or in double.
__attribute__((always_inline)) inline void emulate_moment(IntLanes8 mb, Lanes8 g, Lanes8 denom, Lanes8 shrunk,
                                                          IntLanes8& p_out, IntLanes8& m_out,
                                                          const ew::AdamWCoefficients& k) {
  const Wide8 mi = to_float(static_cast<double>(k.beta1) * value_of(mb)) + wide(k.one_minus_beta1 * g);
  const Wide8 quotient = to_float(to_float(static_cast<double>(k.step_size) * mi) / wide(denom));
  p_out = bits_of(to_float(wide(shrunk) - quotient)), m_out = bits_of(mi);
}

typedef std::int32_t IntLanes16 __attribute__((vector_size(kLineFloats * sizeof(std::int32_t))));

// -1 in the lanes whose value is nonzero with a magnitude below `limit` (at most
// infinity's bits), 0 elsewhere. Sign bits of differences instead of comparisons:
// GCC 12 turned some of these comparisons into one scalar compare per lane.
__attribute__((always_inline)) inline IntLanes16 below(IntLanes16 bits, std::uint32_t limit) {
  const IntLanes16 magnitude = bits & static_cast<std::int32_t>(kMagnitude);
  return ((magnitude - static_cast<std::int32_t>(limit)) & ~(magnitude - 1)) >> 31;
}
// -1 in the lanes that are +-0.
__attribute__((always_inline)) inline IntLanes16 is_zero(IntLanes16 bits) {
  return ((bits & static_cast<std::int32_t>(kMagnitude)) - 1) >> 31;
}
// a where mask is -1, b where it is 0.
template <class Bits>
__attribute__((always_inline)) inline Bits pick(Bits mask, Bits a, Bits b) {
  return (a & mask) | (b & ~mask);
}
__attribute__((always_inline)) inline bool any_lane(IntLanes16 mask) {
  std::uint64_t words[kLineFloats / 2];
  std::memcpy(words, &mask, sizeof(words));
  std::uint64_t any = 0;
  for (std::uint64_t w : words) any |= w;
  return any != 0;
}
__attribute__((always_inline)) inline Lanes16 square_root(Lanes16 x) {
  Lanes16 r;
  for (std::size_t j = 0; j < kLineFloats; ++j) r[j] = __builtin_sqrtf(x[j]);
  return r;
}
// The low (h = 0) or high (h = 1) eight lanes of sixteen, and sixteen from two
// eights, in registers.
template <class Sixteen>
__attribute__((always_inline)) inline auto low(Sixteen x) {
  return __builtin_shufflevector(x, x, 0, 1, 2, 3, 4, 5, 6, 7);
}
template <class Sixteen>
__attribute__((always_inline)) inline auto high(Sixteen x) {
  return __builtin_shufflevector(x, x, 8, 9, 10, 11, 12, 13, 14, 15);
}
__attribute__((always_inline)) inline IntLanes16 join(IntLanes8 low_half, IntLanes8 high_half) {
  return __builtin_shufflevector(low_half, high_half, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}

// elementwise.hpp's adamw_update on 16 lanes, operation for operation, keeping the
// intermediate results the software path takes up.
struct FloatRule {
  Lanes16 m, v, denom, shrunk, param;  // m', v', sqrt(v') * bias + eps, parameter * decay, parameter'
};
__attribute__((always_inline)) inline FloatRule float_rule(Lanes16 p, Lanes16 g, Lanes16 m, Lanes16 v,
                                                           const ew::AdamWCoefficients& k) {
  FloatRule r;
  r.m = k.beta1 * m + k.one_minus_beta1 * g;
  r.v = k.beta2 * v + k.one_minus_beta2 * g * g;
  r.denom = square_root(r.v) * k.inv_sqrt_bias2 + k.eps;
  r.shrunk = p * k.decay;
  r.param = r.shrunk - k.step_size * r.m / r.denom;
  return r;
}

// The 16 lanes of a line with values the float rule must not see (the screen's
// `small_*` masks): the rule runs with zeros in their place, then those lanes'
// results are replaced.
MPIDDP_VECTOR_CLONES __attribute__((noinline))
void flagged_line(float* params, const float* grads, float* m, float* v, const ew::AdamWCoefficients& k,
                  const Screen& s, const WideCoefficients& wide_k) {
  IntLanes16 pb, gb, mb, vb;
  std::memcpy(&pb, params, sizeof(pb));
  std::memcpy(&gb, grads, sizeof(gb));
  std::memcpy(&mb, m, sizeof(mb));
  std::memcpy(&vb, v, sizeof(vb));
  const IntLanes16 small_m = below(mb, s.m), small_v = below(vb, s.v), small_g = below(gb, s.grad);
  // Only the first moment is small and the gradient is 0 (units that stopped
  // firing): the float rule's other results stand, the moment's chain is emulated.
  const IntLanes16 decaying = small_m & ~small_v & is_zero(gb);
  const IntLanes16 general = (small_m | small_v | small_g) & ~decaying;  // every operation emulated
  // Zeros in place of the inputs the float rule must not see, by integer masks: a
  // select could become a masked operation, which still stalls on what it masks off.
  const Lanes16 mm = reinterpret_cast<Lanes16>(mb & ~small_m), vv = reinterpret_cast<Lanes16>(vb & ~small_v);
  const Lanes16 g = reinterpret_cast<Lanes16>(gb & ~small_g);
  const FloatRule r = float_rule(reinterpret_cast<Lanes16>(pb), g, mm, vv, k);
  const Lanes16 denom = r.denom, shrunk = r.shrunk;
  IntLanes16 p_out = reinterpret_cast<IntLanes16>(r.param), m_out = reinterpret_cast<IntLanes16>(r.m),
             v_out = reinterpret_cast<IntLanes16>(r.v);
  // A stuck first moment (stuck_limit) keeps its bits, and the float rule's
  // parameter (with m = 0 its quotient is +-0 as well) and second moment stand,
  // unless the decayed parameter is +-0 (then the zero's sign could differ).
  const IntLanes16 stuck = decaying & below(mb, s.stuck + 1u) & ~is_zero(reinterpret_cast<IntLanes16>(shrunk));
  m_out = pick(stuck, mb, m_out);
  const IntLanes16 moving = decaying & ~stuck;
  if (any_lane(moving)) {
    IntLanes8 pe_low, me_low, pe_high, me_high;
    emulate_moment(low(mb), low(g), low(denom), low(shrunk), pe_low, me_low, k);
    emulate_moment(high(mb), high(g), high(denom), high(shrunk), pe_high, me_high, k);
    p_out = pick(moving, join(pe_low, pe_high), p_out);
    m_out = pick(moving, join(me_low, me_high), m_out);
  }
  if (any_lane(general)) {
    IntLanes8 pa_low, ma_low, va_low, pa_high, ma_high, va_high;
    emulate_all(low(pb), low(gb), low(mb), low(vb), pa_low, ma_low, va_low, wide_k);
    emulate_all(high(pb), high(gb), high(mb), high(vb), pa_high, ma_high, va_high, wide_k);
    p_out = pick(general, join(pa_low, pa_high), p_out);
    m_out = pick(general, join(ma_low, ma_high), m_out);
    v_out = pick(general, join(va_low, va_high), v_out);
  }
  std::memcpy(params, &p_out, sizeof(p_out));
  std::memcpy(m, &m_out, sizeof(m_out));
  std::memcpy(v, &v_out, sizeof(v_out));
}

// AdamW over `lines` whole cache lines (16 lanes each). Each line is screened by
// integer tests on its moments' and gradient's bits (a tiny parameter, which no
// training makes, only pays the stall); a clean line runs the float rule as it
// is, a flagged one goes through flagged_line.
MPIDDP_VECTOR_CLONES
void adamw_lines(float* params, const float* grads, float* m, float* v, std::size_t lines, ew::AdamWCoefficients k,
                 Screen s, WideCoefficients wide_k) {
  for (std::size_t line = 0; line < lines; ++line) {
    const std::size_t at = line * kLineFloats;
    IntLanes16 gb, mb, vb;
    std::memcpy(&gb, grads + at, sizeof(gb));
    std::memcpy(&mb, m + at, sizeof(mb));
    std::memcpy(&vb, v + at, sizeof(vb));
    if (any_lane(below(mb, s.m) | below(vb, s.v) | below(gb, s.grad))) {
      flagged_line(params + at, grads + at, m + at, v + at, k, s, wide_k);
      continue;
    }
    Lanes16 p;
    std::memcpy(&p, params + at, sizeof(p));
    const FloatRule r = float_rule(p, reinterpret_cast<Lanes16>(gb), reinterpret_cast<Lanes16>(mb),
                                   reinterpret_cast<Lanes16>(vb), k);
    std::memcpy(params + at, &r.param, sizeof(r.param));
    std::memcpy(m + at, &r.m, sizeof(r.m));
    std::memcpy(v + at, &r.v, sizeof(r.v));
  }
}

// Every lane through the software path (for tests), eight at a time.
MPIDDP_VECTOR_CLONES
void adamw_emulated_lines(float* params, const float* grads, float* m, float* v, std::size_t eights,
                          WideCoefficients k) {
  for (std::size_t i = 0; i < eights * 8; i += 8) {
    IntLanes8 pb, gb, mb, vb;
    std::memcpy(&pb, params + i, sizeof(pb));
    std::memcpy(&gb, grads + i, sizeof(gb));
    std::memcpy(&mb, m + i, sizeof(mb));
    std::memcpy(&vb, v + i, sizeof(vb));
    emulate_all(pb, gb, mb, vb, pb, mb, vb, k);
    std::memcpy(params + i, &pb, sizeof(pb));
    std::memcpy(m + i, &mb, sizeof(mb));
    std::memcpy(v + i, &vb, sizeof(vb));
  }
}

MPIDDP_VECTOR_CLONES
void adamw_plain_loop(float* __restrict params, const float* __restrict grads, float* __restrict m,
                      float* __restrict v, std::size_t n, ew::AdamWCoefficients k) {
  for (std::size_t i = 0; i < n; ++i) ew::adamw_update(params[i], grads[i], m[i], v[i], k);
}

// The last n < `Width` elements through `whole` (which takes whole groups of
// Width) via copies padded with zeros (zeros stay zeros: a clean lane).
template <std::size_t Width, class Whole>
void run_tail(float* params, const float* grads, float* m, float* v, std::size_t n, Whole whole) {
  if (n == 0) return;
  float p[Width] = {}, g[Width] = {}, mm[Width] = {}, vv[Width] = {};
  std::copy_n(params, n, p), std::copy_n(grads, n, g), std::copy_n(m, n, mm), std::copy_n(v, n, vv);
  whole(p, g, mm, vv);
  std::copy_n(p, n, params), std::copy_n(mm, n, m), std::copy_n(vv, n, v);
}

}  // namespace

void adamw_update(float* params, const float* grads, float* m, float* v, std::size_t n,
                  const ew::AdamWCoefficients& k) {
  const Screen screen = screen_for(k);
  const WideCoefficients wide_k = widen(k);
  const std::size_t lines = n / kLineFloats, done = lines * kLineFloats;
  adamw_lines(params, grads, m, v, lines, k, screen, wide_k);
  run_tail<kLineFloats>(params + done, grads + done, m + done, v + done, n - done,
                        [&](float* p, const float* g, float* mm, float* vv) { adamw_lines(p, g, mm, vv, 1, k, screen, wide_k); });
}

void adamw_update_plain(float* params, const float* grads, float* m, float* v, std::size_t n,
                        const ew::AdamWCoefficients& k) {
  adamw_plain_loop(params, grads, m, v, n, k);
}

void adamw_update_emulated(float* params, const float* grads, float* m, float* v, std::size_t n,
                           const ew::AdamWCoefficients& k) {
  const WideCoefficients wide_k = widen(k);
  const std::size_t eights = n / 8, done = eights * 8;
  adamw_emulated_lines(params, grads, m, v, eights, wide_k);
  run_tail<8>(params + done, grads + done, m + done, v + done, n - done,
              [&](float* p, const float* g, float* mm, float* vv) { adamw_emulated_lines(p, g, mm, vv, 1, wide_k); });
}

}  // namespace mpiddp::cpu
