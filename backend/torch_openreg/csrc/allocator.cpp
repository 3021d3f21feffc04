// allocator.cpp - device memory on orMalloc with memory statistics, and
// pinned host memory on orMallocHost (Tensor.pin_memory()).
//
// Frees are stream-ordered: orFree is immediate, so a tensor that dies while
// work using it is still queued on its stream must not give its memory back
// before that work has run. The free is enqueued as a host function on the
// allocation's stream (after any stream recorded with record_stream).
#include <mutex>
#include <vector>

#include <ATen/ATen.h>
#include <torch/library.h>

#include "openreg_torch.h"

namespace torch_openreg {
namespace {

struct Allocation {
    void *ptr;
    size_t size;
    c10::Stream stream; // allocated on: frees are ordered after its work
    std::mutex mutex;
    std::vector<c10::Stream> used_on; // from record_stream
    Allocation(void *p, size_t n, c10::Stream s) : ptr(p), size(n), stream(s) {}
};

struct MemoryStats {
    std::mutex mutex;
    int64_t allocated_current = 0, allocated_peak = 0;
    int64_t allocated_total = 0, freed_total = 0;
    int64_t count_current = 0, count_peak = 0, count_allocated = 0, count_freed = 0;
};

std::vector<MemoryStats> &memory_stats() {
    static std::vector<MemoryStats> stats(static_cast<size_t>(device_count()));
    return stats;
}

MemoryStats &device_stats(int64_t index) {
    check_device_index(index);
    return memory_stats().at(index);
}

void account(c10::DeviceIndex index, int64_t bytes) {
    std::vector<MemoryStats> &all = memory_stats();
    if (index < 0 || static_cast<size_t>(index) >= all.size())
        return;
    MemoryStats &s = all[index];
    std::lock_guard<std::mutex> lock(s.mutex);
    s.allocated_current += bytes;
    if (bytes > 0) {
        s.allocated_total += bytes;
        s.count_current++;
        s.count_allocated++;
        s.allocated_peak = std::max(s.allocated_peak, s.allocated_current);
        s.count_peak = std::max(s.count_peak, s.count_current);
    } else {
        s.freed_total -= bytes;
        s.count_current--;
        s.count_freed++;
    }
}

void free_now(void *user_data) {
    Allocation *a = static_cast<Allocation *>(user_data);
    OR_TORCH_WARN(orFree(a->ptr));
    delete a;
}

// The deleter may run on any thread, with any current device; it must not
// throw.
void free_device_memory(void *ctx) {
    Allocation *a = static_cast<Allocation *>(ctx);
    account(a->stream.device_index(), -static_cast<int64_t>(a->size));
    int previous = 0;
    bool switched = orGetDevice(&previous) == orSuccess && previous != a->stream.device_index() &&
                    orSetDevice(a->stream.device_index()) == orSuccess;
    // Streams other than the allocation's: wait for them here (rare).
    for (const c10::Stream &s : a->used_on) {
        try {
            OR_TORCH_WARN(orStreamSynchronize(stream_handle(s)));
        } catch (...) {
        }
    }
    orStream_t handle = nullptr;
    try {
        handle = stream_handle(a->stream);
    } catch (...) {
    }
    if (orLaunchHostFunc(handle, free_now, a) != orSuccess) {
        // The runtime refuses work (e.g. at exit): free after a full drain.
        orStreamSynchronize(handle);
        free_now(a);
    }
    if (switched)
        orSetDevice(previous);
}

class DeviceAllocator final : public c10::Allocator {
  public:
    c10::DataPtr allocate(size_t nbytes) const override {
        c10::DeviceIndex index = current_device();
        c10::Device device(kDeviceType, index);
        if (nbytes == 0)
            return c10::DataPtr(nullptr, device);
        void *ptr = nullptr;
        orError_t err = orMalloc(&ptr, nbytes);
        if (err == orErrorMemoryAllocation) {
            size_t free_bytes = 0, total = 0;
            orMemGetInfo(&free_bytes, &total);
            TORCH_CHECK_WITH(OutOfMemoryError, false, "openreg: out of memory on device ",
                             static_cast<int>(index),
                             ": tried to allocate ", nbytes, " bytes; ", free_bytes, " of ", total,
                             " bytes free (OPENREG_DEVICE_MEM sets the capacity)");
        }
        OR_TORCH_CHECK(err);
        account(index, static_cast<int64_t>(nbytes));
        Allocation *a = new Allocation(ptr, nbytes, current_stream(index));
        return c10::DataPtr(ptr, a, &free_device_memory, device);
    }
    c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
};

void free_host_memory(void *ptr) { OR_TORCH_WARN(orFreeHost(ptr)); }

class HostAllocator final : public c10::Allocator {
  public:
    c10::DataPtr allocate(size_t nbytes) const override {
        void *ptr = nullptr;
        if (nbytes > 0)
            OR_TORCH_CHECK(orMallocHost(&ptr, nbytes));
        return c10::DataPtr(ptr, ptr, &free_host_memory, c10::Device(c10::DeviceType::CPU));
    }
    c10::DeleterFnPtr raw_deleter() const override { return &free_host_memory; }
};

DeviceAllocator g_device_allocator;
HostAllocator g_host_allocator;
} // namespace

// c10::GetAllocator(PrivateUse1), for PyTorch's generic code.
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_device_allocator);

