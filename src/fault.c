/*
 * src/fault.c - catching faults of device work (see fault.h).
 *
 * The handler only acts for a thread that armed it (a worker inside
 * or_fault_call*): it jumps back there. Otherwise it chains: to the previous
 * handler if there was one, else it restores the default action and returns,
 * so the faulting instruction runs again and the process dies of the signal
 * as it would have without us.
 *
 * AddressSanitizer installs its own SEGV handler before main (handle_segv=1,
 * its default); ours is installed later, at the runtime's start-up, so it
 * sees faults first and hands ASan those that are not a worker's.
 */
#include "fault.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

typedef struct fault_catch {
    sigjmp_buf env;
    void *volatile addr;
    volatile int sig;
} fault_catch;

/* The armed thread's catch, NULL otherwise. initial-exec: the handler reads
 * it in any thread, and must not make the dynamic loader allocate there. */
static _Thread_local fault_catch *armed __attribute__((tls_model("initial-exec")));
static _Thread_local void *own_altstack __attribute__((tls_model("initial-exec")));
static _Thread_local size_t own_altstack_size __attribute__((tls_model("initial-exec")));

static struct sigaction previous_segv, previous_bus;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;
static int install_rc;

static void on_fault(int sig, siginfo_t *si, void *uc)
{
    fault_catch *c = armed;
    if (c && si->si_code > 0) { /* a real fault, not a kill() */
        armed = NULL;
        c->addr = si->si_addr;
        c->sig = sig;
        siglongjmp(c->env, 1);
    }
    const struct sigaction *prev = sig == SIGBUS ? &previous_bus : &previous_segv;
    if (prev->sa_flags & SA_SIGINFO) {
        prev->sa_sigaction(sig, si, uc);
        return;
    }
    if (prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN) {
        prev->sa_handler(sig);
        return;
    }
    /* Default action: the faulting instruction runs again without us. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    if (si->si_code <= 0)
        raise(sig);
}

static void install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    /* NODEFER and an empty mask: the jump back leaves the signal mask as it
     * was, so sigsetjmp need not save it (a system call per block). */
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &previous_segv) || sigaction(SIGBUS, &sa, &previous_bus))
        install_rc = -1;
}

int or_fault_install(void)
{
    pthread_once(&install_once, install);
    return install_rc;
}

void or_fault_thread_start(void)
{
    stack_t cur;
    if (sigaltstack(NULL, &cur) == 0 && !(cur.ss_flags & SS_DISABLE))
        return; /* the thread has one (AddressSanitizer gives every thread one) */
    size_t size = 64 * 1024;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return;
    stack_t ss = {.ss_sp = p, .ss_size = size, .ss_flags = 0};
    if (sigaltstack(&ss, NULL)) {
        munmap(p, size);
        return;
    }
    own_altstack = p;
    own_altstack_size = size;
}

void or_fault_thread_end(void)
{
    if (!own_altstack)
        return;
    stack_t ss = {.ss_sp = NULL, .ss_size = own_altstack_size, .ss_flags = SS_DISABLE};
    sigaltstack(&ss, NULL);
    munmap(own_altstack, own_altstack_size);
    own_altstack = NULL;
}

/* sigsetjmp's frame must live while fn runs: or_fault_call is that frame. */
bool or_fault_call(void (*fn)(void *), void *arg, or_fault *fault)
{
    fault_catch c;
    if (sigsetjmp(c.env, 0)) {
        fault->addr = c.addr;
        fault->sig = c.sig;
        return false;
    }
    armed = &c;
    fn(arg);
    armed = NULL;
    return true;
}

typedef struct kernel_call {
    orKernel_t fn;
    const orKernelContext *ctx;
    void *args;
} kernel_call;

static void run_kernel(void *p)
{
    kernel_call *k = p;
    k->fn(k->ctx, k->args);
}

bool or_fault_call_kernel(orKernel_t fn, const orKernelContext *ctx, void *args, or_fault *fault)
{
    kernel_call k = {fn, ctx, args};
    return or_fault_call(run_kernel, &k, fault);
}
