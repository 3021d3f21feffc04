// module.cpp - the Python module torch_openreg._C. Every source adds its own
// bindings with TORCH_OPENREG_BINDINGS(name) { ... } (see common.h), so
// adding a source to the extension never means editing this file.
#include <utility>
#include <vector>

#include "bindings.h"

namespace torch_openreg {
namespace {

std::vector<std::pair<std::string, BindingInit>> &binding_inits() {
    static std::vector<std::pair<std::string, BindingInit>> inits;
    return inits;
}

} // namespace

BindingRegistrar::BindingRegistrar(const char *name, BindingInit init) {
    binding_inits().emplace_back(name, std::move(init));
}

} // namespace torch_openreg

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.doc() = "torch_openreg: the openreg runtime as PyTorch's PrivateUse1 device";
    for (auto &init : torch_openreg::binding_inits())
        init.second(m);
}
