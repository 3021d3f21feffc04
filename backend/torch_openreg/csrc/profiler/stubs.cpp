// stubs.cpp - the profiler without Kineto on openreg: PyTorch's profiler
// stubs for the PrivateUse1 device. With
// torch.autograd.profiler.profile(use_device="openreg", use_kineto=False)
// PyTorch records an event on the device's current stream when each op
// starts and ends, and each op's device time is the time between them: the
// runtime's event timing, so virtual time under OPENREG_TIME=virtual.
// torch.profiler (Kineto) reads the runtime's activity records instead
// (kineto.cpp).
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#include "runtime/openreg_torch.h"

namespace torch_openreg {
namespace {

using torch::profiler::impl::ProfilerVoidEventStub;

struct OpenRegProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
    void record(c10::DeviceIndex *device, ProfilerVoidEventStub *event,
                int64_t *cpu_ns) const override {
        c10::DeviceIndex index = current_device();
        if (device != nullptr)
            *device = index;
        orEvent_t e = nullptr;
        OR_TORCH_CHECK(orEventCreateWithFlags(&e, orEventEnableTiming));
        *event = std::shared_ptr<void>(e, [](void *p) {
            orEventDestroy(static_cast<orEvent_t>(p));
        });
        if (cpu_ns != nullptr)
            *cpu_ns = c10::getTime();
        OR_TORCH_CHECK(orEventRecord(e, current_stream_handle(index)));
    }
    // Microseconds, as the CUDA stubs answer.
    float elapsed(const ProfilerVoidEventStub *start,
                  const ProfilerVoidEventStub *end) const override {
        orEvent_t a = static_cast<orEvent_t>(start->get());
        orEvent_t b = static_cast<orEvent_t>(end->get());
        OR_TORCH_SYNC(orEventSynchronize(b));
        float ms = 0;
        OR_TORCH_CHECK(orEventElapsedTime(&ms, a, b));
        return ms * 1000.0f;
    }
    // The runtime has no named ranges of its own: marks and ranges are the
    // profiler's (its CPU-side records), nothing is added on the device.
    void mark(const char *) const override {}
    void rangePush(const char *) const override {}
    void rangePop() const override {}
    bool enabled() const override { return true; }
    void onEachDevice(std::function<void(int)> op) const override {
        for (c10::DeviceIndex i = 0; i < device_count(); i++) {
            DeviceScope scope(i);
            op(i);
        }
    }
    void synchronize() const override {
        for (c10::DeviceIndex i = 0; i < device_count(); i++) {
            DeviceScope scope(i);
            WithoutGil no_gil;
            OR_TORCH_SYNC(orDeviceSynchronize());
        }
    }
};

const bool registered = [] {
    static OpenRegProfilerStubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
    return true;
}();

} // namespace
} // namespace torch_openreg
