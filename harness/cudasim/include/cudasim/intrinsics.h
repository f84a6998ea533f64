// cudasim: the device-only functions of CUDA that the host compiler does not know: integer and
// bit intrinsics, min/max, conversions with a rounding mode, the fast-math intrinsics (with a GPU's
// error, see below), and the half/bfloat16 functions cuda_fp16.h and cuda_bf16.h declare only
// for nvcc. Included by cudasim/cudasim.h.
//
// Fast-math intrinsics (__expf, __logf, __fdividef, __sinf, rsqrtf, ...) are approximations on a
// GPU. Here they are computed the way the GPU computes them where that matters (__expf multiplies
// by log2(e) in float before an exponential of base 2, so its error grows with |x|; __fdividef
// multiplies by a reciprocal that is flushed to zero for |y| > 2^126), and the result is then
// moved by a few units in the last place, deterministically (a hash of the arguments) and within
// the error bounds of the CUDA C++ Programming Guide. A test whose tolerance only an exact
// function meets fails here as it would on a GPU.
#pragma once

#include <cfenv>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

// ---- loads and stores with cache hints: plain accesses here ---------------------------------------

template <class T>
inline T __ldg(const T* p) { return *p; }
template <class T>
inline T __ldcs(const T* p) { return *p; }
template <class T>
inline T __ldcg(const T* p) { return *p; }
template <class T>
inline T __ldca(const T* p) { return *p; }
template <class T>
inline T __ldcv(const T* p) { return *p; }
template <class T>
inline T __ldlu(const T* p) { return *p; }
template <class T>
inline void __stcs(T* p, T v) { *p = v; }
template <class T>
inline void __stcg(T* p, T v) { *p = v; }
template <class T>
inline void __stwb(T* p, T v) { *p = v; }
template <class T>
inline void __stwt(T* p, T v) { *p = v; }

// ---- integer and bit intrinsics ----------------------------------------------------------------

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}
inline unsigned long long __brevll(unsigned long long x) {
  return (static_cast<unsigned long long>(__brev(static_cast<unsigned>(x))) << 32) | __brev(static_cast<unsigned>(x >> 32));
}
/// Byte i of the result is byte (s >> 4i) & 7 of the eight bytes {y, x} (x the low four).
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const unsigned long long v = (static_cast<unsigned long long>(y) << 32) | x;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= static_cast<unsigned>((v >> (8 * ((s >> (4 * i)) & 7u))) & 0xffu) << (8 * i);
  return r;
}
inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned shift) {
  const unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
  return static_cast<unsigned>((v << (shift & 31u)) >> 32);
}
inline unsigned __funnelshift_lc(unsigned lo, unsigned hi, unsigned shift) {
  const unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
  return static_cast<unsigned>((v << (shift > 32 ? 32 : shift)) >> 32);
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
  const unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
  return static_cast<unsigned>(v >> (shift & 31u));
}
inline unsigned __funnelshift_rc(unsigned lo, unsigned hi, unsigned shift) {
  const unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
  return static_cast<unsigned>(v >> (shift > 32 ? 32 : shift));
}
/// Products of the low 24 bits (the upper 8 bits of each argument are ignored, as on a GPU).
inline int __mul24(int x, int y) {
  const long long a = static_cast<int>(static_cast<unsigned>(x) << 8) >> 8, b = static_cast<int>(static_cast<unsigned>(y) << 8) >> 8;
  return static_cast<int>(static_cast<unsigned>(a * b));
}
inline unsigned __umul24(unsigned x, unsigned y) { return (x & 0xffffffu) * (y & 0xffffffu); }
inline int __mulhi(int x, int y) { return static_cast<int>((static_cast<long long>(x) * y) >> 32); }
inline unsigned __umulhi(unsigned x, unsigned y) {
  return static_cast<unsigned>((static_cast<unsigned long long>(x) * y) >> 32);
}
inline long long __mul64hi(long long x, long long y) { return static_cast<long long>((static_cast<__int128>(x) * y) >> 64); }
inline unsigned long long __umul64hi(unsigned long long x, unsigned long long y) {
  return static_cast<unsigned long long>((static_cast<unsigned __int128>(x) * y) >> 64);
}
inline unsigned __sad(int x, int y, unsigned z) { return (x > y ? static_cast<unsigned>(x - y) : static_cast<unsigned>(y - x)) + z; }
inline unsigned __usad(unsigned x, unsigned y, unsigned z) { return (x > y ? x - y : y - x) + z; }
inline int __hadd(int x, int y) { return static_cast<int>((static_cast<long long>(x) + y) >> 1); }
inline int __rhadd(int x, int y) { return static_cast<int>((static_cast<long long>(x) + y + 1) >> 1); }
inline unsigned __uhadd(unsigned x, unsigned y) { return static_cast<unsigned>((static_cast<unsigned long long>(x) + y) >> 1); }
inline unsigned __urhadd(unsigned x, unsigned y) {
  return static_cast<unsigned>((static_cast<unsigned long long>(x) + y + 1) >> 1);
}

