/*
 * collectives/plugin.c - finding and opening NCCL plugin libraries, shared
 * by the tuner and the profiler.
 *
 * The name comes from OCCL_TUNER_PLUGIN / OCCL_PROFILER_PLUGIN, else from
 * NCCL's NCCL_TUNER_PLUGIN / NCCL_PROFILER_PLUGIN, and resolves as NCCL
 * resolves it (src/plugin/plugin_open.cc): a path is opened as it is; a
 * bare name is tried through the library search path as given, then (unless
 * it already reads "lib*.so") as libnccl-tuner-<name>.so or
 * libnccl-profiler-<name>.so. "none" (or unset) means no plugin.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "plugin.h"

static const struct {
    const char *what, *env, *nccl_env, *prefix;
} kinds[OCCL_PLUGIN_KINDS] = {
    [OCCL_PLUGIN_TUNER] = {"tuner", "OCCL_TUNER_PLUGIN", "NCCL_TUNER_PLUGIN", "libnccl-tuner"},
    [OCCL_PLUGIN_PROFILER] = {"profiler", "OCCL_PROFILER_PLUGIN", "NCCL_PROFILER_PLUGIN", "libnccl-profiler"},
};

static pthread_mutex_t libs_lock = PTHREAD_MUTEX_INITIALIZER;
static occl_plugin_lib libs[OCCL_PLUGIN_KINDS];

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && strcmp(s + n - t, tail) == 0;
}

/* dlopen as NCCL names it; NULL with every attempt's error in why. */
static void *open_named(occl_plugin_kind kind, const char *name, char *why, size_t size)
{
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (h)
        return h;
    const char *err = dlerror();
    int len = snprintf(why, size, "%s", err ? err : "cannot open");
    if (strchr(name, '/') || (strncmp(name, "lib", 3) == 0 && ends_with(name, ".so")))
        return NULL;
    char full[320];
    snprintf(full, sizeof full, "%s-%s.so", kinds[kind].prefix, name);
    h = dlopen(full, RTLD_NOW | RTLD_LOCAL);
    if (h)
        return h;
    err = dlerror();
    if (len >= 0 && (size_t)len < size)
        snprintf(why + len, size - (size_t)len, "; %s", err ? err : full);
    return NULL;
}

const occl_plugin_lib *occl_plugin_acquire(occl_plugin_kind kind, occl_plugin_resolve_fn resolve)
{
    occl_plugin_lib *L = &libs[kind];
    const occl_plugin_lib *out = NULL;
    pthread_mutex_lock(&libs_lock);
    if (L->users > 0) {
        L->users++;
        out = L;
        goto unlock;
    }
    if (L->refused)
        goto unlock;
    const char *env = kinds[kind].env, *name = getenv(env);
    if (!name || !*name) {
        env = kinds[kind].nccl_env;
        name = getenv(env);
    }
    if (!name || !*name || strcasecmp(name, "none") == 0)
        goto unlock;
    snprintf(L->name, sizeof L->name, "%s", name);
    char why[1024];
    L->handle = open_named(kind, name, why, sizeof why);
    if (!L->handle) {
        OCCL_WARN("%s plugin '%s' (%s) refused: %s; continuing without it", kinds[kind].what, name, env, why);
        L->refused = true;
        goto unlock;
    }
    if (!resolve(L->handle, name, &L->sym, &L->version)) {
        dlclose(L->handle);
        L->handle = NULL;
        L->refused = true;
        goto unlock;
    }
    L->users = 1;
    OCCL_INFO("%s plugin '%s' (%s) loaded: %s, NCCL interface v%d", kinds[kind].what, name, env,
              *(const char *const *)L->sym, L->version);
    out = L;
unlock:
    pthread_mutex_unlock(&libs_lock);
    return out;
}

void occl_plugin_release(occl_plugin_kind kind)
{
    occl_plugin_lib *L = &libs[kind];
    pthread_mutex_lock(&libs_lock);
    if (L->users > 0 && --L->users == 0) {
        OCCL_INFO("%s plugin '%s' unloaded", kinds[kind].what, L->name);
        dlclose(L->handle);
        L->handle = NULL;
        L->sym = NULL;
    }
    pthread_mutex_unlock(&libs_lock);
}

void occl_plugin_refuse_versions(void *handle, const char *what, const char *name, const char *symbol,
                                 int oldest, int newest)
{
    for (int v = 1; v <= 32; v++) {
        char s[48];
        snprintf(s, sizeof s, "%s_v%d", symbol, v);
        if (dlsym(handle, s)) {
            OCCL_WARN("%s plugin '%s' refused: it exports %s, a version OCCL does not support "
                      "(%s_v%d to _v%d); continuing without it", what, name, s, symbol, oldest, newest);
            return;
        }
    }
    OCCL_WARN("%s plugin '%s' refused: no symbol %s_v%d .. _v%d in it; continuing without it", what, name,
              symbol, newest, oldest);
}

void occl_plugin_refuse_for_comm(occl_plugin_kind kind, occlComm_t comm, const char *why, int result)
{
    OCCL_WARN("rank %d: %s plugin '%s' refused for comm %016llx: %s returned %d; continuing without it",
              comm->rank, kinds[kind].what, libs[kind].name, (unsigned long long)comm->id, why, result);
}

void occl_plugin_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt,
                        ...)
{
    occl_log_level mine = level == NCCL_LOG_WARN || level == NCCL_LOG_ABORT ? OCCL_LOG_WARN
                          : level == NCCL_LOG_TRACE                         ? OCCL_LOG_TRACE
                          : level == NCCL_LOG_NONE                          ? OCCL_LOG_NONE
                                                                            : OCCL_LOG_INFO;
    if (mine == OCCL_LOG_NONE || occl_log_threshold < mine)
        return;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    occl_log(mine, "plugin: %s", msg);
}

void occl_plugins_comm_init(occlComm_t comm)
{
    occl_tuner_comm_init(comm);
    occl_prof_comm_init(comm);
}

void occl_plugins_comm_fini(occlComm_t comm)
{
    occl_prof_comm_fini(comm);
    occl_tuner_comm_fini(comm);
}
