// device.cpp - devices of the runtime as seen from PyTorch: count, current
// device, synchronization.
#include "common.h"

TORCH_OPENREG_BINDINGS(device) {
    m.def("device_count", []() {
        int count = 0;
        OR_TORCH_CHECK(orGetDeviceCount(&count));
        return count;
    });
}