// ---- min and max: CUDA's overloads, signed/unsigned mixes compare as unsigned ----------------------

inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned umin(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned umax(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long llmin(long long a, long long b) { return a < b ? a : b; }
inline long long llmax(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long ullmin(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long ullmax(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return umin(a, b); }
inline unsigned max(unsigned a, unsigned b) { return umax(a, b); }
inline unsigned min(int a, unsigned b) { return umin(static_cast<unsigned>(a), b); }
inline unsigned max(int a, unsigned b) { return umax(static_cast<unsigned>(a), b); }
inline unsigned min(unsigned a, int b) { return umin(a, static_cast<unsigned>(b)); }
inline unsigned max(unsigned a, int b) { return umax(a, static_cast<unsigned>(b)); }
inline long min(long a, long b) { return a < b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline unsigned long min(unsigned long a, unsigned long b) { return a < b ? a : b; }
inline unsigned long max(unsigned long a, unsigned long b) { return a > b ? a : b; }
inline unsigned long min(long a, unsigned long b) { return min(static_cast<unsigned long>(a), b); }
inline unsigned long max(long a, unsigned long b) { return max(static_cast<unsigned long>(a), b); }
inline unsigned long min(unsigned long a, long b) { return min(a, static_cast<unsigned long>(b)); }
inline unsigned long max(unsigned long a, long b) { return max(a, static_cast<unsigned long>(b)); }
inline long long min(long long a, long long b) { return llmin(a, b); }
inline long long max(long long a, long long b) { return llmax(a, b); }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return ullmin(a, b); }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return ullmax(a, b); }
inline unsigned long long min(long long a, unsigned long long b) { return ullmin(static_cast<unsigned long long>(a), b); }
inline unsigned long long max(long long a, unsigned long long b) { return ullmax(static_cast<unsigned long long>(a), b); }
inline unsigned long long min(unsigned long long a, long long b) { return ullmin(a, static_cast<unsigned long long>(b)); }
inline unsigned long long max(unsigned long long a, long long b) { return ullmax(a, static_cast<unsigned long long>(b)); }
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }
inline double min(float a, double b) { return std::fmin(static_cast<double>(a), b); }
inline double max(float a, double b) { return std::fmax(static_cast<double>(a), b); }
inline double min(double a, float b) { return std::fmin(a, static_cast<double>(b)); }
inline double max(double a, float b) { return std::fmax(a, static_cast<double>(b)); }

// ---- reinterpretation --------------------------------------------------------------------------

inline float __int_as_float(int x) { float f; std::memcpy(&f, &x, 4); return f; }
inline int __float_as_int(float x) { int i; std::memcpy(&i, &x, 4); return i; }
inline float __uint_as_float(unsigned x) { float f; std::memcpy(&f, &x, 4); return f; }
inline unsigned __float_as_uint(float x) { unsigned i; std::memcpy(&i, &x, 4); return i; }
inline double __longlong_as_double(long long x) { double d; std::memcpy(&d, &x, 8); return d; }
inline long long __double_as_longlong(double x) { long long i; std::memcpy(&i, &x, 8); return i; }
inline double __hiloint2double(int hi, int lo) {
  return __longlong_as_double(static_cast<long long>((static_cast<unsigned long long>(static_cast<unsigned>(hi)) << 32) |
                                                     static_cast<unsigned>(lo)));
}
inline int __double2hiint(double d) { return static_cast<int>(static_cast<unsigned long long>(__double_as_longlong(d)) >> 32); }
inline int __double2loint(double d) { return static_cast<int>(static_cast<unsigned>(__double_as_longlong(d))); }

// ---- conversions and arithmetic with an explicit rounding mode --------------------------------------

namespace cudasim::detail {
enum class Round { Nearest, Zero, Up, Down };

// Integer from floating point: rounded, clamped to the range, NaN -> 0 (PTX cvt semantics).
template <class I, class F>
I to_int(F x, Round r) {
  if (std::isnan(x)) return 0;
  const F v = r == Round::Nearest ? std::nearbyint(x) : r == Round::Zero ? std::trunc(x)
            : r == Round::Up      ? std::ceil(x)      : std::floor(x);
  if (v <= static_cast<F>(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (v >= static_cast<F>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}
// `exact` (representable in long double) rounded to F in direction r: round to nearest, then step
// one unit towards the wanted side if that went the wrong way.
template <class F>
F from_exact(long double exact, Round r) {
  F f = static_cast<F>(exact);
  if (r == Round::Zero && std::fabs(static_cast<long double>(f)) > std::fabs(exact)) f = std::nextafter(f, F(0));
  if (r == Round::Up && static_cast<long double>(f) < exact) f = std::nextafter(f, std::numeric_limits<F>::infinity());
  if (r == Round::Down && static_cast<long double>(f) > exact) f = std::nextafter(f, -std::numeric_limits<F>::infinity());
  return f;
}
// Runs f() with the FPU's rounding mode set; the operands are read through volatile so the
// operation cannot be moved outside.
template <class T, class Op>
T rounded(Round r, T a, T b, T c, Op op) {
  const int mode = r == Round::Zero ? FE_TOWARDZERO : r == Round::Up ? FE_UPWARD : r == Round::Down ? FE_DOWNWARD : FE_TONEAREST;
  const int old = std::fegetround();
  std::fesetround(mode);
  volatile T va = a, vb = b, vc = c;
  volatile T result = op(va, vb, vc);
  std::fesetround(old);
  return result;
}
}  // namespace cudasim::detail

#define CUDASIM_TO_INT(name, I, F)                                                                            \
  inline I name##_rn(F x) { return cudasim::detail::to_int<I>(x, cudasim::detail::Round::Nearest); }          \
  inline I name##_rz(F x) { return cudasim::detail::to_int<I>(x, cudasim::detail::Round::Zero); }             \
  inline I name##_ru(F x) { return cudasim::detail::to_int<I>(x, cudasim::detail::Round::Up); }               \
  inline I name##_rd(F x) { return cudasim::detail::to_int<I>(x, cudasim::detail::Round::Down); }
CUDASIM_TO_INT(__float2int, int, float)
CUDASIM_TO_INT(__float2uint, unsigned, float)
CUDASIM_TO_INT(__float2ll, long long, float)
CUDASIM_TO_INT(__float2ull, unsigned long long, float)
CUDASIM_TO_INT(__double2int, int, double)
CUDASIM_TO_INT(__double2uint, unsigned, double)
CUDASIM_TO_INT(__double2ll, long long, double)
CUDASIM_TO_INT(__double2ull, unsigned long long, double)
#undef CUDASIM_TO_INT

#define CUDASIM_FROM_EXACT(name, To, From)                                                                          \
  inline To name##_rn(From x) { return cudasim::detail::from_exact<To>(static_cast<long double>(x), cudasim::detail::Round::Nearest); } \
  inline To name##_rz(From x) { return cudasim::detail::from_exact<To>(static_cast<long double>(x), cudasim::detail::Round::Zero); }    \
  inline To name##_ru(From x) { return cudasim::detail::from_exact<To>(static_cast<long double>(x), cudasim::detail::Round::Up); }      \
  inline To name##_rd(From x) { return cudasim::detail::from_exact<To>(static_cast<long double>(x), cudasim::detail::Round::Down); }
CUDASIM_FROM_EXACT(__int2float, float, int)
CUDASIM_FROM_EXACT(__uint2float, float, unsigned)
CUDASIM_FROM_EXACT(__ll2float, float, long long)
CUDASIM_FROM_EXACT(__ull2float, float, unsigned long long)
CUDASIM_FROM_EXACT(__ll2double, double, long long)
CUDASIM_FROM_EXACT(__ull2double, double, unsigned long long)
CUDASIM_FROM_EXACT(__double2float, float, double)
#undef CUDASIM_FROM_EXACT
inline double __int2double_rn(int x) { return x; }
inline double __uint2double_rn(unsigned x) { return x; }

// A table of generated functions, of no interest to the documentation:
/// @cond
#define CUDASIM_ROUNDED(name, T, arity, expr)                                                                    \
  inline T name##_rz(CUDASIM_ARGS_##arity(T)) {                                                                  \
    return cudasim::detail::rounded<T>(cudasim::detail::Round::Zero, CUDASIM_PASS_##arity,                       \
                                       []([[maybe_unused]] volatile T& a, [[maybe_unused]] volatile T& b, [[maybe_unused]] volatile T& c) -> T { return expr; }); \
  }                                                                                                              \
  inline T name##_ru(CUDASIM_ARGS_##arity(T)) {                                                                  \
    return cudasim::detail::rounded<T>(cudasim::detail::Round::Up, CUDASIM_PASS_##arity,                         \
                                       []([[maybe_unused]] volatile T& a, [[maybe_unused]] volatile T& b, [[maybe_unused]] volatile T& c) -> T { return expr; }); \
  }                                                                                                              \
  inline T name##_rd(CUDASIM_ARGS_##arity(T)) {                                                                  \
    return cudasim::detail::rounded<T>(cudasim::detail::Round::Down, CUDASIM_PASS_##arity,                       \
                                       []([[maybe_unused]] volatile T& a, [[maybe_unused]] volatile T& b, [[maybe_unused]] volatile T& c) -> T { return expr; }); \
  }                                                                                                              \
  inline T name##_rn(CUDASIM_ARGS_##arity(T)) {                                                                  \
    return cudasim::detail::rounded<T>(cudasim::detail::Round::Nearest, CUDASIM_PASS_##arity,                    \
                                       []([[maybe_unused]] volatile T& a, [[maybe_unused]] volatile T& b, [[maybe_unused]] volatile T& c) -> T { return expr; }); \
  }
#define CUDASIM_ARGS_1(T) T x
#define CUDASIM_ARGS_2(T) T x, T y
#define CUDASIM_ARGS_3(T) T x, T y, T z
#define CUDASIM_PASS_1 x, x, x
#define CUDASIM_PASS_2 x, y, y
#define CUDASIM_PASS_3 x, y, z
CUDASIM_ROUNDED(__fadd, float, 2, a + b)
CUDASIM_ROUNDED(__fsub, float, 2, a - b)
CUDASIM_ROUNDED(__fmul, float, 2, a * b)
CUDASIM_ROUNDED(__fdiv, float, 2, a / b)
CUDASIM_ROUNDED(__fmaf, float, 3, std::fma(static_cast<float>(a), static_cast<float>(b), static_cast<float>(c)))
CUDASIM_ROUNDED(__frcp, float, 1, 1.0f / a)
CUDASIM_ROUNDED(__fsqrt, float, 1, std::sqrt(static_cast<float>(a)))
CUDASIM_ROUNDED(__dadd, double, 2, a + b)
CUDASIM_ROUNDED(__dsub, double, 2, a - b)
CUDASIM_ROUNDED(__dmul, double, 2, a * b)
CUDASIM_ROUNDED(__ddiv, double, 2, a / b)
CUDASIM_ROUNDED(__fma, double, 3, std::fma(static_cast<double>(a), static_cast<double>(b), static_cast<double>(c)))
CUDASIM_ROUNDED(__drcp, double, 1, 1.0 / a)
CUDASIM_ROUNDED(__dsqrt, double, 1, std::sqrt(static_cast<double>(a)))
#undef CUDASIM_ROUNDED
#undef CUDASIM_ARGS_1
#undef CUDASIM_ARGS_2
#undef CUDASIM_ARGS_3
#undef CUDASIM_PASS_1
#undef CUDASIM_PASS_2
#undef CUDASIM_PASS_3
/// @endcond
inline float __frsqrt_rn(float x) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(x))); }
inline float __saturatef(float x) { return std::isnan(x) ? 0.0f : x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
inline float saturate(float x) { return __saturatef(x); }

// ---- fast-math intrinsics with a GPU's error ---------------------------------------------------------

namespace cudasim::detail {
inline uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}
inline uint32_t bits_of(float x) { uint32_t u; std::memcpy(&u, &x, 4); return u; }
/// `v` moved by 1..max_ulps units in the last place, up or down, as chosen by `seed`.
inline float ulp_error(float v, uint32_t seed, int max_ulps) {
  if (!std::isfinite(v) || v == 0.0f || max_ulps <= 0) return v;
  const uint32_t h = mix32(seed);
  const int k = 1 + static_cast<int>(h % static_cast<uint32_t>(max_ulps));
  const float towards = (h & 0x80000000u) ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
  float r = v;
  for (int i = 0; i < k; ++i) r = std::nextafter(r, towards);
  return std::isfinite(r) ? r : v;
}
/// `v` moved by up to `max_abs` (at least a quarter of it), up or down, as chosen by `seed`.
inline float abs_error(float v, uint32_t seed, float max_abs) {
  if (!std::isfinite(v)) return v;
  const uint32_t h = mix32(seed);
  const float t = 0.25f + 0.75f * static_cast<float>(h & 0xffffu) / 65535.0f;
  return v + ((h & 0x80000000u) ? t : -t) * max_abs;
}
// The errors below are chosen so that each intrinsic stays within its documented bound with the
// roundings of the operations around the approximation included.
/// ex2.approx.ftz.f32: 2^x, one unit in the last place off; denormal results flush to zero.
inline float ex2_approx(float x) {
  const float r = static_cast<float>(std::exp2(static_cast<double>(x)));
  if (r != 0.0f && std::fabs(r) < std::numeric_limits<float>::min()) return 0.0f;
  return ulp_error(r, bits_of(x) ^ 0x2e2u, 1);
}
/// lg2.approx.ftz.f32: log2(x), off by up to 2^-22.3 in [0.5, 2] and one unit in the last place
/// elsewhere.
inline float lg2_approx(float x) {
  const float r = static_cast<float>(std::log2(static_cast<double>(x)));
  if (x >= 0.5f && x <= 2.0f) return abs_error(r, bits_of(x) ^ 0x1e2u, 0x1p-22f * 0.8f);
  return ulp_error(r, bits_of(x) ^ 0x1e2u, 1);
}
/// rcp.approx.ftz.f32: 1/y within 1 ulp; a result below 2^-126 is flushed to zero.
inline float rcp_approx(float y) {
  const float r = 1.0f / y;
  if (r != 0.0f && std::fabs(r) < std::numeric_limits<float>::min()) return std::copysign(0.0f, r);
  return ulp_error(r, bits_of(y) ^ 0x7c9u, 1);
}
// sin.approx/cos.approx reduce the argument in float, so the error grows with |x| outside [-pi, pi].
inline float reduce_2pi(float x) { return x - std::nearbyint(x * 0.159154943f) * 6.28318548f; }
}  // namespace cudasim::detail

