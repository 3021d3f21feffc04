// ops.cpp - the native ops of the openreg device: factories, views, resize,
// copies (on the current stream), fill and zero, scalar reads; everything
// else goes through the boxed CPU fallback: inputs copied to the host,
// the CPU kernel run, results copied back. All device memory is reached
// through runtime copies and kernels, never dereferenced by host code, so
// strict mode (OPENREG_STRICT=1) holds through the fallback too.
#include <cstring>

#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

#include "aten/kernels.h"
#include "runtime/openreg_torch.h"

namespace torch_openreg {
namespace {

at::Tensor empty_memory_format(at::IntArrayRef size, c10::optional<at::ScalarType> dtype,
                               c10::optional<at::Layout> layout, c10::optional<at::Device> device,
                               c10::optional<bool> pin_memory,
                               c10::optional<at::MemoryFormat> memory_format) {
    c10::Device d = device.value_or(c10::Device(kDeviceType, current_device()));
    check_device_index(d.has_index() ? d.index() : current_device());
    c10::DeviceGuard guard(d);
    return at::detail::empty_generic(size, device_allocator(),
                                     c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                     c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride,
                         c10::optional<at::ScalarType> dtype, c10::optional<at::Layout> layout,
                         c10::optional<at::Device> device, c10::optional<bool> pin_memory) {
    c10::Device d = device.value_or(c10::Device(kDeviceType, current_device()));
    check_device_index(d.has_index() ? d.index() : current_device());
    c10::DeviceGuard guard(d);
    return at::detail::empty_strided_generic(size, stride, device_allocator(),
                                             c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                             c10::dtype_or_default(dtype));
}

// Grows the storage (never shrinks it, as CPU and CUDA do); old bytes are
// copied on the device.
const at::Tensor &resize_(const at::Tensor &self, at::IntArrayRef size,
                          c10::optional<at::MemoryFormat> memory_format) {
    c10::TensorImpl *impl = self.unsafeGetTensorImpl();
    impl->set_sizes_contiguous(size);
    if (memory_format.has_value() && *memory_format != at::MemoryFormat::Preserve)
        impl->empty_tensor_restride(*memory_format);
    size_t needed = at::detail::computeStorageNbytes(self.sizes(), self.strides(),
                                                     self.dtype().itemsize(),
                                                     self.storage_offset());
    if (needed > self.storage().nbytes())
        resize_storage_bytes(self.storage(), needed);
    return self;
}

at::Tensor &set_empty(at::Tensor &self) {
    c10::Storage storage(c10::Storage::use_byte_size_t(), 0, device_allocator(), true);
    return at::native::set_storage_cpu_(self, storage, 0, {0}, {});
}

// A copy of `src` (on the device) with contiguous layout on the same device,
// made by a kernel on the current stream.
at::Tensor device_contiguous(const at::Tensor &src) {
    if (src.is_contiguous())
        return src;
    at::Tensor out = at::empty(src.sizes(), src.options());
    c10::DeviceGuard guard(src.device());
    TORCH_CHECK(launch_strided_copy(out.data_ptr(), out.strides(), src.data_ptr(), src.strides(),
                                    src.sizes(), src.element_size(),
                                    current_stream_handle(src.device().index())),
                "openreg: tensors of more than ", kMaxKernelDims,
                " dimensions are not supported on the device");
    return out;
}

void sync_stream(c10::DeviceIndex index) {
    DeviceScope scope(index); // a NULL handle means the current device's default stream
    orStream_t stream = current_stream_handle(index);
    WithoutGil no_gil;
    OR_TORCH_SYNC(orStreamSynchronize(stream));
}

// Set while the CPU fallback runs an op on this thread. Its copies between
// the host and the device then are not device work but part of running the
// op elsewhere: plain memcpy once the stream's queued work is done, off the
// virtual clock, which charges the op itself (charge_host_op) instead.
thread_local bool in_fallback = false;

// A copy between the host and device `index`, on its current stream, waited
// for when `wait`; inside the fallback, a memcpy (see in_fallback).
void host_device_copy(void *dst, const void *src, size_t nbytes, orMemcpyKind kind,
                      c10::DeviceIndex index, bool wait) {
    if (in_fallback) {
        sync_stream(index);
        HostWindow window;
        std::memcpy(dst, src, nbytes);
        return;
    }
    OR_TORCH_CHECK(orMemcpyAsync(dst, src, nbytes, kind, current_stream_handle(index)));
    if (wait)
        sync_stream(index);
}

// Work enqueued on `waiter` (of device `wi`) from now on runs after the work
// queued so far on `signaler` (of device `si`).
void stream_wait_stream(c10::DeviceIndex wi, orStream_t waiter, c10::DeviceIndex si,
                        orStream_t signaler) {
    orEvent_t ready = nullptr;
    {
        DeviceScope scope(si);
        OR_TORCH_CHECK(orEventCreateWithFlags(&ready, orEventDisableTiming));
        orError_t err = orEventRecord(ready, signaler);
        if (err != orSuccess)
            orEventDestroy(ready);
        OR_TORCH_CHECK(err);
    }
    DeviceScope scope(wi);
    orError_t err = orStreamWaitEvent(waiter, ready, 0);
    orEventDestroy(ready); // the runtime keeps it until the wait is satisfied
    OR_TORCH_CHECK(err);
}

// dst (device) <- src (device), same dtype and shape.
void copy_device_to_device(const at::Tensor &src, const at::Tensor &dst) {
    c10::DeviceIndex si = src.device().index(), di = dst.device().index();
    c10::DeviceGuard guard(dst.device());
    orStream_t stream = current_stream_handle(di);
    if (si == di && !(dst.is_contiguous() && src.is_contiguous())) {
        TORCH_CHECK(launch_strided_copy(dst.data_ptr(), dst.strides(), src.data_ptr(),
                                        src.strides(), src.sizes(), src.element_size(), stream),
                    "openreg: tensors of more than ", kMaxKernelDims,
                    " dimensions are not supported on the device");
        return;
    }
    at::Tensor s = device_contiguous(src);
    at::Tensor d = dst.is_contiguous() ? dst : at::empty(dst.sizes(), dst.options());
    size_t nbytes = static_cast<size_t>(s.numel()) * s.element_size();
    if (si == di) {
        OR_TORCH_CHECK(orMemcpyAsync(d.data_ptr(), s.data_ptr(), nbytes, orMemcpyDeviceToDevice,
                                     stream));
    } else {
        // As CUDA does between devices: the copy (on the destination's
        // current stream) waits for the source's current stream, and the
        // source's stream then waits for the copy before it may overwrite.
        orStream_t src_stream = current_stream_handle(si);
        stream_wait_stream(di, stream, si, src_stream);
        OR_TORCH_CHECK(orMemcpyPeerAsync(d.data_ptr(), di, s.data_ptr(), si, nbytes, stream));
        stream_wait_stream(si, src_stream, di, stream);
    }
    if (!d.is_same(dst))
        copy_device_to_device(d, dst);
}

// The host side of a copy, with the dtype and layout of `like` (a CPU tensor
// usable by orMemcpy: contiguous).
at::Tensor host_buffer(const at::Tensor &like) {
    return at::empty(like.sizes(), like.options().device(at::kCPU).memory_format(
                                        at::MemoryFormat::Contiguous));
}

at::Tensor copy_from(const at::Tensor &src, const at::Tensor &dst, bool non_blocking);

// A copy where a tensor is a conjugate or negative view (its data stored
// unconjugated, unnegated): the stored data is copied, then the math bits
// that differ are applied to the destination's data. PyTorch's conjugate and
// negative fallbacks would otherwise resolve the view with a clone, which is
// itself a copy through here: endless recursion (_copy_from falls through
// those keys, below).
at::Tensor copy_with_math_bits(const at::Tensor &src, const at::Tensor &dst, bool non_blocking) {
    at::Tensor s = src, d = dst;
    if (s.is_conj())
        s = s.conj(); // the same data, the bit cleared
    if (d.is_conj())
        d = d.conj();
    if (s.is_neg())
        s = s._neg_view();
    if (d.is_neg())
        d = d._neg_view();
    copy_from(s, d, non_blocking);
    if (src.is_conj() != dst.is_conj()) {
        if (d.is_cpu()) {
            d.conj_physical_();
        } else { // conj_physical_ has no kernel for the device: on the host
            at::Tensor h = d.cpu();
            h.conj_physical_();
            copy_from(h, d, false);
        }
    }
    if (src.is_neg() != dst.is_neg())
        d.neg_();
    return dst;
}

at::Tensor copy_from(const at::Tensor &src, const at::Tensor &dst, bool non_blocking) {
    if (dst.numel() == 0)
        return dst;
    if (src.is_conj() || dst.is_conj() || src.is_neg() || dst.is_neg())
        return copy_with_math_bits(src, dst, non_blocking);
    // copy_ hands external backends its source unbroadcast.
    const at::Tensor self = src.sizes() == dst.sizes() ? src : src.expand(dst.sizes());
    bool src_dev = self.device().type() == kDeviceType;
    bool dst_dev = dst.device().type() == kDeviceType;
    TORCH_CHECK(src_dev || self.is_cpu(), "openreg: cannot copy from ", self.device());
    TORCH_CHECK(dst_dev || dst.is_cpu(), "openreg: cannot copy to ", dst.device());

    if (src_dev && dst_dev) {
        if (self.scalar_type() == dst.scalar_type()) {
            copy_device_to_device(self, dst);
        } else {
            // Conversions run on the host.
            dst.copy_(self.to(at::kCPU).to(dst.scalar_type()));
        }
        return dst;
    }
    if (src_dev) { // device -> host
        at::Tensor s = device_contiguous(self);
        c10::DeviceGuard guard(self.device());
        bool direct = dst.is_contiguous() && dst.scalar_type() == self.scalar_type();
        at::Tensor h = direct ? dst : host_buffer(s);
        // Asynchronous only into pinned memory, as CUDA: the caller then
        // synchronizes before reading.
        bool async = non_blocking && direct && dst.is_pinned() && !in_fallback;
        host_device_copy(h.data_ptr(), s.data_ptr(),
                         static_cast<size_t>(s.numel()) * s.element_size(), orMemcpyDeviceToHost,
                         self.device().index(), !async);
        if (async)
            record_host_use(dst, self.device().index());
        if (!direct)
            dst.copy_(h);
        return dst;
    }
    // host -> device
    at::Tensor h = self.to(dst.scalar_type()).contiguous();
    c10::DeviceGuard guard(dst.device());
    at::Tensor d = dst.is_contiguous() ? dst : at::empty(dst.sizes(), dst.options());
    // The host buffer must outlive the copy: wait unless it is the caller's
    // pinned tensor itself.
    bool async = non_blocking && h.is_same(self) && self.is_pinned() && !in_fallback;
    host_device_copy(d.data_ptr(), h.data_ptr(), static_cast<size_t>(h.numel()) * h.element_size(),
                     orMemcpyHostToDevice, dst.device().index(), !async);
    if (async)
        record_host_use(self, dst.device().index());
    if (!d.is_same(dst))
        copy_device_to_device(d, dst);
    return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor &self, const at::Tensor &dst) {
    if (dst.sizes() != self.sizes())
        dst.resize_(self.sizes());
    return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor &self) {
    return at::_local_scalar_dense(self.to(at::kCPU));
}

// `param.data = param.to(device)` (what FSDP2's fully_shard and older
// model code do) is allowed by the core only between its own dense
// backends; a dense openreg tensor and a dense CPU one may take each other's
// place too, as CUDA's and the CPU's may.
bool has_compatible_shallow_copy_type(const at::Tensor &self, const at::Tensor &from) {
    if (self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set()))
        return true;
    auto dense_here = [](const at::Tensor &t) {
        return t.layout() == c10::kStrided &&
               (t.device().is_cpu() || t.device().is_privateuseone());
    };
    return dense_here(self) && dense_here(from);
}

at::Tensor &fill_scalar(at::Tensor &self, const at::Scalar &value) {
    if (self.numel() == 0)
        return self;
    // The element's bytes, converted on the host.
    at::Tensor pattern = at::empty({1}, self.options().device(at::kCPU));
    pattern.fill_(value);
    c10::DeviceGuard guard(self.device());
    TORCH_CHECK(launch_fill(self.data_ptr(), self.strides(), self.sizes(), pattern.data_ptr(),
                            self.element_size(), current_stream_handle(self.device().index())),
                "openreg: tensors of more than ", kMaxKernelDims,
                " dimensions are not supported on the device");
    return self;
}

at::Tensor &zero_(at::Tensor &self) {
    if (self.numel() == 0)
        return self;
    if (self.is_contiguous()) {
        c10::DeviceGuard guard(self.device());
        OR_TORCH_CHECK(orMemsetAsync(self.data_ptr(), 0,
                                     static_cast<size_t>(self.numel()) * self.element_size(),
                                     current_stream_handle(self.device().index())));
        return self;
    }
    return fill_scalar(self, 0);
}

// PyTorch's boxed CPU fallback, and the op charged on the device it stands
// in for (the first device among its tensor arguments).
void cpu_fallback(const c10::OperatorHandle &op, torch::jit::Stack *stack) {
    if (in_fallback) { // an op the fallback itself calls: part of the outer one
        at::native::cpu_fallback(op, stack);
        return;
    }
    std::vector<at::Tensor> inputs, outputs; // read; written (the returns)
    c10::optional<c10::DeviceIndex> device;
    const auto &schema_args = op.schema().arguments();
    const size_t nargs = schema_args.size();
    for (size_t i = 0; i < nargs; i++) {
        const c10::IValue &v = (*stack)[stack->size() - nargs + i];
        std::vector<at::Tensor> found;
        device_tensors(v, found);
        if (!found.empty() && !device)
            device = found.front().device().index();
        const c10::AliasInfo *alias = schema_args[i].alias_info();
        if (alias != nullptr && alias->isWrite() && schema_args[i].kwarg_only())
            continue; // an out= argument: written, not read
        inputs.insert(inputs.end(), found.begin(), found.end());
    }
    if (!device) { // no device tensor to charge
        at::native::cpu_fallback(op, stack);
        return;
    }
    c10::DeviceIndex index = *device;
    in_fallback = true;
    try {
        at::native::cpu_fallback(op, stack);
    } catch (...) {
        in_fallback = false;
        throw;
    }
    in_fallback = false;
    const size_t nret = op.schema().returns().size();
    for (auto it = stack->end() - static_cast<std::ptrdiff_t>(nret); it != stack->end(); ++it)
        device_tensors(*it, outputs);
    charge_host_op(op, inputs, outputs, index);
}

} // namespace
} // namespace torch_openreg

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    using namespace torch_openreg;
    m.impl("empty.memory_format", &empty_memory_format);
    m.impl("empty_strided", &empty_strided);
    m.impl("as_strided", &at::native::as_strided_tensorimpl);
    m.impl("view", &at::native::view);
    m.impl("_reshape_alias", &at::native::_reshape_alias);
    // Views with a kernel per backend: through the fallback they would be
    // copies, and writes through them lost (torch.distributed sends complex
    // tensors as view_as_real).
    m.impl("view_as_real", &at::native::view_as_real);
    m.impl("view_as_complex", &at::native::view_as_complex);
    m.impl("unfold", &at::native::unfold);
    m.impl("resize_", &resize_);
    m.impl("set_.source_Storage", &at::native::set_);
    m.impl("set_.source_Storage_storage_offset", &at::native::set_storage_cpu_);
    m.impl("set_.source_Tensor", &at::native::set_tensor_);
    m.impl("set_", &set_empty);
    m.impl("_copy_from", &copy_from);
    m.impl("_copy_from_and_resize", &copy_from_and_resize);
    m.impl("_local_scalar_dense", &local_scalar_dense);
    m.impl("fill_.Scalar", &fill_scalar);
    m.impl("zero_", &zero_);
    m.impl("_has_compatible_shallow_copy_type", &has_compatible_shallow_copy_type);
}

// Copies of conjugate and negative views are copy_from's (copy_with_math_bits).
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
    m.impl("_copy_from", torch::CppFunction::makeFallthrough());
    m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
    m.impl("_copy_from", torch::CppFunction::makeFallthrough());
    m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

// Functional ops whose generic (CompositeExplicitAutogradNonFunctional)
// kernel would call their out= variant with an output its CPU kernel
// resizes (a PyTorch 1.13 deprecation warning): straight to the CPU.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    m.impl("mse_loss",
           torch::CppFunction::makeFromBoxedFunction<&torch_openreg::cpu_fallback>());
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
    m.fallback(torch::CppFunction::makeFromBoxedFunction<&torch_openreg::cpu_fallback>());
}
