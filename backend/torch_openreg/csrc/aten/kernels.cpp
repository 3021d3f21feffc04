// kernels.cpp - device kernels (see kernels.h). A launch's arguments are
// copied by the runtime, so they live in plain structs on the caller's stack.
#include <cstring>

#include <c10/core/ScalarType.h>
#include <c10/util/BFloat16.h>
#include <c10/util/complex.h>
#include <c10/util/Half.h>

#include "common.h"
#include "aten/kernels.h"

namespace torch_openreg {
namespace {

constexpr unsigned kBlockElems = 4096;

struct StridedArgs {
    char *dst;
    const char *src; // NULL for a fill: then `pattern` is copied
    int64_t numel;
    int ndim;
    size_t itemsize;
    int64_t sizes[kMaxKernelDims];
    int64_t dst_strides[kMaxKernelDims];
    int64_t src_strides[kMaxKernelDims];
    unsigned char pattern[16];
};

// Element offsets (in elements) of linear index i on both sides.
inline void offsets(const StridedArgs *a, int64_t i, int64_t *dst_off, int64_t *src_off) {
    int64_t d = 0, s = 0;
    for (int k = a->ndim - 1; k >= 0; k--) {
        int64_t idx = i % a->sizes[k];
        i /= a->sizes[k];
        d += idx * a->dst_strides[k];
        s += idx * a->src_strides[k];
    }
    *dst_off = d;
    *src_off = s;
}

template <size_t N>
void strided_kernel(const orKernelContext *ctx, void *p) {
    const StridedArgs *a = static_cast<const StridedArgs *>(p);
    int64_t begin = static_cast<int64_t>(ctx->blockIdx.x) * kBlockElems;
    int64_t end = std::min<int64_t>(begin + kBlockElems, a->numel);
    for (int64_t i = begin; i < end; i++) {
        int64_t d, s;
        offsets(a, i, &d, &s);
        const void *from = a->src != nullptr
                               ? static_cast<const void *>(a->src + s * static_cast<int64_t>(N))
                               : static_cast<const void *>(a->pattern);
        std::memcpy(a->dst + d * static_cast<int64_t>(N), from, N);
    }
}

orKernel_t strided_kernel_for(size_t itemsize) {
    switch (itemsize) {
    case 1: return strided_kernel<1>;
    case 2: return strided_kernel<2>;
    case 4: return strided_kernel<4>;
    case 8: return strided_kernel<8>;
    case 16: return strided_kernel<16>;
    default: return nullptr;
    }
}

bool launch_strided(StridedArgs &a, c10::IntArrayRef sizes, c10::IntArrayRef dst_strides,
                    c10::IntArrayRef src_strides, orStream_t stream) {
    orKernel_t kernel = strided_kernel_for(a.itemsize);
    TORCH_CHECK(kernel != nullptr, "openreg: no copy kernel for elements of ", a.itemsize,
                " bytes");
    if (sizes.size() > kMaxKernelDims)
        return false;
    a.ndim = static_cast<int>(sizes.size());
    a.numel = 1;
    for (size_t k = 0; k < sizes.size(); k++) {
        a.sizes[k] = sizes[k];
        a.dst_strides[k] = dst_strides[k];
        a.src_strides[k] = src_strides.empty() ? 0 : src_strides[k];
        a.numel *= sizes[k];
    }
    if (a.numel == 0)
        return true;
    orDim3 grid = {static_cast<unsigned>((a.numel + kBlockElems - 1) / kBlockElems), 1, 1};
    orDim3 block = {1, 1, 1};
    OR_TORCH_CHECK(orLaunchKernel(kernel, grid, block, &a, sizeof a, 0, stream));
    return true;
}

struct AffineArgs {
    void *out;
    const float *in;
    double a, b;
    size_t n;
};

template <typename T>
void affine_kernel(const orKernelContext *ctx, void *p) {
    const AffineArgs *a = static_cast<const AffineArgs *>(p);
    size_t begin = static_cast<size_t>(ctx->blockIdx.x) * kBlockElems;
    size_t end = std::min<size_t>(begin + kBlockElems, a->n);
    T *out = static_cast<T *>(a->out);
    for (size_t i = begin; i < end; i++)
        out[i] = static_cast<T>(a->a + a->b * static_cast<double>(a->in[i]));
}

struct ThresholdArgs {
    void *out;
    const float *in;
    float threshold;
    size_t n;
};

template <typename T>
void threshold_kernel(const orKernelContext *ctx, void *p) {
    const ThresholdArgs *a = static_cast<const ThresholdArgs *>(p);
    size_t begin = static_cast<size_t>(ctx->blockIdx.x) * kBlockElems;
    size_t end = std::min<size_t>(begin + kBlockElems, a->n);
    T *out = static_cast<T *>(a->out);
    for (size_t i = begin; i < end; i++)
        out[i] = static_cast<T>(a->in[i] > a->threshold ? 1 : 0);
}

} // namespace

void launch_threshold_from_float(void *out, c10::ScalarType out_type, const float *in,
                                 float threshold, size_t n, orStream_t stream) {
    if (n == 0)
        return;
    orKernel_t kernel = nullptr;
    switch (out_type) {
#define OR_THRESHOLD_CASE(ctype, name)                                                      \
    case c10::ScalarType::name: kernel = threshold_kernel<ctype>; break;
        AT_FORALL_SCALAR_TYPES_WITH_COMPLEX(OR_THRESHOLD_CASE)
#undef OR_THRESHOLD_CASE
    default: TORCH_CHECK(false, "openreg: no bernoulli kernel for dtype ", out_type);
    }
    ThresholdArgs args{out, in, threshold, n};
    orDim3 grid = {static_cast<unsigned>((n + kBlockElems - 1) / kBlockElems), 1, 1};
    orDim3 block = {1, 1, 1};
    OR_TORCH_CHECK(orLaunchKernel(kernel, grid, block, &args, sizeof args, 0, stream));
}

bool launch_strided_copy(void *dst, c10::IntArrayRef dst_strides, const void *src,
                         c10::IntArrayRef src_strides, c10::IntArrayRef sizes, size_t itemsize,
                         orStream_t stream) {
    StridedArgs a{};
    a.dst = static_cast<char *>(dst);
    a.src = static_cast<const char *>(src);
    a.itemsize = itemsize;
    return launch_strided(a, sizes, dst_strides, src_strides, stream);
}

bool launch_fill(void *dst, c10::IntArrayRef strides, c10::IntArrayRef sizes, const void *pattern,
                 size_t itemsize, orStream_t stream) {
    StridedArgs a{};
    a.dst = static_cast<char *>(dst);
    a.src = nullptr;
    a.itemsize = itemsize;
    TORCH_CHECK(itemsize <= sizeof a.pattern, "openreg: fill of ", itemsize, "-byte elements");
    std::memcpy(a.pattern, pattern, itemsize);
    return launch_strided(a, sizes, strides, {}, stream);
}

void launch_affine_from_float(void *out, c10::ScalarType out_type, const float *in, double a,
                              double b, size_t n, orStream_t stream) {
    if (n == 0)
        return;
    orKernel_t kernel = nullptr;
    switch (out_type) {
    case c10::ScalarType::Float: kernel = affine_kernel<float>; break;
    case c10::ScalarType::Double: kernel = affine_kernel<double>; break;
    case c10::ScalarType::Half: kernel = affine_kernel<c10::Half>; break;
    case c10::ScalarType::BFloat16: kernel = affine_kernel<c10::BFloat16>; break;
    default: TORCH_CHECK(false, "openreg: no random kernel for dtype ", out_type);
    }
    AffineArgs args{out, in, a, b, n};
    orDim3 grid = {static_cast<unsigned>((n + kBlockElems - 1) / kBlockElems), 1, 1};
    orDim3 block = {1, 1, 1};
    OR_TORCH_CHECK(orLaunchKernel(kernel, grid, block, &args, sizeof args, 0, stream));
}

} // namespace torch_openreg
