/*
 * src/handle.c - a generation-checked slot table: changed under one mutex,
 * looked up without it.
 *
 * Every stream or event call looks its handle up (a small collective twice),
 * so the lookup takes no lock: the slots live in pages that never move once
 * allocated, and a slot's object is read between two reads of its
 * generation, seqlock-style. A writer releases a slot by clearing its
 * object, then bumping its generation, and reuses it only after that, so a
 * lookup that sees the new object also sees the new generation and refuses
 * a stale handle; a lookup racing with the release of its own handle sees
 * the object either still there or gone, as it would just before or after.
 */
#include "handle.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

_Static_assert(sizeof(uintptr_t) == 8, "handles encode 64-bit values");

#define INDEX_BITS 28
#define KIND_SHIFT 28
#define GEN_SHIFT 32
#define PAGE_BITS 12 /* 4096 slots, 96 KiB a page */
#define PAGE_SLOTS (1u << PAGE_BITS)
#define MAX_PAGES ((1u << INDEX_BITS) / PAGE_SLOTS)

typedef struct slot {
    _Atomic(void *) obj;        /* NULL when free */
    _Atomic uint32_t gen;       /* bumped on every release, never 0 */
    _Atomic uint32_t kind;
    uint32_t next_free;         /* under table_lock */
} slot;

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(slot *) pages[MAX_PAGES];
static _Atomic uint32_t nslots; /* slots ever handed out; published after their page */
static uint32_t free_head = UINT32_MAX;

static slot *slot_at(uint32_t idx)
{
    return &atomic_load_explicit(&pages[idx >> PAGE_BITS], memory_order_acquire)[idx & (PAGE_SLOTS - 1)];
}

static uintptr_t encode(uint32_t idx, uint32_t gen, or_handle_kind kind)
{
    return ((uintptr_t)gen << GEN_SHIFT) | ((uintptr_t)kind << KIND_SHIFT) | (idx + 1);
}

/* The slot handle h names, or NULL; its object in *obj (NULL: released). */
static slot *decode(or_handle_kind kind, uintptr_t h, void **obj)
{
    uint32_t idx = (uint32_t)(h & ((1u << INDEX_BITS) - 1));
    uint32_t k = (uint32_t)((h >> KIND_SHIFT) & 0xf);
    uint32_t gen = (uint32_t)(h >> GEN_SHIFT);
    if (idx == 0 || idx > atomic_load_explicit(&nslots, memory_order_acquire) || k != (uint32_t)kind)
        return NULL;
    slot *s = slot_at(idx - 1);
    uint32_t g1 = atomic_load_explicit(&s->gen, memory_order_acquire);
    void *o = atomic_load_explicit(&s->obj, memory_order_acquire);
    uint32_t sk = atomic_load_explicit(&s->kind, memory_order_relaxed);
    uint32_t g2 = atomic_load_explicit(&s->gen, memory_order_relaxed);
    if (!o || g1 != gen || g2 != gen || sk != (uint32_t)kind)
        return NULL;
    *obj = o;
    return s;
}

uintptr_t or_handle_register(or_handle_kind kind, void *obj)
{
    uintptr_t h = 0;
    pthread_mutex_lock(&table_lock);
    uint32_t idx, n = atomic_load_explicit(&nslots, memory_order_relaxed);
    slot *s;
    if (free_head != UINT32_MAX) {
        idx = free_head;
        s = slot_at(idx);
        free_head = s->next_free;
    } else {
        if (n >= (1u << INDEX_BITS) - 1)
            goto out;
        idx = n;
        if (!atomic_load_explicit(&pages[idx >> PAGE_BITS], memory_order_relaxed)) {
            slot *page = calloc(PAGE_SLOTS, sizeof *page);
            if (!page)
                goto out;
            atomic_store_explicit(&pages[idx >> PAGE_BITS], page, memory_order_release);
        }
        s = slot_at(idx);
        atomic_store_explicit(&s->gen, 1, memory_order_relaxed);
        atomic_store_explicit(&nslots, n + 1, memory_order_release);
    }
    atomic_store_explicit(&s->kind, (uint32_t)kind, memory_order_relaxed);
    atomic_store_explicit(&s->obj, obj, memory_order_release);
    h = encode(idx, atomic_load_explicit(&s->gen, memory_order_relaxed), kind);
out:
    pthread_mutex_unlock(&table_lock);
    return h;
}

void *or_handle_lookup(or_handle_kind kind, uintptr_t h)
{
    void *obj = NULL;
    decode(kind, h, &obj);
    return obj;
}

void *or_handle_unregister(or_handle_kind kind, uintptr_t h)
{
    pthread_mutex_lock(&table_lock);
    void *obj = NULL;
    slot *s = decode(kind, h, &obj);
    if (s) {
        atomic_store_explicit(&s->obj, NULL, memory_order_release);
        uint32_t gen = atomic_load_explicit(&s->gen, memory_order_relaxed) + 1;
        atomic_store_explicit(&s->gen, gen ? gen : 1, memory_order_release);
        uint32_t idx = (uint32_t)(h & ((1u << INDEX_BITS) - 1)) - 1;
        s->next_free = free_head;
        free_head = idx;
    }
    pthread_mutex_unlock(&table_lock);
    return obj;
}

void or_handle_table_fini(void)
{
    pthread_mutex_lock(&table_lock);
    uint32_t n = atomic_load_explicit(&nslots, memory_order_relaxed);
    atomic_store_explicit(&nslots, 0, memory_order_release);
    for (uint32_t p = 0; p < MAX_PAGES && p * PAGE_SLOTS < n; p++) {
        free(atomic_load_explicit(&pages[p], memory_order_relaxed));
        atomic_store_explicit(&pages[p], NULL, memory_order_relaxed);
    }
    free_head = UINT32_MAX;
    pthread_mutex_unlock(&table_lock);
}
