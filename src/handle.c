/* src/handle.c - a generation-checked slot table behind one mutex. */
#include "handle.h"

#include <pthread.h>
#include <stdlib.h>

_Static_assert(sizeof(uintptr_t) == 8, "handles encode 64-bit values");

#define INDEX_BITS 28
#define KIND_SHIFT 28
#define GEN_SHIFT 32

typedef struct slot {
    void *obj;       /* NULL when free */
    uint32_t gen;    /* bumped on every release, never 0 */
    uint32_t kind;
    uint32_t next_free;
} slot;

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static slot *slots;
static uint32_t nslots, capacity;
static uint32_t free_head = UINT32_MAX;

static uintptr_t encode(uint32_t idx, const slot *s)
{
    return ((uintptr_t)s->gen << GEN_SHIFT) | ((uintptr_t)s->kind << KIND_SHIFT) | (idx + 1);
}

static slot *decode(or_handle_kind kind, uintptr_t h)
{
    uint32_t idx = (uint32_t)(h & ((1u << INDEX_BITS) - 1));
    uint32_t k = (uint32_t)((h >> KIND_SHIFT) & 0xf);
    uint32_t gen = (uint32_t)(h >> GEN_SHIFT);
    if (idx == 0 || idx > nslots || k != (uint32_t)kind)
        return NULL;
    slot *s = &slots[idx - 1];
    if (!s->obj || s->gen != gen || s->kind != (uint32_t)kind)
        return NULL;
    return s;
}

uintptr_t or_handle_register(or_handle_kind kind, void *obj)
{
    uintptr_t h = 0;
    pthread_mutex_lock(&table_lock);
    uint32_t idx;
    if (free_head != UINT32_MAX) {
        idx = free_head;
        free_head = slots[idx].next_free;
    } else {
        if (nslots == capacity) {
            uint32_t cap = capacity ? capacity * 2 : 64;
            if (cap >= (1u << INDEX_BITS))
                goto out;
            slot *grown = realloc(slots, cap * sizeof *grown);
            if (!grown)
                goto out;
            slots = grown;
            capacity = cap;
        }
        idx = nslots++;
        slots[idx].gen = 1;
    }
    slots[idx].obj = obj;
    slots[idx].kind = (uint32_t)kind;
    h = encode(idx, &slots[idx]);
out:
    pthread_mutex_unlock(&table_lock);
    return h;
}

void *or_handle_lookup(or_handle_kind kind, uintptr_t h)
{
    pthread_mutex_lock(&table_lock);
    slot *s = decode(kind, h);
    void *obj = s ? s->obj : NULL;
    pthread_mutex_unlock(&table_lock);
    return obj;
}

void *or_handle_unregister(or_handle_kind kind, uintptr_t h)
{
    pthread_mutex_lock(&table_lock);
    slot *s = decode(kind, h);
    void *obj = NULL;
    if (s) {
        obj = s->obj;
        s->obj = NULL;
        if (++s->gen == 0)
            s->gen = 1;
        s->next_free = free_head;
        free_head = (uint32_t)(s - slots);
    }
    pthread_mutex_unlock(&table_lock);
    return obj;
}

void or_handle_table_fini(void)
{
    pthread_mutex_lock(&table_lock);
    free(slots);
    slots = NULL;
    nslots = capacity = 0;
    free_head = UINT32_MAX;
    pthread_mutex_unlock(&table_lock);
}
