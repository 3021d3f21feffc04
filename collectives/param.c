/*
 * collectives/param.c - NCCL 2.31's parameter API over OCCL's environment
 * settings: each OCCL_* variable is a key with a type, a default, and its
 * current value (the environment's text when set, else the default). Typed
 * reads need the key's own type, as NCCL's do; the key-based read gives any
 * key's value as text.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "occl_internal.h"

typedef enum { P_I32, P_I64, P_U64, P_STR } param_type;

struct occlParamHandle {
    const char *key;
    param_type type;
    const char *def; /* the default, as text ("" for none) */
    const char *alias; /* an NCCL name read when the key is unset, or NULL */
};

/* The settings docs/occl.md lists under "Environment", with their defaults. */
static const struct occlParamHandle params[] = {
    {"OCCL_TIMEOUT_MS", P_I64, "300000", NULL},
    {"OCCL_ALGO", P_STR, "", NULL},
    {"OCCL_PROTO", P_STR, "", NULL},
    {"OCCL_CHECK_CALLS", P_I32, "1", NULL},
    {"OCCL_TUNER_PLUGIN", P_STR, "", "NCCL_TUNER_PLUGIN"},
    {"OCCL_PROFILER_PLUGIN", P_STR, "", "NCCL_PROFILER_PLUGIN"},
    {"OCCL_LL_MAX_BYTES", P_U64, "4096", NULL},
    {"OCCL_CALLER_WAIT_US", P_U64, "200", NULL},
    {"OCCL_LL_NAP_US", P_U64, "20", NULL},
    {"OCCL_DEBUG", P_STR, "WARN", NULL},
    {"OCCL_DEBUG_SUBSYS", P_STR, "ALL", NULL},
    {"OCCL_DEBUG_FILE", P_STR, "", NULL},
};
#define NPARAMS ((int)(sizeof params / sizeof params[0]))

static const char *type_name(param_type t)
{
    switch (t) {
    case P_I32: return "int32";
    case P_I64: return "int64";
    case P_U64: return "uint64";
    default: return "string";
    }
}

/* Handles are entries of the table: anything else is refused unread. */
static const struct occlParamHandle *lookup(occlParamHandle_t h)
{
    for (int i = 0; i < NPARAMS; i++)
        if (h == &params[i])
            return h;
    return NULL;
}

static const struct occlParamHandle *find(const char *key)
{
    for (int i = 0; i < NPARAMS; i++)
        if (strcmp(params[i].key, key) == 0)
            return &params[i];
    return NULL;
}

static const char *text_of(const struct occlParamHandle *p)
{
    const char *v = getenv(p->key);
    if ((!v || !*v) && p->alias)
        v = getenv(p->alias);
    return v && *v ? v : p->def;
}

/* The value of an integer key; occlInvalidArgument with the reason when
 * the environment's text is not one (OCCL refuses to start on it too). */
static occlResult_t int_value(const struct occlParamHandle *p, int64_t *i, uint64_t *u)
{
    const char *s = text_of(p);
    char *end;
    errno = 0;
    bool digits = *s >= '0' && *s <= '9';
    if (p->type == P_U64) {
        *u = strtoull(s, &end, 10);
    } else {
        long long v = strtoll(s, &end, 10);
        digits |= *s == '-' && s[1] >= '0' && s[1] <= '9';
        *i = v;
        if (p->type == P_I32 && (v < INT32_MIN || v > INT32_MAX))
            errno = ERANGE;
    }
    if (!digits || errno || *end)
        return occl_fail(occlInvalidArgument, "%s='%.40s' is not a %s", p->key, s, type_name(p->type));
    return occlSuccess;
}

occlResult_t occlParamBind(occlParamHandle_t *out, const char *key)
{
    if (!out || !key)
        return occl_fail(occlInvalidArgument, "ParamBind: out or key is NULL");
    const struct occlParamHandle *p = find(key);
    if (!p)
        return occl_fail(occlInvalidArgument, "ParamBind: no parameter '%.60s' (see "
                                              "occlParamGetAllParameterKeys)", key);
    *out = (occlParamHandle_t)p;
    return occlSuccess;
}

/* The bound key if it has type want. */
static occlResult_t typed(occlParamHandle_t h, const void *out, param_type want,
                          const struct occlParamHandle **p)
{
    *p = lookup(h);
    if (!*p || !out)
        return occl_fail(occlInvalidArgument, "ParamGet: not a handle of occlParamBind, or out is NULL");
    if ((*p)->type != want)
        return occl_fail(occlInvalidArgument, "ParamGet: %s is a %s parameter, not a %s", (*p)->key,
                         type_name((*p)->type), type_name(want));
    return occlSuccess;
}

