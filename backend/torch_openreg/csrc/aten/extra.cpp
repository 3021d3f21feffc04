// extra.cpp - what a backend adds beyond ATen's own ops, as PyTorch's
// reference backend shows: scaled_dot_product_attention through its
// "overrideable" fused entry, and a custom operator of the openreg library
// (schema, device kernel, meta kernel, autograd).
#include <cmath>
#include <limits>

#include <ATen/ATen.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

namespace torch_openreg {
namespace {

// ---- scaled_dot_product_attention --------------------------------------------------

// F.scaled_dot_product_attention asks the device which kernel to use. The
// fused one takes the common case; dropout and grouped-query attention go to
// PyTorch's math composition (which runs on the device like any other ops).
int64_t fused_sdp_choice(const at::Tensor &query, const at::Tensor &key, const at::Tensor &value,
                         const std::optional<at::Tensor> &attn_mask, double dropout_p,
                         bool is_causal, std::optional<double> scale, bool enable_gqa) {
    bool fused = dropout_p == 0.0 && !enable_gqa && query.dim() == 4 &&
                 query.size(1) == key.size(1) && key.sizes() == value.sizes();
    return static_cast<int64_t>(fused ? at::SDPBackend::overrideable : at::SDPBackend::math);
}

// What the kernel computes in: float32 for float16 and bfloat16 inputs,
// else the inputs' own type (float64 stays float64).
at::ScalarType compute_type(const at::Tensor &t) {
    return at::isReducedFloatingType(t.scalar_type()) ? at::kFloat : t.scalar_type();
}

double softmax_scale(const at::Tensor &query, std::optional<double> scale) {
    return scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(query.size(-1)));
}

// The attention scores (batch, heads, L, S) in the compute type, masked.
at::Tensor scores(const at::Tensor &query, const at::Tensor &key,
                  const std::optional<at::Tensor> &attn_bias, bool is_causal, double scale) {
    at::ScalarType ct = compute_type(query);
    at::Tensor s = at::matmul(query.to(ct), key.to(ct).transpose(-2, -1)) * scale;
    if (is_causal) {
        int64_t l = query.size(-2), n = key.size(-2);
        // Top-left aligned, as PyTorch's is_causal: query i sees keys 0..i.
        at::Tensor keep = at::ones({l, n}, query.options().dtype(at::kBool)).tril();
        s = s.masked_fill(keep.logical_not(), -std::numeric_limits<float>::infinity());
    }
    if (attn_bias.has_value() && attn_bias->defined()) {
        if (attn_bias->scalar_type() == at::kBool)
            s = s.masked_fill(attn_bias->logical_not(), -std::numeric_limits<float>::infinity());
        else
            s = s + attn_bias->to(ct);
    }
    return s;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor,
           at::Tensor, at::Tensor>
sdpa_forward(const at::Tensor &query, const at::Tensor &key, const at::Tensor &value,
             const std::optional<at::Tensor> &attn_bias, double dropout_p, bool is_causal,
             bool return_debug_mask, std::optional<double> scale) {
    TORCH_CHECK(dropout_p == 0.0, "openreg: the fused attention kernel takes no dropout");
    double sc = softmax_scale(query, scale);
    at::Tensor s = scores(query, key, attn_bias, is_causal, sc);
    at::Tensor lse = at::logsumexp(s, -1); // (batch, heads, L): what backward needs
    at::Tensor out = at::matmul(at::exp(s - lse.unsqueeze(-1)), value.to(compute_type(query)))
                         .to(query.scalar_type());
    at::Tensor empty = at::empty({0}, query.options().dtype(at::kLong));
    return {out,   lse,  empty, empty, c10::SymInt(query.size(-2)), c10::SymInt(key.size(-2)),
            empty, empty, at::empty({0}, query.options())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>
sdpa_backward(const at::Tensor &grad_out, const at::Tensor &query, const at::Tensor &key,
              const at::Tensor &value, const at::Tensor &attn_bias,
              std::array<bool, 4> grad_input_mask, const at::Tensor &out,
              const at::Tensor &logsumexp, const at::Tensor &, const at::Tensor &, int64_t,
              int64_t, double dropout_p, bool is_causal, const at::Tensor &, const at::Tensor &,
              std::optional<double> scale) {
    double sc = softmax_scale(query, scale);
    std::optional<at::Tensor> bias;
    if (attn_bias.defined())
        bias = attn_bias;
    // P = softmax(S) from the saved log-sum-exp; dS = P * (dP - rowsum(dO * O)).
    at::Tensor p = at::exp(scores(query, key, bias, is_causal, sc) - logsumexp.unsqueeze(-1));
    at::ScalarType ct = compute_type(query);
    at::Tensor go = grad_out.to(ct), q = query.to(ct), k = key.to(ct), v = value.to(ct);
    at::Tensor dp = at::matmul(go, v.transpose(-2, -1));
    at::Tensor ds = p * (dp - (go * out.to(ct)).sum(-1, true));
    at::Tensor dq, dk, dv, dbias;
    if (grad_input_mask[0])
        dq = (at::matmul(ds, k) * sc).to(query.scalar_type());
    if (grad_input_mask[1])
        dk = (at::matmul(ds.transpose(-2, -1), q) * sc).to(key.scalar_type());
    if (grad_input_mask[2])
        dv = at::matmul(p.transpose(-2, -1), go).to(value.scalar_type());
    if (grad_input_mask[3] && attn_bias.defined())
        dbias = ds.sum_to_size(attn_bias.sizes()).to(attn_bias.scalar_type());
    return {dq, dk, dv, dbias};
}

// ---- a custom operator -----------------------------------------------------------------

// openreg::scaled_abs(x, s) = |x| * s: registered as PyTorch extensions
// register theirs (schema, kernels per dispatch key, autograd), usable from
// Python as torch.ops.openreg.scaled_abs and under torch.compile.
at::Tensor scaled_abs(const at::Tensor &x, double s) { return at::abs(x) * s; }

at::Tensor scaled_abs_meta(const at::Tensor &x, double) { return at::empty_like(x); }

class ScaledAbs : public torch::autograd::Function<ScaledAbs> {
  public:
    static at::Tensor forward(torch::autograd::AutogradContext *ctx, const at::Tensor &x,
                              double s) {
        at::AutoDispatchBelowADInplaceOrView guard;
        ctx->save_for_backward({x});
        ctx->saved_data["s"] = s;
        static auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("openreg::scaled_abs", "")
                             .typed<at::Tensor(const at::Tensor &, double)>();
        return op.call(x, s);
    }
    static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx,
                                                   torch::autograd::variable_list grad) {
        at::Tensor x = ctx->get_saved_variables()[0];
        double s = ctx->saved_data["s"].toDouble();
        return {grad[0] * at::sign(x) * s, at::Tensor()};
    }
};

at::Tensor scaled_abs_autograd(const at::Tensor &x, double s) { return ScaledAbs::apply(x, s); }

} // namespace
} // namespace torch_openreg

// scaled_dot_product_attention asks the device's stub, _fused_sdp_choice the op.
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_openreg::fused_sdp_choice)
} // namespace at::native

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    m.impl("_fused_sdp_choice", &torch_openreg::fused_sdp_choice);
    m.impl("_scaled_dot_product_fused_attention_overrideable", &torch_openreg::sdpa_forward);
    m.impl("_scaled_dot_product_fused_attention_overrideable_backward",
           &torch_openreg::sdpa_backward);
}

TORCH_LIBRARY(openreg, m) {
    m.def("scaled_abs(Tensor x, float s) -> Tensor");
}
TORCH_LIBRARY_IMPL(openreg, PrivateUse1, m) { m.impl("scaled_abs", &torch_openreg::scaled_abs); }
TORCH_LIBRARY_IMPL(openreg, CPU, m) { m.impl("scaled_abs", &torch_openreg::scaled_abs); }
TORCH_LIBRARY_IMPL(openreg, Meta, m) { m.impl("scaled_abs", &torch_openreg::scaled_abs_meta); }
TORCH_LIBRARY_IMPL(openreg, Autograd, m) {
    m.impl("scaled_abs", &torch_openreg::scaled_abs_autograd);
}
