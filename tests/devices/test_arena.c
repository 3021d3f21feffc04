/*
 * test_arena.c - the pure first-fit allocator behind device memory.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"

#define U OR_ARENA_ALIGN /* one allocation unit */

static or_arena arena;

static void make(size_t capacity)
{
    cr_assert_eq(or_arena_init(&arena, capacity), 0);
}

static void done(void)
{
    or_arena_fini(&arena);
}

static size_t alloc_ok(size_t size)
{
    size_t off = (size_t)-1;
    int rc = or_arena_alloc(&arena, size, &off);
    cr_assert_eq(rc, 0, "alloc %zu -> %d", size, rc);
    cr_assert_eq(off % U, 0, "offset %zu not aligned", off);
    return off;
}

static void free_ok(size_t off, size_t expect_size)
{
    size_t sz = 0;
    int rc = or_arena_free(&arena, off, &sz);
    cr_assert_eq(rc, 0, "free %zu -> %d", off, rc);
    cr_assert_eq(sz, expect_size, "free %zu returned size %zu", off, sz);
}

/* Free extents: sorted, inside capacity, aligned, coalesced; free + used == capacity. */
static void check_invariants(void)
{
    size_t free_total = 0;
    const or_extent_set *f = &arena.free_extents;
    for (size_t i = 0; i < f->n; i++) {
        cr_assert_gt(f->v[i].size, 0, "empty free extent");
        cr_assert_eq(f->v[i].off % U, 0);
        cr_assert_eq(f->v[i].size % U, 0);
        cr_assert_leq(f->v[i].off + f->v[i].size, arena.capacity);
        if (i > 0)
            cr_assert_gt(f->v[i].off, f->v[i - 1].off + f->v[i - 1].size,
                         "free extents %zu and %zu overlap or touch (not coalesced)", i - 1, i);
        free_total += f->v[i].size;
    }
    cr_assert_eq(free_total + arena.used, arena.capacity, "free %zu + used %zu != capacity %zu",
                 free_total, arena.used, arena.capacity);
}

Test(arena, init_rounds_capacity)
{
    make(1000);
    cr_assert_eq(arena.capacity, 768);
    cr_assert_eq(arena.used, 0);
    cr_assert_eq(or_arena_largest_free(&arena), 768);
    check_invariants();
    done();
    make(16 * U);
    cr_assert_eq(arena.capacity, 16 * U);
    done();
}

Test(arena, init_too_small)
{
    or_arena a;
    cr_assert_eq(or_arena_init(&a, 0), EINVAL);
    cr_assert_eq(or_arena_init(&a, U - 1), EINVAL);
    cr_assert_eq(or_arena_init(&a, U), 0);
    or_arena_fini(&a);
}

Test(arena, alloc_rounds_and_aligns)
{
    make(64 * U);
    size_t a = alloc_ok(1), b = alloc_ok(U), c = alloc_ok(U + 1), d = alloc_ok(3 * U - 5);
    cr_assert_eq(arena.used, U + U + 2 * U + 3 * U);
    cr_assert_eq(a, 0, "first fit starts at 0");
    cr_assert_eq(b, U);
    cr_assert_eq(c, 2 * U);
    cr_assert_eq(d, 4 * U);
    check_invariants();
    free_ok(c, 2 * U);
    free_ok(a, U);
    free_ok(d, 3 * U);
    free_ok(b, U);
    cr_assert_eq(arena.used, 0);
    check_invariants();
    done();
}

Test(arena, alloc_zero_is_einval)
{
    make(4 * U);
    size_t off = 12345;
    cr_assert_eq(or_arena_alloc(&arena, 0, &off), EINVAL);
    cr_assert_eq(off, 12345, "offset written on failure");
    cr_assert_eq(arena.used, 0);
    done();
}

Test(arena, exact_fit_and_exhaustion)
{
    make(4 * U);
    size_t off = alloc_ok(4 * U);
    cr_assert_eq(off, 0);
    cr_assert_eq(arena.used, 4 * U);
    cr_assert_eq(or_arena_largest_free(&arena), 0);
    size_t o = 777;
    cr_assert_eq(or_arena_alloc(&arena, 1, &o), ENOMEM);
    cr_assert_eq(o, 777);
    cr_assert_eq(arena.used, 4 * U, "failed alloc changed used");
    check_invariants();
    free_ok(0, 4 * U);
    /* Recovery: the whole capacity is usable again. */
    cr_assert_eq(alloc_ok(4 * U), 0);
    done();
}

