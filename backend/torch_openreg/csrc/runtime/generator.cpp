// generator.cpp - one Philox generator per device on the runtime's RNG
// (orRandGenerateUniform/Normal), and the random ops that use it: uniform_
// (torch.rand, nn.init), normal_ (torch.randn) and bernoulli_ (dropout). A generator's state is
// (seed, offset): each call consumes a block of the Philox stream, so a seed
// reproduces the same sequence of tensors, whatever the device's threads.
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>
#include <torch/csrc/Generator.h>
#include <torch/library.h>

#include "aten/kernels.h"
#include "bindings.h"
#include "runtime/openreg_torch.h"

namespace torch_openreg {
namespace {

// The state of get_rng_state/set_rng_state: a ByteTensor of this layout.
struct PhiloxState {
    uint64_t seed;
    uint64_t offset;
};

class OpenRegGenerator final : public c10::GeneratorImpl {
  public:
    explicit OpenRegGenerator(c10::DeviceIndex index)
        : c10::GeneratorImpl(c10::Device(kDeviceType, index),
                             c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}

    static c10::DeviceType device_type() { return kDeviceType; }

    void set_current_seed(uint64_t seed) override {
        seed_ = seed;
        offset_ = 0;
    }
    uint64_t current_seed() const override { return seed_; }
    void set_offset(uint64_t offset) override { offset_ = offset; }
    uint64_t get_offset() const override { return offset_; }
    uint64_t seed() override {
        uint64_t s = c10::detail::getNonDeterministicRandom();
        set_current_seed(s);
        return s;
    }
    void set_state(const c10::TensorImpl &new_state) override {
        at::detail::check_rng_state(new_state);
        TORCH_CHECK(new_state.numel() == static_cast<int64_t>(sizeof(PhiloxState)),
                    "openreg: RNG state must be ", sizeof(PhiloxState), " bytes, got ",
                    new_state.numel());
        PhiloxState st;
        std::memcpy(&st, new_state.data(), sizeof st);
        seed_ = st.seed;
        offset_ = st.offset;
    }
    c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
        at::Tensor state = at::empty({static_cast<int64_t>(sizeof(PhiloxState))},
                                     at::TensorOptions().dtype(at::kByte));
        PhiloxState st{seed_, offset_};
        std::memcpy(state.data_ptr(), &st, sizeof st);
        return state.getIntrusivePtr();
    }

    // Reserves n numbers of the stream; offsets stay multiples of 4 (one
    // Philox block) so normal pairs never straddle two calls.
    uint64_t advance(uint64_t n) {
        uint64_t at = offset_;
        offset_ += (n + 3) / 4 * 4;
        return at;
    }

  private:
    OpenRegGenerator *clone_impl() const override {
        auto *g = new OpenRegGenerator(device().index());
        g->seed_ = seed_;
        g->offset_ = offset_;
        return g;
    }

