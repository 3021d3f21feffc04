// bindings.h - the hook through which a source adds its Python bindings to
// the one module torch_openreg._C: TORCH_OPENREG_BINDINGS(name) { m.def(...); }.
// module.cpp runs every registered function when Python imports the module.
#pragma once

#include <functional>
#include <string>

#include <torch/csrc/utils/pybind.h>

#include "common.h"

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