Test(arena, too_large_and_overflowing_sizes)
{
    make(8 * U);
    size_t o = 777;
    cr_assert_eq(or_arena_alloc(&arena, 8 * U + 1, &o), ENOMEM);
    cr_assert_eq(or_arena_alloc(&arena, SIZE_MAX, &o), ENOMEM, "rounding must not wrap");
    cr_assert_eq(or_arena_alloc(&arena, SIZE_MAX - U + 2, &o), ENOMEM);
    cr_assert_eq(o, 777);
    cr_assert_eq(arena.used, 0);
    check_invariants();
    done();
}

Test(arena, fragmentation_enomem_then_recovery)
{
    make(4 * U);
    size_t a = alloc_ok(U), b = alloc_ok(U), c = alloc_ok(U), d = alloc_ok(U);
    free_ok(a, U);
    free_ok(c, U);
    /* 2 units free, but not contiguous. */
    cr_assert_eq(or_arena_largest_free(&arena), U);
    size_t o = 777;
    cr_assert_eq(or_arena_alloc(&arena, 2 * U, &o), ENOMEM);
    cr_assert_eq(o, 777);
    check_invariants();
    free_ok(b, U); /* joins a, b, c */
    cr_assert_eq(or_arena_largest_free(&arena), 3 * U);
    cr_assert_eq(arena.free_extents.n, 1);
    cr_assert_eq(alloc_ok(3 * U), 0);
    free_ok(d, U);
    done();
}

Test(arena, coalesces_with_both_neighbours)
{
    make(8 * U);
    size_t off[8];
    for (int i = 0; i < 8; i++)
        off[i] = alloc_ok(U);
    /* Free 1 and 3, then 2 joins both into one extent of 3 units. */
    free_ok(off[1], U);
    free_ok(off[3], U);
    cr_assert_eq(arena.free_extents.n, 2);
    free_ok(off[2], U);
    cr_assert_eq(arena.free_extents.n, 1);
    cr_assert_eq(arena.free_extents.v[0].off, U);
    cr_assert_eq(arena.free_extents.v[0].size, 3 * U);
    /* Coalescing with only the previous neighbour, and with only the next. */
    free_ok(off[4], U);
    cr_assert_eq(arena.free_extents.n, 1);
    cr_assert_eq(arena.free_extents.v[0].size, 4 * U);
    free_ok(off[0], U);
    cr_assert_eq(arena.free_extents.n, 1);
    cr_assert_eq(arena.free_extents.v[0].off, 0);
    cr_assert_eq(arena.free_extents.v[0].size, 5 * U);
    check_invariants();
    /* The tail: free 7 (touches nothing free), then 6 and 5 merge everything. */
    free_ok(off[7], U);
    cr_assert_eq(arena.free_extents.n, 2);
    free_ok(off[6], U);
    free_ok(off[5], U);
    cr_assert_eq(arena.free_extents.n, 1);
    cr_assert_eq(or_arena_largest_free(&arena), 8 * U);
    check_invariants();
    done();
}

Test(arena, first_fit_reuses_lowest_hole)
{
    make(16 * U);
    size_t a = alloc_ok(2 * U), b = alloc_ok(3 * U), c = alloc_ok(U), d = alloc_ok(4 * U);
    (void)c;
    free_ok(b, 3 * U);
    free_ok(d, 4 * U);
    /* Both holes fit 2 units; first fit takes the lower one. */
    cr_assert_eq(alloc_ok(2 * U), b);
    /* 1 unit left in the first hole: a 2-unit request skips it. */
    cr_assert_eq(alloc_ok(2 * U), d);
    cr_assert_eq(alloc_ok(U), b + 2 * U);
    check_invariants();
    (void)a;
    done();
}

Test(arena, free_errors)
{
    make(8 * U);
    size_t a = alloc_ok(2 * U);
    size_t sz = 999;
    cr_assert_eq(or_arena_free(&arena, a + U, &sz), ENOENT, "interior offset");
    cr_assert_eq(or_arena_free(&arena, a + 1, &sz), ENOENT);
    cr_assert_eq(or_arena_free(&arena, 4 * U, &sz), ENOENT, "never allocated");
    cr_assert_eq(or_arena_free(&arena, 100 * U, &sz), ENOENT, "beyond capacity");
    cr_assert_eq(or_arena_free(&arena, SIZE_MAX, &sz), ENOENT);
    cr_assert_eq(sz, 999, "size written on failure");
    cr_assert_eq(arena.used, 2 * U, "failed frees changed used");
    cr_assert_eq(or_arena_free(&arena, a, NULL), 0, "size pointer may be NULL");
    cr_assert_eq(or_arena_free(&arena, a, &sz), ENOENT, "double free");
    cr_assert_eq(arena.used, 0);
    check_invariants();
    done();
}

