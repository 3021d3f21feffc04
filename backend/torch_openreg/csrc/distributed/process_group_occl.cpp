// process_group_occl.cpp - the "occl" torch.distributed backend over occl.h.
// See process_group_occl.h for the model; docs/torch-distributed.md for use.
#include "distributed/process_group_occl.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <strings.h>

#include <ATen/core/ivalue.h>
#include <c10/core/DeviceGuard.h>
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>
#include <torch/library.h>
#include <pybind11/chrono.h>

#include "bindings.h"
#include "runtime/openreg_torch.h"

namespace torch_openreg {
namespace {

// ---- checks and conversions --------------------------------------------------

const char *dtype_name(at::ScalarType t) {
    switch (t) {
    case at::kFloat: return "torch.float32";
    case at::kDouble: return "torch.float64";
    case at::kHalf: return "torch.float16";
    case at::kBFloat16: return "torch.bfloat16";
    case at::kChar: return "torch.int8";
    case at::kByte: return "torch.uint8";
    case at::kShort: return "torch.int16";
    case at::kInt: return "torch.int32";
    case at::kLong: return "torch.int64";
    case at::kBool: return "torch.bool";
    case at::kComplexFloat: return "torch.complex64";
    case at::kComplexDouble: return "torch.complex128";
    default: return c10::toString(t);
    }
}

occlDataType_t occl_type(at::ScalarType t, const char *op) {
    switch (t) {
    case at::kFloat: return occlFloat32;
    case at::kDouble: return occlFloat64;
    case at::kHalf: return occlFloat16;
    case at::kBFloat16: return occlBfloat16;
    case at::kChar: return occlInt8;
    case at::kByte: return occlUint8;
    case at::kBool: return occlUint8; // 0 and 1; reductions are mapped below
    case at::kInt: return occlInt32;
    case at::kLong: return occlInt64;
    default:
        TORCH_CHECK(false, "occl ", op, ": dtype ", dtype_name(t),
                    " is not supported (occl carries torch.float32, float64, float16, "
                    "bfloat16, int8, uint8, int32, int64 and bool)");
    }
}

// An openreg device tensor occl can carry as one buffer.
void check_tensor(const at::Tensor &t, const char *op, const char *what) {
    TORCH_CHECK(t.defined(), "occl ", op, ": ", what, " is an undefined tensor");
    TORCH_CHECK(t.device().type() == kDeviceType, "occl ", op, ": ", what, " is on device '",
                t.device(), "'; the occl backend takes tensors on openreg devices "
                "(torch_openreg.device(i)); use a gloo group for CPU tensors");
    TORCH_CHECK(t.layout() == at::kStrided, "occl ", op, ": ", what,
                " is not a dense (strided) tensor");
    TORCH_CHECK(t.is_non_overlapping_and_dense() && t.is_contiguous(), "occl ", op, ": ", what,
                " is not contiguous");
    occl_type(t.scalar_type(), op);
}

// The one input tensor of a call that takes a list (one device per process).
const at::Tensor &single(const std::vector<at::Tensor> &tensors, const char *op) {
    TORCH_CHECK(tensors.size() == 1, "occl ", op, ": takes one tensor per process, got ",
                tensors.size(), " (one device per rank: start one rank per device)");
    check_tensor(tensors[0], op, "the tensor");
    return tensors[0];
}

void check_like(const at::Tensor &t, const at::Tensor &ref, const char *op, const char *what) {
    check_tensor(t, op, what);
    TORCH_CHECK(t.device() == ref.device(), "occl ", op, ": ", what, " is on ", t.device(),
                ", the input on ", ref.device(), ": all tensors of a call share one device");
    TORCH_CHECK(t.scalar_type() == ref.scalar_type(), "occl ", op, ": ", what, " is ",
                dtype_name(t.scalar_type()), ", the input ", dtype_name(ref.scalar_type()));
}

// A reduction as OCCL runs it: one of OCCL's own ops, or PREMUL_SUM, whose
// factor becomes an op of the communicator at launch (ScopedOp).
struct Reduction {
    occlRedOp_t op = occlSum;
    bool premul = false;
    occlDataType_t type = occlFloat32;
    double factor = 0;        // the factor read on the host, or
    at::Tensor device_factor; // one element of the data's dtype on its device
};

constexpr const char *kReductions =
    "occl reduces with SUM, PRODUCT, MIN, MAX, AVG and PREMUL_SUM; all_reduce also with BAND, "
    "BOR and BXOR";

// t is the call's (checked) tensor: its dtype decides the op.
Reduction occl_reduction(const c10d::ReduceOp &op, const at::Tensor &t, const char *name) {
    Reduction r;
    at::ScalarType st = t.scalar_type();
    r.type = occl_type(st, name);
    bool boolean = st == at::kBool;
    switch (op.op_) {
    case c10d::ReduceOp::SUM: r.op = boolean ? occlMax : occlSum; break; // logical or
    case c10d::ReduceOp::PRODUCT: r.op = boolean ? occlMin : occlProd; break; // logical and
    case c10d::ReduceOp::MIN: r.op = occlMin; break;
    case c10d::ReduceOp::MAX: r.op = occlMax; break;
    case c10d::ReduceOp::AVG:
        TORCH_CHECK(!boolean, "occl ", name, ": ReduceOp.AVG of torch.bool tensors has no meaning");
        r.op = occlAvg;
        break;
    case c10d::ReduceOp::PREMUL_SUM: {
        TORCH_CHECK(st == at::kFloat || st == at::kDouble || st == at::kHalf || st == at::kBFloat16,
                    "occl ", name, ": ReduceOp.PREMUL_SUM takes floating-point tensors "
                    "(torch.float32, float64, float16, bfloat16), got ", dtype_name(st));
        auto *sup = dynamic_cast<c10d::PreMulSumSupplement *>(op.supplement_.get());
        TORCH_CHECK(sup, "occl ", name, ": ReduceOp.PREMUL_SUM without its factor (make it with "
                    "torch.distributed._make_nccl_premul_sum)");
        r.premul = true;
        const at::Tensor &f = sup->tensor_factor;
        if (!f.defined()) {
            r.factor = sup->double_factor;
        } else if (f.device().type() == at::kCPU) {
            r.factor = f.item<double>();
        } else {
            TORCH_CHECK(f.device() == t.device(), "occl ", name, ": the PREMUL_SUM factor is on ",
                        f.device(), ", the data on ", t.device());
            // On the current stream, before the call that reads it.
            r.device_factor = f.reshape({1}).to(st).contiguous();
        }
        break;
    }
    case c10d::ReduceOp::BAND: TORCH_CHECK(false, "occl ", name, ": ReduceOp.BAND is not supported (", kReductions, ")");
    case c10d::ReduceOp::BOR: TORCH_CHECK(false, "occl ", name, ": ReduceOp.BOR is not supported (", kReductions, ")");
    case c10d::ReduceOp::BXOR: TORCH_CHECK(false, "occl ", name, ": ReduceOp.BXOR is not supported (", kReductions, ")");
    default: TORCH_CHECK(false, "occl ", name, ": this ReduceOp is not supported (", kReductions, ")");
    }
    return r;
}

// The op of one call. PREMUL_SUM's is made on the communicator here and
// destroyed when the scope ends, after the call: OCCL resolves an op when
// the call is made (within a group too), so the call keeps what it needs.
class ScopedOp {
  public:
    ScopedOp(const Reduction &r, occlComm_t comm) : op_(r.op), comm_(comm) {
        if (!r.premul)
            return;
        if (r.device_factor.defined()) {
            result_ = occlRedOpCreatePreMulSum(&op_, r.device_factor.data_ptr(), r.type,
                                               occlScalarDevice, comm);
        } else {
            union {
                float f;
                double d;
                uint16_t h;
            } v;
            switch (r.type) {
            case occlFloat32: v.f = static_cast<float>(r.factor); break;
            case occlFloat16: v.h = c10::Half(static_cast<float>(r.factor)).x; break;
            case occlBfloat16: v.h = c10::BFloat16(static_cast<float>(r.factor)).x; break;
            default: v.d = r.factor; break;
            }
            result_ = occlRedOpCreatePreMulSum(&op_, &v, r.type, occlScalarHostImmediate, comm);
        }
        made_ = result_ == occlSuccess;
    }
    ~ScopedOp() {
        if (made_)
            occlRedOpDestroy(op_, comm_);
    }
    ScopedOp(const ScopedOp &) = delete;
    ScopedOp &operator=(const ScopedOp &) = delete;
    occlResult_t result() const { return result_; }
    occlRedOp_t op() const { return op_; }

