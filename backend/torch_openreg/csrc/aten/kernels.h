// kernels.h - the device kernels of torch_openreg: what must run on the
// device itself (strided copies, fills, random-number post-processing), so
// that host code never touches device memory (strict mode stays honest).
// Each enqueues on `stream` of the current device and returns at once.
#pragma once

#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

#include <openreg.h>

namespace torch_openreg {

constexpr size_t kMaxKernelDims = 16;

// dst[i...] = src[i...] over `sizes`, element strides of each side, for
// elements of `itemsize` bytes (1, 2, 4, 8 or 16). Returns false when the
// shape has more than kMaxKernelDims dimensions (the caller goes through the
// host).
bool launch_strided_copy(void *dst, c10::IntArrayRef dst_strides, const void *src,
                         c10::IntArrayRef src_strides, c10::IntArrayRef sizes, size_t itemsize,
                         orStream_t stream);

// Writes the `itemsize`-byte `pattern` to the strided elements of dst.
bool launch_fill(void *dst, c10::IntArrayRef strides, c10::IntArrayRef sizes, const void *pattern,
                 size_t itemsize, orStream_t stream);

// out[i] = (T)(a + b * in[i]) for n contiguous elements; out may alias in
// when T is float. T is float, double, Half or BFloat16.
void launch_affine_from_float(void *out, c10::ScalarType out_type, const float *in, double a,
                              double b, size_t n, orStream_t stream);

// out[i] = (T)(in[i] > threshold) for n contiguous elements, T any real
// dtype or bool: a Bernoulli draw from uniforms in (0, 1].
void launch_threshold_from_float(void *out, c10::ScalarType out_type, const float *in,
                                 float threshold, size_t n, orStream_t stream);

} // namespace torch_openreg
