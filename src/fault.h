/*
 * src/fault.h - a fault (SIGSEGV, SIGBUS) in device work becomes an error.
 *
 * Device workers run kernels, copies and memsets inside or_fault_call*: a
 * fault there returns to the call instead of killing the process. Anywhere
 * else (host code, MPI, a worker between ops) the signal goes on to the
 * handler that was installed before ours (AddressSanitizer's, say), or to the
 * default action: real crashes stay crashes.
 */
#ifndef OR_FAULT_H
#define OR_FAULT_H

#include <stdbool.h>

#include "openreg.h"

typedef struct or_fault {
    void *addr; /* the faulting address */
    int sig;    /* SIGSEGV or SIGBUS */
} or_fault;

/* Install the process's handler, once; later calls do nothing. 0 or -1. */
int or_fault_install(void);
/* A worker thread starts or ends: its alternate signal stack (a fault may
 * be a stack overflow), unless the thread has one already. */
void or_fault_thread_start(void);
void or_fault_thread_end(void);

/* Run fn(ctx, args) (a kernel block) or fn(arg); true when it returned,
 * false when it faulted (then *fault says where). */
bool or_fault_call_kernel(orKernel_t fn, const orKernelContext *ctx, void *args, or_fault *fault);
bool or_fault_call(void (*fn)(void *), void *arg, or_fault *fault);

#endif
