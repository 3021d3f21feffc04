// device.cpp - devices, streams and events of the runtime as PyTorch sees
// them: the PrivateUse1 device guard (what torch.empty(device=...) and every
// device switch go through) and the Python bindings of devices, streams and
// events.
#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "bindings.h"
#include "runtime/openreg_torch.h"

namespace torch_openreg {

namespace {
std::atomic<bool> g_started{false}; // the runtime answered a call
}

c10::DeviceIndex device_count() noexcept {
    int count = 0;
    if (orGetDeviceCount(&count) != orSuccess)
        return 0;
    g_started = true;
    return static_cast<c10::DeviceIndex>(count);
}

void check_device_index(int64_t index) {
    int count = 0;
    OR_TORCH_CHECK(orGetDeviceCount(&count));
    TORCH_CHECK_INDEX(index >= 0 && index < count, "openreg: invalid device index ", index,
                      ": this process has ", count, " openreg device(s) (OPENREG_DEVICES)");
}

c10::DeviceIndex current_device() {
    int index = 0;
    OR_TORCH_CHECK(orGetDevice(&index));
    return static_cast<c10::DeviceIndex>(index);
}

DeviceScope::DeviceScope(c10::DeviceIndex index) : previous_(0), switched_(false) {
    OR_TORCH_CHECK(orGetDevice(&previous_));
    if (previous_ != index) {
        OR_TORCH_CHECK(orSetDevice(index));
        switched_ = true;
    }
}

DeviceScope::~DeviceScope() {
    if (switched_)
        OR_TORCH_WARN(orSetDevice(previous_));
}

namespace {

// Per device: kPoolSize streams of normal and kPoolSize of high priority,
// handed out round robin as CUDA's pool does. Pool streams live as long as
// the process, so a c10::Stream (a bare id) can never dangle.
constexpr int kPoolSize = 8;
constexpr c10::StreamId kHighPriorityBase = 1 + kPoolSize;

struct DeviceStreams {
    std::once_flag created;
    std::array<orStream_t, 2 * kPoolSize + 1> handles{};
    std::atomic<unsigned> next_normal{0}, next_high{0};
};

std::vector<std::unique_ptr<DeviceStreams>> &stream_pools() {
    static std::vector<std::unique_ptr<DeviceStreams>> pools = [] {
        std::vector<std::unique_ptr<DeviceStreams>> v;
        for (c10::DeviceIndex i = 0; i < device_count(); i++)
            v.emplace_back(new DeviceStreams());
        return v;
    }();
    return pools;
}

DeviceStreams &device_streams(c10::DeviceIndex index) {
    check_device_index(index);
    DeviceStreams &pool = *stream_pools().at(index);
    std::call_once(pool.created, [&] {
        DeviceScope scope(index);
        int least = 0, greatest = 0;
        OR_TORCH_CHECK(orDeviceGetStreamPriorityRange(&least, &greatest));
        pool.handles[0] = nullptr; // the default stream
        for (int i = 0; i < kPoolSize; i++) {
            OR_TORCH_CHECK(orStreamCreateWithPriority(&pool.handles[1 + i], 0, least));
            OR_TORCH_CHECK(
                orStreamCreateWithPriority(&pool.handles[kHighPriorityBase + i], 0, greatest));
        }
    });
    return pool;
}

// The current stream of each device, per thread, as in CUDA.
std::vector<c10::StreamId> &thread_current_streams() {
    thread_local std::vector<c10::StreamId> ids(static_cast<size_t>(device_count()), 0);
    return ids;
}

c10::Stream make_stream(c10::DeviceIndex index, c10::StreamId id) {
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kDeviceType, index), id);
}

c10::Stream pool_stream(c10::DeviceIndex index, bool high_priority) {
    DeviceStreams &pool = device_streams(index);
    if (high_priority)
        return make_stream(index, kHighPriorityBase + pool.next_high++ % kPoolSize);
    return make_stream(index, 1 + pool.next_normal++ % kPoolSize);
}

void set_current_stream(const c10::Stream &stream) {
    check_device_index(stream.device_index());
    thread_current_streams().at(stream.device_index()) = stream.id();
}

} // namespace

