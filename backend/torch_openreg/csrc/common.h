// common.h - what every source of the torch_openreg extension shares: the
// error check that turns an orError_t into a Python exception, and the hook
// through which a source adds its Python bindings to the one module _C.
#pragma once

#include <functional>
#include <string>

#include <c10/util/Exception.h>
#include <torch/extension.h>

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

// Same, without throwing: for destructors and deleters, which must not.
#define OR_TORCH_WARN(call)                                                         \
    do {                                                                            \
        orError_t or_torch_err_ = (call);                                           \
        if (or_torch_err_ != orSuccess)                                             \
            TORCH_WARN("openreg: ", #call, " failed: ", orGetErrorName(or_torch_err_)); \
    } while (0)

namespace torch_openreg {

// Each source registers a function that adds its bindings to the module;
// module.cpp runs them all when Python imports torch_openreg._C.
using BindingInit = std::function<void(pybind11::module &)>;
struct BindingRegistrar {
    BindingRegistrar(const char *name, BindingInit init);
};

} // namespace torch_openreg

#define TORCH_OPENREG_BINDINGS(name)                                                 \
    static void torch_openreg_bind_##name(pybind11::module &m);                      \
    static ::torch_openreg::BindingRegistrar torch_openreg_registrar_##name(         \
        #name, torch_openreg_bind_##name);                                           \
    static void torch_openreg_bind_##name(pybind11::module &m)
