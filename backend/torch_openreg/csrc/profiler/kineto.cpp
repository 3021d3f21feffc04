// kineto.cpp - torch.profiler's device activities on openreg: a Kineto
// activity-profiler plugin over the runtime's activity records
// (orActivity* in openreg.h), as CUPTI's is on CUDA. With
// ProfilerActivity.PrivateUse1 every kernel, copy, memset and collective the
// devices ran in the profiling window appears on its device and stream,
// linked to the op that issued it (the correlation id Kineto pushes when an
// op starts is pushed into the runtime, which stamps each op issued with it),
// so key_averages() gets the ops' device times and the exported trace their
// flows. Under OPENREG_TIME=virtual the device times are the virtual clock's.
// Kineto's activities format their metadata with fmt, which libtorch does
// not export: this file carries the (inline) fmt it uses.
#define FMT_HEADER_ONLY
#include <time.h>

#include <kineto/libkineto.h>
#include <kineto/output_base.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "runtime/openreg_torch.h"

namespace torch_openreg {
namespace {

using libkineto::ActivityType;

uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// The runtime's records; the strings they point to live as long as the
// process (orActivityFlush).
using Record = orActivity;

void keep_record(const orActivity *a, void *user)
{
    static_cast<std::vector<Record> *>(user)->push_back(*a);
}

void discard_record(const orActivity *, void *) {}

// The call that issued a record, as the host-side runtime event Kineto
// shows under the op (CUDA's cudaLaunchKernel): the flow to the device work
// starts there.
std::string issuing_call(const Record &r)
{
    switch (r.kind) {
    case orActivityKindKernel: return "orLaunchKernel";
    case orActivityKindMemcpy: return "orMemcpyAsync";
    case orActivityKindMemset: return "orMemsetAsync";
    case orActivityKindHostFunc: return "orLaunchHostFunc";
    default: { // "occl AllReduce" -> "occlAllReduce"
        std::string call = r.name;
        call.erase(std::remove(call.begin(), call.end(), ' '), call.end());
        return call;
    }
    }
}

// What Kineto shows a record as: device work of a PrivateUse1 device.
ActivityType activity_type(orActivityKind kind)
{
    switch (kind) {
    case orActivityKindMemcpy: return ActivityType::GPU_MEMCPY;
    case orActivityKindMemset: return ActivityType::GPU_MEMSET;
    default: return ActivityType::CONCURRENT_KERNEL; // kernels, host functions, collectives
    }
}

class Session final : public libkineto::IActivityProfilerSession {
  public:
    void start() override
    {
        // Stale records (a window that ended without a flush) are not ours.
        OR_TORCH_CHECK(orActivityFlush(discard_record, nullptr, nullptr));
        OR_TORCH_CHECK(orActivityEnable());
        status_ = libkineto::TraceStatus::RECORDING;
    }

    void stop() override
    {
        // The window's work finishes before it is read, as a profiled CUDA
        // program's does at the profiler's synchronization.
        for (c10::DeviceIndex i = 0; i < device_count(); i++) {
            DeviceScope scope(i);
            WithoutGil no_gil;
            orError_t err = orDeviceSynchronize();
            if (err != orSuccess)
                errors_.push_back(std::string("openreg: synchronizing device ") +
                                  std::to_string(i) + ": " + orGetErrorString(err));
        }
        orActivityDisable();
        unsigned long long dropped = 0;
        orActivityFlush(keep_record, &records_, &dropped);
        if (dropped)
            errors_.push_back("openreg: " + std::to_string(dropped) +
                              " device activities dropped (more than OPENREG_TRACE_BUFFER)");
        // Wall-mode records are in CLOCK_MONOTONIC; Kineto's times are
        // CLOCK_REALTIME (the system clock's ns since the epoch).
        mono_to_real_ = static_cast<int64_t>(clock_ns(CLOCK_REALTIME)) -
                        static_cast<int64_t>(clock_ns(CLOCK_MONOTONIC));
        status_ = libkineto::TraceStatus::PROCESSING;
    }

    std::vector<std::string> errors() override { return errors_; }

    void processTrace(libkineto::ActivityLogger &logger) override
    {
        processTrace(logger, [](int32_t) { return nullptr; }, 0, 0);
    }

