// DeviceBuffer: one cudaMalloc holding front guard, payload and rear guard (see device_buffer.h).
// Only the CUDA runtime API is used, so this object links against libcudart and the CPU backend
// alike.
#include "harness/check/device_buffer.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "harness/check/cuda_check.h"

// The CPU backend's checker is told which part of each allocation is the buffer a kernel gets,
// and its name: an access to a guard band is then reported at once, as element i of 'name'.
// Weak: libcudart has no such function, and the same object links against both.
extern "C" void cudasim_name_allocation(const void* base, const void* view, size_t view_bytes, size_t elem_bytes,
                                        const char* label) __attribute__((weak));

namespace clockwork {

namespace {

constexpr size_t kMinGuard = 256;        // also cudaMalloc's alignment: the payload stays aligned
constexpr size_t kMaxGuard = 64 * 1024;  // catches one stray row of up to 16384 floats

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

std::string elements(size_t n) {
  return std::to_string(n) + (n == 1 ? " element" : " elements");
}

}  // namespace

template <class T>
size_t DeviceBuffer<T>::guard_bytes_for(size_t payload_bytes) {
  return std::clamp(round_up(payload_bytes, kMinGuard), kMinGuard, kMaxGuard);
}

template <class T>
DeviceBuffer<T>::DeviceBuffer(std::string name, std::vector<int64_t> shape)
    : name_(std::move(name)), shape_(std::move(shape)) {
  try {
    size_ = element_count(shape_);
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument("DeviceBuffer " + label() + ": every dimension must be >= 0");
  }
  guard_ = guard_bytes_for(bytes());
  void* p = nullptr;
  if (cudaError_t err = cudaMalloc(&p, bytes() + 2 * guard_)) {
    fail("cudaMalloc of " + std::to_string(bytes()) + " bytes plus two guards of " +
             std::to_string(guard_),
         err);
  }
  base_ = static_cast<unsigned char*>(p);
  if (cudasim_name_allocation) cudasim_name_allocation(base_, payload(), bytes(), sizeof(T), label().c_str());
  try {
    reset_guards();
    poison();
  } catch (...) {
    release();
    throw;
  }
}

template <class T>
DeviceBuffer<T>::~DeviceBuffer() {
  release();
}

template <class T>
DeviceBuffer<T>::DeviceBuffer(DeviceBuffer&& other) noexcept
    : name_(std::move(other.name_)),
      shape_(std::move(other.shape_)),
      size_(std::exchange(other.size_, 0)),
      guard_(std::exchange(other.guard_, 0)),
      base_(std::exchange(other.base_, nullptr)) {}

template <class T>
DeviceBuffer<T>& DeviceBuffer<T>::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    name_ = std::move(other.name_);
    shape_ = std::move(other.shape_);
    size_ = std::exchange(other.size_, 0);
    guard_ = std::exchange(other.guard_, 0);
    base_ = std::exchange(other.base_, nullptr);
  }
  return *this;
}

template <class T>
void DeviceBuffer<T>::release() noexcept {
  if (base_) (void)cudaFree(base_);
  base_ = nullptr;
}

template <class T>
void DeviceBuffer<T>::fail(const std::string& call, cudaError_t err) const {
  (void)cudaGetLastError();  // the error is reported here; do not let it resurface later
  std::string msg = "DeviceBuffer " + label() + ": " + call + " failed: " + cudaGetErrorName(err) +
                    " (" + cudaGetErrorString(err) + ")";
  const std::string hint = detail::cuda_error_hint(err);
  if (!hint.empty()) msg += "; " + hint;
  throw CudaError(err, msg);
}

template <class T>
void DeviceBuffer<T>::upload(const std::vector<T>& host) {
  if (host.size() != size_) {
    throw std::invalid_argument("upload to " + label() + ": got " + elements(host.size()) +
                                ", the buffer holds " + std::to_string(size_));
  }
  if (size_ == 0) return;
  if (cudaError_t err = cudaMemcpy(payload(), host.data(), bytes(), cudaMemcpyHostToDevice)) {
    fail("cudaMemcpy (upload, host to device)", err);
  }
}

