/*
 * occltest.h - mpitest.h for programs that call OCCL: a failed OCCL call
 * prints its result and OCCL's reason, then aborts the job.
 */
#ifndef OR_OCCLTEST_H
#define OR_OCCLTEST_H

#include "mpitest.h"
#include "occl.h"

#define CHECK_OCCL(call)                                                                 \
    do {                                                                                 \
        occlResult_t check_occl_ = (call);                                               \
        if (check_occl_ != occlSuccess) {                                                \
            char detail_[512];                                                           \
            snprintf(detail_, sizeof detail_, "%s (%s)", occlGetErrorString(check_occl_), \
                     occlGetLastError(NULL));                                            \
            mpitest_fail(__FILE__, __LINE__, #call " -> ", detail_);                     \
        }                                                                                \
    } while (0)

#endif
