// ipc.cpp - openreg memory shared between processes (torch.multiprocessing).
//
// The producer names the orMalloc allocation behind a storage with
// orIpcGetMemHandle and sends the handle, the storage's offset in the
// allocation and its size (torch_openreg/multiprocessing.py pickles them with
// the tensor's dtype, sizes, strides and offset). The consumer opens the
// handle and builds a tensor over the opened memory itself: the same bytes,
// not a copy. Its DataPtr's deleter closes the handle.
//
// Work queued on the producer's current stream is complete when the handle is
// sent. Rule, as CUDA's: the producer keeps the tensor alive as long as consumers
// use it. The producer's block is then never cached for reuse
// (allocator.cpp): once its tensor dies the allocation is freed, and opening
// a handle of it afterwards raises RuntimeError.
#include <cstring>
#include <string>
#include <tuple>

#include <ATen/ATen.h>
#include <c10/core/TensorImpl.h>

#include "bindings.h"
#include "runtime/openreg_torch.h"

namespace torch_openreg {
namespace {

// The context of an opened allocation: the pointer orIpcOpenMemHandle gave.
void close_ipc_memory(void *ctx) {
    OR_TORCH_WARN(orIpcCloseMemHandle(ctx));
}

// (device index, handle bytes, storage offset in the allocation, storage bytes)
std::tuple<int64_t, pybind11::bytes, int64_t, int64_t> ipc_share(const at::Tensor &self) {
    TORCH_CHECK(self.device().type() == kDeviceType, "openreg: ipc_share takes an openreg tensor, "
                "got one on ", self.device());
    const c10::Storage &storage = self.storage();
    const c10::DataPtr &data_ptr = storage.data_ptr();
    TORCH_CHECK(data_ptr.get_deleter() != &close_ipc_memory,
                "openreg: this tensor's memory was received from another process; only the "
                "process that allocated it can share it");
    void *base = ipc_export(data_ptr);
    TORCH_CHECK(base != nullptr, "openreg: cannot share this tensor with another process: its "
                "memory does not come from openreg's caching allocator");
    orIpcMemHandle_t handle;
    {
        DeviceScope scope(self.device().index());
        OR_TORCH_CHECK(orIpcGetMemHandle(&handle, base));
        // The consumer reads what the producer's stream has written so far:
        // CUDA's consumer waits for an event the producer records; the
        // runtime has no events between processes, so the producer waits for
        // its current stream here, before the handle leaves.
        WithoutGil no_gil;
        OR_TORCH_SYNC(orStreamSynchronize(current_stream_handle(self.device().index())));
    }
    int64_t offset = static_cast<const char *>(data_ptr.get()) - static_cast<const char *>(base);
    return {self.device().index(),
            pybind11::bytes(reinterpret_cast<const char *>(&handle), sizeof handle), offset,
            static_cast<int64_t>(storage.nbytes())};
}

at::Tensor ipc_open(const std::string &handle_bytes, int64_t storage_offset_bytes,
                    int64_t storage_nbytes, int64_t device, at::ScalarType dtype,
                    at::IntArrayRef sizes, at::IntArrayRef strides, int64_t offset) {
    check_device_index(device);
    TORCH_CHECK(handle_bytes.size() == sizeof(orIpcMemHandle_t), "openreg: an IPC handle is ",
                sizeof(orIpcMemHandle_t), " bytes, got ", handle_bytes.size());
    TORCH_CHECK(storage_offset_bytes >= 0 && storage_nbytes >= 0,
                "openreg: a shared storage's offset and size must not be negative");
    orIpcMemHandle_t handle;
    std::memcpy(&handle, handle_bytes.data(), sizeof handle);
    c10::Device dev(kDeviceType, static_cast<c10::DeviceIndex>(device));
    void *base = nullptr;
    orError_t err;
    {
        DeviceScope scope(dev.index());
        WithoutGil no_gil;
        err = orIpcOpenMemHandle(&base, handle, orIpcMemLazyEnablePeerAccess);
    }
    TORCH_CHECK(err == orSuccess, "openreg: cannot open the shared memory of a tensor from "
                "another process: ", orGetErrorName(err), " (", orGetErrorString(err), "). ",
                err == orErrorInvalidDevicePointer
                    ? "Its producer freed it (or exited): the producer must keep a shared "
                      "tensor alive while other processes use it."
                    : err == orErrorInvalidResourceHandle
                          ? "The handle was not made by this process's parent (or job): "
                            "openreg shares memory with processes started by the producer "
                            "(torch.multiprocessing spawn), under OPENREG_IPC_CHILDREN=1."
                          : "");
    c10::DataPtr data_ptr(static_cast<char *>(base) + storage_offset_bytes, base,
                          &close_ipc_memory, dev);
    c10::Storage storage(c10::Storage::use_byte_size_t(), static_cast<size_t>(storage_nbytes),
                         std::move(data_ptr), /*allocator=*/nullptr, /*resizable=*/false);
    auto tensor = at::detail::make_tensor<c10::TensorImpl>(
        std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
        c10::scalarTypeToTypeMeta(dtype));
    tensor.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides, offset);
    return tensor;
}

} // namespace
} // namespace torch_openreg

TORCH_OPENREG_BINDINGS(ipc) {
    using namespace torch_openreg;
    m.def("_ipc_share", &ipc_share, pybind11::arg("tensor"));
    m.def("_ipc_open", &ipc_open, pybind11::arg("handle"), pybind11::arg("storage_offset_bytes"),
          pybind11::arg("storage_nbytes"), pybind11::arg("device"), pybind11::arg("dtype"),
          pybind11::arg("sizes"), pybind11::arg("strides"), pybind11::arg("offset"));
}
