// native.cpp - the common ops as device kernels. An op listed here is
// checked and shaped on the host (its Meta kernel: shapes, dtypes,
// broadcasting, the errors PyTorch raises synchronously), its outputs are
// allocated on the device, and its CPU kernel then runs as a kernel of the
// current stream: on the device's worker thread, in stream order, on CPU
// tensors that alias the device memory. No host copies (the boxed fallback's
// cost), and the launch states the op's FLOPs and bytes, so OPENREG_TIME=
// virtual charges it on the device profile's roofline.
//
// Errors that depend on the data (an index out of range) happen on the
// device, after the call returned: they are raised by the next
// synchronization of the device's work from this package, as CUDA reports a
// device-side assertion, and the process keeps working.
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#include <ATen/native/CPUFallback.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include "runtime/openreg_torch.h"

namespace torch_openreg {

namespace {

// ---- device-side errors ---------------------------------------------------

std::mutex error_mutex;
std::string pending_error; // the first since the last report
std::atomic<bool> error_pending{false};

void record_device_error(const std::string &op, const char *what) {
    std::lock_guard<std::mutex> lock(error_mutex);
    if (!error_pending.load()) {
        pending_error = "openreg: device-side error in " + op + ": " + what;
        error_pending.store(true);
    }
}

} // namespace

void raise_device_errors() {
    if (!error_pending.load(std::memory_order_acquire))
        return;
    std::string message;
    {
        std::lock_guard<std::mutex> lock(error_mutex);
        message.swap(pending_error);
        error_pending.store(false);
    }
    TORCH_CHECK(message.empty(), message);
}

namespace {

// ---- what an op costs -------------------------------------------------------

enum class Cost { Elementwise, Reduction, Softmax, Matmul, Memory, Foreach };

struct NativeOp {
    // The out= overload a functional op runs on the device; none for
    // in-place and out= overloads, which run as they are.
    c10::optional<c10::OperatorHandle> out_op;
    Cost cost;
};

double tensor_bytes(const at::Tensor &t) {
    return static_cast<double>(t.numel()) * static_cast<double>(t.element_size());
}

// FLOPs of the op: elementwise and reductions one per element they read or
// write (the larger), softmax five, matmul 2*M*N*K per output matrix (K the
// inner size of the first of its two matrix operands), a _foreach_ op one per
// element it writes (reads, for a norm), summed over its lists; copies and
// indexing none. Bytes:
// every device tensor read and written once.
orLaunchCost launch_cost(Cost kind, const std::vector<at::Tensor> &inputs,
                         const std::vector<at::Tensor> &outputs) {
    double bytes = 0, in_elems = 0, out_elems = 0;
    for (const at::Tensor &t : inputs) {
        bytes += tensor_bytes(t);
        in_elems = std::max(in_elems, static_cast<double>(t.numel()));
    }
    for (const at::Tensor &t : outputs) {
        bytes += tensor_bytes(t);
        out_elems = std::max(out_elems, static_cast<double>(t.numel()));
    }
    double flops = 0;
    switch (kind) {
    case Cost::Elementwise:
    case Cost::Reduction: flops = std::max(in_elems, out_elems); break;
    case Cost::Softmax: flops = 5 * std::max(in_elems, out_elems); break;
    case Cost::Matmul: {
        const at::Tensor *a = nullptr;
        for (size_t i = 0; i + 1 < inputs.size(); i++)
            if (inputs[i].dim() >= 2 && inputs[i + 1].dim() >= 2)
                a = &inputs[i];
        if (a != nullptr)
            flops = 2 * out_elems * static_cast<double>(a->size(-1));
        break;
    }
    case Cost::Foreach: {
        // Summed over the lists: the elements written, or read when each
        // output is one number (a norm per tensor).
        bool reduced = !outputs.empty();
        for (const at::Tensor &t : outputs) {
            flops += static_cast<double>(t.numel());
            reduced &= t.dim() == 0;
        }
        if (reduced) {
            flops = 0;
            for (const at::Tensor &t : inputs)
                flops += static_cast<double>(t.numel());
        }
        break;
    }
    case Cost::Memory: break;
    }
    return orLaunchCost{flops, bytes};
}

// The table: the functional, in-place and out= overloads of each op.
const std::unordered_map<std::string, NativeOp> &native_ops() {
    static const std::unordered_map<std::string, NativeOp> ops = [] {
        std::unordered_map<std::string, NativeOp> m;
        // family("add.Tensor", "add.out", cost, {"add_.Tensor"}): names without "aten::".
        auto family = [&m](const std::string &functional, const std::string &out, Cost cost,
                           std::initializer_list<const char *> as_is) {
            size_t dot = out.find('.');
            c10::OperatorHandle out_op = c10::Dispatcher::singleton().findSchemaOrThrow(
                ("aten::" + out.substr(0, dot)).c_str(), out.substr(dot + 1).c_str());
            m.emplace(functional, NativeOp{out_op, cost});
            m.emplace(out, NativeOp{c10::nullopt, cost});
            for (const char *name : as_is)
                m.emplace(name, NativeOp{c10::nullopt, cost});
        };
        const Cost E = Cost::Elementwise, R = Cost::Reduction, S = Cost::Softmax,
                   M = Cost::Matmul, C = Cost::Memory;
        family("add.Tensor", "add.out", E, {"add_.Tensor"});
        family("sub.Tensor", "sub.out", E, {"sub_.Tensor"});
        family("mul.Tensor", "mul.out", E, {"mul_.Tensor"});
        family("div.Tensor", "div.out", E, {"div_.Tensor"});
        for (const char *op : {"neg", "exp", "log", "sqrt", "rsqrt", "abs", "sigmoid", "tanh",
                               "reciprocal", "sin", "cos", "gelu", "silu", "clamp_min"}) {
            family(op, std::string(op) + ".out", E, {});
            m.emplace(std::string(op) + "_", NativeOp{c10::nullopt, E});
        }
        family("maximum", "maximum.out", E, {});
        family("minimum", "minimum.out", E, {});
        family("where.self", "where.self_out", E, {});
        family("pow.Tensor_Scalar", "pow.Tensor_Scalar_out", E, {"pow_.Scalar"});
        family("addcmul", "addcmul.out", E, {"addcmul_"});
        family("addcdiv", "addcdiv.out", E, {"addcdiv_"});
        family("lerp.Scalar", "lerp.Scalar_out", E, {"lerp_.Scalar"});
        family("threshold_backward", "threshold_backward.grad_input", E, {});
        family("sigmoid_backward", "sigmoid_backward.grad_input", E, {});
        family("tanh_backward", "tanh_backward.grad_input", E, {});
        family("gelu_backward", "gelu_backward.grad_input", E, {});
        family("silu_backward", "silu_backward.grad_input", E, {});
        family("sum.dim_IntList", "sum.IntList_out", R, {});
        family("mean.dim", "mean.out", R, {});
        family("amax", "amax.out", R, {});
        family("amin", "amin.out", R, {});
        family("argmax", "argmax.out", R, {});
        family("_softmax", "_softmax.out", S, {});
        family("_log_softmax", "_log_softmax.out", S, {});
        family("_softmax_backward_data", "_softmax_backward_data.out", S, {});
        family("_log_softmax_backward_data", "_log_softmax_backward_data.out", S, {});
        family("mm", "mm.out", M, {});
        family("addmm", "addmm.out", M, {"addmm_"});
        family("bmm", "bmm.out", M, {});
        family("baddbmm", "baddbmm.out", M, {"baddbmm_"});
        family("index_select", "index_select.out", C, {});
        family("gather", "gather.out", C, {});
        family("cat", "cat.out", C, {});
        // The _foreach_ ops optimizers (Adam, SGD, clip_grad_norm_) run on
        // their parameter lists: one kernel per call, over the whole lists.
        const Cost F = Cost::Foreach;
        for (const char *op : {"add", "sub", "mul", "div", "maximum", "clamp_min", "lerp",
                               "pow", "addcmul", "addcdiv"}) {
            for (const char *overload : {"List", "Scalar", "ScalarList", "Tensor"}) {
                std::string name = std::string("_foreach_") + op;
                if (!c10::Dispatcher::singleton().findSchema({"aten::" + name, overload}))
                    continue; // not every op has every overload
                family(name + "." + overload, name + "." + overload + "_out", F, {});
                if (c10::Dispatcher::singleton().findSchema({"aten::" + name + "_", overload}))
                    m.emplace(name + "_." + overload, NativeOp{c10::nullopt, F});
            }
        }
        for (const char *op : {"sqrt", "neg", "exp", "abs", "reciprocal", "sign", "zero"}) {
            std::string name = std::string("_foreach_") + op;
            family(name, name + ".out", F, {});
            m.emplace(name + "_", NativeOp{c10::nullopt, F});
        }
        family("_foreach_norm.Scalar", "_foreach_norm.Scalar_out", F, {});
        return m;
    }();
    return ops;
}

// "add.Tensor" for aten::add.Tensor, as the table names ops.
std::string op_key(const c10::OperatorHandle &op) {
    const c10::OperatorName &name = op.operator_name();
    std::string base = name.name.substr(name.name.find("::") + 2);
    return name.overload_name.empty() ? base : base + "." + name.overload_name;
}

// ---- the launch --------------------------------------------------------------

// A CPU tensor over t's device memory: the same bytes, sizes and strides,
// and the same math bits (a conjugate or negative view stays one: the ops
// that take such views, matmul among them, read them as views).
at::Tensor host_alias(const at::Tensor &t) {
    at::Tensor alias = at::from_blob(t.data_ptr(), t.sizes(), t.strides(),
                                     at::TensorOptions().dtype(t.dtype()).device(at::kCPU));
    if (t.is_conj())
        alias = alias.conj();
    if (t.is_neg())
        alias = alias._neg_view();
    return alias;
}

at::Tensor meta_like(const at::Tensor &t) {
    return at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta));
}

