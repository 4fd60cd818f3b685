#include "runtime/DeviceArray.h"

#include "compiler/ir/Buffer.h"
#include "runtime/CudaDriver.h"
#include "runtime/Device.h"

#include <algorithm>
#include <utility>

namespace tessel {

DeviceArray::DeviceArray(DataType dtype, std::vector<int64_t> shape, Device *device)
    : DeviceArray(dtype, std::move(shape), {}, device) {}

DeviceArray::DeviceArray(DataType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides,
                         Device *device)
    : dtype_(dtype), shape_(std::move(shape)), strides_(std::move(strides)),
      device_(device ? device : &Device::get()) {
  user_check(!dtype.is_handle() && dtype.bits() % 8 == 0, "DeviceArray")
      << "cannot store elements of type " << dtype << " (whole bytes per element needed)";
  for (int64_t extent : shape_)
    user_check(extent >= 0, "DeviceArray") << "negative extent " << extent << " in shape";
  user_check(strides_.empty() || strides_.size() == shape_.size(), "DeviceArray")
      << shape_.size() << " dimensions but " << strides_.size() << " strides";
  for (int64_t s : strides_)
    user_check(s >= 1, "DeviceArray") << "stride " << s << " (strides are at least 1 element)";
  numel_ = storage_elements(shape_, strides_);
  device_->make_current();
  // cuMemAlloc rejects 0 bytes; allocate one element so data() is a valid distinct pointer.
  int64_t n = std::max<int64_t>(bytes(), dtype_.bytes());
  TESSEL_CU(cuMemAlloc_v2, &ptr_, static_cast<size_t>(n));
}

DeviceArray::~DeviceArray() { release(); }

void DeviceArray::release() noexcept {
  if (!ptr_)
    return;
  // A destructor must not throw; a failed free (a dead context after a kernel fault) can only
  // leak, and the fault itself was or will be reported by the call that observed it.
  const CudaDriver &d = CudaDriver::instance();
  d.cuCtxSetCurrent(device_->context());
  d.cuMemFree_v2(ptr_);
  ptr_ = 0;
}

DeviceArray::DeviceArray(DeviceArray &&o) noexcept
    : dtype_(o.dtype_), shape_(std::move(o.shape_)), strides_(std::move(o.strides_)),
      numel_(o.numel_),
      ptr_(std::exchange(o.ptr_, 0)), device_(o.device_) {
  o.numel_ = 0;
}

DeviceArray &DeviceArray::operator=(DeviceArray &&o) noexcept {
  if (this != &o) {
    release();
    dtype_ = o.dtype_;
    shape_ = std::move(o.shape_);
    strides_ = std::move(o.strides_);
    numel_ = std::exchange(o.numel_, 0);
    ptr_ = std::exchange(o.ptr_, 0);
    device_ = o.device_;
  }
  return *this;
}

Device &DeviceArray::device() const {
  internal_check(device_) << "device() of an empty DeviceArray";
  return *device_;
}

void DeviceArray::check_element_size(size_t elem_bytes, int64_t count, const char *what) const {
  user_check(static_cast<int64_t>(elem_bytes) == dtype_.bytes(), what)
      << "host element of " << elem_bytes << " bytes for a DeviceArray of " << dtype_ << " ("
      << dtype_.bytes() << " bytes)";
  user_check(count == numel_, what)
      << count << " host elements for a DeviceArray of " << numel_ << " elements";
}

void DeviceArray::copy_from_host(const void *src, int64_t n) {
  user_check(defined(), "copy_from_host") << "the DeviceArray is empty (moved from?)";
  user_check(n == bytes(), "copy_from_host") << n << " bytes given, array holds " << bytes();
  device_->make_current();
  if (n)
    TESSEL_CU(cuMemcpyHtoD_v2, ptr_, src, static_cast<size_t>(n));
}

void DeviceArray::copy_to_host(void *dst, int64_t n) const {
  user_check(defined(), "copy_to_host") << "the DeviceArray is empty (moved from?)";
  user_check(n == bytes(), "copy_to_host") << n << " bytes asked for, array holds " << bytes();
  device_->make_current();
  if (n)
    TESSEL_CU(cuMemcpyDtoH_v2, dst, ptr_, static_cast<size_t>(n));
}

void DeviceArray::copy_from(const DeviceArray &src) {
  user_check(defined() && src.defined(), "copy_from") << "an empty DeviceArray";
  user_check(src.bytes() == bytes(), "copy_from")
      << "source holds " << src.bytes() << " bytes, destination " << bytes();
  device_->make_current();
  if (bytes()) {
    TESSEL_CU(cuMemcpyDtoD_v2, ptr_, src.ptr_, static_cast<size_t>(bytes()));
    // The device-to-device copy is asynchronous with respect to the host; make it behave like
    // the other copies.
    TESSEL_CU(cuCtxSynchronize);
  }
}

void DeviceArray::fill_bytes(uint8_t byte) {
  user_check(defined(), "fill_bytes") << "the DeviceArray is empty (moved from?)";
  device_->make_current();
  TESSEL_CU(cuMemsetD8_v2, ptr_, byte, static_cast<size_t>(std::max<int64_t>(bytes(), 1)));
  TESSEL_CU(cuCtxSynchronize);
}

} // namespace tessel