orStream_t stream_handle(const c10::Stream &stream) {
    TORCH_CHECK(stream.device_type() == kDeviceType, "openreg: ", stream,
                " is not a stream of an openreg device");
    TORCH_CHECK(stream.id() >= 0 && stream.id() <= 2 * kPoolSize, "openreg: unknown stream id ",
                stream.id());
    return device_streams(stream.device_index()).handles[stream.id()];
}

c10::Stream current_stream(c10::DeviceIndex index) {
    check_device_index(index);
    return make_stream(index, thread_current_streams().at(index));
}

orStream_t current_stream_handle(c10::DeviceIndex index) {
    return stream_handle(current_stream(index));
}

namespace {

// The PrivateUse1 guard: device switches, streams and events for PyTorch's
// generic code (DeviceGuard, StreamGuard, autograd's device threads).
struct OpenRegGuardImpl final : public c10::impl::DeviceGuardImplInterface {
    c10::DeviceType type() const override { return kDeviceType; }

    // torch.device("openreg") without an index means the current device.
    static c10::DeviceIndex index_of(c10::Device d) {
        return d.has_index() ? d.index() : current_device();
    }

    c10::Device exchangeDevice(c10::Device d) const override {
        c10::Device old = getDevice();
        if (old.index() != d.index())
            setDevice(d);
        return old;
    }
    c10::Device getDevice() const override { return c10::Device(kDeviceType, current_device()); }
    void setDevice(c10::Device d) const override {
        TORCH_CHECK(d.type() == kDeviceType, "openreg: not an openreg device: ", d);
        check_device_index(d.index());
        OR_TORCH_CHECK(orSetDevice(d.index()));
    }
    void uncheckedSetDevice(c10::Device d) const noexcept override {
        OR_TORCH_WARN(orSetDevice(d.index()));
    }

    c10::Stream getStream(c10::Device d) const noexcept override {
        const std::vector<c10::StreamId> &ids = thread_current_streams();
        int current = 0;
        if (!d.has_index())
            (void)orGetDevice(&current); // noexcept: device 0 if the runtime is down
        c10::DeviceIndex index = d.has_index() ? d.index() : static_cast<c10::DeviceIndex>(current);
        c10::StreamId id =
            index >= 0 && static_cast<size_t>(index) < ids.size() ? ids[index] : 0;
        return make_stream(index, id);
    }
    c10::Stream getDefaultStream(c10::Device d) const override {
        return make_stream(index_of(d), 0);
    }
    c10::Stream getStreamFromGlobalPool(c10::Device d, bool high_priority) const override {
        return pool_stream(index_of(d), high_priority);
    }
    // torch.Stream(device="openreg") and generic code asking for a new
    // stream get one of the pool, as on CUDA the pool's streams are reused.
    c10::Stream getNewStream(c10::Device d, int priority) const override {
        return pool_stream(index_of(d), priority < 0);
    }
    c10::Stream exchangeStream(c10::Stream s) const noexcept override {
        c10::StreamId &slot = thread_current_streams().at(s.device_index());
        c10::Stream old = make_stream(s.device_index(), slot);
        slot = s.id();
        return old;
    }
    c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }

