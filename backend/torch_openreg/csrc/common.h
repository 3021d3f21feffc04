// common.h - what every source of the torch_openreg extension shares: the
// error checks that turn an orError_t into a Python exception. (Python
// bindings are added through bindings.h.)
#pragma once

#include <c10/util/Exception.h>

#include <openreg.h>
// Throws c10::Error (RuntimeError in Python) naming the call and the runtime's
// error, so a bad device index or an exhausted arena never crashes Python.
#define OR_TORCH_CHECK(call)                                                        \
    do {                                                                            \
        orError_t or_torch_err_ = (call);                                           \
        TORCH_CHECK(or_torch_err_ == orSuccess, "openreg: ", #call, " failed: ",    \
                    orGetErrorName(or_torch_err_), " (",                            \
                    orGetErrorString(or_torch_err_), ")");                          \
    } while (0)

namespace torch_openreg {
// Raises (RuntimeError) the first error a device kernel of an op met since
// the last call, such as an index out of range, and forgets it
// (aten/native.cpp).
void raise_device_errors();
} // namespace torch_openreg

// A synchronization with the device's work (a stream, an event, the whole
// device): its own error, then those of the ops' device kernels it waited for.
#define OR_TORCH_SYNC(call)                                                         \
    do {                                                                            \
        OR_TORCH_CHECK(call);                                                       \
        ::torch_openreg::raise_device_errors();                                     \
    } while (0)

// Same, without throwing: for destructors and deleters, which must not.
#define OR_TORCH_WARN(call)                                                         \
    do {                                                                            \
        orError_t or_torch_err_ = (call);                                           \
        if (or_torch_err_ != orSuccess)                                             \
            TORCH_WARN("openreg: ", #call, " failed: ", orGetErrorName(or_torch_err_)); \
    } while (0)