// Launches kernel(args) as one block on the current stream of `device`,
// charged `cost`, named `name` in traces.
orError_t launch_charged(c10::DeviceIndex device, const char *name, const orLaunchCost &cost,
                         orKernel_t kernel, void *args, size_t args_size) {
    orLaunchConfig config{};
    config.gridDim = {1, 1, 1};
    config.blockDim = {1, 1, 1};
    config.stream = current_stream_handle(device);
    config.cost = &cost;
    config.name = name;
    return orLaunchKernelEx(&config, kernel, args, args_size);
}

// Inside an op: its CPU (or Meta) kernels run on plain tensors without
// autograd history, straight to the kernel, and are not ops of their own to
// the profiler (the caller's op is).
struct InnerCall {
    at::RecordFunctionGuard not_recorded{false};
    c10::impl::ExcludeDispatchKeyGuard below_autograd{
        c10::autograd_dispatch_keyset_with_ADInplaceOrView};
};

struct Job {
    c10::optional<c10::OperatorHandle> op;
    torch::jit::Stack stack; // CPU tensors: aliases of device memory, CPU scalars
    std::string name;
    // Instead of op: work on aliases of device memory (an op whose CPU
    // kernel is another op's, e.g. the overrideable convolutions).
    std::function<void()> body;
};