    // Events are created lazily on the device of the stream they are first
    // recorded on, as CUDA's are.
    void record(void **event, const c10::Stream &stream, const c10::DeviceIndex device_index,
                const c10::EventFlag flag) const override {
        TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                    "openreg: event device ", static_cast<int>(device_index),
                    " does not match the recording stream's device ",
                    static_cast<int>(stream.device_index()));
        DeviceScope scope(stream.device_index());
        if (*event == nullptr) {
            orEvent_t created = nullptr;
            OR_TORCH_CHECK(orEventCreateWithFlags(
                &created, flag == c10::EventFlag::PYTORCH_DEFAULT ? orEventDisableTiming
                                                                  : orEventEnableTiming));
            *event = created;
        }
        OR_TORCH_CHECK(orEventRecord(static_cast<orEvent_t>(*event), stream_handle(stream)));
    }
    void block(void *event, const c10::Stream &stream) const override {
        if (event == nullptr)
            return; // never recorded: nothing to wait for
        DeviceScope scope(stream.device_index());
        OR_TORCH_CHECK(orStreamWaitEvent(stream_handle(stream), static_cast<orEvent_t>(event), 0));
    }
    bool queryEvent(void *event) const override {
        if (event == nullptr)
            return true;
        orError_t err = orEventQuery(static_cast<orEvent_t>(event));
        if (err == orErrorNotReady)
            return false;
        OR_TORCH_CHECK(err);
        return true;
    }
    void destroyEvent(void *event, const c10::DeviceIndex) const noexcept override {
        if (event != nullptr)
            OR_TORCH_WARN(orEventDestroy(static_cast<orEvent_t>(event)));
    }

    void synchronizeEvent(void *event) const override {
        if (event == nullptr)
            return;
        WithoutGil no_gil;
        OR_TORCH_SYNC(orEventSynchronize(static_cast<orEvent_t>(event)));
    }
    double elapsedTime(void *start, void *end, const c10::DeviceIndex) const override {
        TORCH_CHECK(start != nullptr && end != nullptr,
                    "openreg: elapsed_time needs both events recorded");
        float ms = 0;
        OR_TORCH_CHECK(orEventElapsedTime(&ms, static_cast<orEvent_t>(start),
                                          static_cast<orEvent_t>(end)));
        return ms;
    }
    void synchronizeDevice(const c10::DeviceIndex index) const override {
        DeviceScope scope(index);
        WithoutGil no_gil;
        OR_TORCH_SYNC(orDeviceSynchronize());
    }

    bool queryStream(const c10::Stream &stream) const override {
        DeviceScope scope(stream.device_index());
        orError_t err = orStreamQuery(stream_handle(stream));
        if (err == orErrorNotReady)
            return false;
        OR_TORCH_CHECK(err);
        return true;
    }
    void synchronizeStream(const c10::Stream &stream) const override {
        DeviceScope scope(stream.device_index());
        WithoutGil no_gil;
        OR_TORCH_SYNC(orStreamSynchronize(stream_handle(stream)));
    }
    void recordDataPtrOnStream(const c10::DataPtr &data_ptr,
                               const c10::Stream &stream) const override {
        record_data_ptr_on_stream(data_ptr, stream);
    }
};

} // namespace
} // namespace torch_openreg

C10_REGISTER_GUARD_IMPL(PrivateUse1, torch_openreg::OpenRegGuardImpl);

namespace torch_openreg {
namespace {

// An event of the Python API (torch_openreg.Event): created on first record,
// on the recording stream's device.
class Event {
  public:
    explicit Event(bool enable_timing) : timing_(enable_timing) {}
    ~Event() {
        if (event_ != nullptr)
            OR_TORCH_WARN(orEventDestroy(event_));
    }
    Event(const Event &) = delete;
    Event &operator=(const Event &) = delete;

    void record(c10::StreamId id, c10::DeviceIndex index) {
        c10::Stream stream = make_stream(index, id);
        orStream_t handle = stream_handle(stream);
        TORCH_CHECK(event_ == nullptr || device_ == index, "openreg: event of device ",
                    static_cast<int>(device_), " cannot be recorded on a stream of device ",
                    static_cast<int>(index));
        DeviceScope scope(index);
        if (event_ == nullptr) {
            OR_TORCH_CHECK(orEventCreateWithFlags(
                &event_, timing_ ? orEventEnableTiming : orEventDisableTiming));
            device_ = index;
        }
        OR_TORCH_CHECK(orEventRecord(event_, handle));
    }
    void wait(c10::StreamId id, c10::DeviceIndex index) {
        orStream_t handle = stream_handle(make_stream(index, id));
        DeviceScope scope(index);
        if (event_ != nullptr)
            OR_TORCH_CHECK(orStreamWaitEvent(handle, event_, 0));
    }
    bool query() const {
        if (event_ == nullptr)
            return true;
        orError_t err = orEventQuery(event_);
        if (err == orErrorNotReady)
            return false;
        OR_TORCH_CHECK(err);
        return true;
    }
    void synchronize() const {
        if (event_ != nullptr) {
            WithoutGil no_gil;
            OR_TORCH_SYNC(orEventSynchronize(event_));
        }
    }
    float elapsed_time(const Event &end) const {
        TORCH_CHECK(event_ != nullptr && end.event_ != nullptr,
                    "openreg: elapsed_time needs both events recorded");
        float ms = 0;
        OR_TORCH_CHECK(orEventElapsedTime(&ms, event_, end.event_));
        return ms;
    }
    int device() const { return event_ == nullptr ? -1 : device_; }

