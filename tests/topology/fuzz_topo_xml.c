/* tests/topology/fuzz_topo_xml.c - libFuzzer harness of the XML reader
 * (both formats). Beyond "no crash": whatever it accepts must write out and
 * read back equal, and rings and trees must build on it. `make fuzz`. */
#include "topo.h"

#include <stdint.h>
#include <stdlib.h>

static void exercise(const or_topo *t)
{
    or_topo_error err;
    char *xml;
    size_t len;
    if (or_topo_write_xml(t, &xml, &len, &err) != OR_TOPO_OK)
        abort();
    or_topo *back = NULL;
    if (or_topo_from_xml_memory(xml, len, "written", &back, &err) != OR_TOPO_OK ||
        !or_topo_equal(t, back))
        abort();
    or_topo_free(back);
    free(xml);
    int n = or_topo_device_count(t);
    if (n > 64)
        return; /* rings of big topologies are slow to search, not wrong */
    int dev[64], order[64];
    or_topo_tree_vertex tv[128];
    if (or_topo_place(t, n, 1, OR_TOPO_PLACE_SPREAD, dev, &err) != OR_TOPO_OK ||
        or_topo_ring(t, dev, n, order, &err) != OR_TOPO_OK ||
        or_topo_trees(t, dev, n, tv, &err) != OR_TOPO_OK)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    or_topo *t = NULL;
    or_topo_error err;
    if (or_topo_from_xml_memory((const char *)data, size, "fuzz", &t, &err) == OR_TOPO_OK) {
        exercise(t);
        or_topo_free(t);
    } else if (err.message[0] == '\0') {
        abort(); /* every failure explains itself */
    }
    return 0;
}