/// Max ulp error 2 + floor(|1.173 x|) (CUDA C++ Programming Guide, intrinsic functions).
inline float __expf(float x) { return cudasim::detail::ex2_approx(x * 1.44269502f); }
/// Max ulp error 2 + floor(|2.97 x|).
inline float __exp10f(float x) { return cudasim::detail::ex2_approx(x * 3.32192802f); }
/// For x in [0.5, 2] absolute error 2^-21.41, otherwise 3 ulp.
inline float __logf(float x) { return cudasim::detail::lg2_approx(x) * 0.693147182f; }
/// For x in [0.5, 2] absolute error 2^-22, otherwise 2 ulp.
inline float __log2f(float x) { return cudasim::detail::lg2_approx(x); }
/// For x in [0.5, 2] absolute error 2^-24, otherwise 3 ulp.
inline float __log10f(float x) { return cudasim::detail::lg2_approx(x) * 0.301029995f; }
/// 2 ulp for 2^-126 <= |y| <= 2^126; for 2^126 < |y| < 2^128 the result is 0 (NaN for infinite x).
inline float __fdividef(float x, float y) { return x * cudasim::detail::rcp_approx(y); }
inline float fdividef(float x, float y) { return x / y; }
/// For x in [-pi, pi] absolute error 2^-21.41, larger outside.
inline float __sinf(float x) {
  using namespace cudasim::detail;
  return abs_error(static_cast<float>(std::sin(static_cast<double>(reduce_2pi(x)))), bits_of(x) ^ 0x51u,
                   0.8f * 3.5888e-07f /* 2^-21.41 */);
}
/// For x in [-pi, pi] absolute error 2^-21.19, larger outside.
inline float __cosf(float x) {
  using namespace cudasim::detail;
  return abs_error(static_cast<float>(std::cos(static_cast<double>(reduce_2pi(x)))), bits_of(x) ^ 0xc0u,
                   0.8f * 4.1800e-07f /* 2^-21.19 */);
}
inline void __sincosf(float x, float* s, float* c) {
  *s = __sinf(x);
  *c = __cosf(x);
}
inline float __tanf(float x) { return __fdividef(__sinf(x), __cosf(x)); }
/// exp2(y * log2(x)) from the two approximations above.
inline float __powf(float x, float y) { return cudasim::detail::ex2_approx(y * cudasim::detail::lg2_approx(x)); }
/// rsqrtf is approximate in CUDA's math library too: max 2 ulp.
inline float rsqrtf(float x) {
  return cudasim::detail::ulp_error(static_cast<float>(1.0 / std::sqrt(static_cast<double>(x))),
                                    cudasim::detail::bits_of(x) ^ 0x5f3u, 2);
}
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __fmaf_ieee_rn(float a, float b, float c) { return std::fma(a, b, c); }

