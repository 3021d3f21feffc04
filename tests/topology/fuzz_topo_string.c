/* tests/topology/fuzz_topo_string.c - libFuzzer harness of preset names and
 * synthetic strings. Whatever is accepted must round-trip through XML.
 * `make fuzz`. */
#include "topo.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char text[512];
    if (size >= sizeof text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    or_topo *t = NULL;
    or_topo_error err;
    if (or_topo_from_string(text, "fuzz", &t, &err) != OR_TOPO_OK) {
        if (err.message[0] == '\0')
            abort();
        return 0;
    }
    char *xml;
    size_t len;
    or_topo *back = NULL;
    if (or_topo_write_xml(t, &xml, &len, &err) != OR_TOPO_OK ||
        or_topo_from_xml_memory(xml, len, "written", &back, &err) != OR_TOPO_OK ||
        !or_topo_equal(t, back))
        abort();
    free(xml);
    or_topo_free(back);
    or_topo_free(t);
    return 0;
}
