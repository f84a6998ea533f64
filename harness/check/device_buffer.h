/// @file device_buffer.h
/// DeviceBuffer: a named, shaped device allocation that a kernel test hands to a launcher, with
/// guard bands that catch writes just outside it and poison that shows which elements a kernel
/// never wrote.
///
/// Memory layout of one buffer (one cudaMalloc):
///
///     [ front guard | payload: size() elements of T | rear guard ]
///                     ^ data()
///
/// - The guards (at least 256 bytes each, up to 64 KiB for large buffers) hold a canary byte
///   pattern (0xA5). check_guards() reads them back and names any element a kernel wrote outside
///   the payload: a missing or wrong bounds check. A write further away than the guard is not
///   seen here (on a GPU it may land in another buffer or stop the kernel with an illegal address).
/// - The payload starts poisoned: every byte 0xFF, which reads as NaN for float and bf16 and as -1
///   for integers. An output element still holding that pattern after the kernel ran was never
///   written; compare() in compare.h counts and locates such elements.
///
/// Every CUDA call is checked; a failure throws clockwork::CudaError (a std::runtime_error) naming
/// the call and the buffer.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/check/shape.h"

namespace clockwork {

/// A device allocation of `size()` elements of T with a name and a shape, guard bands on both
/// sides and a poisoned payload. T is float, int32_t, int64_t or __nv_bfloat16.
/// Not copyable (it owns device memory); movable.
template <class T>
class DeviceBuffer {
 public:
  /// Allocates the payload for `shape` plus both guards, fills the guards with the canary and
  /// the payload with poison. `name` appears in every message about this buffer.
  DeviceBuffer(std::string name, std::vector<int64_t> shape);
  /// Frees the allocation (errors are ignored: a destructor cannot report them).
  ~DeviceBuffer();

  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  /// Takes over `other`'s allocation; `other` is left empty (size 0, no memory).
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  /// Frees this buffer's memory, then takes over `other`'s.
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;

  /// Device pointer to the first payload element (what a launcher receives).
  T* data() { return payload(); }
  /// Device pointer to the first payload element.
  const T* data() const { return payload(); }
  /// Number of payload elements (the product of the shape).
  size_t size() const { return size_; }
  /// Payload size in bytes.
  size_t bytes() const { return size_ * sizeof(T); }
  /// The shape given at construction.
  const std::vector<int64_t>& shape() const { return shape_; }
  /// The name given at construction.
  const std::string& name() const { return name_; }
  /// `'q' [4 x 4096]`: the name and shape as messages print them.
  std::string label() const { return "'" + name_ + "' " + shape_string(shape_); }

  /// Copies `host` into the payload. Throws std::invalid_argument naming the buffer when
  /// host.size() != size().
  void upload(const std::vector<T>& host);
  /// Copies the payload back to the host (waits for work queued on the default stream).
  std::vector<T> download() const;
  /// Refills the payload with poison (all bytes 0xFF), e.g. before running a second kernel into
  /// the same output.
  void poison();
  /// Refills both guards with the canary, e.g. after a test provoked a guard violation on purpose.
  void reset_guards();
  /// "" when both guards are intact; otherwise one sentence per damaged guard, such as
  /// "kernel wrote 3 elements past the end of 'q' [4 x 4096] (first at +0 elements, index 16384)".
  std::string check_guards() const;

  /// Size of each guard band in bytes for a payload of `payload_bytes`: 256 bytes at least, up to
  /// the payload's own size rounded up to 256, at most 64 KiB.
  static size_t guard_bytes_for(size_t payload_bytes);

 private:
  T* payload() const { return reinterpret_cast<T*>(base_ + guard_); }
  void release() noexcept;
  [[noreturn]] void fail(const std::string& call, cudaError_t err) const;

  std::string name_;
  std::vector<int64_t> shape_;
  size_t size_ = 0;
  size_t guard_ = 0;               // bytes in each guard band
  unsigned char* base_ = nullptr;  // start of the front guard
};

extern template class DeviceBuffer<float>;
extern template class DeviceBuffer<int32_t>;
extern template class DeviceBuffer<int64_t>;
extern template class DeviceBuffer<__nv_bfloat16>;

/// Byte every guard is filled with.
inline constexpr unsigned char kCanaryByte = 0xA5;
/// Byte every payload element is filled with before a kernel runs (NaN as float/bf16, -1 as int).
inline constexpr unsigned char kPoisonByte = 0xFF;

}  // namespace clockwork