// The device's thread is the op's only thread: ATen's intra-op pool
// (OpenMP, which MKL follows) would start a team from it, and the team, pinned
// to the device's cores with it, waits on itself there (4 ms scheduler ticks
// per op on a 1-core device). OpenMP's thread count is per thread: set once on
// each device thread, after ATen's own first setting of it there.
bool run_serially() {
    (void)at::get_num_threads(); // ATen's lazy per-thread initialization
    using SetThreads = void (*)(int);
    if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads")))
        set(1);
    return true;
}

void run_job(const orKernelContext *, void *args) {
    std::unique_ptr<Job> job(*static_cast<Job **>(args));
    try {
        InnerCall inner;
        static thread_local bool serial = run_serially();
        (void)serial;
        if (job->body)
            job->body();
        else
            job->op->callBoxed(&job->stack);
    } catch (const std::exception &e) {
        record_device_error(job->name, e.what());
    }
    job->stack.clear(); // the aliases die here, on the device's thread
}

// Where the tensor arguments are: one openreg device, besides CPU scalars
// (0-dim), which ops accept with device tensors, as CUDA's do.
struct Operands {
    c10::optional<c10::Device> device, other; // other: a second device, an error
};

void visit(const at::Tensor &t, Operands &ops) {
    if (!t.defined() || (t.is_cpu() && t.dim() == 0))
        return;
    if (t.device().type() == kDeviceType && !ops.device)
        ops.device = t.device();
    else if (t.device() != ops.device && !ops.other)
        ops.other = t.device();
}

