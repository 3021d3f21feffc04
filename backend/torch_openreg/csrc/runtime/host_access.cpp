// host_access.cpp - host code that reads and writes device memory directly:
// the C++ kernels torch.compile (Inductor) generates for the openreg device,
// and torch_openreg.host_access() for user code. Device memory is host memory
// (the runtime's arenas are mapped in the process), with two conditions:
//
//  - work is asynchronous: before the host touches the memory, the work
//    queued on the device's current stream must be done, so entering host
//    access synchronizes that stream. Work queued on it after the host code
//    returns is ordered after it by construction (the host code has run).
//  - strict mode (OPENREG_STRICT=1) keeps device memory PROT_NONE outside
//    runtime operations: host access opens an orMemoryUnprotect window and
//    closes it (orMemoryProtect) on exit. Windows are counted per process, so
//    host accesses nest and may overlap between threads.
//
// orMemoryUnprotect/orMemoryProtect only validate their pointer, which must
// lie in a live device allocation: this file keeps one small allocation of
// its own for that, made on first use.
#include <atomic>
#include <mutex>
#include <vector>

#include "bindings.h"
#include "runtime/openreg_torch.h"

namespace torch_openreg {

namespace {

void *window_token() {
    static std::once_flag once;
    static void *token = nullptr;
    std::call_once(once, [] {
        DeviceScope scope(0);
        OR_TORCH_CHECK(orMalloc(&token, 1));
    });
    return token;
}

// Host accesses entered, per device (the tests count generated kernels).
std::vector<std::atomic<int64_t>> &entry_counts() {
    static std::vector<std::atomic<int64_t>> counts(
        static_cast<size_t>(std::max<int>(device_count(), 1)));
    return counts;
}

void enter(int64_t index, bool sync) {
    check_device_index(index);
    void *token = window_token();
    if (sync) {
        auto device = static_cast<c10::DeviceIndex>(index);
        orStream_t stream = current_stream_handle(device);
        DeviceScope scope(device);
        WithoutGil no_gil;
        OR_TORCH_SYNC(orStreamSynchronize(stream));
    }
    OR_TORCH_CHECK(orMemoryUnprotect(token));
    entry_counts()[static_cast<size_t>(index)]++;
}

void leave() { OR_TORCH_CHECK(orMemoryProtect(window_token())); }

// A reusable context manager for one device: `with access: kernel(...)`.
struct HostAccess {
    int64_t device;
    bool sync;
    HostAccess &enter_() {
        enter(device, sync);
        return *this;
    }
    bool exit_(const pybind11::args &) {
        leave();
        return false; // exceptions propagate
    }
};

} // namespace

HostWindow::HostWindow() { OR_TORCH_CHECK(orMemoryUnprotect(window_token())); }
HostWindow::~HostWindow() { OR_TORCH_WARN(orMemoryProtect(window_token())); }

} // namespace torch_openreg

TORCH_OPENREG_BINDINGS(host_access) {
    using namespace torch_openreg;
    namespace py = pybind11;
    py::class_<HostAccess>(m, "_HostAccess")
        .def(py::init([](int64_t device, bool sync) {
                 check_device_index(device);
                 return HostAccess{device, sync};
             }),
             py::arg("device"), py::arg("sync") = true)
        .def_readonly("device", &HostAccess::device)
        .def("__enter__", &HostAccess::enter_, py::return_value_policy::reference)
        .def("__exit__", &HostAccess::exit_);
    m.def("_memory_unprotect", []() { OR_TORCH_CHECK(orMemoryUnprotect(window_token())); });
    m.def("_memory_protect", []() { leave(); });
    m.def("_host_access_count", [](int64_t index) {
        check_device_index(index);
        return entry_counts()[static_cast<size_t>(index)].load();
    });
}
