/*
 * devices/profile.h - named device models.
 *
 * A profile says what a simulated device is: its memory, its copy engines,
 * and the compute rate and memory bandwidth the virtual clock charges with.
 * Compute threads are host threads, so they come from the device's cores
 * unless OPENREG_DEVICE_THREADS says otherwise; sm_count is what the
 * modelled part would have.
 */
#ifndef OR_PROFILE_H
#define OR_PROFILE_H

#include <stddef.h>

typedef struct or_device_profile {
    const char *name;
    const char *description;
    size_t memory;         /* bytes; 0 = a share of the host's memory */
    int sm_count;          /* multiprocessors of the modelled part; 0 = the device's cores */
    int copy_engines;
    double compute_gflops; /* declared FP32 rate; 0 = per-core estimate */
    double memory_gbs;     /* declared memory bandwidth, GB/s; 0 = per-core estimate */
} or_device_profile;

/* Profile names, NULL-terminated, in table order (for the config parser). */
extern const char *const or_profile_names[];
#define OR_PROFILE_NAMES_TEXT "cpu, v100, a100 or h100"

/* NULL-terminated table, in the order `orinfo` lists them. */
const or_device_profile *const *or_profiles(void);
const or_device_profile *or_profile_find(const char *name);

/* The 'cpu' profile's estimates for a device of ncores host cores. */
#define OR_CPU_GFLOPS_PER_CORE 32.0
#define OR_CPU_GBS_PER_CORE 10.0

#endif