// ---- math functions of CUDA that the C library lacks ----------------------------------------------

inline float sinpif(float x) { return static_cast<float>(std::sin(M_PI * static_cast<double>(x))); }
inline float cospif(float x) { return static_cast<float>(std::cos(M_PI * static_cast<double>(x))); }
inline double sinpi(double x) { return std::sin(M_PI * x); }
inline double cospi(double x) { return std::cos(M_PI * x); }
inline void sincospif(float x, float* s, float* c) {
  *s = sinpif(x);
  *c = cospif(x);
}
inline void sincospi(double x, double* s, double* c) {
  *s = sinpi(x);
  *c = cospi(x);
}
inline float rcbrtf(float x) { return 1.0f / std::cbrt(x); }
inline double rcbrt(double x) { return 1.0 / std::cbrt(x); }
inline float rhypotf(float x, float y) { return 1.0f / std::hypot(x, y); }
inline double rhypot(double x, double y) { return 1.0 / std::hypot(x, y); }
inline float norm3df(float a, float b, float c) { return static_cast<float>(std::sqrt(double(a) * a + double(b) * b + double(c) * c)); }
inline float rnorm3df(float a, float b, float c) { return 1.0f / norm3df(a, b, c); }
inline float norm4df(float a, float b, float c, float d) {
  return static_cast<float>(std::sqrt(double(a) * a + double(b) * b + double(c) * c + double(d) * d));
}
inline float rnorm4df(float a, float b, float c, float d) { return 1.0f / norm4df(a, b, c, d); }
inline double normcdf(double x) { return 0.5 * std::erfc(-x / M_SQRT2); }
inline float normcdff(float x) { return static_cast<float>(normcdf(x)); }
/// Inverse error function: Newton's method on erf from a closed-form first guess.
inline double erfinv(double y) {
  if (y <= -1.0) return y == -1.0 ? -INFINITY : NAN;
  if (y >= 1.0) return y == 1.0 ? INFINITY : NAN;
  const double w = -std::log((1.0 - y) * (1.0 + y));
  double x = std::copysign(std::sqrt(std::sqrt((4.330746750799873 + w / 2) * (4.330746750799873 + w / 2) - w / 0.147) -
                                     (4.330746750799873 + w / 2)),
                           y);
  for (int i = 0; i < 4; ++i) x -= (std::erf(x) - y) / (2.0 / std::sqrt(M_PI) * std::exp(-x * x));
  return x;
}
inline float erfinvf(float y) { return static_cast<float>(erfinv(y)); }
inline double erfcinv(double y) { return erfinv(1.0 - y); }
inline float erfcinvf(float y) { return static_cast<float>(erfcinv(y)); }
inline double normcdfinv(double p) { return -M_SQRT2 * erfcinv(2.0 * p); }
inline float normcdfinvf(float p) { return static_cast<float>(normcdfinv(p)); }