namespace {

// Pinned memory: on PyTorch 1.13, tensor.pin_memory(device) and
// tensor.is_pinned(device) dispatch on the device argument's backend.
bool is_pinned(const at::Tensor &self, c10::optional<at::Device> device) {
    TORCH_CHECK(!device.has_value() || device->type() == kDeviceType,
                "openreg: is_pinned asked for device ", *device);
    if (!self.is_cpu() || !self.has_storage())
        return false;
    const c10::DataPtr &data = self.storage().data_ptr();
    if (data.get_deleter() == &free_host_memory)
        return true;
    orPointerAttributes attr;
    OR_TORCH_CHECK(orPointerGetAttributes(&attr, data.get()));
    return attr.type == orMemoryTypeHost;
}

at::Tensor pin_memory(const at::Tensor &self, c10::optional<at::Device> device) {
    TORCH_CHECK(self.is_cpu(), "openreg: cannot pin '", self.toString(),
                "': only dense CPU tensors can be pinned");
    size_t nbytes = at::detail::computeStorageNbytes(self.sizes(), self.strides(),
                                                     self.dtype().itemsize());
    c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes, &g_host_allocator, false);
    at::Tensor pinned = at::empty({0}, self.options()).set_(storage, 0, self.sizes(),
                                                            self.strides());
    pinned.copy_(self);
    return pinned;
}

} // namespace

c10::Allocator *device_allocator() { return &g_device_allocator; }
c10::Allocator *host_allocator() { return &g_host_allocator; }

void record_data_ptr_on_stream(const c10::DataPtr &data_ptr, const c10::Stream &stream) {
    if (data_ptr.get_deleter() != &free_device_memory)
        return; // not ours (or empty): nothing to order
    Allocation *a = static_cast<Allocation *>(data_ptr.get_context());
    if (stream == a->stream)
        return;
    std::lock_guard<std::mutex> lock(a->mutex);
    for (const c10::Stream &s : a->used_on)
        if (s == stream)
            return;
    a->used_on.push_back(stream);
}

} // namespace torch_openreg

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    m.impl("is_pinned", &torch_openreg::is_pinned);
    m.impl("_pin_memory", &torch_openreg::pin_memory);
}

TORCH_OPENREG_BINDINGS(allocator) {
    using namespace torch_openreg;
    m.def("memory_stats", [](int64_t index) {
        MemoryStats &s = device_stats(index);
        std::lock_guard<std::mutex> lock(s.mutex);
        pybind11::dict d;
        d["allocated_bytes.all.current"] = s.allocated_current;
        d["allocated_bytes.all.peak"] = s.allocated_peak;
        d["allocated_bytes.all.allocated"] = s.allocated_total;
        d["allocated_bytes.all.freed"] = s.freed_total;
        d["allocation.all.current"] = s.count_current;
        d["allocation.all.peak"] = s.count_peak;
        d["allocation.all.allocated"] = s.count_allocated;
        d["allocation.all.freed"] = s.count_freed;
        return d;
    });
    m.def("reset_peak_memory_stats", [](int64_t index) {
        MemoryStats &s = device_stats(index);
        std::lock_guard<std::mutex> lock(s.mutex);
        s.allocated_peak = s.allocated_current;
        s.count_peak = s.count_current;
    });
    m.def("reset_accumulated_memory_stats", [](int64_t index) {
        MemoryStats &s = device_stats(index);
        std::lock_guard<std::mutex> lock(s.mutex);
        s.allocated_total = s.freed_total = 0;
        s.count_allocated = s.count_freed = 0;
    });
    m.def("mem_get_info", [](int64_t index) {
        check_device_index(index);
        DeviceScope scope(static_cast<c10::DeviceIndex>(index));
        size_t free_bytes = 0, total = 0;
        OR_TORCH_CHECK(orMemGetInfo(&free_bytes, &total));
        return std::make_pair(free_bytes, total);
    });
}