  private:
    occlRedOp_t op_;
    occlComm_t comm_;
    occlResult_t result_ = occlSuccess;
    bool made_ = false;
};

// What keeps a reduction's device factor alive until its call has run.
void keep_factor(const Reduction &r, std::vector<at::Tensor> &keep) {
    if (r.device_factor.defined())
        keep.push_back(r.device_factor);
}

// OCCL's reason for a failure: its result's text and the call's own message.
std::string occl_message(occlResult_t res, occlComm_t comm) {
    std::ostringstream s;
    s << occlGetErrorString(res);
    const char *last = occlGetLastError(comm);
    if (last && *last)
        s << ": " << last;
    return s.str();
}

// A c10::Error (RuntimeError in Python) to hand to a Work or a Future.
std::exception_ptr error_ptr(const std::string &message) {
    try {
        TORCH_CHECK(false, message);
    } catch (...) {
        return std::current_exception();
    }
    return nullptr;
}

#define OCCL_CHECK(call, op, comm)                                                     \
    do {                                                                               \
        occlResult_t occl_res_ = (call);                                               \
        TORCH_CHECK(occl_res_ == occlSuccess, "occl ", op, " failed: ",                \
                    occl_message(occl_res_, comm));                                    \
    } while (0)

// Calls f(i, op) for every reduction inside one occlGroupStart/End (launched
// together), their ops made before and destroyed after.
template <typename F>
occlResult_t grouped(const std::vector<Reduction> &reds, occlComm_t comm, F f) {
    std::vector<std::unique_ptr<ScopedOp>> ops;
    for (const auto &r : reds) {
        ops.push_back(std::make_unique<ScopedOp>(r, comm));
        if (ops.back()->result() != occlSuccess)
            return ops.back()->result();
    }
    occlResult_t res = occlGroupStart();
    for (size_t i = 0; i < reds.size() && res == occlSuccess; i++)
        res = f(i, ops[i]->op());
    occlResult_t end = occlGroupEnd();
    return res != occlSuccess ? res : end;
}

// The (output i, input i) pairs of a coalesced call: as many of each, all on
// one device, each output of its input's dtype.
void check_pairs(const std::vector<at::Tensor> &outputs, const std::vector<at::Tensor> &inputs,
                 const char *op) {
    TORCH_CHECK(!inputs.empty(), "occl ", op, ": no tensors");
    TORCH_CHECK(outputs.size() == inputs.size(), "occl ", op, ": ", outputs.size(),
                " output and ", inputs.size(), " input tensors (one output per input)");
    for (size_t i = 0; i < inputs.size(); i++) {
        std::string in = "input " + std::to_string(i), out = "output " + std::to_string(i);
        check_tensor(inputs[i], op, in.c_str());
        TORCH_CHECK(inputs[i].device() == inputs[0].device(), "occl ", op, ": ", in, " is on ",
                    inputs[i].device(), ", input 0 on ", inputs[0].device(),
                    ": all tensors of a call share one device");
        check_like(outputs[i], inputs[i], op, out.c_str());
    }
}

// ---- DDP's timer ------------------------------------------------------------------

// DDP's Reducer asks this registry for a timer of its parameters' device type;
// host clocks are what an openreg device has (its work runs on host threads).
class OpenRegTimer : public c10d::Timer {
  public:
    explicit OpenRegTimer(c10::Device) {}
    c10::optional<int64_t> measureDifference(Event start, Event end) override {
        int64_t a = getTimeRef(start), b = getTimeRef(end);
        if (a == c10d::kUnsetTime || b == c10d::kUnsetTime || b < a)
            return c10::nullopt;
        return b - a;
    }
};

} // namespace
} // namespace torch_openreg

namespace c10d {
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::kPrivateUse1, torch_openreg::OpenRegTimer);
} // namespace c10d

// c10d's dispatched ops have kernels per device type (PrivateUse1 among
// them) and none for autograd: calls on openreg tensors reach the
// AutogradPrivateUse1 key first, where the generic autograd fallback would
// run. They have no gradient, so they fall through to the device kernel.
TORCH_LIBRARY_IMPL(c10d, AutogradPrivateUse1, m) {
    for (const char *op :
         {"broadcast_", "allreduce_", "allreduce_coalesced_", "allgather_", "_allgather_base_",
          "allgather_coalesced_", "allgather_into_tensor_coalesced_", "reduce_", "gather_",
          "scatter_", "reduce_scatter_", "_reduce_scatter_base_",
          "reduce_scatter_tensor_coalesced_", "alltoall_", "alltoall_base_", "barrier", "send",
          "recv_", "recv_any_source_"})
        m.impl(op, torch::CppFunction::makeFallthrough());
}

namespace torch_openreg {

// ---- communicators ------------------------------------------------------------------

OcclComm::~OcclComm() { release(false); }

void OcclComm::release(bool abort) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!comm)
        return;
    occlResult_t failed = occlSuccess;
    occlCommGetAsyncError(comm, &failed);
    // A failed communicator cannot finalize (its peers are gone): abort it.
    if (abort || failed != occlSuccess)
        occlCommAbort(comm);
    else
        occlCommDestroy(comm);
    comm = nullptr;
    aborted = abort;
}

std::string OcclComm::failure(const char *name) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!comm)
        return c10::str("occl ", name, ": the process group was ",
                        aborted ? "aborted" : "shut down", " before the call completed");
    occlResult_t async = occlSuccess;
    if (occlCommGetAsyncError(comm, &async) != occlSuccess || async == occlSuccess)
        return {};
    return c10::str("occl ", name, " failed: ", occl_message(async, comm),
                    " (the communicator is unusable from now on: destroy the process group)");
}

// ---- Work ---------------------------------------------------------------------------

ProcessGroupOCCL::WorkOCCL::WorkOCCL(int rank, c10d::OpType type, const char *name,
                                     std::shared_ptr<OcclComm> comm,
                                     std::vector<at::Tensor> outputs,
                                     std::vector<at::Tensor> keep_alive,
                                     std::chrono::milliseconds timeout)
    : c10d::Work(rank, type), name_(name), comm_(std::move(comm)), outputs_(std::move(outputs)),
      keep_alive_(std::move(keep_alive)), timeout_(timeout) {}

ProcessGroupOCCL::WorkOCCL::~WorkOCCL() {
    if (event_)
        orEventDestroy(event_);
}

bool ProcessGroupOCCL::WorkOCCL::settle(bool block) {
    if (settled_)
        return true;
    if (!recorded_)
        return false; // its coalescing has not ended
    // Waited for without settle_mutex_: the waiter and the watcher may both
    // wait on the event, and the first to see it complete settles the work;
    // neither waits for the other.
    orError_t e = block ? orEventSynchronize(event_) : orEventQuery(event_);
    if (e == orErrorNotReady)
        return false;
    complete(e);
    return true;
}

void ProcessGroupOCCL::WorkOCCL::complete(orError_t e) {
    std::exception_ptr failure;
    if (e != orSuccess) {
        failure = error_ptr(c10::str("occl ", name_, ": waiting for its event failed: ",
                                     orGetErrorName(e), " (", orGetErrorString(e), ")"));
    } else {
        std::string why = comm_ ? comm_->failure(name_) : std::string();
        if (!why.empty())
            failure = error_ptr(why);
    }
    std::lock_guard<std::mutex> lock(settle_mutex_);
    if (settled_)
        return;
    keep_alive_.clear();
    finish(failure);
    if (future_)
        complete_future();
    settled_ = true;
}

void ProcessGroupOCCL::WorkOCCL::complete_future() {
    if (exception_)
        future_->setError(exception_);
    else
        future_->markCompleted(c10::IValue(outputs_));
}

void ProcessGroupOCCL::WorkOCCL::recorded(orStream_t stream) {
    if (!event_)
        OR_TORCH_CHECK(orEventCreate(&event_));
    OR_TORCH_CHECK(orEventRecord(event_, stream));
    recorded_ = true;
}

void ProcessGroupOCCL::WorkOCCL::drop(const std::string &why) {
    std::lock_guard<std::mutex> lock(settle_mutex_);
    if (settled_)
        return;
    recorded_ = true;
    keep_alive_.clear();
    finish(error_ptr(why));
    if (future_)
        complete_future();
    settled_ = true;
}

bool ProcessGroupOCCL::WorkOCCL::isCompleted() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (completed_)
            return true;
    }
    return settle(false);
}

bool ProcessGroupOCCL::WorkOCCL::isSuccess() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return completed_ && !exception_;
}

namespace {

// wait() blocks the host until the work is complete (gloo's semantics,
// which PyTorch's own suite checks: is_completed() after wait()), unless
// TORCH_OCCL_BLOCKING_WAIT=0 asks for NCCL's default (see wait()).
bool blocking_wait() {
    static const bool blocking = [] {
        const char *v = std::getenv("TORCH_OCCL_BLOCKING_WAIT");
        return !(v && std::strcmp(v, "0") == 0);
    }();
    return blocking;
}

} // namespace