Test(arena, find_interior_offsets)
{
    make(16 * U);
    size_t a = alloc_ok(1), b = alloc_ok(3 * U - 10);
    or_extent e = {.off = 111, .size = 222, .requested = 333};
    cr_assert_eq(or_arena_find(&arena, a, &e), 0);
    cr_assert_eq(e.off, a);
    cr_assert_eq(e.size, U);
    cr_assert_eq(e.requested, 1, "requested keeps the size asked for");
    for (size_t off = b; off < b + 3 * U; off += 97) {
        e = (or_extent){.off = 111, .size = 222, .requested = 333};
        cr_assert_eq(or_arena_find(&arena, off, &e), 0, "offset %zu", off);
        cr_assert_eq(e.off, b);
        cr_assert_eq(e.size, 3 * U, "find reports the rounded size");
        cr_assert_eq(e.requested, 3 * U - 10);
    }
    cr_assert_eq(or_arena_find(&arena, b + 3 * U - 1, &e), 0, "last byte");
    e = (or_extent){.off = 111, .size = 222, .requested = 333};
    cr_assert_eq(or_arena_find(&arena, b + 3 * U, &e), ENOENT, "one past the end (free)");
    cr_assert_eq(or_arena_find(&arena, 15 * U, &e), ENOENT);
    cr_assert_eq(or_arena_find(&arena, 1000 * U, &e), ENOENT);
    cr_assert_eq(e.off, 111, "extent written on failure");
    cr_assert_eq(e.size, 222);
    cr_assert_eq(e.requested, 333);
    free_ok(b, 3 * U);
    cr_assert_eq(or_arena_find(&arena, b + 5, &e), ENOENT, "freed allocation");
    done();
}

Test(arena, largest_free_after_fragmentation)
{
    make(32 * U);
    size_t off[8];
    const size_t units[8] = {1, 4, 2, 6, 3, 5, 1, 2}; /* 24 units, 8 left at the end */
    for (int i = 0; i < 8; i++)
        off[i] = alloc_ok(units[i] * U);
    cr_assert_eq(or_arena_largest_free(&arena), 8 * U);
    free_ok(off[3], 6 * U);
    free_ok(off[1], 4 * U);
    cr_assert_eq(or_arena_largest_free(&arena), 8 * U);
    free_ok(off[7], 2 * U); /* joins the tail: 10 units */
    cr_assert_eq(or_arena_largest_free(&arena), 10 * U);
    free_ok(off[2], 2 * U); /* 4 + 2 + 6 = 12 units in the middle */
    cr_assert_eq(or_arena_largest_free(&arena), 12 * U);
    check_invariants();
    done();
}

/* ---- model check against a unit bitmap --------------------------------- */

#define M_UNITS 64

typedef struct {
    int owner[M_UNITS]; /* allocation id per unit, -1 free */
    size_t start[512], units[512];
    int live[512];
    int next_id;
} model;

/* Lowest run of n free units, or -1. */
static long model_first_fit(const model *m, size_t n)
{
    size_t run = 0;
    for (size_t i = 0; i < M_UNITS; i++) {
        run = m->owner[i] < 0 ? run + 1 : 0;
        if (run == n)
            return (long)(i + 1 - n);
    }
    return -1;
}

static size_t model_largest(const model *m)
{
    size_t run = 0, best = 0;
    for (size_t i = 0; i < M_UNITS; i++) {
        run = m->owner[i] < 0 ? run + 1 : 0;
        if (run > best)
            best = run;
    }
    return best;
}

