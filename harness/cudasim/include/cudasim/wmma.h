// cudasim: CUDA's warp matrix functions (`#include <mma.h>`, namespace nvcuda::wmma) on the CPU.
//
// A cudasim build finds harness/cudasim/include/mma.h before CUDA's own, and that file includes
// this one; nvcc builds use CUDA's mma.h unchanged.
//
// Supported, as in the CUDA C++ Programming Guide ("Warp Matrix Functions"):
//   shapes 16x16x16, 32x8x16 and 8x32x16 (m x n x k); inputs __half or __nv_bfloat16, row_major or
//   col_major; accumulators float (and __half, for __half inputs); fill_fragment,
//   load_matrix_sync, store_matrix_sync (mem_row_major / mem_col_major for accumulators),
//   mma_sync, fragment::num_elements and x[i].
//
// Fragments hold as many elements per lane as on a GPU (num_elements is the GPU's). Which lane
// holds which element is unspecified in CUDA; here element e of the fragment's matrix (row-major
// numbering) is in lane e % 32, slot e / 32. Where the GPU's num_elements is larger than the
// matrix divided by 32 (__half inputs), the further slots repeat the first ones; an element-wise
// operation applied to every x[i] therefore gives the same matrix as on a GPU, and mma_sync reads
// the first copy. Code that assumes which lane holds an element is wrong on a GPU as well.
//
// load_matrix_sync, store_matrix_sync and mma_sync are warp-collective: every lane of the warp
// calls them, at the same call site; a call reached by only part of a warp stops the program
// with a diagnostic, as a divergent shuffle does. They also order the memory accesses of the
// warp's lanes like __syncwarp() (the checker sees them so). Each lane loads and stores its own
// elements, so in a checked build (CUDASIM_CHECK) the checker sees every access of a fragment,
// attributed to the lane that makes it and to the line of the call: races, bounds and
// uninitialised reads through fragments are reported like any other.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstdio>
#include <source_location>
#include <type_traits>

#include "cudasim/cudasim.h"

// Always inlined, so that the accesses the checker sees belong to the caller's line.
#define CUDASIM_WMMA_INLINE inline __attribute__((always_inline))

namespace cudasim::detail {
enum class WmmaType : uint8_t { Half, BFloat16, Float };

/// A lane's operands of one mma_sync: the element arrays of its four fragments.
struct WmmaOperands {
  const void* a;
  const void* b;
  const void* c;
  void* d;
};
struct WmmaShape {
  unsigned m, n, k;
  WmmaType ab, c, d;
};

/// The lanes of the caller's warp meet at a warp-collective wmma call (`what` at `where`): every
/// lane of a whole warp must make it.
void wmma_meet(const char* what, std::source_location where);
/// One lane's part of mma_sync: the warp's lanes meet, each computes its own elements of D from
/// all lanes' A, B and C, and they meet again before any lane may change a fragment.
void wmma_mma(const WmmaShape& shape, const WmmaOperands& mine, const char* what, std::source_location where);
/// Stops the kernel: `what` at `where` breaks a rule of the API (`problem` says which).
[[noreturn]] void wmma_refuse(const char* what, std::source_location where, const char* problem);

template <class T>
constexpr WmmaType wmma_type() {
  if constexpr (std::is_same_v<T, __half>) return WmmaType::Half;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return WmmaType::BFloat16;
  else return WmmaType::Float;
}
}  // namespace cudasim::detail

