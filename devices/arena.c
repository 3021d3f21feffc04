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
    return set_insert_at(&a->free_extents, 0, (or_extent){0, a->capacity, 0, 0, 0});
}

void or_arena_fini(or_arena *a)
{
    free(a->quarantine);
    or_extent_set_free(&a->free_extents);
    or_extent_set_free(&a->live);
    memset(a, 0, sizeof *a);
}

/* Take rsize bytes at the first free extent that holds them; its offset. */
static int take_free(or_arena *a, size_t rsize, size_t *off)
{
    or_extent_set *fs = &a->free_extents;
    for (size_t i = 0; i < fs->n; i++) {
        if (fs->v[i].size < rsize)
            continue;
        *off = fs->v[i].off;
        return (int)i;
    }
    return -1;
}

static void shrink_free(or_arena *a, size_t i, size_t rsize)
{
    or_extent_set *fs = &a->free_extents;
    if (fs->v[i].size == rsize) {
        set_remove_at(fs, i);
    } else {
        fs->v[i].off += rsize;
        fs->v[i].size -= rsize;
    }
}

/* Give [off, off + size) back: coalesce with the free neighbours, else insert
 * a new free extent (ENOMEM if the bookkeeping cannot grow). */
static int give_back(or_arena *a, size_t off, size_t size)
{
    or_extent_set *fs = &a->free_extents;
    size_t j = upper_bound(fs, off);
    int merged_prev = j > 0 && fs->v[j - 1].off + fs->v[j - 1].size == off;
    int merged_next = j < fs->n && off + size == fs->v[j].off;
    if (merged_prev && merged_next) {
        fs->v[j - 1].size += size + fs->v[j].size;
        set_remove_at(fs, j);
    } else if (merged_prev) {
        fs->v[j - 1].size += size;
    } else if (merged_next) {
        fs->v[j].off = off;
        fs->v[j].size += size;
    } else if (set_insert_at(fs, j, (or_extent){off, size, 0, 0, 0})) {
        return ENOMEM;
    }
    return 0;
}

/* Release the oldest quarantined region. */
static int release_oldest(or_arena *a)
{
    or_extent r = a->quarantine[0];
    if (give_back(a, r.off, r.size))
        return ENOMEM;
    memmove(&a->quarantine[0], &a->quarantine[1], (a->nquarantine - 1) * sizeof *a->quarantine);
    a->nquarantine--;
    a->quarantined -= r.size;
    a->used -= r.size;
    return 0;
}

int or_arena_init_guarded(or_arena *a, size_t capacity, size_t page, size_t quarantine_limit)
{
    if (page < OR_ARENA_ALIGN || (page & (page - 1)) || capacity % page)
        return EINVAL;
    int rc = or_arena_init(a, capacity);
    if (rc == 0) {
        a->page = page;
        a->quarantine_limit = quarantine_limit;
    }
    return rc;
}

static int alloc_guarded(or_arena *a, size_t size, size_t *off)
{
    size_t page = a->page;
    if (size > a->capacity - 2 * page)
        return ENOMEM;
    size_t pages = (size + page - 1) & ~(page - 1);
    size_t region = pages + 2 * page;
    size_t at;
    int i;
    /* Out of room: what the quarantine holds comes back first. */
    while ((i = take_free(a, region, &at)) < 0)
        if (a->nquarantine == 0 || release_oldest(a))
            return ENOMEM;
    /* The block starts 256-byte aligned as in a plain arena, and ends within
     * 255 bytes of where the trailing guard starts (the slack in between is
     * the caller's to watch). */
    size_t rsize = (size + OR_ARENA_ALIGN - 1) & ~(OR_ARENA_ALIGN - 1);
    size_t lead = page + pages - rsize;
    or_extent got = {at + lead, region - lead, size, a->last_id + 1, lead};
    if (set_insert_at(&a->live, upper_bound(&a->live, got.off), got))
        return ENOMEM;
    shrink_free(a, (size_t)i, region);
    a->used += region;
    a->last_id++;
    if (at + region > a->high_water)
        a->high_water = at + region;
    *off = got.off;
    return 0;
}

int or_arena_alloc(or_arena *a, size_t size, size_t *off)
{
    if (size == 0)
        return EINVAL;
    if (size > a->capacity)
        return ENOMEM;
    if (a->page)
        return alloc_guarded(a, size, off);
    size_t rsize = (size + OR_ARENA_ALIGN - 1) & ~(OR_ARENA_ALIGN - 1);
    size_t at;
    int i = take_free(a, rsize, &at);
    if (i < 0)
        return ENOMEM;
    or_extent got = {at, rsize, size, a->last_id + 1, 0};
    /* Record the allocation first: if that fails nothing has changed. */
    if (set_insert_at(&a->live, upper_bound(&a->live, got.off), got))
        return ENOMEM;
    shrink_free(a, (size_t)i, rsize);
    a->used += rsize;
    a->last_id++;
    if (got.off + rsize > a->high_water)
        a->high_water = got.off + rsize;
    *off = got.off;
    return 0;
}

/* Guarded: the region goes to the quarantine's tail, the oldest ones out
 * past the limit. */
static int quarantine_region(or_arena *a, or_extent e)
{
    if (a->nquarantine == a->cap_quarantine) {
        size_t cap = a->cap_quarantine ? a->cap_quarantine * 2 : 16;
        or_extent *q = realloc(a->quarantine, cap * sizeof *q);
        if (!q)
            return ENOMEM;
        a->quarantine = q;
        a->cap_quarantine = cap;
    }
    a->quarantine[a->nquarantine++] =
        (or_extent){e.off - e.lead, e.size + e.lead, e.requested, e.id, e.lead};
    a->quarantined += e.size + e.lead;
    while (a->quarantined > a->quarantine_limit && a->nquarantine > 0)
        if (release_oldest(a))
            break; /* kept quarantined: retried at the next free */
    return 0;
}

int or_arena_free(or_arena *a, size_t off, size_t *size)
{
    size_t i = upper_bound(&a->live, off);
    if (i == 0 || a->live.v[i - 1].off != off)
        return ENOENT;
    or_extent e = a->live.v[i - 1];
    if (a->page) {
        if (quarantine_region(a, e))
            return ENOMEM;
        set_remove_at(&a->live, i - 1);
        if (size)
            *size = e.size + e.lead;
        return 0;
    }
    /* Out of bookkeeping memory: keep the block allocated rather than lose it. */
    if (give_back(a, e.off, e.size))
        return ENOMEM;
    set_remove_at(&a->live, i - 1);
    a->used -= e.size;
    if (size)
        *size = e.size;
    return 0;
}

or_arena_where or_arena_locate(const or_arena *a, size_t off, or_extent *e)
{
    size_t i = upper_bound(&a->live, off);
    /* Past the start of live[i-1] (its block, its trailing guard) or before
     * live[i]'s block (its leading guard, the bytes up to the block). */
    if (i > 0 && off - a->live.v[i - 1].off < a->live.v[i - 1].size) {
        *e = a->live.v[i - 1];
        return OR_ARENA_LIVE;
    }
    if (i < a->live.n && a->live.v[i].off - off <= a->live.v[i].lead) {
        *e = a->live.v[i];
        return OR_ARENA_LIVE;
    }
    for (size_t q = a->nquarantine; q-- > 0;) {
        const or_extent *r = &a->quarantine[q];
        if (off - r->off < r->size) {
            *e = (or_extent){r->off + r->lead, r->size - r->lead, r->requested, r->id, r->lead};
            return OR_ARENA_FREED;
        }
    }
    return OR_ARENA_NOWHERE;
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
