/* tests/collectives/test_topo_ring.c - a communicator's ring on a declared
 * topology: comm ranks -> topology devices -> ring order (occl_topo_ring),
 * a pure function. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "topo.h"
#include "topo_ring.h"

TestSuite(topo_ring);

static or_topo *load(const char *spec)
{
    or_topo *t = NULL;
    or_topo_error err;
    cr_assert_eq(or_topo_load(spec, "test", &t, &err), OR_TOPO_OK, "%s: %s", spec, err.message);
    return t;
}

static void place(const or_topo *t, int nranks, or_topo_placement how, int *dev)
{
    or_topo_error err;
    cr_assert_eq(or_topo_place(t, nranks, 1, how, dev, &err), OR_TOPO_OK, "%s", err.message);
}

static int is_permutation(const int *ring, int n)
{
    int seen[64] = {0};
    for (int i = 0; i < n; i++) {
        if (ring[i] < 0 || ring[i] >= n || seen[ring[i]])
            return 0;
        seen[ring[i]] = 1;
    }
    return 1;
}

/* Spread: rank r on node r mod 2, so rank order would leave a node at every
 * step; the ring takes node 0's ranks, then node 1's. */
Test(topo_ring, spread_ranks_cross_the_network_twice)
{
    or_topo *t = load("dgx-a100x2");
    int dev[8], ring[8], order[8];
    place(t, 8, OR_TOPO_PLACE_SPREAD, dev);
    char why[256] = "";
    cr_assert_eq(occl_topo_ring(t, dev, 8, ring, why, sizeof why), 0, "%s", why);
    cr_assert(is_permutation(ring, 8));
    const int want[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    cr_assert_arr_eq(ring, want, sizeof want);
    cr_assert_eq(occl_topo_ring_crossings(t, dev, ring, 8), 2);
    for (int i = 0; i < 8; i++)
        order[i] = i;
    cr_assert_eq(occl_topo_ring_crossings(t, dev, order, 8), 8, "rank order crosses at every step");
    or_topo_free(t);
}

/* On a 2 x 3 torus rank order steps (0,2) -> (1,0): two links. The ring uses
 * neighbour links only. */
Test(topo_ring, torus_ring_uses_neighbour_links_only)
{
    or_topo *t = load("torus2x3");
    int dev[6], ring[6];
    place(t, 6, OR_TOPO_PLACE_PACKED, dev);
    char why[256] = "";
    cr_assert_eq(occl_topo_ring(t, dev, 6, ring, why, sizeof why), 0, "%s", why);
    cr_assert(is_permutation(ring, 6));
    cr_assert_eq(occl_topo_ring_crossings(t, dev, ring, 6), 0);
    for (int i = 0; i < 6; i++) {
        const or_topo_path *p = or_topo_path_between(t, dev[ring[i]], dev[ring[(i + 1) % 6]]);
        cr_assert_eq(p->nhops, 1, "ring step %d -> %d takes %d links", ring[i],
                     ring[(i + 1) % 6], p->nhops);
    }
    cr_assert_eq(or_topo_path_between(t, dev[2], dev[3])->nhops, 2);
    or_topo_free(t);
}

/* Ranks given in a scrambled device order still get the physical ring. */
Test(topo_ring, ring_preset_is_followed_whatever_the_rank_order)
{
    or_topo *t = load("ring8");
    const int dev[8] = {5, 0, 3, 6, 1, 7, 2, 4};
    int ring[8];
    char why[256] = "";
    cr_assert_eq(occl_topo_ring(t, dev, 8, ring, why, sizeof why), 0, "%s", why);
    cr_assert(is_permutation(ring, 8));
    for (int i = 0; i < 8; i++)
        cr_assert_eq(or_topo_path_between(t, dev[ring[i]], dev[ring[(i + 1) % 8]])->nhops, 1);
    or_topo_free(t);
}

Test(topo_ring, two_ranks_on_one_device_are_refused)
{
    or_topo *t = load("full8");
    const int dev[3] = {0, 4, 0};
    int ring[3] = {-1, -1, -1};
    char why[256] = "";
    cr_assert_eq(occl_topo_ring(t, dev, 3, ring, why, sizeof why), -1);
    cr_assert_str_eq(why, "rank 2 shares topology device 0 with another rank");
    or_topo_free(t);
}

Test(topo_ring, a_device_outside_the_topology_is_refused)
{
    or_topo *t = load("full8");
    const int dev[2] = {0, 8};
    int ring[2];
    char why[256] = "";
    cr_assert_eq(occl_topo_ring(t, dev, 2, ring, why, sizeof why), -1);
    cr_assert_str_eq(why, "rank 1's device 8 is not in the topology");
    cr_assert_eq(occl_topo_ring(NULL, dev, 2, ring, why, sizeof why), -1);
    or_topo_free(t);
}
