// hooks.cpp - PyTorch's PrivateUse1HooksInterface for the openreg device:
// what PyTorch's device-generic code asks of a backend without naming it
// (torch.accelerator, pin_memory()/is_pinned(), Tensor from a raw pointer,
// generators for torch.Generator("openreg"), lazy initialization).
#include <ATen/detail/PrivateUse1HooksInterface.h>

#include "runtime/openreg_torch.h"

namespace torch_openreg {
namespace {

struct OpenRegHooks final : public at::PrivateUse1HooksInterface {
    // The runtime starts on its first call; asking for the device count
    // makes it start here, so that a bad OPENREG_* setting is reported when
    // PyTorch first initializes the device rather than at a later tensor.
    void init() const override {
        int count = 0;
        OR_TORCH_CHECK(orGetDeviceCount(&count));
    }
    bool isBuilt() const override { return true; }
    bool isAvailable() const override { return device_count() > 0; }
    bool hasPrimaryContext(c10::DeviceIndex index) const override {
        return index >= 0 && index < device_count();
    }
    c10::DeviceIndex deviceCount() const override { return device_count(); }
    void setCurrentDevice(c10::DeviceIndex index) const override {
        check_device_index(index);
        OR_TORCH_CHECK(orSetDevice(index));
    }
    c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
    c10::DeviceIndex exchangeDevice(c10::DeviceIndex index) const override {
        c10::DeviceIndex previous = current_device();
        if (index != previous)
            setCurrentDevice(index);
        return previous;
    }
    c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex index) const override {
        if (index < 0 || index >= device_count())
            return current_device();
        return exchangeDevice(index);
    }

    bool isPinnedPtr(const void *data) const override {
        orPointerAttributes attr;
        return data != nullptr && orPointerGetAttributes(&attr, data) == orSuccess &&
               attr.type == orMemoryTypeHost;
    }
    at::Allocator *getPinnedMemoryAllocator() const override { return host_allocator(); }
    at::Device getDeviceFromPtr(void *data) const override {
        orPointerAttributes attr;
        TORCH_CHECK(orPointerGetAttributes(&attr, data) == orSuccess &&
                        attr.type == orMemoryTypeDevice,
                    "openreg: ", data, " is not a pointer to openreg device memory");
        return at::Device(kDeviceType, static_cast<c10::DeviceIndex>(attr.device));
    }

    // UntypedStorage.resize_ (FSDP2 frees and refills unsharded parameters so).
    void resizePrivateUse1Bytes(const c10::Storage &storage, size_t newsize) const override {
        resize_storage_bytes(storage, newsize);
    }

    const at::Generator &getDefaultGenerator(c10::DeviceIndex index) const override {
        return default_generator(index < 0 ? current_device() : index);
    }
    at::Generator getNewGenerator(c10::DeviceIndex index) const override {
        return new_generator(index < 0 ? current_device() : index);
    }
};

// Registered when the module loads, before Python can create a tensor.
const bool registered = [] {
    at::RegisterPrivateUse1HooksInterface(new OpenRegHooks());
    return true;
}();

} // namespace
} // namespace torch_openreg