void visit(const c10::IValue &v, Operands &ops) {
    if (v.isTensor())
        visit(v.toTensor(), ops);
    else if (v.isTensorList())
        for (const at::Tensor &t : v.toTensorList().vec())
            visit(t, ops);
}

// v with every device tensor (alone or in a list) replaced by f(tensor).
c10::IValue map_tensors(const c10::IValue &v, at::Tensor (*f)(const at::Tensor &)) {
    auto one = [f](const at::Tensor &t) {
        return t.defined() && t.device().type() == kDeviceType ? f(t) : t;
    };
    if (v.isTensor())
        return one(v.toTensor());
    if (v.isTensorList()) {
        c10::List<at::Tensor> out;
        for (const at::Tensor &t : v.toTensorList().vec())
            out.push_back(one(t));
        return out;
    }
    return v;
}

// ---- the Meta kernel's answers, remembered ----------------------------------

// The layouts of a call's results, as its Meta kernel made them: a tensor,
// or a list of them (the _foreach_ ops).
struct Layout {
    std::vector<int64_t> sizes, strides;
    c10::ScalarType dtype;
};
struct Result {
    bool list;
    std::vector<Layout> tensors; // one unless a list
};
using Layouts = std::vector<Result>;

template <typename T>
void put(std::string &sig, const T &value) {
    sig.append(reinterpret_cast<const char *>(&value), sizeof value);
}

void put_tensor(std::string &sig, const at::Tensor &t) {
    put(sig, t.defined());
    if (!t.defined())
        return;
    put(sig, t.scalar_type());
    put(sig, t.device().type());
    put(sig, t.dim());
    for (int64_t d = 0; d < t.dim(); d++) {
        put(sig, t.size(d));
        put(sig, t.stride(d));
    }
}

// What a Meta kernel's answer depends on: the op and, per argument, a
// tensor's dtype, device type, sizes and strides; a Scalar's type (not its
// value, which changes every step for an optimizer's factors, and leaves
// shapes and dtypes alone; only the sign of an integer, which an integer
// power checks); a list of Scalars' length; any other value whole. False for an argument of another kind.
bool signature(const std::string &key, const c10::FunctionSchema &schema,
               const std::vector<c10::IValue> &args, std::string &sig) {
    sig = key;
    for (size_t i = 0; i < args.size(); i++) {
        const c10::IValue &v = args[i];
        put(sig, static_cast<int>(v.tagKind().size()));
        sig += v.tagKind();
        if (v.isTensor()) {
            put_tensor(sig, v.toTensor());
        } else if (v.isTensorList()) {
            for (const at::Tensor &t : v.toTensorList().vec())
                put_tensor(sig, t);
        } else if (schema.arguments()[i].type()->kind() == c10::TypeKind::NumberType) {
            if (v.isInt())
                put(sig, v.toInt() < 0);
        } else if (v.isInt()) {
            put(sig, v.toInt());
        } else if (v.isDouble()) {
            put(sig, v.toDouble());
        } else if (v.isBool()) {
            put(sig, v.toBool());
        } else if (v.isIntList()) {
            for (int64_t x : v.toIntList())
                put(sig, x);
        } else if (v.isString()) {
            sig += v.toStringRef();
        } else if (schema.arguments()[i].type()->str() == "Scalar[]" && v.isList()) {
            put(sig, v.toListRef().size()); // a _foreach_ op's factors: values vary
        } else if (!v.isNone()) {
            return false;
        }
    }
    return true;
}