Test(arena, randomized_model_check)
{
    make(M_UNITS * U);
    static model m;
    memset(&m, 0, sizeof m);
    for (int i = 0; i < M_UNITS; i++)
        m.owner[i] = -1;
    srand(12345);
    size_t used_units = 0;
    for (int step = 0; step < 5000; step++) {
        int op = rand() % 3;
        if (op < 2 && m.next_id < 512) {
            size_t bytes = 1 + (size_t)rand() % (8 * U);
            size_t n = (bytes + U - 1) / U;
            long want = model_first_fit(&m, n);
            size_t off = 424242;
            int rc = or_arena_alloc(&arena, bytes, &off);
            if (want < 0) {
                cr_assert_eq(rc, ENOMEM, "step %d: alloc %zu should fail", step, bytes);
                cr_assert_eq(off, 424242);
            } else {
                cr_assert_eq(rc, 0, "step %d: alloc %zu failed", step, bytes);
                cr_assert_eq(off, (size_t)want * U, "step %d: first fit at unit %ld, got %zu",
                             step, want, off / U);
                int id = m.next_id++;
                m.start[id] = (size_t)want;
                m.units[id] = n;
                m.live[id] = 1;
                for (size_t u = 0; u < n; u++)
                    m.owner[want + u] = id;
                used_units += n;
            }
        } else {
            /* Free a random unit's owner, or try a non-start / free offset. */
            size_t u = (size_t)rand() % M_UNITS;
            int id = m.owner[u];
            size_t sz = 0;
            size_t off = u * U + ((rand() % 4 == 0) ? 1 : 0);
            int rc = or_arena_free(&arena, off, &sz);
            if (id >= 0 && m.start[id] == u && off % U == 0) {
                cr_assert_eq(rc, 0, "step %d: free unit %zu", step, u);
                cr_assert_eq(sz, m.units[id] * U);
                for (size_t k = 0; k < m.units[id]; k++)
                    m.owner[m.start[id] + k] = -1;
                m.live[id] = 0;
                used_units -= m.units[id];
            } else {
                cr_assert_eq(rc, ENOENT, "step %d: free of offset %zu should fail", step, off);
            }
        }
        cr_assert_eq(arena.used, used_units * U, "step %d: used", step);
        cr_assert_eq(or_arena_largest_free(&arena), model_largest(&m) * U, "step %d: largest",
                     step);
        check_invariants();
        /* find agrees with the model at a random byte. */
        size_t byte = (size_t)rand() % (M_UNITS * U);
        or_extent e;
        int rc = or_arena_find(&arena, byte, &e);
        int id = m.owner[byte / U];
        if (id < 0) {
            cr_assert_eq(rc, ENOENT, "step %d: find %zu", step, byte);
        } else {
            cr_assert_eq(rc, 0, "step %d: find %zu", step, byte);
            cr_assert_eq(e.off, m.start[id] * U);
            cr_assert_eq(e.size, m.units[id] * U);
        }
        /* Recycle ids once the table fills: start over from an empty arena. */
        if (m.next_id == 512) {
            for (int i = 0; i < 512; i++)
                if (m.live[i])
                    free_ok(m.start[i] * U, m.units[i] * U);
            memset(&m, 0, sizeof m);
            for (int i = 0; i < M_UNITS; i++)
                m.owner[i] = -1;
            used_units = 0;
            cr_assert_eq(arena.used, 0);
            cr_assert_eq(arena.free_extents.n, 1);
        }
    }
    done();
}

Test(arena, many_allocations_grow_bookkeeping)
{
    /* Thousands of live extents: the sets must grow without losing entries. */
    make(4096 * U);
    for (size_t i = 0; i < 4096; i++)
        cr_assert_eq(alloc_ok(U), i * U);
    cr_assert_eq(or_arena_largest_free(&arena), 0);
    for (size_t i = 0; i < 4096; i += 2)
        free_ok(i * U, U);
    cr_assert_eq(arena.free_extents.n, 2048);
    for (size_t i = 1; i < 4096; i += 2)
        free_ok(i * U, U);
    cr_assert_eq(arena.free_extents.n, 1);
    cr_assert_eq(arena.used, 0);
    check_invariants();
    done();
}

/* ---- sorted extent sets ---------------------------------------------------- */

