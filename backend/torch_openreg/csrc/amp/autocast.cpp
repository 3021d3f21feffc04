// autocast.cpp - torch.autocast("openreg"): the AutocastPrivateUse1 kernels.
// The op lists are PyTorch's own (ATen/autocast_mode.h), the ones CUDA
// registers: convolutions and matmuls run in the autocast dtype (float16 by
// default, or bfloat16), losses, norms and reductions in float32, ops with
// several inputs in their widest type, binary_cross_entropy refused. Every
// other op falls through to its kernel unchanged.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace torch_openreg {
namespace {

// As on CUDA: binary_cross_entropy of a float16 input is unsafe.
at::Tensor binary_cross_entropy_banned(const at::Tensor &, const at::Tensor &,
                                       const std::optional<at::Tensor> &, int64_t) {
    TORCH_CHECK(false,
                "openreg autocast: torch.nn.functional.binary_cross_entropy and "
                "torch.nn.BCELoss are unsafe to autocast (their input may be float16 or "
                "bfloat16); use torch.nn.functional.binary_cross_entropy_with_logits or "
                "torch.nn.BCEWithLogitsLoss, which are safe, as on CUDA");
}

} // namespace
} // namespace torch_openreg

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
    m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
    using namespace at; // the op lists name Tensor, Scalar, ScalarType unqualified
    using namespace at::autocast;
#define OPENREG_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
    AT_FORALL_LOWER_PRECISION_FP(OPENREG_LOWER_PRECISION_FP)
#define OPENREG_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
    AT_FORALL_FP32(OPENREG_FP32)
#define OPENREG_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
    AT_FORALL_FP32_SET_OPT_DTYPE(OPENREG_FP32_SET_OPT_DTYPE)
    AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
#define OPENREG_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
    AT_FORALL_PROMOTE(OPENREG_PROMOTE)
    m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"),
           TORCH_FN(torch_openreg::binary_cross_entropy_banned));
}
