/// @file cuda_check.h
/// `CUDA_CHECK(call)`: the one error check used after every CUDA runtime call and right after every
/// kernel launch (`CUDA_CHECK(cudaGetLastError())`).
///
/// A failing call throws clockwork::CudaError, whose message names the source file and line, the
/// call as written, and the error's name and description, plus a hint for the errors students meet
/// most often. GoogleTest reports an exception escaping a test as that test's failure, with the
/// message, so a broken launch shows up as a readable failure instead of garbage output.
///
/// This header is included by kernel sources: it must stay tiny and free of libtorch.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace clockwork {

/// A CUDA runtime call that returned an error; code() is the cudaError_t it returned.
class CudaError : public std::runtime_error {
 public:
  /// @param code     what the runtime returned
  /// @param message  the full, human-readable description
  CudaError(cudaError_t code, const std::string& message)
      : std::runtime_error(message), code_(code) {}

  /// The error code the failing call returned.
  cudaError_t code() const noexcept { return code_; }

 private:
  cudaError_t code_;
};

namespace detail {

/// One sentence of advice for the errors a kernel course runs into most, or "" for the others.
inline const char* cuda_error_hint(cudaError_t err) {
  switch (err) {
    case cudaErrorInvalidConfiguration:
      return "check the launch: 1 to 1024 threads per block, at least one block, grid y and z at "
             "most 65535, and no more shared memory than the device allows";
    case cudaErrorInvalidValue:
      // CUDA 13 also reports a rejected launch configuration this way.
      return "check the arguments: a host pointer where a device pointer belongs, a swapped copy "
             "direction, or more bytes than the allocation holds; after a kernel launch, check the "
             "launch: 1 to 1024 threads per block, at least one block, grid y and z at most "
             "65535, and no more shared memory than the device allows";
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
      return "a kernel accessed memory outside its buffers; the error shows at the next call that "
             "waits for the GPU, not necessarily at the guilty launch (the CPU backend, or "
             "compute-sanitizer, names the exact access)";
    case cudaErrorMemoryAllocation:
      return "the device is out of memory";
    default:
      return "";
  }
}

/// Builds the message and throws clockwork::CudaError. Clears the runtime's last-error slot first,
/// so a later `CUDA_CHECK(cudaGetLastError())` does not report this failure a second time.
[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* call, const char* file,
                                          int line) {
  (void)cudaGetLastError();
  std::string msg = std::string(file) + ":" + std::to_string(line) + ": " + call +
                    " failed: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
  const std::string hint = cuda_error_hint(err);
  if (!hint.empty()) msg += "; " + hint;
  throw CudaError(err, msg);
}

}  // namespace detail
}  // namespace clockwork

/// Evaluates `expr` (a CUDA runtime call returning cudaError_t) once and throws
/// clockwork::CudaError if it did not return cudaSuccess.
#define CUDA_CHECK(expr)                                                                     \
  do {                                                                                       \
    const cudaError_t clockwork_cuda_err_ = (expr);                                          \
    if (clockwork_cuda_err_ != cudaSuccess) {                                                \
      ::clockwork::detail::throw_cuda_error(clockwork_cuda_err_, #expr, __FILE__, __LINE__); \
    }                                                                                        \
  } while (0)