namespace nvcuda::wmma {

struct row_major;
struct col_major;
struct matrix_a;
struct matrix_b;
struct accumulator;

enum layout_t { mem_row_major, mem_col_major };

namespace detail {
constexpr bool supported_shape(int m, int n, int k) {
  return k == 16 && ((m == 16 && n == 16) || (m == 32 && n == 8) || (m == 8 && n == 32));
}
// Rows and columns of the matrix a fragment holds: A is m x k, B is k x n, C and D are m x n.
template <class Use, int m, int n, int k>
constexpr int rows() {
  return std::is_same_v<Use, matrix_b> ? k : m;
}
template <class Use, int m, int n, int k>
constexpr int cols() {
  return std::is_same_v<Use, matrix_a> ? k : n;
}
// Elements per lane, as on a GPU: __half inputs take 16 slots whatever the shape (a fragment
// layout inherited from the first tensor cores), the others the matrix's size over 32.
template <class Use, int m, int n, int k, class T>
constexpr int elements() {
  if constexpr (!std::is_same_v<Use, accumulator> && std::is_same_v<T, __half>) return 16;
  return rows<Use, m, n, k>() * cols<Use, m, n, k>() / 32;
}

template <class T, int size>
struct frag_base {
  enum { num_elements = size };
  enum { num_storage_elements = size };
  typedef T element_type;
  typedef T storage_element_type;
  T x[size];
};
}  // namespace detail

/// A warp's share of one matrix operand: each lane holds num_elements of its elements in x[].
template <class Use, int m, int n, int k, class T, class Layout = void>
class fragment : public detail::frag_base<T, detail::elements<Use, m, n, k, T>()> {
  static_assert(detail::supported_shape(m, n, k),
                "wmma: the CPU backend supports the shapes 16x16x16, 32x8x16 and 8x32x16 (m x n x k)");
  static_assert(std::is_same_v<Use, matrix_a> || std::is_same_v<Use, matrix_b> || std::is_same_v<Use, accumulator>,
                "wmma: a fragment is a matrix_a, a matrix_b or an accumulator");
  static_assert(std::is_same_v<Use, accumulator> || std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>,
                "wmma: matrix_a and matrix_b fragments hold __half or __nv_bfloat16 here");
  static_assert(!std::is_same_v<Use, accumulator> || std::is_same_v<T, float> || std::is_same_v<T, __half>,
                "wmma: accumulator fragments hold float or __half");
  static_assert(std::is_same_v<Use, accumulator> ? std::is_void_v<Layout>
                                                 : std::is_same_v<Layout, row_major> || std::is_same_v<Layout, col_major>,
                "wmma: matrix_a and matrix_b fragments need a layout (row_major or col_major); accumulators take "
                "none (it is given to load_matrix_sync and store_matrix_sync instead)");
};

/// Sets every element of the fragment (each lane its own; no warp-wide meeting, as on a GPU).
template <class Use, int m, int n, int k, class T, class Layout>
CUDASIM_WMMA_INLINE void fill_fragment(fragment<Use, m, n, k, T, Layout>& f, const T& v) {
  for (int i = 0; i < f.num_elements; ++i) f.x[i] = v;
}
// A value of another type (fill_fragment(acc, 0.0f) on a __half accumulator) converts as it would
// on a GPU.
template <class Use, int m, int n, int k, class T, class Layout, class V,
          class = std::enable_if_t<!std::is_same_v<std::decay_t<V>, T>>>
CUDASIM_WMMA_INLINE void fill_fragment(fragment<Use, m, n, k, T, Layout>& f, const V& v) {
  fill_fragment(f, static_cast<T>(v));
}

namespace detail {
template <class T>
CUDASIM_WMMA_INLINE void check_pointer_and_ldm(const char* what, const void* p, unsigned ldm,
                                                std::source_location l) {
  char problem[256];
  if (reinterpret_cast<uintptr_t>(p) % 32 != 0) {
    std::snprintf(problem, sizeof problem,
                  "the matrix pointer %p is not 32-byte aligned (it is %u bytes past a 32-byte boundary); "
                  "the GPU needs a 256-bit aligned address. Offsets into a tile must keep that alignment.",
                  p, static_cast<unsigned>(reinterpret_cast<uintptr_t>(p) % 32));
    cudasim::detail::wmma_refuse(what, l, problem);
  }
  constexpr unsigned multiple = 16 / sizeof(T);
  if (ldm % multiple != 0) {
    std::snprintf(problem, sizeof problem,
                  "ldm = %u is not a multiple of %u; the leading dimension must be a multiple of 16 bytes "
                  "(8 elements of a 16-bit type, 4 floats).",
                  ldm, multiple);
    cudasim::detail::wmma_refuse(what, l, problem);
  }
}

// Element (r, c) of a matrix at p with leading dimension ldm.
CUDASIM_WMMA_INLINE size_t offset(unsigned r, unsigned c, unsigned ldm, bool row_major_memory) {
  return row_major_memory ? static_cast<size_t>(r) * ldm + c : static_cast<size_t>(c) * ldm + r;
}

// Each lane reads its own elements (slot s: element (s mod per) * 32 + lane), once each.
template <int R, int C, class T, int size>
CUDASIM_WMMA_INLINE void load(frag_base<T, size>& f, const T* p, unsigned ldm, bool row_major_memory) {
  constexpr int per = R * C / 32;
  const unsigned lane = cudasim::detail::lane_id();
  for (int s = 0; s < per; ++s) {
    const unsigned e = static_cast<unsigned>(s) * 32 + lane;
    f.x[s] = p[offset(e / C, e % C, ldm, row_major_memory)];
  }
  for (int s = per; s < size; ++s) f.x[s] = f.x[s % per];
}

template <int R, int C, class T, int size>
CUDASIM_WMMA_INLINE void store(T* p, const frag_base<T, size>& f, unsigned ldm, bool row_major_memory) {
  constexpr int per = R * C / 32;
  const unsigned lane = cudasim::detail::lane_id();
  for (int s = 0; s < per; ++s) {
    const unsigned e = static_cast<unsigned>(s) * 32 + lane;
    p[offset(e / C, e % C, ldm, row_major_memory)] = f.x[s];
  }
}
}  // namespace detail

/// Loads an A or B tile (layout from the fragment type). p: 32-byte aligned; ldm: elements
/// between rows (row_major) or columns (col_major), a multiple of 8.
template <class Use, int m, int n, int k, class T, class Layout>
CUDASIM_WMMA_INLINE void load_matrix_sync(fragment<Use, m, n, k, T, Layout>& f, const T* p, unsigned ldm,
                                          std::source_location l = std::source_location::current()) {
  static_assert(!std::is_same_v<Use, accumulator>,
                "wmma::load_matrix_sync of an accumulator takes the memory layout: load_matrix_sync(frag, p, ldm, "
                "wmma::mem_row_major)");
  constexpr const char* what = std::is_same_v<Use, matrix_a> ? "wmma::load_matrix_sync (matrix_a)"
                                                             : "wmma::load_matrix_sync (matrix_b)";
  detail::check_pointer_and_ldm<T>(what, p, ldm, l);
  cudasim::detail::wmma_meet(what, l);
  detail::load<detail::rows<Use, m, n, k>(), detail::cols<Use, m, n, k>()>(f, p, ldm, std::is_same_v<Layout, row_major>);
}

/// Loads an accumulator tile stored with the given layout.
template <int m, int n, int k, class T>
CUDASIM_WMMA_INLINE void load_matrix_sync(fragment<accumulator, m, n, k, T>& f, const T* p, unsigned ldm, layout_t layout,
                                          std::source_location l = std::source_location::current()) {
  constexpr const char* what = "wmma::load_matrix_sync (accumulator)";
  detail::check_pointer_and_ldm<T>(what, p, ldm, l);
  cudasim::detail::wmma_meet(what, l);
  detail::load<m, n>(f, p, ldm, layout == mem_row_major);
}

/// Stores an accumulator tile with the given layout.
template <int m, int n, int k, class T>
CUDASIM_WMMA_INLINE void store_matrix_sync(T* p, const fragment<accumulator, m, n, k, T>& f, unsigned ldm, layout_t layout,
                                           std::source_location l = std::source_location::current()) {
  constexpr const char* what = "wmma::store_matrix_sync";
  detail::check_pointer_and_ldm<T>(what, p, ldm, l);
  cudasim::detail::wmma_meet(what, l);
  detail::store<m, n>(p, f, ldm, layout == mem_row_major);
}

/// D = A * B + C for the warp's tiles. The products of the 16-bit inputs are exact in float and
/// are summed in float, one k after the other starting from C. A GPU's tensor cores also multiply
/// exactly and accumulate in (at least) float, but the order (and internal rounding) of the sums
/// within one k-step is unspecified: results agree with a GPU's to the rounding of K sums, not
/// bit for bit. d may be the same fragment as c.
template <int m, int n, int k, class Ta, class La, class Tb, class Lb, class Tc, class Td>
CUDASIM_WMMA_INLINE void mma_sync(fragment<accumulator, m, n, k, Td>& d, const fragment<matrix_a, m, n, k, Ta, La>& a,
                                  const fragment<matrix_b, m, n, k, Tb, Lb>& b, const fragment<accumulator, m, n, k, Tc>& c,
                                  std::source_location l = std::source_location::current()) {
  static_assert(std::is_same_v<Ta, Tb>, "wmma::mma_sync: matrix_a and matrix_b must hold the same type");
  static_assert(std::is_same_v<Ta, __half> || (std::is_same_v<Tc, float> && std::is_same_v<Td, float>),
                "wmma::mma_sync: __nv_bfloat16 inputs need float accumulators (c and d)");
  constexpr cudasim::detail::WmmaShape shape{m, n, k, cudasim::detail::wmma_type<Ta>(), cudasim::detail::wmma_type<Tc>(),
                                             cudasim::detail::wmma_type<Td>()};
  const cudasim::detail::WmmaOperands mine{a.x, b.x, c.x, d.x};
  cudasim::detail::wmma_mma(shape, mine, "wmma::mma_sync", l);
}

}  // namespace nvcuda::wmma
