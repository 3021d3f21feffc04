/* devices/arena.c - first-fit extent allocator with coalescing over sorted arrays. */
#include "arena.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Index of the first extent with off > key (upper bound). */
static size_t upper_bound(const or_extent_set *s, size_t key)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->v[mid].off <= key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int set_insert_at(or_extent_set *s, size_t i, or_extent e)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        or_extent *v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    memmove(&s->v[i + 1], &s->v[i], (s->n - i) * sizeof *s->v);
    s->v[i] = e;
    s->n++;
    return 0;
}

static void set_remove_at(or_extent_set *s, size_t i)
{
    memmove(&s->v[i], &s->v[i + 1], (s->n - i - 1) * sizeof *s->v);
    s->n--;
}

int or_extent_set_add(or_extent_set *s, or_extent e)
{
    return set_insert_at(s, upper_bound(s, e.off), e);
}

int or_extent_set_remove(or_extent_set *s, size_t off, or_extent *removed)
{
    size_t i = upper_bound(s, off);
    if (i == 0 || s->v[i - 1].off != off)
        return ENOENT;
    if (removed)
        *removed = s->v[i - 1];
    set_remove_at(s, i - 1);
    return 0;
}

int or_extent_set_find(const or_extent_set *s, size_t off, or_extent *found)
{
    size_t i = upper_bound(s, off);
    if (i == 0 || off - s->v[i - 1].off >= s->v[i - 1].size)
        return ENOENT;
    *found = s->v[i - 1];
    return 0;
}

void or_extent_set_free(or_extent_set *s)
{
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

int or_arena_init(or_arena *a, size_t capacity)
{
    memset(a, 0, sizeof *a);
    a->capacity = capacity & ~(OR_ARENA_ALIGN - 1);
    if (a->capacity == 0)
        return EINVAL;
    return set_insert_at(&a->free_extents, 0, (or_extent){0, a->capacity, 0, 0});
}

void or_arena_fini(or_arena *a)
{
    or_extent_set_free(&a->free_extents);
    or_extent_set_free(&a->live);
    memset(a, 0, sizeof *a);
}

int or_arena_alloc(or_arena *a, size_t size, size_t *off)
{
    if (size == 0)
        return EINVAL;
    if (size > a->capacity)
        return ENOMEM;
    size_t rsize = (size + OR_ARENA_ALIGN - 1) & ~(OR_ARENA_ALIGN - 1);
    or_extent_set *fs = &a->free_extents;
    for (size_t i = 0; i < fs->n; i++) {
        if (fs->v[i].size < rsize)
            continue;
        or_extent got = {fs->v[i].off, rsize, size, a->last_id + 1};
        /* Record the allocation first: if that fails nothing has changed. */
        if (set_insert_at(&a->live, upper_bound(&a->live, got.off), got))
            return ENOMEM;
        if (fs->v[i].size == rsize) {
            set_remove_at(fs, i);
        } else {
            fs->v[i].off += rsize;
            fs->v[i].size -= rsize;
        }
        a->used += rsize;
        a->last_id++;
        if (got.off + rsize > a->high_water)
            a->high_water = got.off + rsize;
        *off = got.off;
        return 0;
    }
    return ENOMEM;
}

int or_arena_free(or_arena *a, size_t off, size_t *size)
{
    size_t i = upper_bound(&a->live, off);
    if (i == 0 || a->live.v[i - 1].off != off)
        return ENOENT;
    or_extent e = a->live.v[i - 1];

    /* Coalesce with the free neighbours, else insert a new free extent. */
    or_extent_set *fs = &a->free_extents;
    size_t j = upper_bound(fs, e.off);
    int merged_prev = j > 0 && fs->v[j - 1].off + fs->v[j - 1].size == e.off;
    int merged_next = j < fs->n && e.off + e.size == fs->v[j].off;
    if (merged_prev && merged_next) {
        fs->v[j - 1].size += e.size + fs->v[j].size;
        set_remove_at(fs, j);
    } else if (merged_prev) {
        fs->v[j - 1].size += e.size;
    } else if (merged_next) {
        fs->v[j].off = e.off;
        fs->v[j].size += e.size;
    } else if (set_insert_at(fs, j, (or_extent){e.off, e.size, 0, 0})) {
        /* Out of bookkeeping memory: keep the block allocated rather than lose it. */
        return ENOMEM;
    }
    set_remove_at(&a->live, i - 1);
    a->used -= e.size;
    if (size)
        *size = e.size;
    return 0;
}

int or_arena_find(const or_arena *a, size_t off, or_extent *alloc)
{
    return or_extent_set_find(&a->live, off, alloc);
}

size_t or_arena_largest_free(const or_arena *a)
{
    size_t best = 0;
    for (size_t i = 0; i < a->free_extents.n; i++)
        if (a->free_extents.v[i].size > best)
            best = a->free_extents.v[i].size;
    return best;
}
