/* src/error.c - error names and strings from OR_ERROR_LIST, and the per-thread last error. */
#include "internal.h"

static _Thread_local orError_t last_error = orSuccess;

/* A fault of device work (orErrorIllegalAddress) poisons the process for
 * good, as CUDA's sticky errors poison a context. */
static _Atomic int sticky_error = orSuccess;

void or_error_set_sticky(orError_t err)
{
    int none = orSuccess;
    atomic_compare_exchange_strong(&sticky_error, &none, (int)err);
}

orError_t or_error_sticky(void)
{
    return (orError_t)atomic_load_explicit(&sticky_error, memory_order_relaxed);
}

const char *orGetErrorName(orError_t error)
{
    switch (error) {
#define OR_ERROR_NAME(name, value, text) \
    case name:                           \
        return #name;
        OR_ERROR_LIST(OR_ERROR_NAME)
#undef OR_ERROR_NAME
    }
    return "unrecognized error code";
}

const char *orGetErrorString(orError_t error)
{
    switch (error) {
#define OR_ERROR_TEXT(name, value, text) \
    case name:                           \
        return text;
        OR_ERROR_LIST(OR_ERROR_TEXT)
#undef OR_ERROR_TEXT
    }
    return "unrecognized error code";
}

/* orErrorNotReady is a status, not an error (as in CUDA): a polling loop must
 * not leave a stale last error behind. */
orError_t or_error_record(orError_t err)
{
    orError_t sticky = or_error_sticky();
    if (sticky != orSuccess)
        err = sticky;
    if (err != orSuccess && err != orErrorNotReady)
        last_error = err;
    return err;
}

orError_t orGetLastError(void)
{
    orError_t sticky = or_error_sticky();
    if (sticky != orSuccess)
        return sticky; /* never reset */
    orError_t err = last_error;
    last_error = orSuccess;
    return err;
}

orError_t orPeekAtLastError(void)
{
    orError_t sticky = or_error_sticky();
    return sticky != orSuccess ? sticky : last_error;
}
