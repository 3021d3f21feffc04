/*
 * devices/arena.h - the allocator behind a device's memory.
 *
 * Pure bookkeeping over offsets [0, capacity): first-fit with coalescing,
 * 256-byte granularity (CUDA's allocation alignment). No locking and no
 * mapping here: the device owns the memory and the lock, which keeps this
 * part unit-testable.
 */
#ifndef OR_ARENA_H
#define OR_ARENA_H

#include <stddef.h>
#include <stdint.h>

#define OR_ARENA_ALIGN ((size_t)256)

typedef struct or_extent {
    size_t off, size;
    size_t requested; /* live allocations: the size asked for (size is rounded up) */
    uint64_t id;      /* live allocations: unique in the arena's life, from 1 */
    size_t lead;      /* guarded arenas: the allocation's region starts lead bytes before off */
} or_extent;

/* Extents sorted by offset, non-overlapping. */
typedef struct or_extent_set {
    or_extent *v;
    size_t n, cap;
} or_extent_set;

typedef struct or_arena {
    size_t capacity; /* multiple of OR_ARENA_ALIGN */
    size_t used;     /* bytes in live allocations (rounded sizes) */
    size_t high_water; /* end of the highest allocation ever made */
    uint64_t last_id;
    or_extent_set free_extents;
    or_extent_set live;
    /* Guarded (memcheck) arenas: page > 0. Each allocation is a region of
     * whole pages, [off - lead, off + size): a guard page, the block placed
     * so that its size rounded up to OR_ARENA_ALIGN ends where the trailing
     * guard page starts (the block stays 256-byte aligned; its end is
     * within OR_ARENA_ALIGN - 1 bytes of the guard page: or_arena_slack), that page. A
     * freed region waits in a FIFO quarantine (oldest first, regions with
     * off = region start, lead = the block's offset in it) until more than
     * quarantine_limit bytes are quarantined, so that its addresses are not
     * handed out again soon. */
    size_t page;
    size_t quarantine_limit, quarantined;
    or_extent *quarantine;
    size_t nquarantine, cap_quarantine;
} or_arena;

/* Guarded arenas: the bytes between a live block's end and its trailing
 * guard page (0 when its size is a multiple of OR_ARENA_ALIGN). */
static inline size_t or_arena_slack(const or_extent *e)
{
    return ((e->requested + OR_ARENA_ALIGN - 1) & ~(OR_ARENA_ALIGN - 1)) - e->requested;
}

/* What an offset of a guarded arena is, for fault reports. */
typedef enum {
    OR_ARENA_NOWHERE, /* in no region: free, or never allocated */
    OR_ARENA_LIVE,    /* in a live allocation's region (its guard pages included) */
    OR_ARENA_FREED    /* in a quarantined region */
} or_arena_where;

/* Sorted-set primitives, also used for other address registries. add: 0 or
 * ENOMEM; remove: 0 or ENOENT (no extent starts at off); find: 0 and the
 * extent containing off, or ENOENT. */
int or_extent_set_add(or_extent_set *s, or_extent e);
int or_extent_set_remove(or_extent_set *s, size_t off, or_extent *removed);
int or_extent_set_find(const or_extent_set *s, size_t off, or_extent *found);
void or_extent_set_free(or_extent_set *s);

/* 0 or ENOMEM. capacity is rounded down to OR_ARENA_ALIGN; EINVAL if that is 0. */
int or_arena_init(or_arena *a, size_t capacity);
void or_arena_fini(or_arena *a);
/* As or_arena_init, guarded: page is the page size (a power of two that
 * divides capacity), quarantine_limit the bytes of freed regions kept out of
 * use. Allocations then take whole pages plus two guard pages each. */
int or_arena_init_guarded(or_arena *a, size_t capacity, size_t page, size_t quarantine_limit);
/* Guarded arenas: where off lies, and the allocation it is nearest: the one
 * whose region holds it (live, or freed and quarantined: then e->off is the
 * block's start, e->requested its size). */
or_arena_where or_arena_locate(const or_arena *a, size_t off, or_extent *e);
/* 0, EINVAL (size 0) or ENOMEM (no free extent large enough). *off set on success only. */
int or_arena_alloc(or_arena *a, size_t size, size_t *off);
/* 0, ENOENT when off is not the start of a live allocation, or ENOMEM when the
 * bookkeeping cannot grow (the block then stays allocated). *size (may be NULL) gets
 * the allocation's rounded size; in a guarded arena, its whole region's, which is
 * quarantined (and the oldest quarantined regions released past the limit). */
int or_arena_free(or_arena *a, size_t off, size_t *size);
/* 0 and the live allocation containing off, or ENOENT. */
int or_arena_find(const or_arena *a, size_t off, or_extent *alloc);
/* Largest single allocation that would succeed now. */
size_t or_arena_largest_free(const or_arena *a);

#endif /* OR_ARENA_H */
