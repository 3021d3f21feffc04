/* topology/units.c - bandwidths and latencies with units, read and written
 * so that a written value reads back bit for bit. */
#include "topo_internal.h"

#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    double scale;
} ot_unit;

/* Decimal bytes, binary bytes, and bits (network speeds are in bits). */
static const ot_unit bw_units[] = {
    {"B/s", 1},          {"KB/s", 1e3},           {"MB/s", 1e6},
    {"GB/s", 1e9},       {"TB/s", 1e12},          {"KiB/s", 1024.0},
    {"MiB/s", 1048576.0}, {"GiB/s", 1073741824.0}, {"TiB/s", 1099511627776.0},
    {"b/s", 0.125},      {"Kb/s", 125.0},         {"Mb/s", 125e3},
    {"Gb/s", 125e6},     {"Tb/s", 125e9},
};
static const ot_unit lat_units[] = {{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}};
#define NBW (sizeof bw_units / sizeof bw_units[0])
#define NLAT (sizeof lat_units / sizeof lat_units[0])

/* Length of the number at the start of text: digits [. digits] [e[+-]digits]. */
static size_t number_span(const char *s)
{
    size_t i = 0;
    while (s[i] >= '0' && s[i] <= '9')
        i++;
    if (i == 0)
        return 0;
    if (s[i] == '.') {
        size_t j = i + 1;
        while (s[j] >= '0' && s[j] <= '9')
            j++;
        if (j == i + 1)
            return 0; /* "5." is not a number here */
        i = j;
    }
    if (s[i] == 'e' || s[i] == 'E') {
        size_t j = i + 1;
        if (s[j] == '+' || s[j] == '-')
            j++;
        size_t k = j;
        while (s[k] >= '0' && s[k] <= '9')
            k++;
        if (k > j)
            i = k;
    }
    return i;
}

/* strtod on a validated span, whatever the process's locale says a decimal
 * point is. */
static int convert(const char *s, size_t n, double *value)
{
    char buf[64];
    if (n >= sizeof buf)
        return -1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    char point = localeconv()->decimal_point[0];
    for (char *p = buf; *p; p++)
        if (*p == '.')
            *p = point;
    char *end;
    double v = strtod(buf, &end);
    if (*end || !isfinite(v))
        return -1;
    *value = v;
    return 0;
}

int ot_parse_number(const char *text, double *value)
{
    size_t n = number_span(text);
    if (n == 0 || text[n] != '\0')
        return -1;
    return convert(text, n, value);
}

static void unit_list(const ot_unit *units, size_t count, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < count && used < size; i++)
        used += (size_t)snprintf(out + used, size - used, "%s%s", i ? ", " : "", units[i].name);
}

static int parse_quantity(const char *text, const ot_unit *units, size_t nunits,
                          const char *what, int positive, double *out, char *why)
{
    char list[160];
    if (text[0] == '-') {
        snprintf(why, OT_WHY_SIZE, "%s '%.40s' is negative", what, text);
        return -1;
    }
    size_t n = number_span(text);
    double v;
    if (n == 0 || convert(text, n, &v)) {
        snprintf(why, OT_WHY_SIZE, "%s '%.40s' does not start with a number", what, text);
        return -1;
    }
    const char *unit = text + n;
    if (*unit == '\0') {
        unit_list(units, nunits, list, sizeof list);
        snprintf(why, OT_WHY_SIZE, "%s '%.40s' has no unit (one of %s)", what, text, list);
        return -1;
    }
    for (size_t i = 0; i < nunits; i++) {
        if (strcmp(unit, units[i].name) == 0) {
            v *= units[i].scale;
            if (!isfinite(v)) {
                snprintf(why, OT_WHY_SIZE, "%s '%.40s' is too large", what, text);
                return -1;
            }
            if (positive && v == 0) {
                snprintf(why, OT_WHY_SIZE, "%s '%.40s' must be greater than zero", what, text);
                return -1;
            }
            *out = v;
            return 0;
        }
    }
    unit_list(units, nunits, list, sizeof list);
    snprintf(why, OT_WHY_SIZE, "unknown unit '%.12s' in %s '%.40s' (one of %s)", unit, what,
             text, list);
    return -1;
}

int ot_parse_bandwidth(const char *text, double *bytes_per_s, char *why)
{
    return parse_quantity(text, bw_units, NBW, "bandwidth", 1, bytes_per_s, why);
}

int ot_parse_latency(const char *text, double *ns, char *why)
{
    return parse_quantity(text, lat_units, NLAT, "latency", 0, ns, why);
}

/* Units tried for output, largest first; the base unit last always works. */
static void format_quantity(double v, const ot_unit *const *order, size_t count, char *buf,
                            size_t size)
{
    /* Plain decimals first ("500ns", not "5e+02ns"); exponents if needed. */
    for (int plain = 1; plain >= 0; plain--)
    for (size_t u = 0; u < count; u++) {
        double scale = order[u]->scale;
        if (u + 1 < count && v < scale)
            continue;
        for (int digits = 1; digits <= 17; digits++) {
            char num[48];
            snprintf(num, sizeof num, "%.*g", digits, v / scale);
            if (plain && strchr(num, 'e'))
                continue;
            char point = localeconv()->decimal_point[0];
            for (char *p = num; *p; p++)
                if (*p == point)
                    *p = '.';
            double back;
            size_t n = number_span(num);
            if (n == strlen(num) && convert(num, n, &back) == 0 && back * scale == v) {
                snprintf(buf, size, "%s%s", num, order[u]->name);
                return;
            }
        }
    }
    snprintf(buf, size, "%.17g%s", v, order[count - 1]->name); /* not reached for finite v */
}

void ot_format_bandwidth(double v, char *buf, size_t size)
{
    const ot_unit *order[] = {&bw_units[4], &bw_units[3], &bw_units[2], &bw_units[1],
                              &bw_units[0]};
    format_quantity(v, order, sizeof order / sizeof order[0], buf, size);
}

void ot_format_latency(double v, char *buf, size_t size)
{
    const ot_unit *order[] = {&lat_units[2], &lat_units[1], &lat_units[0]};
    format_quantity(v, order, sizeof order / sizeof order[0], buf, size);
}