bool ProcessGroupOCCL::WorkOCCL::stream_wait() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (completed_) {
            if (exception_)
                std::rethrow_exception(exception_);
            return true;
        }
    }
    if (!recorded_ || !comm_)
        return false; // no event yet (an open coalescing): the host must wait
    OR_TORCH_CHECK(orStreamWaitEvent(current_stream_handle(comm_->device), event_, 0));
    return true;
}

bool ProcessGroupOCCL::WorkOCCL::wait(std::chrono::milliseconds timeout) {
    // Under TORCH_OCCL_BLOCKING_WAIT=0, as NCCL's by default: without a
    // timeout, the calling thread's current stream on the work's device
    // waits for the work, and the host goes on (FSDP2 overlaps its next work
    // with it). A failure known now is raised now; a later one is logged by
    // the watcher, fails the future and every later call on the group. A
    // barrier, a receive from any source or a timeout block the host always.
    if (timeout == kNoTimeout && !blocking_wait() && opType_ != c10d::OpType::BARRIER &&
        opType_ != c10d::OpType::RECVANYSOURCE && stream_wait())
        return true;
    // Without a timeout of its own, the wait outlasts OCCL's deadline (the
    // group's timeout) a little, so that OCCL's reason is what the user sees.
    // Without a timeout of its own, the waiter settles the work itself: it
    // wakes when the event completes, not after the watcher has (one thread
    // hop less). Every OCCL wait has OCCL_TIMEOUT_MS, so the event completes.
    if (timeout == kNoTimeout && settle(true)) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (exception_)
            std::rethrow_exception(exception_);
        return true;
    }
    auto limit = timeout == kNoTimeout ? timeout_ + std::chrono::milliseconds(10000) : timeout;
    std::unique_lock<std::mutex> lock(mutex_);
    // The watcher thread settles works in order; waiting on the condition
    // variable costs no core while the collective runs.
    if (!cv_.wait_until(lock, std::chrono::steady_clock::now() + limit,
                        [this] { return completed_; })) {
        lock.unlock(); // settle() completes the work under mutex_
        TORCH_CHECK(settle(false), "occl ", name_, ": not complete after ", limit.count(),
                    " ms (the wait's timeout)");
        lock.lock();
    }
    if (exception_)
        std::rethrow_exception(exception_);
    return true;
}

void ProcessGroupOCCL::WorkOCCL::synchronize() {}

std::vector<at::Tensor> ProcessGroupOCCL::WorkOCCL::result() { return outputs_; }

c10::intrusive_ptr<c10::ivalue::Future> ProcessGroupOCCL::WorkOCCL::getFuture() {
    // Made on demand: most works (a wait()ed call) never have theirs asked for.
    std::lock_guard<std::mutex> lock(settle_mutex_);
    if (!future_) {
        future_ = c10::make_intrusive<c10::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()));
        if (settled_)
            complete_future();
    }
    return future_;
}

int ProcessGroupOCCL::WorkOCCL::sourceRank() const {
    TORCH_CHECK(source_, "occl ", name_, ": only a receive from any source has a source rank");
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK(completed_, "occl ", name_, ": the source rank is known once the receive has "
                "completed: wait() for it first");
    TORCH_CHECK(!exception_, "occl ", name_, " failed: no source rank");
    return *source_;
}

// ---- the group -------------------------------------------------------------------------

namespace {

// OCCL reads OCCL_TIMEOUT_MS once, at its first wait: the first group of the
// process sets it from its timeout; later groups can only keep it.
std::mutex timeout_mutex;
long long occl_timeout_ms = -1;

void set_occl_timeout(std::chrono::milliseconds timeout) {
    std::lock_guard<std::mutex> lock(timeout_mutex);
    long long ms = timeout.count() > 0 ? static_cast<long long>(timeout.count()) : 0;
    if (occl_timeout_ms < 0) {
        if (ms > 0) {
            std::string v = std::to_string(ms);
            setenv("OCCL_TIMEOUT_MS", v.c_str(), 1);
        }
        occl_timeout_ms = ms;
    } else if (ms != occl_timeout_ms) {
        TORCH_WARN("occl: this group's timeout (", ms, " ms) differs from the first occl "
                   "group's (", occl_timeout_ms, " ms), which OCCL keeps for the process "
                   "(OCCL_TIMEOUT_MS)");
    }
}

} // namespace

ProcessGroupOCCL::ProcessGroupOCCL(const c10::intrusive_ptr<c10d::Store> &store, int rank,
                                   int size, std::chrono::milliseconds timeout)
    : c10d::Backend(rank, size), store_(store), timeout_(timeout) {
    TORCH_CHECK(store_, "occl: the process group needs a store");
    TORCH_CHECK(size > 0 && rank >= 0 && rank < size, "occl: rank ", rank,
                " is not in [0, ", size, ")");
    set_occl_timeout(timeout_);
    watcher_ = std::thread([this] { watch(); });
    init();
}

ProcessGroupOCCL::~ProcessGroupOCCL() {
    stop_watcher();
    // Communicators go with the last work that holds them.
}

void ProcessGroupOCCL::stop_watcher() {
    {
        std::lock_guard<std::mutex> lock(queue_mutex_);
        stopping_ = true;
    }
    queue_cv_.notify_all();
    // The watcher may need the GIL (the last reference to a tensor Python
    // made frees its Python object): never join it holding the GIL.
    if (watcher_.joinable()) {
        WithoutGil no_gil;
        watcher_.join();
    }
}

void ProcessGroupOCCL::close(bool abort) {
    WithoutGil no_gil; // the waits below can be long, and the watcher may need it
    std::map<int, std::shared_ptr<OcclComm>> comms;
    {
        // No call is being made (run holds it), and none will be.
        std::lock_guard<std::mutex> lock(mutex_);
        closed_ = true;
        comms.swap(comms_);
    }
    if (abort) {
        // The works in flight stop at their next wait, failed.
        for (auto &kv : comms)
            kv.second->release(true);
        stop_watcher();
    } else {
        // Every OCCL wait has OCCL_TIMEOUT_MS: the works finish or fail.
        stop_watcher();
        for (auto &kv : comms)
            kv.second->release(false);
    }
}

void ProcessGroupOCCL::shutdown() { close(false); }

void ProcessGroupOCCL::abort() { close(true); }

namespace {
// The base class cannot be copied from Python; split_group deep-copies the
// parent's options for its child.
struct OcclOptions : c10d::Backend::Options {
    explicit OcclOptions(std::chrono::milliseconds timeout) : Options("occl", timeout) {}
};
} // namespace

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupOCCL::getBackendOptions() {
    return c10::make_intrusive<OcclOptions>(timeout_);
}

namespace {
std::mutex live_mutex;
std::vector<c10::weak_intrusive_ptr<ProcessGroupOCCL>> live_groups;
} // namespace

void ProcessGroupOCCL::track(const c10::intrusive_ptr<ProcessGroupOCCL> &group) {
    std::lock_guard<std::mutex> lock(live_mutex);
    // Forget the groups gone since.
    live_groups.erase(std::remove_if(live_groups.begin(), live_groups.end(),
                                     [](const auto &w) { return w.expired(); }),
                      live_groups.end());
    live_groups.emplace_back(group);
}

void ProcessGroupOCCL::shutdown_all() {
    std::vector<c10::intrusive_ptr<ProcessGroupOCCL>> groups;
    {
        std::lock_guard<std::mutex> lock(live_mutex);
        for (auto &w : live_groups)
            if (auto g = w.lock())
                groups.push_back(std::move(g));
        live_groups.clear();
    }
    // Newest first, as torch shuts groups down.
    for (auto it = groups.rbegin(); it != groups.rend(); ++it)
        (*it)->shutdown();
}

void ProcessGroupOCCL::watch() {
    bool failure_said = false;
    for (;;) {
        c10::intrusive_ptr<WorkOCCL> work;
        {
            std::unique_lock<std::mutex> lock(queue_mutex_);
            queue_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
            if (queue_.empty())
                return; // stopping, and nothing left in flight
            work = queue_.front();
        }
        // Every OCCL wait has OCCL_TIMEOUT_MS: the event always completes.
        work->settle(true);
        // Its waiter may have gone on (a stream-side wait): the first failure
        // is said here (the later works of the group fail with it).
        if (!blocking_wait() && !work->isSuccess() && !failure_said) {
            failure_said = true;
            try {
                std::rethrow_exception(work->exception());
            } catch (const c10::Error &e) {
                TORCH_WARN("occl: rank ", getRank(), ": ", e.what_without_backtrace());
            } catch (const std::exception &e) {
                TORCH_WARN("occl: rank ", getRank(), ": ", e.what());
            }
        }
        std::lock_guard<std::mutex> lock(queue_mutex_);
        queue_.pop_front();
    }
}