// ---- half and bfloat16 functions that cuda_fp16.h / cuda_bf16.h declare only for nvcc ------------------

namespace cudasim::detail {
inline float to_f(__half h) { return __half2float(h); }
inline float to_f(__nv_bfloat16 h) { return __bfloat162float(h); }
template <class H>
H from_f(float f) {
  if constexpr (std::is_same_v<H, __half>) return __float2half_rn(f);
  else return __float2bfloat16_rn(f);
}
template <class H>
H from_d(double d) {
  if constexpr (std::is_same_v<H, __half>) return __double2half(d);
  else return __double2bfloat16(d);
}
template <class H>
H fma_rn(H a, H b, H c) {  // a*b is exact in double; one rounding to H, as on a GPU
  return from_d<H>(static_cast<double>(to_f(a)) * to_f(b) + to_f(c));
}
template <class H>
H relu(H v) { return std::isnan(to_f(v)) ? v : to_f(v) < 0.0f ? from_f<H>(0.0f) : v; }
template <class H>
H sat(H v) { const float f = to_f(v); return from_f<H>(std::isnan(f) ? 0.0f : f < 0.0f ? 0.0f : f > 1.0f ? 1.0f : f); }
}  // namespace cudasim::detail

#define CUDASIM_HALF_MATH(name, expr)                                                                               \
  inline __half h##name(__half v) { const float x = cudasim::detail::to_f(v); return __float2half_rn(expr); }        \
  inline __nv_bfloat16 h##name(__nv_bfloat16 v) {                                                                    \
    const float x = cudasim::detail::to_f(v);                                                                        \
    return __float2bfloat16_rn(expr);                                                                                \
  }                                                                                                                  \
  inline __half2 h2##name(__half2 v) { return __halves2half2(h##name(v.x), h##name(v.y)); }                          \
  inline __nv_bfloat162 h2##name(__nv_bfloat162 v) { return __halves2bfloat162(h##name(v.x), h##name(v.y)); }