std::mutex layout_mutex;
std::unordered_map<std::string, Layouts> layout_cache;
constexpr size_t kLayoutCacheEntries = 8192;

// The results' layouts of op on args: remembered, or from the Meta kernel,
// which also raises the errors PyTorch raises before any work is done.
Layouts result_layouts(const c10::OperatorHandle &op, const std::string &key,
                       const std::vector<c10::IValue> &args) {
    std::string sig;
    bool cacheable = signature(key, op.schema(), args, sig);
    if (cacheable) {
        std::lock_guard<std::mutex> lock(layout_mutex);
        auto it = layout_cache.find(sig);
        if (it != layout_cache.end())
            return it->second;
    }
    torch::jit::Stack meta;
    for (const c10::IValue &v : args)
        meta.push_back(map_tensors(v, meta_like));
    {
        InnerCall inner; // a check, not an op of its own
        op.callBoxed(&meta);
    }
    Layouts layouts;
    auto layout = [](const at::Tensor &m) {
        return Layout{m.sizes().vec(), m.strides().vec(), m.scalar_type()};
    };
    for (const c10::IValue &r : meta) {
        TORCH_INTERNAL_ASSERT(r.isTensor() || r.isTensorList(), "openreg: ", key,
                              " returns a non-tensor");
        Result result{r.isTensorList(), {}};
        if (result.list)
            for (const at::Tensor &m : r.toTensorList().vec())
                result.tensors.push_back(layout(m));
        else
            result.tensors.push_back(layout(r.toTensor()));
        layouts.push_back(std::move(result));
    }
    if (cacheable) {
        std::lock_guard<std::mutex> lock(layout_mutex);
        if (layout_cache.size() >= kLayoutCacheEntries)
            layout_cache.clear();
        layout_cache.emplace(std::move(sig), layouts);
    }
    return layouts;
}

