/*
 * test_ipc_children.c - OPENREG_IPC_CHILDREN: a process started alone shares
 * its device memory with the processes it starts, which open its IPC handles.
 * The child is this same program, started with OR_TEST_IPC_CHILD set: it
 * opens the handle in OR_TEST_IPC_HANDLE (hex), adds 1 to its first 16 bytes
 * and exits with the runtime's error code (0 on success).
 */
#include "helpers.h"

#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

extern char **environ;

TestSuite(ipc_children, .timeout = 60);

static int child_main(void)
{
    const char *hex = getenv("OR_TEST_IPC_HANDLE");
    orIpcMemHandle_t h;
    if (!hex || strlen(hex) != 2 * sizeof h)
        return 100;
    for (size_t i = 0; i < sizeof h; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        h.reserved[i] = (char)v;
    }
    void *p = NULL;
    orError_t err = orIpcOpenMemHandle(&p, h, 0);
    if (err != orSuccess)
        return err;
    unsigned char buf[16];
    if ((err = orMemcpy(buf, p, sizeof buf, orMemcpyDeviceToHost)) != orSuccess)
        return err;
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i]++;
    if ((err = orMemcpy(p, buf, sizeof buf, orMemcpyHostToDevice)) != orSuccess)
        return err;
    return orIpcCloseMemHandle(p);
}

/* Before Criterion's main: the child does its part and leaves. */
__attribute__((constructor)) static void maybe_child(void)
{
    if (getenv("OR_TEST_IPC_CHILD"))
        _exit(child_main());
}

/* Start the child with h and return its exit code. */
static int run_child(const orIpcMemHandle_t *h)
{
    char hex[2 * sizeof *h + 1];
    for (size_t i = 0; i < sizeof *h; i++)
        sprintf(hex + 2 * i, "%02x", (unsigned char)h->reserved[i]);
    setenv("OR_TEST_IPC_HANDLE", hex, 1);
    setenv("OR_TEST_IPC_CHILD", "1", 1);
    char *argv[] = {"test_ipc_children", NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ);
    unsetenv("OR_TEST_IPC_CHILD");
    cr_assert_eq(rc, 0, "posix_spawn: %s", strerror(rc));
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void *shared_alloc(size_t n, unsigned char value)
{
    setenv("OPENREG_IPC_CHILDREN", "1", 1);
    void *p = NULL;
    CHECK_OR(orMalloc(&p, n));
    CHECK_OR(orMemset(p, value, n));
    cr_assert_not_null(getenv("OPENREG_IPC_PARENT"), "the runtime exports its identity");
    return p;
}

Test(ipc_children, child_writes_parent_memory)
{
    unsigned char *p = shared_alloc(4096, 5);
    orIpcMemHandle_t h;
    /* A pointer inside the allocation names the whole allocation. */
    CHECK_OR(orIpcGetMemHandle(&h, p + 100));
    cr_assert_eq(run_child(&h), 0);
    unsigned char buf[17];
    CHECK_OR(orMemcpy(buf, p, sizeof buf, orMemcpyDeviceToHost));
    for (int i = 0; i < 16; i++)
        cr_assert_eq(buf[i], 6, "byte %d is %d", i, buf[i]);
    cr_assert_eq(buf[16], 5);
    cr_assert_eq(run_child(&h), 0, "a handle opens again");
    CHECK_OR(orMemcpy(buf, p, 1, orMemcpyDeviceToHost));
    cr_assert_eq(buf[0], 7);
    CHECK_OR(orFree(p));
}

Test(ipc_children, stale_handle_refused)
{
    void *p = shared_alloc(1024, 0);
    orIpcMemHandle_t h;
    CHECK_OR(orIpcGetMemHandle(&h, p));
    CHECK_OR(orFree(p));
    cr_assert_eq(run_child(&h), orErrorInvalidDevicePointer);
    /* Reused at the same offset: still the freed allocation's handle, refused. */
    void *q = NULL;
    CHECK_OR(orMalloc(&q, 1024));
    cr_assert_eq(q, p);
    cr_assert_eq(run_child(&h), orErrorInvalidDevicePointer);
    orIpcMemHandle_t hq;
    CHECK_OR(orIpcGetMemHandle(&hq, q));
    cr_assert_eq(run_child(&hq), 0);
    CHECK_OR(orFree(q));
}

Test(ipc_children, forged_handle_refused)
{
    void *p = shared_alloc(1024, 0);
    orIpcMemHandle_t h;
    CHECK_OR(orIpcGetMemHandle(&h, p));
    for (size_t i = 0; i < 56; i += 8) {
        orIpcMemHandle_t f = h;
        f.reserved[i] ^= 1;
        cr_assert_eq(run_child(&f), orErrorInvalidResourceHandle, "byte %zu altered", i);
    }
    CHECK_OR(orFree(p));
}

Test(ipc_children, not_shared_without_the_setting)
{
    setenv("OPENREG_IPC_CHILDREN", "0", 1);
    void *p = NULL;
    CHECK_OR(orMalloc(&p, 1024));
    cr_assert_null(getenv("OPENREG_IPC_PARENT"));
    orIpcMemHandle_t h;
    CHECK_OR(orIpcGetMemHandle(&h, p));
    cr_assert_eq(run_child(&h), orErrorInvalidResourceHandle);
    CHECK_OR(orFree(p));
}
