/*
 * src/handle.h - validated handles for streams and events.
 *
 * A handle is an encoded (slot, generation, kind), never a pointer the user
 * could make dangle: a destroyed handle, one of another kind, or a made-up
 * value is rejected by a table lookup instead of being dereferenced.
 */
#ifndef OR_HANDLE_H
#define OR_HANDLE_H

#include <stdint.h>

typedef enum { OR_HANDLE_STREAM = 1, OR_HANDLE_EVENT = 2 } or_handle_kind;

/* 0 when out of memory. */
uintptr_t or_handle_register(or_handle_kind kind, void *obj);
/* The object, or NULL if h is not a live handle of this kind. */
void *or_handle_lookup(or_handle_kind kind, uintptr_t h);
/* Like lookup, and the handle is dead from now on. */
void *or_handle_unregister(or_handle_kind kind, uintptr_t h);
/* Free the table (process teardown). */
void or_handle_table_fini(void);

#endif