  private:
    bool timing_;
    orEvent_t event_ = nullptr;
    c10::DeviceIndex device_ = -1;
};

} // namespace
} // namespace torch_openreg

TORCH_OPENREG_BINDINGS(device) {
    using namespace torch_openreg;
    namespace py = pybind11;
    m.def("device_count", []() {
        int count = 0;
        OR_TORCH_CHECK(orGetDeviceCount(&count));
        g_started = true;
        return count;
    });
    m.def("is_initialized", []() { return g_started.load(); });
    m.def("current_device", []() { return current_device(); });
    m.def("set_device", [](int64_t index) {
        check_device_index(index);
        OR_TORCH_CHECK(orSetDevice(static_cast<int>(index)));
    });
    m.def("synchronize", [](int64_t index) {
        check_device_index(index);
        DeviceScope scope(static_cast<c10::DeviceIndex>(index));
        py::gil_scoped_release no_gil;
        OR_TORCH_SYNC(orDeviceSynchronize());
    });
    m.def("get_device_properties", [](int64_t index) {
        check_device_index(index);
        orDeviceProp prop;
        OR_TORCH_CHECK(orGetDeviceProperties(&prop, static_cast<int>(index)));
        py::dict d;
        d["name"] = std::string(prop.name);
        d["total_memory"] = prop.totalGlobalMem;
        d["multi_processor_count"] = prop.multiProcessorCount;
        d["numa_node"] = prop.numaNode;
        d["cpu_list"] = std::string(prop.cpuList);
        // The profile's rates: what OPENREG_TIME=virtual charges ops against.
        d["compute_rate_gflops"] = prop.computeRateGflops;
        d["memory_bandwidth_gbs"] = prop.memoryBandwidthGBs;
        return d;
    });

    // Streams travel to Python as (stream id, device index).
    m.def("_stream_current", [](int64_t index) {
        check_device_index(index);
        return current_stream(static_cast<c10::DeviceIndex>(index)).id();
    });
    m.def("_stream_from_pool", [](int64_t index, bool high_priority) {
        check_device_index(index);
        return pool_stream(static_cast<c10::DeviceIndex>(index), high_priority).id();
    });
    m.def("_stream_set_current", [](c10::StreamId id, int64_t index) {
        c10::Stream stream = make_stream(static_cast<c10::DeviceIndex>(index), id);
        stream_handle(stream); // validates the device and the id
        set_current_stream(stream);
    });
    m.def("_stream_synchronize", [](c10::StreamId id, int64_t index) {
        orStream_t handle = stream_handle(make_stream(static_cast<c10::DeviceIndex>(index), id));
        DeviceScope scope(static_cast<c10::DeviceIndex>(index));
        py::gil_scoped_release no_gil;
        OR_TORCH_SYNC(orStreamSynchronize(handle));
    });
    m.def("_stream_query", [](c10::StreamId id, int64_t index) {
        orStream_t handle = stream_handle(make_stream(static_cast<c10::DeviceIndex>(index), id));
        DeviceScope scope(static_cast<c10::DeviceIndex>(index));
        orError_t err = orStreamQuery(handle);
        if (err == orErrorNotReady)
            return false;
        OR_TORCH_CHECK(err);
        return true;
    });
    m.def("_stream_priority", [](c10::StreamId id, int64_t index) {
        orStream_t handle = stream_handle(make_stream(static_cast<c10::DeviceIndex>(index), id));
        DeviceScope scope(static_cast<c10::DeviceIndex>(index));
        int priority = 0;
        OR_TORCH_CHECK(orStreamGetPriority(handle, &priority));
        return priority;
    });
    py::class_<Event>(m, "_Event")
        .def(py::init<bool>(), py::arg("enable_timing") = false)
        .def("record", &Event::record)
        .def("wait", &Event::wait)
        .def("query", &Event::query)
        .def("synchronize", &Event::synchronize)
        .def("elapsed_time", &Event::elapsed_time)
        .def_property_readonly("device_index", &Event::device);
}