template <class T>
std::vector<T> DeviceBuffer<T>::download() const {
  std::vector<T> host(size_);
  if (size_ == 0) return host;
  if (cudaError_t err = cudaMemcpy(host.data(), payload(), bytes(), cudaMemcpyDeviceToHost)) {
    fail("cudaMemcpy (download, device to host)", err);
  }
  return host;
}

template <class T>
void DeviceBuffer<T>::poison() {
  if (size_ == 0) return;
  if (cudaError_t err = cudaMemset(payload(), kPoisonByte, bytes())) {
    fail("cudaMemset (poisoning the payload)", err);
  }
}

template <class T>
void DeviceBuffer<T>::reset_guards() {
  if (!base_) return;
  if (cudaError_t err = cudaMemset(base_, kCanaryByte, guard_)) {
    fail("cudaMemset (front guard)", err);
  }
  if (cudaError_t err = cudaMemset(base_ + guard_ + bytes(), kCanaryByte, guard_)) {
    fail("cudaMemset (rear guard)", err);
  }
}

template <class T>
std::string DeviceBuffer<T>::check_guards() const {
  if (!base_) return "";
  std::vector<unsigned char> front(guard_), rear(guard_);
  if (cudaError_t err = cudaMemcpy(front.data(), base_, guard_, cudaMemcpyDeviceToHost)) {
    fail("cudaMemcpy (reading the front guard)", err);
  }
  if (cudaError_t err =
          cudaMemcpy(rear.data(), base_ + guard_ + bytes(), guard_, cudaMemcpyDeviceToHost)) {
    fail("cudaMemcpy (reading the rear guard)", err);
  }
  // Guard slot j holds the bytes an element at that position would occupy; a slot is damaged when
  // any of its bytes lost the canary.
  auto damaged = [](const std::vector<unsigned char>& g, size_t slot) {
    for (size_t b = 0; b < sizeof(T); ++b) {
      if (g[slot * sizeof(T) + b] != kCanaryByte) return true;
    }
    return false;
  };
  const size_t slots = guard_ / sizeof(T);
  std::string out;

  // Front guard: slot j (from the start of the guard) is element index -(slots - j).
  size_t n_front = 0, nearest = 0, farthest = 0;
  for (size_t j = 0; j < slots; ++j) {
    if (!damaged(front, j)) continue;
    const size_t dist = slots - j;
    if (n_front == 0) farthest = dist;
    nearest = dist;
    ++n_front;
  }
  if (n_front) {
    out += "kernel wrote " + elements(n_front) + " before the start of " + label() +
           " (nearest at -" + std::to_string(nearest) + " elements, index -" +
           std::to_string(nearest);
    if (farthest != nearest) out += "; farthest at index -" + std::to_string(farthest);
    out += ")";
  }

  // Rear guard: slot j is element index size() + j.
  size_t n_rear = 0, first = 0, last = 0;
  for (size_t j = 0; j < slots; ++j) {
    if (!damaged(rear, j)) continue;
    if (n_rear == 0) first = j;
    last = j;
    ++n_rear;
  }
  if (n_rear) {
    if (!out.empty()) out += "; ";
    out += "kernel wrote " + elements(n_rear) + " past the end of " + label() + " (first at +" +
           std::to_string(first) + " elements, index " + std::to_string(size_ + first);
    if (last != first) out += "; last at index " + std::to_string(size_ + last);
    out += ")";
  }
  return out;
}

template class DeviceBuffer<float>;
template class DeviceBuffer<int32_t>;
template class DeviceBuffer<int64_t>;
template class DeviceBuffer<__nv_bfloat16>;

}  // namespace clockwork
