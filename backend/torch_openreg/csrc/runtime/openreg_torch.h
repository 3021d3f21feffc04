// openreg_torch.h - what the device sources of torch_openreg share: device
// scopes, streams, allocators and generators of the openreg PrivateUse1
// device. Only the runtime's public API (openreg.h) is used underneath.
#pragma once

#include <Python.h>

#include <string>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include "common.h"

namespace torch_openreg {

constexpr c10::DeviceType kDeviceType = c10::DeviceType::PrivateUse1;

// Number of devices of this process (OPENREG_DEVICES); 0 if the runtime
// cannot start (the error is then raised by the first real use).
c10::DeviceIndex device_count() noexcept;
// Raises c10::IndexError (IndexError in Python) for an index outside [0, count).
void check_device_index(int64_t index);
c10::DeviceIndex current_device();

// Releases the GIL for a blocking wait when the calling thread holds it
// (Python calls), and does nothing on threads without it (autograd's), so
// other Python threads run meanwhile.
class WithoutGil {
  public:
    WithoutGil() : state_(Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr) {}
    ~WithoutGil() {
        if (state_ != nullptr)
            PyEval_RestoreThread(state_);
    }
    WithoutGil(const WithoutGil &) = delete;
    WithoutGil &operator=(const WithoutGil &) = delete;

  private:
    PyThreadState *state_;
};

// Makes `index` the calling thread's current runtime device for a scope.
class DeviceScope {
  public:
    explicit DeviceScope(c10::DeviceIndex index);
    ~DeviceScope();
    DeviceScope(const DeviceScope &) = delete;
    DeviceScope &operator=(const DeviceScope &) = delete;

  private:
    int previous_;
    bool switched_;
};

// Streams: id 0 is the device's default stream (orStream_t NULL); other ids
// name streams of a per-device pool created on first use.
orStream_t stream_handle(const c10::Stream &stream);
c10::Stream current_stream(c10::DeviceIndex index);
orStream_t current_stream_handle(c10::DeviceIndex index);

c10::Allocator *device_allocator();
// Gives a device storage newsize bytes: a new block of the device allocator
// holding the old bytes up to newsize (copied on the current stream), or no
// memory at all for 0 (UntypedStorage.resize_, Tensor.resize_).
void resize_storage_bytes(const c10::Storage &storage, size_t newsize);
c10::Allocator *host_allocator();
// An asynchronous copy on device's current stream uses the pinned tensor's
// memory: the memory outlives the copy even if the tensor dies first.
void record_host_use(const at::Tensor &pinned, c10::DeviceIndex device);
// Tensor.record_stream: the memory is freed only after `stream`'s work queued
// so far, as well as its allocation stream's.
void record_data_ptr_on_stream(const c10::DataPtr &data_ptr, const c10::Stream &stream);
// Sharing with other processes: marks the caching allocator's block behind
// data_ptr as exported (freed to the arena, not cached, when its tensor dies)
// and returns the start of its orMalloc allocation; nullptr when data_ptr is
// not the caching allocator's.
void *ipc_export(const c10::DataPtr &data_ptr);

// While one lives, host code may read and write device memory (strict mode's
// window, host_access.cpp). The caller has synchronized the work it needs done.
class HostWindow {
  public:
    HostWindow();
    ~HostWindow();
    HostWindow(const HostWindow &) = delete;
    HostWindow &operator=(const HostWindow &) = delete;
};

// Charges an op that ran outside the device (the CPU fallback) on the current
// stream of `index` as if it had: a kernel that does nothing, stating the op's
// FLOPs and bytes (native.cpp's estimates) to the clock.
void charge_host_op(const c10::OperatorHandle &op, const std::vector<at::Tensor> &inputs,
                    const std::vector<at::Tensor> &outputs, c10::DeviceIndex index);

// Appends the openreg tensors of v (a tensor or a list of tensors) to into.
void device_tensors(const c10::IValue &v, std::vector<at::Tensor> &into);

// The default Philox generator of each device, and a new one (seeded with
// the default seed) for torch.Generator("openreg").
const at::Generator &default_generator(c10::DeviceIndex index);
at::Generator new_generator(c10::DeviceIndex index);

} // namespace torch_openreg