    void processTrace(libkineto::ActivityLogger &logger,
                      libkineto::getLinkedActivityCallback linked_activity, int64_t start_time,
                      int64_t end_time) override
    {
        buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
        buffer_->span = libkineto::TraceSpan(start_time, end_time, "openreg");
        // Virtual times count from the model's origin: they are placed from
        // the window's start, keeping their durations and gaps exactly.
        uint64_t vt0 = UINT64_MAX;
        for (const Record &r : records_)
            if (r.virtualTime && r.start < vt0)
                vt0 = r.start;
        auto place = [&](const orActivity &a, unsigned long long t) -> int64_t {
            if (a.virtualTime)
                return start_time + static_cast<int64_t>(t - vt0);
            return static_cast<int64_t>(t) + mono_to_real_;
        };
        for (const Record &r : records_) {
            buffer_->emplace_activity(buffer_->span, activity_type(r.kind), r.name);
            libkineto::GenericTraceActivity &act = *buffer_->activities.back();
            act.startTime = place(r, r.start);
            act.endTime = place(r, r.end);
            act.device = r.device;
            act.resource = r.stream;
            act.id = static_cast<int32_t>(r.correlationId);
            act.linked = r.correlationId
                             ? linked_activity(static_cast<int32_t>(r.correlationId))
                             : nullptr;
            act.flow.id = static_cast<uint32_t>(r.correlationId);
            act.flow.type = libkineto::kLinkAsyncCpuGpu;
            act.flow.start = false;
            act.addMetadataQuoted("device_type", "openreg");
            act.addMetadata("device", r.device);
            act.addMetadata("stream", r.stream);
            act.addMetadata("correlation", r.correlationId);
            act.addMetadataQuoted("category", r.category);
            if (r.bytes)
                act.addMetadata("bytes", r.bytes);
            if (r.flops > 0)
                act.addMetadata("flops", r.flops);
            if (r.kind == orActivityKindMemcpy) {
                act.addMetadata("src", r.srcDevice);
                act.addMetadata("dst", r.dstDevice);
            }
            if (r.args != nullptr)
                act.addMetadata("args", std::string(r.args));
            if (r.virtualTime)
                act.addMetadataQuoted("clock", "virtual");
            streams_.insert({r.device, r.stream});
            logger.handleGenericActivity(act);
            if (r.correlationId && r.issueTime)
                log_issue(logger, r, linked_activity);
        }
        status_ = libkineto::TraceStatus::READY;
    }

    std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override { return nullptr; }

    std::vector<libkineto::ResourceInfo> getResourceInfos() override
    {
        std::vector<libkineto::ResourceInfo> infos;
        for (const auto &[device, stream] : streams_)
            infos.push_back({stream, stream, device,
                             stream == 0 ? "openreg default stream"
                                         : "openreg stream " + std::to_string(stream)});
        return infos;
    }

    std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override
    {
        return std::move(buffer_);
    }

    void pushCorrelationId(uint64_t id) override { orActivityPushExternalCorrelationId(id); }
    void popCorrelationId() override { orActivityPopExternalCorrelationId(nullptr); }

  private:
    // The issuing call on its host thread, where the flow starts.
    void log_issue(libkineto::ActivityLogger &logger, const Record &r,
                   const libkineto::getLinkedActivityCallback &linked_activity)
    {
        buffer_->emplace_activity(buffer_->span, ActivityType::PRIVATEUSE1_RUNTIME,
                                  issuing_call(r));
        libkineto::GenericTraceActivity &call = *buffer_->activities.back();
        call.startTime = call.endTime = static_cast<int64_t>(r.issueTime) + mono_to_real_;
        call.device = static_cast<int32_t>(libkineto::processId());
        call.resource = call.threadId = r.issueThread;
        call.id = static_cast<int32_t>(r.correlationId);
        call.linked = linked_activity(static_cast<int32_t>(r.correlationId));
        call.flow.id = static_cast<uint32_t>(r.correlationId);
        call.flow.type = libkineto::kLinkAsyncCpuGpu;
        call.flow.start = true;
        call.addMetadata("correlation", r.correlationId);
        logger.handleGenericActivity(call);
    }

    std::vector<Record> records_;
    std::vector<std::string> errors_;
    std::set<std::pair<int, int>> streams_;
    std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
    int64_t mono_to_real_ = 0;
};

class Profiler final : public libkineto::IActivityProfiler {
  public:
    const std::string &name() const override { return name_; }
    const std::set<ActivityType> &availableActivities() const override { return types_; }

    std::unique_ptr<libkineto::IActivityProfilerSession>
    configure(const std::set<ActivityType> &activity_types, const libkineto::Config &) override
    {
        // Only a profile that asked for device activities gets a session:
        // a CPU-only profile neither starts the runtime nor pays for records.
        for (ActivityType t : activity_types)
            if (types_.count(t))
                return std::make_unique<Session>();
        return nullptr;
    }

    std::unique_ptr<libkineto::IActivityProfilerSession>
    configure(int64_t, int64_t, const std::set<ActivityType> &activity_types,
              const libkineto::Config &config) override
    {
        return configure(activity_types, config);
    }

  private:
    std::string name_ = "openreg";
    std::set<ActivityType> types_ = {ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY,
                                     ActivityType::GPU_MEMSET};
};

const bool registered = [] {
    libkineto::api().registerProfilerFactory([] { return std::make_unique<Profiler>(); });
    return true;
}();

} // namespace
} // namespace torch_openreg