namespace {

// Whether everything enqueued on stream has completed. Not under virtual
// time, where waiting for a call's event also moves the host's clock to the
// call's end (orEventSynchronize).
bool drained(orStream_t stream) {
    static const bool virtual_time = [] {
        const char *v = std::getenv("OPENREG_TIME");
        return v && strcasecmp(v, "virtual") == 0;
    }();
    return !virtual_time && orStreamQuery(stream) == orSuccess;
}

} // namespace

std::shared_ptr<OcclComm> ProcessGroupOCCL::comm_for(int device) {
    auto it = comms_.find(device);
    if (it != comms_.end())
        return it->second;
    // Every rank makes its communicators in the same order (the same calls),
    // so a counter names each one's unique id in the store.
    std::string key = "occl/comm/" + std::to_string(comms_made_++);
    occlUniqueId id;
    if (getRank() == 0) {
        OCCL_CHECK(occlGetUniqueId(&id), "process group", nullptr);
        const uint8_t *p = reinterpret_cast<const uint8_t *>(&id);
        store_->set(key, std::vector<uint8_t>(p, p + sizeof id));
    } else {
        std::vector<uint8_t> bytes = store_->get(key);
        TORCH_CHECK(bytes.size() == sizeof id, "occl: the store's unique id for ", key, " has ",
                    bytes.size(), " bytes, expected ", sizeof id);
        memcpy(&id, bytes.data(), sizeof id);
    }
    auto comm = std::make_shared<OcclComm>();
    comm->device = device;
    {
        DeviceScope scope(static_cast<c10::DeviceIndex>(device));
        OCCL_CHECK(occlCommInitRank(&comm->comm, getSize(), id, getRank()),
                   "communicator set-up", nullptr);
    }
    comms_[device] = comm;
    return comm;
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupOCCL::run(const char *name, c10d::OpType type, const at::Device &device,
                      std::vector<at::Tensor> outputs, std::vector<at::Tensor> keep_alive,
                      const Launch &launch, const std::function<void()> &after) {
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK(!closed_, "occl ", name, ": the process group is shut down (or aborted)");
    c10::DeviceGuard guard(device);
    bool coalesced = coalescing_ && std::this_thread::get_id() == coalesce_thread_;
    if (coalesced && coalesce_device_ < 0)
        coalesce_device_ = device.index();
    if (coalesced && coalesce_device_ != device.index()) {
        abandon_coalescing();
        TORCH_CHECK(false, "occl ", name, ": a coalesced call on ", device,
                    " after calls on openreg:", coalesce_device_,
                    " (the calls of one coalescing share one device); the coalescing is dropped");
    }
    std::shared_ptr<OcclComm> comm;
    orStream_t stream = nullptr;
    occlResult_t res = occlSuccess;
    std::string failure;
    try {
        comm = comm_for(device.index());
        // A communicator that failed fails every later call at once, whether
        // or not anyone waited on the failed work (a stream-side wait).
        failure = comm->failure(name);
        TORCH_CHECK(failure.empty(), failure);
        last_device_ = device.index();
        stream = current_stream_handle(device.index());
        if (coalesced && !group_open_) {
            OCCL_CHECK(occlGroupStart(), name, comm->comm);
            group_open_ = true;
        }
        res = launch(comm->comm, stream);
        if (res != occlSuccess)
            failure = occl_message(res, comm->comm);
    } catch (...) {
        if (coalesced)
            abandon_coalescing();
        throw;
    }
    if (res != occlSuccess) {
        if (coalesced)
            abandon_coalescing();
        TORCH_CHECK(false, "occl ", name, " failed: ", failure,
                    coalesced ? " (the coalescing is dropped: none of its calls ran)" : "");
    }
    seq_++;
    auto work = c10::make_intrusive<WorkOCCL>(getRank(), type, name, comm, std::move(outputs),
                                              std::move(keep_alive), timeout_);
    if (coalesced) {
        // Launched, recorded and copied out at the end.
        work->recorded_ = false;
        if (after)
            coalesced_after_.push_back(after);
        coalesced_.push_back(work);
        // As NCCL: no work of its own (torch's synchronous calls then do not
        // wait inside the coalescing); the end's work is the one to wait on.
        return {};
    }
    if (after)
        after(); // copies out of staging buffers, on the same stream
    // A small call often ran to its end on this thread (OCCL's low-latency
    // path): settled now, it costs the watcher no wake-up, and if that left
    // the stream drained, no event either (making, recording, querying and
    // destroying one costs about as much as the call). A failure still goes
    // to the watcher, which reports the first one.
    if (drained(stream))
        work->complete(orSuccess);
    else
        work->recorded(stream);
    if (work->settle(false) && work->isSuccess())
        return work;
    {
        std::lock_guard<std::mutex> qlock(queue_mutex_);
        queue_.push_back(work);
    }
    queue_cv_.notify_one();
    return work;
}

int ProcessGroupOCCL::default_device() {
    // Under mutex_.
    auto bound = getBoundDeviceId();
    if (bound && bound->type() == kDeviceType && bound->has_index())
        return bound->index();
    return last_device_ >= 0 ? last_device_ : current_device();
}

// ---- coalescing ----------------------------------------------------------------------

void ProcessGroupOCCL::abandon_coalescing() {
    // Under mutex_. An open group ends; a failed call in it means none runs.
    if (group_open_)
        occlGroupEnd();
    group_open_ = false;
    coalescing_ = false;
    coalesce_device_ = -1;
    // Their events were never recorded: they complete (failed) now.
    for (auto &w : coalesced_)
        w->drop(c10::str("occl ", w->name_, ": its coalescing was dropped (a later call of it "
                         "failed), and the call never ran"));
    coalesced_.clear();
    coalesced_after_.clear();
}

void ProcessGroupOCCL::startCoalescing() {
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK(!closed_, "occl startCoalescing: the process group is shut down (or aborted)");
    TORCH_CHECK(!coalescing_, "occl startCoalescing: this group is coalescing already "
                "(coalescing does not nest)");
    coalescing_ = true;
    group_open_ = false;
    coalesce_device_ = -1;
    coalesce_thread_ = std::this_thread::get_id();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::endCoalescing() {
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK(coalescing_, "occl endCoalescing: the group is not coalescing (no "
                "startCoalescing, or a call of the coalescing failed and dropped it)");
    TORCH_CHECK(std::this_thread::get_id() == coalesce_thread_,
                "occl endCoalescing: called by another thread than startCoalescing");
    int device = coalesce_device_ >= 0 ? coalesce_device_ : default_device();
    c10::DeviceGuard guard(c10::Device(kDeviceType, static_cast<c10::DeviceIndex>(device)));
    std::shared_ptr<OcclComm> comm;
    if (group_open_) {
        comm = comms_[device];
        occlResult_t res = occlGroupEnd();
        group_open_ = false;
        if (res != occlSuccess) {
            std::string why = occl_message(res, comm->comm);
            abandon_coalescing();
            TORCH_CHECK(false, "occl endCoalescing: the coalesced calls failed: ", why);
        }
    }
    coalescing_ = false;
    coalesce_device_ = -1;
    orStream_t stream = current_stream_handle(device);
    for (auto &f : coalesced_after_)
        f();
    // One work for all: every output, and what the calls keep alive.
    std::vector<at::Tensor> outputs, keep;
    for (auto &w : coalesced_) {
        outputs.insert(outputs.end(), w->outputs_.begin(), w->outputs_.end());
        keep.insert(keep.end(), w->keep_alive_.begin(), w->keep_alive_.end());
    }
    auto all = c10::make_intrusive<WorkOCCL>(getRank(), c10d::OpType::COALESCED, "coalesced calls",
                                             comm, std::move(outputs), std::move(keep), timeout_);
    std::vector<c10::intrusive_ptr<WorkOCCL>> works;
    works.swap(coalesced_);
    coalesced_after_.clear();
    works.push_back(all);
    for (auto &w : works)
        w->recorded(stream);
    {
        std::lock_guard<std::mutex> qlock(queue_mutex_);
        for (auto &w : works)
            queue_.push_back(w);
    }
    queue_cv_.notify_one();
    return all;
}

// ---- sequence numbers, split, eager connect, monitored barrier ---------------------

void ProcessGroupOCCL::setSequenceNumberForGroup() {
    std::lock_guard<std::mutex> lock(mutex_);
    seq_ = 0;
}

uint64_t ProcessGroupOCCL::getSequenceNumberForGroup() {
    std::lock_guard<std::mutex> lock(mutex_);
    return seq_;
}

void ProcessGroupOCCL::eagerConnectSingleDevice(at::Device device) {
    TORCH_CHECK(device.type() == kDeviceType, "occl eager connect: ", device,
                " is not an openreg device");
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK(!closed_, "occl eager connect: the process group is shut down (or aborted)");
    int index = device.has_index() ? device.index() : current_device();
    check_device_index(index);
    comm_for(index);
    last_device_ = index;
}

c10::intrusive_ptr<c10d::Backend>
ProcessGroupOCCL::split(const c10::intrusive_ptr<c10d::Store> &store, const std::vector<int> &ranks,
                        const c10::intrusive_ptr<Options> &opts) {
    auto it = std::find(ranks.begin(), ranks.end(), getRank());
    bool member = it != ranks.end();
    // Disjoint groups of one split_group differ in their smallest rank.
    int color = member ? *std::min_element(ranks.begin(), ranks.end()) : OCCL_SPLIT_NOCOLOR;
    std::chrono::milliseconds timeout = opts ? opts->timeout : timeout_;
    std::shared_ptr<OcclComm> comm = std::make_shared<OcclComm>();
    int device;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        TORCH_CHECK(!closed_, "occl split: the process group is shut down (or aborted)");
        TORCH_CHECK(!coalescing_, "occl split: the group is coalescing");
        device = default_device();
        auto parent = comm_for(device);
        comm->device = device;
        WithoutGil no_gil; // every rank of this group takes part
        DeviceScope scope(static_cast<c10::DeviceIndex>(device));
        // Its rank in the new group is its place in the sorted ranks (key).
        OCCL_CHECK(occlCommSplit(parent->comm, color, getRank(), &comm->comm, nullptr), "split",
                   parent->comm);
    }
    if (!member)
        return nullptr;
    TORCH_CHECK(comm->comm, "occl split: occlCommSplit made no communicator for a member");
    int size = static_cast<int>(ranks.size());
    int rank = static_cast<int>(it - ranks.begin());
    int count = 0;
    occlCommCount(comm->comm, &count);
    TORCH_CHECK(count == size, "occl split: the new communicator has ", count, " ranks, expected ",
                size, " (are the ranks of the groups of one split disjoint?)");
    auto group = c10::make_intrusive<ProcessGroupOCCL>(store, rank, size, timeout);
    group->comms_[device] = comm;
    group->last_device_ = device;
    if (auto bound = getBoundDeviceId())
        group->setBoundDeviceId(bound);
    track(group);
    return group;
}

void ProcessGroupOCCL::monitoredBarrier(const c10d::BarrierOptions &opts, bool wait_all_ranks) {
    uint64_t n;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        TORCH_CHECK(!closed_, "occl monitored_barrier: the process group is shut down (or aborted)");
        n = monitored_barriers_++;
    }
    auto timeout = opts.timeout == c10d::kUnsetTimeout ? timeout_ : opts.timeout;
    std::string prefix = "occl/monitored_barrier/" + std::to_string(n) + "/";
    WithoutGil no_gil;
    if (getRank() != 0) {
        store_->set(prefix + std::to_string(getRank()), std::vector<uint8_t>{1});
        try {
            store_->wait({prefix + "done"}, timeout);
        } catch (const std::exception &e) {
            TORCH_CHECK(false, "occl monitored_barrier: rank ", getRank(),
                        " was not released by rank 0 within ", timeout.count(), " ms: ", e.what());
        }
        return;
    }
    auto deadline = std::chrono::steady_clock::now() + timeout;
    std::vector<int> missing;
    for (int r = 1; r < getSize(); r++) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        try {
            store_->wait({prefix + std::to_string(r)},
                         std::max(left, std::chrono::milliseconds(1)));
        } catch (const std::exception &) {
            missing.push_back(r);
            if (!wait_all_ranks)
                break;
        }
    }
    if (!missing.empty()) {
        std::ostringstream s;
        for (size_t i = 0; i < missing.size(); i++)
            s << (i ? ", " : "") << missing[i];
        TORCH_CHECK(false, "occl monitored_barrier: rank", missing.size() > 1 ? "s " : " ", s.str(),
                    " failed to pass monitoredBarrier in ", timeout.count(), " ms");
    }
    store_->set(prefix + "done", std::vector<uint8_t>{1});
}