    uint64_t seed_ = c10::default_rng_seed_val;
    uint64_t offset_ = 0;
};

std::vector<at::Generator> &default_generators() {
    static std::vector<at::Generator> gens = [] {
        std::vector<at::Generator> v;
        for (c10::DeviceIndex i = 0; i < device_count(); i++)
            v.push_back(at::make_generator<OpenRegGenerator>(i));
        return v;
    }();
    return gens;
}

enum class Dist { Uniform, Normal, Bernoulli };

// Fills `self` from the generator: float32 contiguous tensors in place, other
// floating types through a float32 buffer converted on the device.
at::Tensor &fill_random(at::Tensor &self, Dist dist, double p0, double p1,
                        c10::optional<at::Generator> gen) {
    TORCH_CHECK(dist == Dist::Bernoulli || at::isFloatingType(self.scalar_type()),
                "openreg: ", dist == Dist::Uniform ? "uniform_" : "normal_",
                " expects a floating point tensor, got ", self.scalar_type());
    if (self.numel() == 0)
        return self;
    c10::DeviceIndex index = self.device().index();
    OpenRegGenerator *g =
        at::get_generator_or_default<OpenRegGenerator>(gen, default_generator(index));
    c10::DeviceGuard guard(self.device());
    orStream_t stream = current_stream_handle(index);
    bool direct = dist != Dist::Bernoulli && self.scalar_type() == at::kFloat &&
                  self.is_contiguous();
    at::Tensor target =
        self.is_contiguous() ? self : at::empty_like(self, at::MemoryFormat::Contiguous);
    at::Tensor buffer = direct ? target : at::empty(self.sizes(), self.options().dtype(at::kFloat));
    float *out = buffer.data_ptr<float>();
    size_t n = static_cast<size_t>(self.numel());
    uint64_t seed, offset;
    {
        std::lock_guard<std::mutex> lock(g->mutex_);
        seed = g->current_seed();
        offset = g->advance(n);
    }
    if (dist == Dist::Uniform) {
        // The runtime's uniforms are in (0, 1]; PyTorch's are [from, to):
        // to - (to - from) * u maps one onto the other.
        OR_TORCH_CHECK(orRandGenerateUniform(out, n, seed, offset, stream));
        launch_affine_from_float(target.data_ptr(), target.scalar_type(), out, p1, -(p1 - p0), n,
                                 stream);
    } else if (dist == Dist::Bernoulli) {
        // P(u > 1 - p) = p for u uniform in (0, 1].
        OR_TORCH_CHECK(orRandGenerateUniform(out, n, seed, offset, stream));
        launch_threshold_from_float(target.data_ptr(), target.scalar_type(), out,
                                    static_cast<float>(1.0 - p0), n, stream);
    } else {
        OR_TORCH_CHECK(orRandGenerateNormal(out, n, static_cast<float>(p0), static_cast<float>(p1),
                                            seed, offset, stream));
        if (!direct)
            launch_affine_from_float(target.data_ptr(), target.scalar_type(), out, 0.0, 1.0, n,
                                     stream);
    }
    if (!target.is_same(self))
        self.copy_(target);
    return self;
}

at::Tensor &uniform_(at::Tensor &self, double from, double to, c10::optional<at::Generator> gen) {
    TORCH_CHECK(from <= to, "openreg: uniform_ expects from <= to, got from=", from, " to=", to);
    return fill_random(self, Dist::Uniform, from, to, gen);
}

at::Tensor &normal_(at::Tensor &self, double mean, double std, c10::optional<at::Generator> gen) {
    TORCH_CHECK(std >= 0.0, "openreg: normal_ expects std >= 0.0, got std=", std);
    return fill_random(self, Dist::Normal, mean, std, gen);
}

// Dropout's mask: bernoulli_(1 - p) draws on the device too.
at::Tensor &bernoulli_(at::Tensor &self, double p, c10::optional<at::Generator> gen) {
    TORCH_CHECK(p >= 0.0 && p <= 1.0, "openreg: bernoulli_ expects 0 <= p <= 1, got p=", p);
    return fill_random(self, Dist::Bernoulli, p, 0.0, gen);
}

// Dropout's fused entry (what F.dropout calls on accelerators): the mask is
// a Bernoulli draw of the device generator, the scaling runs as any op.
std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor &input, double p,
                                                  c10::optional<bool> train) {
    TORCH_CHECK(p >= 0.0 && p <= 1.0, "openreg: dropout probability has to be between 0 and 1, "
                "but got ", p);
    at::Tensor mask = at::empty_like(input, input.options().dtype(at::kBool));
    if (!train.value_or(true) || p == 0.0) {
        mask.fill_(true);
        return {input.clone(), mask};
    }
    if (p == 1.0) {
        mask.fill_(false);
        return {at::zeros_like(input), mask};
    }
    bernoulli_(mask, 1.0 - p, c10::nullopt);
    return {input * mask * (1.0 / (1.0 - p)), mask};
}

} // namespace

const at::Generator &default_generator(c10::DeviceIndex index) {
    check_device_index(index);
    return default_generators().at(index);
}

at::Generator new_generator(c10::DeviceIndex index) {
    check_device_index(index);
    return at::make_generator<OpenRegGenerator>(index);
}

} // namespace torch_openreg

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    m.impl("uniform_", &torch_openreg::uniform_);
    m.impl("normal_", &torch_openreg::normal_);
    m.impl("bernoulli_.float", &torch_openreg::bernoulli_);
    m.impl("native_dropout", &torch_openreg::native_dropout);
}

TORCH_OPENREG_BINDINGS(generator) {
    using namespace torch_openreg;
    // torch.Generator objects over the device's default generator: they
    // take manual_seed, get_state/set_state and generator= arguments.
    m.def("_default_generator", [](int64_t index) {
        const at::Generator &gen = default_generator(static_cast<c10::DeviceIndex>(index));
        return pybind11::reinterpret_steal<pybind11::object>(
            THPGenerator_initDefaultGenerator(gen));
    });
}