CUDASIM_HALF_MATH(exp, std::exp(x))
CUDASIM_HALF_MATH(exp2, std::exp2(x))
CUDASIM_HALF_MATH(exp10, std::pow(10.0f, x))
CUDASIM_HALF_MATH(log, std::log(x))
CUDASIM_HALF_MATH(log2, std::log2(x))
CUDASIM_HALF_MATH(log10, std::log10(x))
CUDASIM_HALF_MATH(sin, std::sin(x))
CUDASIM_HALF_MATH(cos, std::cos(x))
CUDASIM_HALF_MATH(tanh, std::tanh(x))
CUDASIM_HALF_MATH(tanh_approx, std::tanh(x))
CUDASIM_HALF_MATH(sqrt, std::sqrt(x))
CUDASIM_HALF_MATH(rsqrt, 1.0f / std::sqrt(x))
CUDASIM_HALF_MATH(rcp, 1.0f / x)
CUDASIM_HALF_MATH(ceil, std::ceil(x))
CUDASIM_HALF_MATH(floor, std::floor(x))
CUDASIM_HALF_MATH(rint, std::nearbyint(x))
CUDASIM_HALF_MATH(trunc, std::trunc(x))
#undef CUDASIM_HALF_MATH

#define CUDASIM_HALF_FMA(H, H2, make2)                                                                              \
  inline H __hfma(H a, H b, H c) { return cudasim::detail::fma_rn(a, b, c); }                                       \
  inline H __hfma_relu(H a, H b, H c) { return cudasim::detail::relu(__hfma(a, b, c)); }                            \
  inline H __hfma_sat(H a, H b, H c) { return cudasim::detail::sat(__hfma(a, b, c)); }                              \
  inline H2 __hfma2(H2 a, H2 b, H2 c) { return make2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)); }               \
  inline H2 __hfma2_relu(H2 a, H2 b, H2 c) { return make2(__hfma_relu(a.x, b.x, c.x), __hfma_relu(a.y, b.y, c.y)); } \
  inline H2 __hfma2_sat(H2 a, H2 b, H2 c) { return make2(__hfma_sat(a.x, b.x, c.x), __hfma_sat(a.y, b.y, c.y)); }    \
  /* complex multiply-add: (a.x + i a.y)(b.x + i b.y) + c */                                                         \
  inline H2 __hcmadd(H2 a, H2 b, H2 c) {                                                                             \
    using cudasim::detail::to_f;                                                                                     \
    const double re = double(to_f(a.x)) * to_f(b.x) - double(to_f(a.y)) * to_f(b.y) + to_f(c.x);                     \
    const double im = double(to_f(a.x)) * to_f(b.y) + double(to_f(a.y)) * to_f(b.x) + to_f(c.y);                     \
    return make2(cudasim::detail::from_d<H>(re), cudasim::detail::from_d<H>(im));                                    \
  }
