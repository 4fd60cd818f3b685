// A typed, shaped buffer in GPU global memory.
#pragma once

#include "compiler/ir/Type.h"
#include "compiler/support/Error.h"

#include <cuda.h>

#include <cstdint>
#include <vector>

namespace tessel {

class Device;

/// Owns one cuMemAlloc'd block; freed on destruction. Move-only. Element values are raw bytes
/// in the dtype's layout: fp16 and bf16 as 16-bit patterns (see runtime/Half.h).
class DeviceArray {
public:
  DeviceArray() = default;
  /// Allocates (uninitialized) dtype[shape] on `device` (the default device when null).
  DeviceArray(DataType dtype, std::vector<int64_t> shape, Device *device = nullptr);
  /// Likewise laid out with `strides` (in elements, each at least 1; empty: dense row-major):
  /// storage_elements(shape, strides) elements, what a strided placeholder's argument spans.
  DeviceArray(DataType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides,
              Device *device = nullptr);
  ~DeviceArray();
  DeviceArray(DeviceArray &&other) noexcept;
  DeviceArray &operator=(DeviceArray &&other) noexcept;
  DeviceArray(const DeviceArray &) = delete;
  DeviceArray &operator=(const DeviceArray &) = delete;

  /// Allocates and copies `values` in; sizeof(T) must be the dtype's size.
  template <typename T>
  static DeviceArray from_vector(DataType dtype, std::vector<int64_t> shape,
                                 const std::vector<T> &values, Device *device = nullptr) {
    DeviceArray a(dtype, std::move(shape), device);
    a.copy_from(values);
    return a;
  }

  bool defined() const { return ptr_ != 0; }
  DataType dtype() const { return dtype_; }
  const std::vector<int64_t> &shape() const { return shape_; }
  /// Empty: dense row-major.
  const std::vector<int64_t> &strides() const { return strides_; }
  /// The elements it holds: storage_elements(shape(), strides()).
  int64_t numel() const { return numel_; }
  int64_t bytes() const { return numel_ * dtype_.bytes(); }
  CUdeviceptr data() const { return ptr_; }
  Device &device() const;

  /// Raw copies; `bytes` must equal bytes().
  void copy_from_host(const void *src, int64_t bytes);
  void copy_to_host(void *dst, int64_t bytes) const;
  /// Device-to-device copy from an array of the same size.
  void copy_from(const DeviceArray &src);

  template <typename T> void copy_from(const std::vector<T> &values) {
    check_element_size(sizeof(T), static_cast<int64_t>(values.size()), "copy_from");
    copy_from_host(values.data(), bytes());
  }
  template <typename T> std::vector<T> to_vector() const {
    std::vector<T> out(static_cast<size_t>(numel_));
    check_element_size(sizeof(T), numel_, "to_vector");
    copy_to_host(out.data(), bytes());
    return out;
  }

  /// Sets every byte to `byte` (synchronous).
  void fill_bytes(uint8_t byte);
  /// Fills with 0xFF bytes: NaN for fp32/fp16/bf16, -1 for signed integers, so an output the
  /// kernel forgot to write cannot pass a numerical check by accident.
  void poison() { fill_bytes(0xff); }

private:
  void check_element_size(size_t elem_bytes, int64_t count, const char *what) const;
  void release() noexcept;

  DataType dtype_;
  std::vector<int64_t> shape_;
  std::vector<int64_t> strides_;
  int64_t numel_ = 0;
  CUdeviceptr ptr_ = 0;
  Device *device_ = nullptr;
};

} // namespace tessel