void device_kernel(const c10::OperatorHandle &op, torch::jit::Stack *stack) {
    const std::string key = op_key(op);
    const NativeOp &native = native_ops().at(key);
    const c10::FunctionSchema &schema = op.schema();
    const size_t nargs = schema.arguments().size();
    const std::vector<c10::IValue> args(stack->end() - static_cast<std::ptrdiff_t>(nargs),
                                        stack->end());

    Operands operands;
    for (const c10::IValue &v : args)
        visit(v, operands);
    TORCH_CHECK(!operands.other, "Expected all tensors to be on the same device, but found at "
                "least two devices, ", operands.device.value_or(at::kCPU), " and ",
                *operands.other, "! (in ", key, ")");
    if (!operands.device) { // only CPU scalars: nothing for the device to do
        at::native::cpu_fallback(op, stack);
        return;
    }
    const c10::DeviceIndex device = operands.device->index();

    // Shapes, dtypes and argument errors, on the host.
    const Layouts layouts = result_layouts(op, key, args);

    c10::DeviceGuard guard(*operands.device);
    std::vector<at::Tensor> inputs, outputs; // device tensors read, written
    torch::jit::Stack launch_args(args.begin(), args.end()), results;
    c10::OperatorHandle run = native.out_op.value_or(op);
    if (native.out_op) {
        // Functional: the outputs laid out as the Meta kernel made them, and
        // the out= overload fills them.
        for (const c10::IValue &v : args)
            device_tensors(v, inputs);
        for (const Result &r : layouts) {
            c10::List<at::Tensor> list;
            for (const Layout &l : r.tensors) {
                at::Tensor out = at::empty_strided(
                    l.sizes, l.strides,
                    at::TensorOptions().dtype(l.dtype).device(kDeviceType, device));
                outputs.push_back(out);
                list.push_back(out);
            }
            c10::IValue result = r.list ? c10::IValue(list) : c10::IValue(list.get(0));
            launch_args.push_back(result);
            results.push_back(result);
        }
    } else {
        // In place or out=: the written arguments, resized as the Meta
        // kernel resized their stand-ins; the op returns them, in order.
        size_t k = 0;
        for (size_t i = 0; i < nargs; i++) {
            const c10::Argument &a = schema.arguments()[i];
            bool written = a.alias_info() != nullptr && a.alias_info()->isWrite();
            if (written && args[i].isTensor()) {
                at::Tensor t = args[i].toTensor();
                if (k < layouts.size() &&
                    t.sizes() != c10::IntArrayRef(layouts[k].tensors.at(0).sizes))
                    t.resize_(layouts[k].tensors[0].sizes);
                k++;
                outputs.push_back(t);
                results.push_back(t);
                if (a.kwarg_only())
                    continue; // out=: only written
            } else if (written && args[i].isTensorList()) {
                // A _foreach_ op's list, written in place (same shapes); the
                // op returns nothing.
                for (const at::Tensor &t : args[i].toTensorList().vec())
                    outputs.push_back(t);
                if (a.kwarg_only())
                    continue;
            }
            device_tensors(args[i], inputs);
        }
    }

    bool empty = true;
    for (const at::Tensor &t : outputs)
        empty &= t.numel() == 0;
    if (!empty) {
        auto job = std::make_unique<Job>(Job{run, {}, key, {}});
        for (const c10::IValue &v : launch_args)
            job->stack.push_back(map_tensors(v, host_alias));
        Job *raw = job.get();
        orError_t err = launch_charged(device, job->name.c_str(),
                                       launch_cost(native.cost, inputs, outputs), run_job, &raw,
                                       sizeof raw);
        if (err == orSuccess)
            job.release(); // the kernel owns it now
        OR_TORCH_CHECK(err);
    }
    torch::jit::drop(*stack, nargs);
    for (c10::IValue &r : results)
        stack->push_back(std::move(r));
}

void nothing(const orKernelContext *, void *) {}

// ---- convolutions -------------------------------------------------------------

// PyTorch sends a convolution on a device it does not know to
// convolution_overrideable and its backward to
// convolution_backward_overrideable; their device kernels run the CPU's
// convolution (which picks its own algorithm) on aliases of device memory
// and copy the results into outputs laid out as the Meta kernel lays them.

void same_device(const char *op, std::initializer_list<const at::Tensor *> tensors) {
    Operands operands;
    for (const at::Tensor *t : tensors)
        if (t != nullptr)
            visit(*t, operands);
    TORCH_CHECK(operands.device && !operands.other,
                "Expected all tensors to be on the same device, but found at least two devices, ",
                operands.device.value_or(at::kCPU), " and ", operands.other.value_or(at::kCPU),
                "! (in ", op, ")");
}

// Multiply-adds of a convolution: each output element of a (non-transposed)
// convolution sums in_channels/groups * prod(kernel) products; a transposed
// one spreads each input element over as many.
double conv_flops(const at::Tensor &input, const at::Tensor &weight, const at::Tensor &output,
                  bool transposed) {
    double per = static_cast<double>(weight.numel()) / static_cast<double>(weight.size(0));
    if (transposed) // weight: in_channels x out_channels/groups x kernel
        return 2.0 * static_cast<double>(input.numel()) * per;
    return 2.0 * static_cast<double>(output.numel()) * per;
}

void launch_body(c10::DeviceIndex device, const std::string &name, const orLaunchCost &cost,
                 std::function<void()> body) {
    auto job = std::make_unique<Job>(Job{c10::nullopt, {}, name, std::move(body)});
    Job *raw = job.get();
    orError_t err = launch_charged(device, job->name.c_str(), cost, run_job, &raw, sizeof raw);
    if (err == orSuccess)
        job.release();
    OR_TORCH_CHECK(err);
}