// ---- collectives ---------------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::broadcast(std::vector<at::Tensor> &tensors,
                                                           const c10d::BroadcastOptions &opts) {
    const at::Tensor &t = single(tensors, "broadcast");
    TORCH_CHECK(opts.rootTensor == 0, "occl broadcast: rootTensor must be 0 (one tensor)");
    occlDataType_t type = occl_type(t.scalar_type(), "broadcast");
    int root = static_cast<int>(opts.rootRank);
    return run("broadcast", c10d::OpType::BROADCAST, t.device(), tensors, {},
               [&](occlComm_t c, orStream_t s) {
                   return occlBroadcast(t.data_ptr(), t.data_ptr(), t.numel(), type, root, c, s);
               });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::allreduce(std::vector<at::Tensor> &tensors,
                                                           const c10d::AllreduceOptions &opts) {
    const at::Tensor &t = single(tensors, "allreduce");
    c10::DeviceGuard guard(t.device());
    c10d::ReduceOp::RedOpType kind = opts.reduceOp.op_;
    if (kind == c10d::ReduceOp::BAND || kind == c10d::ReduceOp::BOR ||
        kind == c10d::ReduceOp::BXOR)
        return bitwise_allreduce(t, kind);
    Reduction red = occl_reduction(opts.reduceOp, t, "allreduce");
    std::vector<at::Tensor> keep;
    keep_factor(red, keep);
    return run("allreduce", c10d::OpType::ALLREDUCE, t.device(), tensors, keep,
               [&](occlComm_t c, orStream_t s) {
                   ScopedOp op(red, c);
                   if (op.result() != occlSuccess)
                       return op.result();
                   return occlAllReduce(t.data_ptr(), t.data_ptr(), t.numel(), red.type, op.op(),
                                        c, s);
               });
}

// OCCL, like NCCL, has no bitwise reductions: every rank's tensor is
// gathered (occlAllGather), then reduced on the device, in stream order.
c10::intrusive_ptr<c10d::Work>
ProcessGroupOCCL::bitwise_allreduce(const at::Tensor &t, c10d::ReduceOp::RedOpType kind) {
    const char *op_name = kind == c10d::ReduceOp::BAND  ? "BAND"
                          : kind == c10d::ReduceOp::BOR ? "BOR"
                                                        : "BXOR";
    TORCH_CHECK(at::isIntegralType(t.scalar_type(), /*includeBool=*/true), "occl allreduce: ",
                "ReduceOp.", op_name, " takes integer or bool tensors, not ",
                dtype_name(t.scalar_type()));
    occlDataType_t type = occl_type(t.scalar_type(), "allreduce");
    at::Tensor flat = at::empty({getSize() * t.numel()}, t.options());
    std::vector<at::Tensor> outs{t};
    return run(
        "allreduce", c10d::OpType::ALLREDUCE, t.device(), outs, {t, flat},
        [&](occlComm_t c, orStream_t s) {
            return occlAllGather(t.data_ptr(), flat.data_ptr(), t.numel(), type, c, s);
        },
        [t, flat, kind, n = getSize()] {
            at::Tensor parts = flat.view({n, t.numel()});
            at::Tensor acc = parts[0].clone();
            for (int r = 1; r < n; r++) {
                if (kind == c10d::ReduceOp::BAND)
                    acc.bitwise_and_(parts[r]);
                else if (kind == c10d::ReduceOp::BOR)
                    acc.bitwise_or_(parts[r]);
                else
                    acc.bitwise_xor_(parts[r]);
            }
            t.view({-1}).copy_(acc);
        });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupOCCL::allreduce_coalesced(std::vector<at::Tensor> &tensors,
                                      const c10d::AllreduceCoalescedOptions &opts) {
    TORCH_CHECK(!tensors.empty(), "occl allreduce_coalesced: no tensors");
    check_tensor(tensors[0], "allreduce_coalesced", "tensor 0");
    c10::DeviceGuard guard(tensors[0].device());
    std::vector<Reduction> reds;
    std::vector<at::Tensor> keep;
    for (size_t i = 0; i < tensors.size(); i++) {
        std::string what = "tensor " + std::to_string(i);
        check_tensor(tensors[i], "allreduce_coalesced", what.c_str());
        TORCH_CHECK(tensors[i].device() == tensors[0].device(), "occl allreduce_coalesced: ",
                    what, " is on ", tensors[i].device(), ", tensor 0 on ", tensors[0].device());
        reds.push_back(occl_reduction(opts.reduceOp, tensors[i], "allreduce_coalesced"));
        keep_factor(reds.back(), keep);
    }
    // One group: the calls launch together, one task for the communicator.
    return run("allreduce_coalesced", c10d::OpType::ALLREDUCE_COALESCED, tensors[0].device(),
               tensors, keep, [&](occlComm_t c, orStream_t s) {
                   return grouped(reds, c, [&](size_t i, occlRedOp_t op) {
                       return occlAllReduce(tensors[i].data_ptr(), tensors[i].data_ptr(),
                                            tensors[i].numel(), reds[i].type, op, c, s);
                   });
               });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::reduce(std::vector<at::Tensor> &tensors,
                                                        const c10d::ReduceOptions &opts) {
    const at::Tensor &t = single(tensors, "reduce");
    TORCH_CHECK(opts.rootTensor == 0, "occl reduce: rootTensor must be 0 (one tensor)");
    c10::DeviceGuard guard(t.device());
    Reduction red = occl_reduction(opts.reduceOp, t, "reduce");
    std::vector<at::Tensor> keep;
    keep_factor(red, keep);
    int root = static_cast<int>(opts.rootRank);
    return run("reduce", c10d::OpType::REDUCE, t.device(), tensors, keep,
               [&](occlComm_t c, orStream_t s) {
                   ScopedOp op(red, c);
                   if (op.result() != occlSuccess)
                       return op.result();
                   return occlReduce(t.data_ptr(), t.data_ptr(), t.numel(), red.type, op.op(), root,
                                     c, s);
               });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupOCCL::allgather(std::vector<std::vector<at::Tensor>> &outputs,
                            std::vector<at::Tensor> &inputs, const c10d::AllgatherOptions &) {
    const at::Tensor &in = single(inputs, "allgather");
    TORCH_CHECK(outputs.size() == 1, "occl allgather: takes one output list per process, got ",
                outputs.size());
    auto &outs = outputs[0];
    TORCH_CHECK(static_cast<int>(outs.size()) == getSize(), "occl allgather: the output list has ",
                outs.size(), " tensors, the group ", getSize(), " ranks");
    for (auto &o : outs) {
        check_like(o, in, "allgather", "an output tensor");
        TORCH_CHECK(o.numel() == in.numel(), "occl allgather: an output tensor has ", o.numel(),
                    " elements, the input ", in.numel());
    }
    occlDataType_t type = occl_type(in.scalar_type(), "allgather");
    at::Tensor flat = at::empty({getSize() * in.numel()}, in.options());
    return run(
        "allgather", c10d::OpType::ALLGATHER, in.device(), outs, {in, flat},
        [&](occlComm_t c, orStream_t s) {
            return occlAllGather(in.data_ptr(), flat.data_ptr(), in.numel(), type, c, s);
        },
        // By value: a coalesced call runs it at the end of the coalescing.
        [outs, flat, in, n = getSize()] {
            for (int r = 0; r < n; r++)
                outs[r].copy_(flat.narrow(0, r * in.numel(), in.numel()).view(outs[r].sizes()));
        });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::_allgather_base(at::Tensor &output,
                                                                 at::Tensor &input,
                                                                 const c10d::AllgatherOptions &) {
    check_tensor(input, "_allgather_base", "the input");
    check_like(output, input, "_allgather_base", "the output");
    TORCH_CHECK(output.numel() == input.numel() * getSize(), "occl _allgather_base: the output has ",
                output.numel(), " elements, expected the input's ", input.numel(), " times ",
                getSize(), " ranks");
    occlDataType_t type = occl_type(input.scalar_type(), "_allgather_base");
    return run("_allgather_base", c10d::OpType::_ALLGATHER_BASE, input.device(), {output},
               {input}, [&](occlComm_t c, orStream_t s) {
                   return occlAllGather(input.data_ptr(), output.data_ptr(), input.numel(), type,
                                        c, s);
               });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupOCCL::allgather_into_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                                  std::vector<at::Tensor> &inputs,
                                                  const c10d::AllgatherOptions &) {
    const char *name = "allgather_into_tensor_coalesced";
    check_pairs(outputs, inputs, name);
    std::vector<occlDataType_t> types;
    for (size_t i = 0; i < inputs.size(); i++) {
        TORCH_CHECK(outputs[i].numel() == inputs[i].numel() * getSize(), "occl ", name,
                    ": output ", i, " has ", outputs[i].numel(), " elements, expected input ", i,
                    "'s ", inputs[i].numel(), " times ", getSize(), " ranks");
        types.push_back(occl_type(inputs[i].scalar_type(), name));
    }
    return run(name, c10d::OpType::COALESCED, inputs[0].device(), outputs, inputs,
               [&](occlComm_t c, orStream_t s) {
                   occlResult_t res = occlGroupStart();
                   for (size_t i = 0; i < inputs.size() && res == occlSuccess; i++)
                       res = occlAllGather(inputs[i].data_ptr(), outputs[i].data_ptr(),
                                           inputs[i].numel(), types[i], c, s);
                   occlResult_t end = occlGroupEnd();
                   return res != occlSuccess ? res : end;
               });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupOCCL::allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputs,
                                      std::vector<at::Tensor> &inputs,
                                      const c10d::AllgatherOptions &) {
    const char *name = "allgather_coalesced";
    TORCH_CHECK(!inputs.empty(), "occl ", name, ": no tensors");
    TORCH_CHECK(static_cast<int>(outputs.size()) == getSize(), "occl ", name, ": ",
                outputs.size(), " output lists, the group has ", getSize(),
                " ranks (one list per rank)");
    std::vector<occlDataType_t> types;
    std::vector<at::Tensor> flats, outs;
    for (size_t i = 0; i < inputs.size(); i++) {
        std::string in = "input " + std::to_string(i);
        check_tensor(inputs[i], name, in.c_str());
        TORCH_CHECK(inputs[i].device() == inputs[0].device(), "occl ", name, ": ", in, " is on ",
                    inputs[i].device(), ", input 0 on ", inputs[0].device(),
                    ": all tensors of a call share one device");
        types.push_back(occl_type(inputs[i].scalar_type(), name));
        flats.push_back(at::empty({getSize() * inputs[i].numel()}, inputs[i].options()));
    }
    for (int r = 0; r < getSize(); r++) {
        TORCH_CHECK(outputs[r].size() == inputs.size(), "occl ", name, ": output list ", r,
                    " has ", outputs[r].size(), " tensors, there are ", inputs.size(),
                    " inputs");
        for (size_t i = 0; i < inputs.size(); i++) {
            std::string out = "output " + std::to_string(r) + "," + std::to_string(i);
            check_like(outputs[r][i], inputs[i], name, out.c_str());
            TORCH_CHECK(outputs[r][i].numel() == inputs[i].numel(), "occl ", name, ": ", out,
                        " has ", outputs[r][i].numel(), " elements, input ", i, " ",
                        inputs[i].numel());
            outs.push_back(outputs[r][i]);
        }
    }
    std::vector<at::Tensor> keep = inputs;
    keep.insert(keep.end(), flats.begin(), flats.end());
    return run(
        name, c10d::OpType::ALLGATHER_COALESCED, inputs[0].device(), outs, keep,
        [&](occlComm_t c, orStream_t s) {
            occlResult_t res = occlGroupStart();
            for (size_t i = 0; i < inputs.size() && res == occlSuccess; i++)
                res = occlAllGather(inputs[i].data_ptr(), flats[i].data_ptr(), inputs[i].numel(),
                                    types[i], c, s);
            occlResult_t end = occlGroupEnd();
            return res != occlSuccess ? res : end;
        },
        [outputs, flats, n = getSize()] {
            for (int r = 0; r < n; r++)
                for (size_t i = 0; i < flats.size(); i++) {
                    int64_t count = flats[i].numel() / n;
                    outputs[r][i].copy_(
                        flats[i].narrow(0, r * count, count).view(outputs[r][i].sizes()));
                }
        });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupOCCL::gather(std::vector<std::vector<at::Tensor>> &outputs,
                         std::vector<at::Tensor> &inputs, const c10d::GatherOptions &opts) {
    const at::Tensor &in = single(inputs, "gather");
    int root = static_cast<int>(opts.rootRank);
    bool is_root = root == getRank();
    at::Tensor flat;
    std::vector<at::Tensor> outs;
    if (is_root) {
        TORCH_CHECK(outputs.size() == 1, "occl gather: the root takes one output list, got ",
                    outputs.size());
        outs = outputs[0];
        TORCH_CHECK(static_cast<int>(outs.size()) == getSize(), "occl gather: the output list has ",
                    outs.size(), " tensors, the group ", getSize(), " ranks");
        for (auto &o : outs) {
            check_like(o, in, "gather", "an output tensor");
            TORCH_CHECK(o.numel() == in.numel(), "occl gather: an output tensor has ", o.numel(),
                        " elements, the input ", in.numel());
        }
        flat = at::empty({getSize() * in.numel()}, in.options());
    } else {
        TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                    "occl gather: only the root (rank ", root, ") takes output tensors");
    }
    occlDataType_t type = occl_type(in.scalar_type(), "gather");
    return run(
        "gather", c10d::OpType::GATHER, in.device(), outs, {in, flat},
        [&](occlComm_t c, orStream_t s) {
            return occlGather(in.data_ptr(), is_root ? flat.data_ptr() : nullptr, in.numel(),
                              type, root, c, s);
        },
        [outs, flat, in] {
            for (size_t r = 0; r < outs.size(); r++)
                outs[r].copy_(flat.narrow(0, r * in.numel(), in.numel()).view(outs[r].sizes()));
        });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupOCCL::scatter(std::vector<at::Tensor> &outputs,
                          std::vector<std::vector<at::Tensor>> &inputs,
                          const c10d::ScatterOptions &opts) {
    const at::Tensor &out = single(outputs, "scatter");
    int root = static_cast<int>(opts.rootRank);
    bool is_root = root == getRank();
    at::Tensor flat;
    std::vector<at::Tensor> keep{out};
    if (is_root) {
        TORCH_CHECK(inputs.size() == 1, "occl scatter: the root takes one input list, got ",
                    inputs.size());
        auto &ins = inputs[0];
        TORCH_CHECK(static_cast<int>(ins.size()) == getSize(), "occl scatter: the input list has ",
                    ins.size(), " tensors, the group ", getSize(), " ranks");
        for (auto &i : ins) {
            check_like(i, out, "scatter", "an input tensor");
            TORCH_CHECK(i.numel() == out.numel(), "occl scatter: an input tensor has ", i.numel(),
                        " elements, the output ", out.numel());
        }
        c10::DeviceGuard guard(out.device());
        flat = at::empty({getSize() * out.numel()}, out.options());
        for (int r = 0; r < getSize(); r++) // on the current stream, before the call
            flat.narrow(0, r * out.numel(), out.numel()).copy_(ins[r].reshape({-1}));
        keep.push_back(flat);
    } else {
        TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                    "occl scatter: only the root (rank ", root, ") takes input tensors");
    }
    occlDataType_t type = occl_type(out.scalar_type(), "scatter");
    return run("scatter", c10d::OpType::SCATTER, out.device(), outputs, keep,
               [&](occlComm_t c, orStream_t s) {
                   return occlScatter(is_root ? flat.data_ptr() : nullptr, out.data_ptr(),
                                      out.numel(), type, root, c, s);
               });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupOCCL::reduce_scatter(std::vector<at::Tensor> &outputs,
                                 std::vector<std::vector<at::Tensor>> &inputs,
                                 const c10d::ReduceScatterOptions &opts) {
    const at::Tensor &out = single(outputs, "reduce_scatter");
    TORCH_CHECK(inputs.size() == 1, "occl reduce_scatter: takes one input list per process, got ",
                inputs.size());
    auto &ins = inputs[0];
    TORCH_CHECK(static_cast<int>(ins.size()) == getSize(), "occl reduce_scatter: the input list has ",
                ins.size(), " tensors, the group ", getSize(), " ranks");
    for (auto &i : ins) {
        check_like(i, out, "reduce_scatter", "an input tensor");
        TORCH_CHECK(i.numel() == out.numel(), "occl reduce_scatter: an input tensor has ",
                    i.numel(), " elements, the output ", out.numel());
    }
    c10::DeviceGuard guard(out.device());
    Reduction red = occl_reduction(opts.reduceOp, out, "reduce_scatter");
    at::Tensor flat = at::empty({getSize() * out.numel()}, out.options());
    for (int r = 0; r < getSize(); r++)
        flat.narrow(0, r * out.numel(), out.numel()).copy_(ins[r].reshape({-1}));
    std::vector<at::Tensor> keep{flat};
    keep_factor(red, keep);
    return run("reduce_scatter", c10d::OpType::REDUCE_SCATTER, out.device(), outputs, keep,
               [&](occlComm_t c, orStream_t s) {
                   ScopedOp op(red, c);
                   if (op.result() != occlSuccess)
                       return op.result();
                   return occlReduceScatter(flat.data_ptr(), out.data_ptr(), out.numel(), red.type,
                                            op.op(), c, s);
               });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupOCCL::_reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                                       const c10d::ReduceScatterOptions &opts) {
    check_tensor(input, "_reduce_scatter_base", "the input");
    check_like(output, input, "_reduce_scatter_base", "the output");
    TORCH_CHECK(input.numel() == output.numel() * getSize(), "occl _reduce_scatter_base: the input has ",
                input.numel(), " elements, expected the output's ", output.numel(), " times ",
                getSize(), " ranks");
    c10::DeviceGuard guard(input.device());
    Reduction red = occl_reduction(opts.reduceOp, input, "_reduce_scatter_base");
    std::vector<at::Tensor> keep{input};
    keep_factor(red, keep);
    return run("_reduce_scatter_base", c10d::OpType::_REDUCE_SCATTER_BASE, input.device(),
               {output}, keep, [&](occlComm_t c, orStream_t s) {
                   ScopedOp op(red, c);
                   if (op.result() != occlSuccess)
                       return op.result();
                   return occlReduceScatter(input.data_ptr(), output.data_ptr(), output.numel(),
                                            red.type, op.op(), c, s);
               });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupOCCL::reduce_scatter_tensor_coalesced(std::vector<at::Tensor> &outputs,
                                                  std::vector<at::Tensor> &inputs,
                                                  const c10d::ReduceScatterOptions &opts) {
    const char *name = "reduce_scatter_tensor_coalesced";
    check_pairs(outputs, inputs, name);
    c10::DeviceGuard guard(inputs[0].device());
    std::vector<Reduction> reds;
    std::vector<at::Tensor> keep(inputs);
    for (size_t i = 0; i < inputs.size(); i++) {
        TORCH_CHECK(inputs[i].numel() == outputs[i].numel() * getSize(), "occl ", name,
                    ": input ", i, " has ", inputs[i].numel(), " elements, expected output ", i,
                    "'s ", outputs[i].numel(), " times ", getSize(), " ranks");
        reds.push_back(occl_reduction(opts.reduceOp, inputs[i], name));
        keep_factor(reds.back(), keep);
    }
    return run(name, c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED, inputs[0].device(), outputs,
               keep, [&](occlComm_t c, orStream_t s) {
                   return grouped(reds, c, [&](size_t i, occlRedOp_t op) {
                       return occlReduceScatter(inputs[i].data_ptr(), outputs[i].data_ptr(),
                                                outputs[i].numel(), reds[i].type, op, c, s);
                   });
               });
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupOCCL::alltoall_base(at::Tensor &output, at::Tensor &input,
                                std::vector<int64_t> &outputSplitSizes,
                                std::vector<int64_t> &inputSplitSizes,
                                const c10d::AllToAllOptions &) {
    check_tensor(input, "alltoall_base", "the input");
    check_like(output, input, "alltoall_base", "the output");
    occlDataType_t type = occl_type(input.scalar_type(), "alltoall_base");
    int n = getSize();
    if (outputSplitSizes.empty() && inputSplitSizes.empty()) {
        TORCH_CHECK(input.numel() == output.numel() && input.numel() % n == 0,
                    "occl alltoall_base: without split sizes the input and the output need the "
                    "same number of elements, a multiple of the ", n, " ranks (input ",
                    input.numel(), ", output ", output.numel(), ")");
        return run("alltoall_base", c10d::OpType::ALLTOALL_BASE, input.device(), {output},
                   {input}, [&](occlComm_t c, orStream_t s) {
                       return occlAlltoAll(input.data_ptr(), output.data_ptr(), input.numel() / n,
                                           type, c, s);
                   });
    }
    // Split sizes count rows (first dimension); empty means equal splits.
    auto offsets = [&](std::vector<int64_t> &splits, const at::Tensor &t, const char *what,
                       std::vector<int64_t> &count, std::vector<int64_t> &displ) {
        TORCH_CHECK(t.dim() > 0, "occl alltoall_base: the ", what, " has no first dimension");
        int64_t rows = t.size(0), row = rows ? t.numel() / rows : 0;
        if (splits.empty()) {
            TORCH_CHECK(rows % n == 0, "occl alltoall_base: the ", what, "'s ", rows,
                        " rows do not split equally among ", n, " ranks");
            splits.assign(n, rows / n);
        }
        TORCH_CHECK(static_cast<int>(splits.size()) == n, "occl alltoall_base: ", splits.size(),
                    " ", what, " split sizes for a group of ", n, " ranks");
        int64_t sum = 0;
        for (int64_t v : splits) {
            TORCH_CHECK(v >= 0, "occl alltoall_base: negative ", what, " split size ", v);
            sum += v;
        }
        TORCH_CHECK(sum == rows, "occl alltoall_base: the ", what, " split sizes add up to ", sum,
                    " rows, the ", what, " has ", rows);
        int64_t at = 0;
        for (int64_t v : splits) {
            count.push_back(v * row);
            displ.push_back(at * row);
            at += v;
        }
    };
    std::vector<int64_t> scount, sdispl, rcount, rdispl;
    offsets(inputSplitSizes, input, "input", scount, sdispl);
    offsets(outputSplitSizes, output, "output", rcount, rdispl);
    int me = getRank();
    TORCH_CHECK(scount[me] == rcount[me], "occl alltoall_base: this rank sends itself ",
                scount[me], " elements but receives ", rcount[me]);
    size_t esize = input.element_size();
    char *in = static_cast<char *>(input.data_ptr()), *out = static_cast<char *>(output.data_ptr());
    return run("alltoall_base", c10d::OpType::ALLTOALL_BASE, input.device(), {output}, {input},
               [&](occlComm_t c, orStream_t s) {
                   // Its own part is a copy; the others are sends and receives
                   // launched together, so no order of peers can deadlock.
                   if (scount[me]) {
                       orError_t e = orMemcpyAsync(out + rdispl[me] * esize, in + sdispl[me] * esize,
                                                   scount[me] * esize, orMemcpyDeviceToDevice, s);
                       TORCH_CHECK(e == orSuccess, "occl alltoall_base: the local copy failed: ",
                                   orGetErrorString(e));
                   }
                   occlResult_t res = occlGroupStart();
                   for (int p = 0; p < n && res == occlSuccess; p++) {
                       if (p == me)
                           continue;
                       if (scount[p])
                           res = occlSend(in + sdispl[p] * esize, scount[p], type, p, c, s);
                       if (res == occlSuccess && rcount[p])
                           res = occlRecv(out + rdispl[p] * esize, rcount[p], type, p, c, s);
                   }
                   occlResult_t end = occlGroupEnd();
                   return res != occlSuccess ? res : end;
               });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::alltoall(std::vector<at::Tensor> &outputs,
                                                          std::vector<at::Tensor> &inputs,
                                                          const c10d::AllToAllOptions &) {
    int n = getSize(), me = getRank();
    TORCH_CHECK(static_cast<int>(inputs.size()) == n && static_cast<int>(outputs.size()) == n,
                "occl alltoall: ", inputs.size(), " input and ", outputs.size(),
                " output tensors for a group of ", n, " ranks (one per rank each)");
    check_tensor(inputs[0], "alltoall", "input 0");
    for (int r = 0; r < n; r++) {
        check_like(inputs[r], inputs[0], "alltoall", "an input tensor");
        check_like(outputs[r], inputs[0], "alltoall", "an output tensor");
    }
    TORCH_CHECK(inputs[me].numel() == outputs[me].numel(), "occl alltoall: this rank sends "
                "itself ", inputs[me].numel(), " elements but receives ", outputs[me].numel());
    occlDataType_t type = occl_type(inputs[0].scalar_type(), "alltoall");
    size_t esize = inputs[0].element_size();
    return run("alltoall", c10d::OpType::ALLTOALL, inputs[0].device(), outputs, inputs,
               [&](occlComm_t c, orStream_t s) {
                   // As alltoall_base with split sizes: a copy to itself, then
                   // every send and receive launched together.
                   if (inputs[me].numel()) {
                       orError_t e = orMemcpyAsync(outputs[me].data_ptr(), inputs[me].data_ptr(),
                                                   inputs[me].numel() * esize,
                                                   orMemcpyDeviceToDevice, s);
                       TORCH_CHECK(e == orSuccess, "occl alltoall: the local copy failed: ",
                                   orGetErrorString(e));
                   }
                   occlResult_t res = occlGroupStart();
                   for (int p = 0; p < n && res == occlSuccess; p++) {
                       if (p == me)
                           continue;
                       if (inputs[p].numel())
                           res = occlSend(inputs[p].data_ptr(), inputs[p].numel(), type, p, c, s);
                       if (res == occlSuccess && outputs[p].numel())
                           res = occlRecv(outputs[p].data_ptr(), outputs[p].numel(), type, p, c, s);
                   }
                   occlResult_t end = occlGroupEnd();
                   return res != occlSuccess ? res : end;
               });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::send(std::vector<at::Tensor> &tensors,
                                                      int dstRank, int) {
    const at::Tensor &t = single(tensors, "send");
    occlDataType_t type = occl_type(t.scalar_type(), "send");
    return run("send", c10d::OpType::SEND, t.device(), tensors, {},
               [&](occlComm_t c, orStream_t s) {
                   return occlSend(t.data_ptr(), t.numel(), type, dstRank, c, s);
               });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::recv(std::vector<at::Tensor> &tensors,
                                                      int srcRank, int) {
    const at::Tensor &t = single(tensors, "recv");
    occlDataType_t type = occl_type(t.scalar_type(), "recv");
    return run("recv", c10d::OpType::RECV, t.device(), tensors, {},
               [&](occlComm_t c, orStream_t s) {
                   return occlRecv(t.data_ptr(), t.numel(), type, srcRank, c, s);
               });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::recvAnysource(std::vector<at::Tensor> &tensors,
                                                               int) {
    const at::Tensor &t = single(tensors, "recvAnysource");
    occlDataType_t type = occl_type(t.scalar_type(), "recvAnysource");
    auto source = std::make_shared<int>(-1);
    auto work = run("recvAnysource", c10d::OpType::RECVANYSOURCE, t.device(), tensors, {},
                    [&](occlComm_t c, orStream_t s) {
                        return occlRecvAnySource(t.data_ptr(), t.numel(), type, source.get(), c, s);
                    });
    // (In a coalescing OCCL refuses it, and run() raises: no work to hold it.)
    static_cast<WorkOCCL *>(work.get())->source_ = std::move(source);
    return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOCCL::barrier(const c10d::BarrierOptions &opts) {
    // A one-element all-reduce on the device the group last used (or the
    // one named, or the current one), as NCCL's barrier.
    int device;
    if (!opts.device_ids.empty()) {
        device = static_cast<int>(opts.device_ids[0]);
        check_device_index(device);
    } else {
        std::lock_guard<std::mutex> lock(mutex_);
        device = default_device();
    }
    at::Tensor token = at::zeros({1}, at::TensorOptions()
                                          .dtype(at::kInt)
                                          .device(c10::Device(kDeviceType,
                                                              static_cast<c10::DeviceIndex>(device))));
    return run("barrier", c10d::OpType::BARRIER, token.device(), {token}, {},
               [&](occlComm_t c, orStream_t s) {
                   return occlAllReduce(token.data_ptr(), token.data_ptr(), 1, occlInt32, occlSum,
                                        c, s);
               });
}

// ---- Python --------------------------------------------------------------------------

TORCH_OPENREG_BINDINGS(process_group_occl) {
    namespace py = pybind11;
    // The base class is torch's: importing torch.distributed first registers it.
    py::module::import("torch.distributed");
    py::class_<ProcessGroupOCCL, c10d::Backend, c10::intrusive_ptr<ProcessGroupOCCL>>(
        m, "ProcessGroupOCCL",
        "The occl torch.distributed backend: a c10d Backend for openreg device tensors (use "
        "through torch.distributed with backend \"occl\")")
        .def(py::init([](const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                         std::chrono::milliseconds timeout) {
                 auto group = c10::make_intrusive<ProcessGroupOCCL>(store, rank, size, timeout);
                 ProcessGroupOCCL::track(group);
                 return group;
             }),
             py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
             py::call_guard<py::gil_scoped_release>())
        .def_property_readonly("timeout", &ProcessGroupOCCL::timeout)
        // split_group copies the parent's options for its child.
        .def_property_readonly("options", &ProcessGroupOCCL::getBackendOptions)
        // new_group on a bound default group asks the ranks outside the new
        // group to take part in a split of the default group's communicator
        // (NCCL's ncclCommSplit). occl's new_group makes its communicator from
        // a unique id among its members only, so there is nothing to do.
        .def("perform_nocolor_split", [](ProcessGroupOCCL &, const at::Device &) {},
             py::arg("device"))
        .def("_get_sequence_number_for_group", &ProcessGroupOCCL::getSequenceNumberForGroup,
             py::call_guard<py::gil_scoped_release>())
        .def(
            "monitored_barrier",
            [](ProcessGroupOCCL &pg, const std::chrono::milliseconds &timeout,
               bool wait_all_ranks) {
                c10d::BarrierOptions opts;
                opts.timeout = timeout;
                pg.monitoredBarrier(opts, wait_all_ranks);
            },
            py::arg("timeout"), py::arg("wait_all_ranks") = false,
            py::call_guard<py::gil_scoped_release>());
    py::class_<OcclOptions, c10d::Backend::Options, c10::intrusive_ptr<OcclOptions>>(
        m, "OcclOptions", "The options of an occl group: its timeout")
        .def("__copy__", [](const OcclOptions &o) { return c10::make_intrusive<OcclOptions>(o.timeout); })
        .def("__deepcopy__", [](const OcclOptions &o, py::dict) {
            return c10::make_intrusive<OcclOptions>(o.timeout);
        });
    // torch_openreg.distributed's exit hook: every group still alive shuts
    // down while the runtime runs.
    m.def("_occl_shutdown_all", &ProcessGroupOCCL::shutdown_all);
}

} // namespace torch_openreg