Test(extent_set, add_find_remove)
{
    or_extent_set s = {0};
    /* Added out of order; kept sorted by offset. */
    const size_t offs[] = {5000, 100, 3000, 0, 7000};
    for (size_t i = 0; i < 5; i++)
        cr_assert_eq(or_extent_set_add(&s, (or_extent){.off = offs[i], .size = 50,
                                                        .requested = i}),
                     0);
    cr_assert_eq(s.n, 5);
    for (size_t i = 1; i < s.n; i++)
        cr_assert_lt(s.v[i - 1].off, s.v[i].off, "not sorted at %zu", i);

    or_extent f = {.off = 1, .size = 2, .requested = 3};
    cr_assert_eq(or_extent_set_find(&s, 3025, &f), 0);
    cr_assert_eq(f.off, 3000);
    cr_assert_eq(f.requested, 2);
    cr_assert_eq(or_extent_set_find(&s, 149, &f), 0);
    cr_assert_eq(f.off, 100);
    f = (or_extent){.off = 1, .size = 2, .requested = 3};
    cr_assert_eq(or_extent_set_find(&s, 150, &f), ENOENT, "one past the end");
    cr_assert_eq(or_extent_set_find(&s, 99999, &f), ENOENT);
    cr_assert_eq(f.off, 1, "found written on failure");

    or_extent r = {0};
    cr_assert_eq(or_extent_set_remove(&s, 3010, &r), ENOENT, "not a start");
    cr_assert_eq(or_extent_set_remove(&s, 3000, &r), 0);
    cr_assert_eq(r.off, 3000);
    cr_assert_eq(r.size, 50);
    cr_assert_eq(s.n, 4);
    cr_assert_eq(or_extent_set_remove(&s, 3000, NULL), ENOENT, "removed twice");
    cr_assert_eq(or_extent_set_find(&s, 3000, &f), ENOENT);
    cr_assert_eq(or_extent_set_remove(&s, 0, NULL), 0);
    cr_assert_eq(s.v[0].off, 100);
    or_extent_set_free(&s);
}

Test(extent_set, grows_to_many_entries)
{
    or_extent_set s = {0};
    /* Descending inserts: every add lands at the front. */
    for (size_t i = 2000; i-- > 0;)
        cr_assert_eq(or_extent_set_add(&s, (or_extent){.off = i * 10, .size = 5}), 0);
    cr_assert_eq(s.n, 2000);
    for (size_t i = 0; i < 2000; i++) {
        or_extent f;
        cr_assert_eq(or_extent_set_find(&s, i * 10 + 4, &f), 0, "entry %zu", i);
        cr_assert_eq(f.off, i * 10);
        cr_assert_eq(or_extent_set_find(&s, i * 10 + 5, &f), ENOENT, "gap after %zu", i);
    }
    or_extent_set_free(&s);
}

/* ---- guarded (memcheck) arenas ------------------------------------------ */

#define PG ((size_t)4096)

/* Guarded blocks start 256-byte aligned, as plain ones. */
static size_t galloc(size_t size)
{
    size_t off = (size_t)-1;
    int rc = or_arena_alloc(&arena, size, &off);
    cr_assert_eq(rc, 0, "alloc(%zu) -> %d", size, rc);
    cr_assert_eq(off % U, 0, "alloc(%zu) at %zu: not %zu-byte aligned", size, off, U);
    return off;
}

static void make_guarded(size_t capacity, size_t quarantine)
{
    cr_assert_eq(or_arena_init_guarded(&arena, capacity, PG, quarantine), 0);
}

Test(arena_guarded, bad_page_sizes)
{
    cr_assert_eq(or_arena_init_guarded(&arena, 64 * PG, 3000, 0), EINVAL);
    cr_assert_eq(or_arena_init_guarded(&arena, 64 * PG + 256, PG, 0), EINVAL);
    cr_assert_eq(or_arena_init_guarded(&arena, 64 * PG, 128, 0), EINVAL);
}

Test(arena_guarded, block_ends_at_the_trailing_guard_page)
{
    make_guarded(64 * PG, 0);
    size_t a = galloc(4000), b = galloc(2 * PG), c = galloc(100);
    or_extent e;
    cr_assert_eq(or_arena_find(&arena, a, &e), 0);
    cr_assert_eq((a + 4096) % PG, 0, "the size rounded to 256 ends on a page boundary");
    cr_assert_eq(e.lead, PG, "4000 bytes round to a page: the block follows its guard page");
    cr_assert_eq(e.size, 4096 + PG, "the block, its slack and its trailing guard page");
    cr_assert_eq(e.requested, 4000);
    cr_assert_eq(or_arena_slack(&e), 96);
    cr_assert_eq(b % PG, 0, "a whole-page block starts right after its guard page");
    cr_assert_eq(b, a + 4096 + PG + PG, "regions are contiguous: guard, block, guard");
    cr_assert_eq(or_arena_find(&arena, b, &e), 0);
    cr_assert_eq(or_arena_slack(&e), 0);
    cr_assert_eq(or_arena_find(&arena, c, &e), 0);
    cr_assert_eq(e.lead, PG + PG - 256, "a guard page, then the bytes up to the block");
    cr_assert_eq(or_arena_slack(&e), 156);
    cr_assert_eq(c + 256, b + 2 * PG + PG + PG + PG, "b, its guard, c's guard, c's page");
    cr_assert_eq(arena.used, 3 * PG + 4 * PG + 3 * PG);
    done();
}