// A convolution's arguments past its tensors, as the CPU's kernels take them.
struct ConvParams {
    std::vector<int64_t> stride, padding, dilation, output_padding;
    bool transposed;
    int64_t groups;
    ConvParams(c10::SymIntArrayRef stride_, c10::SymIntArrayRef padding_,
               c10::SymIntArrayRef dilation_, bool transposed_,
               c10::SymIntArrayRef output_padding_, const c10::SymInt &groups_)
        : stride(C10_AS_INTARRAYREF_SLOW(stride_).vec()),
          padding(C10_AS_INTARRAYREF_SLOW(padding_).vec()),
          dilation(C10_AS_INTARRAYREF_SLOW(dilation_).vec()),
          output_padding(C10_AS_INTARRAYREF_SLOW(output_padding_).vec()), transposed(transposed_),
          groups(groups_.expect_int()) {}
};

at::Tensor empty_like_layout(const at::Tensor &meta, const at::Tensor &like) {
    return at::empty_strided(meta.sizes(), meta.strides(), like.options().dtype(meta.dtype()));
}

at::Tensor convolution_overrideable(const at::Tensor &input, const at::Tensor &weight,
                                    const c10::optional<at::Tensor> &bias_opt,
                                    c10::SymIntArrayRef stride_, c10::SymIntArrayRef padding_,
                                    c10::SymIntArrayRef dilation_, bool transposed,
                                    c10::SymIntArrayRef output_padding_, c10::SymInt groups_) {
    const at::Tensor bias = bias_opt.value_or(at::Tensor());
    same_device("convolution", {&input, &weight, &bias});
    const ConvParams p(stride_, padding_, dilation_, transposed, output_padding_, groups_);
    at::Tensor meta;
    {
        InnerCall inner;
        meta = at::convolution(meta_like(input), meta_like(weight),
                               bias.defined() ? c10::optional<at::Tensor>(meta_like(bias))
                                              : c10::nullopt,
                               p.stride, p.padding, p.dilation, p.transposed, p.output_padding,
                               p.groups);
    }
    c10::DeviceGuard guard(input.device());
    at::Tensor out = empty_like_layout(meta, input);
    if (out.numel() == 0)
        return out;
    double bytes = tensor_bytes(input) + tensor_bytes(weight) + tensor_bytes(out) +
                   (bias.defined() ? tensor_bytes(bias) : 0.0);
    orLaunchCost cost{conv_flops(input, weight, out, transposed), bytes};
    at::Tensor in_h = host_alias(input), w_h = host_alias(weight), out_h = host_alias(out);
    at::Tensor b_h = bias.defined() ? host_alias(bias) : at::Tensor();
    launch_body(input.device().index(), "convolution", cost, [=]() mutable {
        out_h.copy_(at::convolution(in_h, w_h,
                                    b_h.defined() ? c10::optional<at::Tensor>(b_h) : c10::nullopt,
                                    p.stride, p.padding, p.dilation, p.transposed,
                                    p.output_padding, p.groups));
    });
    return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_overrideable(
    const at::Tensor &grad_output, const at::Tensor &input, const at::Tensor &weight,
    c10::SymIntArrayRef stride_, c10::SymIntArrayRef padding_, c10::SymIntArrayRef dilation_,
    bool transposed, c10::SymIntArrayRef output_padding_, c10::SymInt groups_,
    std::array<bool, 3> mask) {
    same_device("convolution_backward", {&grad_output, &input, &weight});
    const ConvParams p(stride_, padding_, dilation_, transposed, output_padding_, groups_);
    int64_t out_channels = transposed ? weight.size(1) * p.groups : weight.size(0);
    std::vector<int64_t> bias_sizes{out_channels};
    at::Tensor meta_gi, meta_gw, meta_gb;
    {
        InnerCall inner;
        std::tie(meta_gi, meta_gw, meta_gb) = at::convolution_backward(
            meta_like(grad_output), meta_like(input), meta_like(weight), bias_sizes, p.stride,
            p.padding, p.dilation, p.transposed, p.output_padding, p.groups, mask);
    }
    c10::DeviceGuard guard(input.device());
    at::Tensor gi = mask[0] ? empty_like_layout(meta_gi, input) : at::Tensor();
    at::Tensor gw = mask[1] ? empty_like_layout(meta_gw, weight) : at::Tensor();
    at::Tensor gb = mask[2] ? empty_like_layout(meta_gb, weight) : at::Tensor();
    // Each of the input's and the weight's gradients is a convolution of the
    // forward's size; the bias's a sum over grad_output.
    double forward = conv_flops(transposed ? grad_output : input, weight,
                                transposed ? input : grad_output, false);
    double flops = (mask[0] ? forward : 0.0) + (mask[1] ? forward : 0.0) +
                   (mask[2] ? static_cast<double>(grad_output.numel()) : 0.0);
    double bytes = tensor_bytes(grad_output) + tensor_bytes(input) + tensor_bytes(weight);
    for (const at::Tensor *t : {&gi, &gw, &gb})
        if (t->defined())
            bytes += tensor_bytes(*t);
    at::Tensor go_h = host_alias(grad_output), in_h = host_alias(input),
               w_h = host_alias(weight);
    at::Tensor gi_h = gi.defined() ? host_alias(gi) : at::Tensor();
    at::Tensor gw_h = gw.defined() ? host_alias(gw) : at::Tensor();
    at::Tensor gb_h = gb.defined() ? host_alias(gb) : at::Tensor();
    launch_body(input.device().index(), "convolution_backward", orLaunchCost{flops, bytes},
                [=]() mutable {
                    auto [r_gi, r_gw, r_gb] = at::convolution_backward(
                        go_h, in_h, w_h, bias_sizes, p.stride, p.padding, p.dilation,
                        p.transposed, p.output_padding, p.groups, mask);
                    if (gi_h.defined())
                        gi_h.copy_(r_gi);
                    if (gw_h.defined())
                        gw_h.copy_(r_gw);
                    if (gb_h.defined())
                        gb_h.copy_(r_gb);
                });
    return {gi, gw, gb};
}

} // namespace