CUDASIM_HALF_FMA(__half, __half2, __halves2half2)
CUDASIM_HALF_FMA(__nv_bfloat16, __nv_bfloat162, __halves2bfloat162)
#undef CUDASIM_HALF_FMA

#define CUDASIM_HALF_TO_INT(name, H)                                                                   \
  inline int name##_rn(H h) { return __float2int_rn(cudasim::detail::to_f(h)); }                       \
  inline int name##_ru(H h) { return __float2int_ru(cudasim::detail::to_f(h)); }                       \
  inline int name##_rd(H h) { return __float2int_rd(cudasim::detail::to_f(h)); }
CUDASIM_HALF_TO_INT(__half2int, __half)
CUDASIM_HALF_TO_INT(__bfloat162int, __nv_bfloat16)
#undef CUDASIM_HALF_TO_INT

// Integers to bfloat16 with a directed rounding: to float in that direction, then to bfloat16 in
// the same direction (rounding twice in one direction is rounding once).
#define CUDASIM_INT_TO_BF16(name, I, conv)                                                             \
  inline __nv_bfloat16 name##_rz(I v) { return __float2bfloat16_rz(conv##_rz(v)); }                    \
  inline __nv_bfloat16 name##_ru(I v) { return __float2bfloat16_ru(conv##_ru(v)); }                    \
  inline __nv_bfloat16 name##_rd(I v) { return __float2bfloat16_rd(conv##_rd(v)); }
CUDASIM_INT_TO_BF16(__int2bfloat16, int, __int2float)
CUDASIM_INT_TO_BF16(__uint2bfloat16, unsigned, __uint2float)
CUDASIM_INT_TO_BF16(__ll2bfloat16, long long, __ll2float)
CUDASIM_INT_TO_BF16(__ull2bfloat16, unsigned long long, __ull2float)
CUDASIM_INT_TO_BF16(__short2bfloat16, int, __int2float)
CUDASIM_INT_TO_BF16(__ushort2bfloat16, unsigned, __uint2float)
#undef CUDASIM_INT_TO_BF16