/* OCCL's keys are of three integer types; each typed getter reads its own. */
#define SIGNED_GETTER(name, ctype, ptype)                                                          \
    occlResult_t name(occlParamHandle_t h, ctype *out)                                              \
    {                                                                                              \
        const struct occlParamHandle *p;                                                           \
        occlResult_t res = typed(h, out, ptype, &p);                                               \
        int64_t i = 0;                                                                             \
        uint64_t u = 0;                                                                            \
        if (res == occlSuccess)                                                                    \
            res = int_value(p, &i, &u);                                                            \
        if (res == occlSuccess)                                                                    \
            *out = (ctype)i;                                                                       \
        return res;                                                                                \
    }
SIGNED_GETTER(occlParamGetI32, int32_t, P_I32)
SIGNED_GETTER(occlParamGetI64, int64_t, P_I64)

occlResult_t occlParamGetU64(occlParamHandle_t h, uint64_t *out)
{
    const struct occlParamHandle *p;
    occlResult_t res = typed(h, out, P_U64, &p);
    int64_t i = 0;
    uint64_t u = 0;
    if (res == occlSuccess)
        res = int_value(p, &i, &u);
    if (res == occlSuccess)
        *out = u;
    return res;
}

/* No key has these types: NCCL's answer for a type mismatch. */
#define NO_KEY_GETTER(name, ctype, tname)                                                          \
    occlResult_t name(occlParamHandle_t h, ctype *out)                                              \
    {                                                                                              \
        const struct occlParamHandle *p = lookup(h);                                               \
        if (!p || !out)                                                                            \
            return occl_fail(occlInvalidArgument, "ParamGet: not a handle of occlParamBind, or "   \
                                                  "out is NULL");                                  \
        return occl_fail(occlInvalidArgument, "ParamGet: %s is a %s parameter, not a " tname,      \
                         p->key, type_name(p->type));                                              \
    }
NO_KEY_GETTER(occlParamGetI8, int8_t, "int8")
NO_KEY_GETTER(occlParamGetI16, int16_t, "int16")
NO_KEY_GETTER(occlParamGetU8, uint8_t, "uint8")
NO_KEY_GETTER(occlParamGetU16, uint16_t, "uint16")
NO_KEY_GETTER(occlParamGetU32, uint32_t, "uint32")

static _Thread_local char str_value[4096], key_value[4096];

occlResult_t occlParamGetStr(occlParamHandle_t h, const char **out)
{
    const struct occlParamHandle *p;
    occlResult_t res = typed(h, out, P_STR, &p);
    if (res != occlSuccess)
        return res;
    snprintf(str_value, sizeof str_value, "%s", text_of(p));
    *out = str_value;
    return occlSuccess;
}

occlResult_t occlParamGet(occlParamHandle_t h, void *out, int maxLen, int *len)
{
    const struct occlParamHandle *p = lookup(h);
    if (!p || !out || !len)
        return occl_fail(occlInvalidArgument, "ParamGet: not a handle of occlParamBind, or out or "
                                              "len is NULL");
    int64_t i = 0;
    uint64_t u = 0;
    int32_t i32;
    const void *src;
    int n;
    if (p->type == P_STR) {
        src = text_of(p);
        n = (int)strlen(src) + 1;
    } else {
        occlResult_t res = int_value(p, &i, &u);
        if (res != occlSuccess)
            return res;
        i32 = (int32_t)i;
        src = p->type == P_I32 ? (const void *)&i32 : p->type == P_I64 ? (const void *)&i : (const void *)&u;
        n = p->type == P_I32 ? 4 : 8;
    }
    *len = n;
    if (maxLen < n)
        return occl_fail(occlInvalidArgument, "ParamGet: %s needs %d bytes, maxLen is %d", p->key, n,
                         maxLen);
    memcpy(out, src, (size_t)n);
    return occlSuccess;
}

occlResult_t occlParamGetParameter(const char *key, const char **value, int *valueLen)
{
    if (!key || !value || !valueLen)
        return occl_fail(occlInvalidArgument, "ParamGetParameter: key, value or valueLen is NULL");
    const struct occlParamHandle *p = find(key);
    if (!p) {
        *value = NULL;
        *valueLen = 0;
        return occl_fail(occlInvalidArgument, "ParamGetParameter: no parameter '%.60s'", key);
    }
    snprintf(key_value, sizeof key_value, "%s", text_of(p));
    *value = key_value;
    *valueLen = (int)strlen(key_value);
    return occlSuccess;
}

occlResult_t occlParamGetAllParameterKeys(const char ***table, int *tableLen)
{
    static const char *keys[NPARAMS];
    if (!table || !tableLen)
        return occl_fail(occlInvalidArgument, "ParamGetAllParameterKeys: table or tableLen is NULL");
    for (int i = 0; i < NPARAMS; i++)
        keys[i] = params[i].key; /* the same every time: no race between threads */
    *table = keys;
    *tableLen = NPARAMS;
    return occlSuccess;
}

void occlParamDumpAll(void)
{
    printf("=== occlParam Registry Dump ===\n");
    for (int i = 0; i < NPARAMS; i++)
        printf("%s (%s) = \"%s\" (default \"%s\")\n", params[i].key, type_name(params[i].type),
               text_of(&params[i]), params[i].def);
}