void charge_host_op(const c10::OperatorHandle &op, const std::vector<at::Tensor> &inputs,
                    const std::vector<at::Tensor> &outputs, c10::DeviceIndex index) {
    // An op of the table (TORCH_OPENREG_NATIVE_OPS=0) is charged as its
    // kernel would be; any other as an elementwise op.
    auto known = native_ops().find(op_key(op));
    Cost kind = known != native_ops().end() ? known->second.cost : Cost::Elementwise;
    c10::DeviceGuard guard(c10::Device(kDeviceType, index));
    OR_TORCH_CHECK(launch_charged(index, op.operator_name().name.c_str(),
                                  launch_cost(kind, inputs, outputs), nothing, nullptr, 0));
}

void device_tensors(const c10::IValue &v, std::vector<at::Tensor> &into) {
    auto add = [&into](const at::Tensor &t) {
        if (t.defined() && t.device().type() == kDeviceType)
            into.push_back(t);
    };
    if (v.isTensor())
        add(v.toTensor());
    else if (v.isTensorList())
        for (const at::Tensor &t : v.toTensorList().vec())
            add(t);
}

} // namespace torch_openreg

// TORCH_OPENREG_NATIVE_OPS=0 leaves every op to the CPU fallback (to
// compare the two, or to rule these kernels out when debugging), except the
// convolutions: the fallback cannot run PyTorch's *_overrideable ops, which
// have no CPU kernel.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    m.impl("convolution_overrideable", TORCH_FN(torch_openreg::convolution_overrideable));
    m.impl("convolution_backward_overrideable",
           TORCH_FN(torch_openreg::convolution_backward_overrideable));
    const char *native = std::getenv("TORCH_OPENREG_NATIVE_OPS");
    if (native != nullptr && std::string(native) == "0")
        return;
    for (const auto &entry : torch_openreg::native_ops()) {
        m.impl(entry.first.c_str(),
               torch::CppFunction::makeFromBoxedFunction<&torch_openreg::device_kernel>());
    }
}
