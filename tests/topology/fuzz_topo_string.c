/* tests/topology/fuzz_topo_string.c - libFuzzer harness of preset names and
 * synthetic strings. Whatever is accepted must round-trip through XML.
 * `make fuzz`. */
#include "topo.h"

#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

/* Counts above 16 (nodes:, devices:, dims:AxB, full32, dgx-a100x64) mean
 * topologies of up to 1024 devices, whose reachability check takes up to a
 * second under the sanitizers: the unit tests cover them; here they would
 * slow the search a hundredfold. A count is a number after ':', 'x' or a preset's letters and
 * before a space, an 'x' or the end; bandwidths and latencies have units. */
static int too_big(const char *text)
{
    char copy[512];
    snprintf(copy, sizeof copy, "%s", text);
    for (char *p = copy; (p = strstr(p, "dgx-")) != NULL; p++)
        if ((p[4] == 'a' || p[4] == 'h') && strncmp(p + 5, "100", 3) == 0)
            p[5] = p[6] = p[7] = '_'; /* the box names dgx-a100 and dgx-h100 */
    for (const char *p = copy; *p; p++) {
        if (*p < '0' || *p > '9' || (p > copy && p[-1] >= '0' && p[-1] <= '9'))
            continue;
        long v = 0;
        const char *q = p;
        while (*q >= '0' && *q <= '9' && v < 1000000)
            v = v * 10 + (*q++ - '0');
        int after = *q == '\0' || *q == ' ' || *q == '\t' || *q == 'x';
        int before = p > copy && strchr(":xlghs", p[-1]) != NULL;
        if (v > 16 && after && before)
            return 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char text[512];
    if (size >= sizeof text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    if (too_big(text))
        return 0;
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
