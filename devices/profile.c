/* devices/profile.c - the profile table. Accelerator figures are the vendors'
 * published datasheet values (FP32 non-tensor rate, HBM bandwidth, memory). */
#include "profile.h"

#include <string.h>

#define GIB ((size_t)1 << 30)

static const or_device_profile cpu = {
    "cpu", "a slice of this host: its cores, a share of its memory", 0, 0, 1, 0, 0};
static const or_device_profile v100 = {
    "v100", "NVIDIA V100 SXM2 32GB: 15.7 TFLOPS FP32, 900 GB/s HBM2", 32 * GIB, 80, 6, 15700,
    900};
static const or_device_profile a100 = {
    "a100", "NVIDIA A100 SXM4 80GB: 19.5 TFLOPS FP32, 2039 GB/s HBM2e", 80 * GIB, 108, 3,
    19500, 2039};
static const or_device_profile h100 = {
    "h100", "NVIDIA H100 SXM5 80GB: 67 TFLOPS FP32, 3350 GB/s HBM3", 80 * GIB, 132, 3, 67000,
    3350};

static const or_device_profile *const table[] = {&cpu, &v100, &a100, &h100, NULL};
const char *const or_profile_names[] = {"cpu", "v100", "a100", "h100", NULL};

const or_device_profile *const *or_profiles(void) { return table; }

const or_device_profile *or_profile_find(const char *name)
{
    for (const or_device_profile *const *p = table; *p; p++)
        if (strcmp((*p)->name, name) == 0)
            return *p;
    return NULL;
}