Test(arena_guarded, odd_sizes_stay_aligned)
{
    make_guarded(1024 * PG, 0);
    const size_t sizes[] = {1, 100, 255, 256, 257, 4000, 4096, 4097, ((size_t)1 << 20) + 3};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t off = galloc(sizes[k]); /* asserts the alignment */
        or_extent e;
        cr_assert_eq(or_arena_find(&arena, off, &e), 0);
        size_t rsize = (sizes[k] + U - 1) & ~(U - 1);
        cr_assert_eq((off + rsize) % PG, 0, "size %zu: the rounded block ends at the guard page",
                     sizes[k]);
        cr_assert_eq(or_arena_slack(&e), rsize - sizes[k]);
        cr_assert_eq(e.size, rsize + PG);
        cr_assert_eq(e.off - e.lead + PG + ((rsize + PG - 1) & ~(PG - 1)), off + rsize,
                     "size %zu: guard page, pages, guard page", sizes[k]);
    }
    done();
}

Test(arena_guarded, locate_names_the_nearest_allocation)
{
    make_guarded(64 * PG, 64 * PG);
    size_t a = galloc(4000), b = galloc(100);
    or_extent e;
    cr_assert_eq(or_arena_locate(&arena, a + 4000, &e), OR_ARENA_LIVE);
    cr_assert_eq(e.off, a, "past the end of a: a");
    cr_assert_eq(or_arena_locate(&arena, b - 1, &e), OR_ARENA_LIVE);
    cr_assert_eq(e.off, b, "just before b: b");
    cr_assert_eq(or_arena_locate(&arena, b - 100 - PG, &e), OR_ARENA_LIVE);
    cr_assert_eq(e.off, b, "b's leading guard page");
    cr_assert_eq(or_arena_free(&arena, a, NULL), 0);
    cr_assert_eq(or_arena_locate(&arena, a + 8, &e), OR_ARENA_FREED);
    cr_assert_eq(e.off, a);
    cr_assert_eq(e.requested, 4000);
    cr_assert_eq(or_arena_locate(&arena, 60 * PG, &e), OR_ARENA_NOWHERE);
    done();
}

Test(arena_guarded, quarantine_is_a_fifo_with_a_byte_limit)
{
    make_guarded(64 * PG, 6 * PG); /* two regions of 3 pages */
    size_t a = galloc(PG), b = galloc(PG), c = galloc(PG);
    cr_assert_eq(or_arena_free(&arena, a, NULL), 0);
    cr_assert_eq(or_arena_free(&arena, b, NULL), 0);
    cr_assert_eq(arena.nquarantine, 2);
    size_t d = galloc(PG);
    cr_assert(d != a && d != b, "quarantined addresses are not handed out");
    cr_assert_eq(or_arena_free(&arena, c, NULL), 0); /* over the limit: a leaves */
    cr_assert_eq(arena.nquarantine, 2);
    or_extent e;
    cr_assert_eq(or_arena_locate(&arena, a, &e), OR_ARENA_NOWHERE, "the oldest left first");
    cr_assert_eq(or_arena_locate(&arena, b, &e), OR_ARENA_FREED);
    cr_assert_eq(arena.used, 3 * 3 * PG, "quarantined regions count as used");
    done();
}

Test(arena_guarded, a_full_arena_takes_the_quarantine_back)
{
    make_guarded(16 * PG, 16 * PG);
    size_t a = galloc(10 * PG);
    cr_assert_eq(or_arena_free(&arena, a, NULL), 0);
    size_t off;
    cr_assert_eq(or_arena_alloc(&arena, 14 * PG, &off), 0, "the quarantine came back");
    cr_assert_eq(arena.nquarantine, 0);
    cr_assert_eq(or_arena_alloc(&arena, PG, &off), ENOMEM);
    done();
}
