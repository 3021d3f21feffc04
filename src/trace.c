/*
 * src/trace.c - recording ops and writing Chrome trace-event JSON.
 *
 * Tracks: a process per device (pid = its global device id, so the files of
 * all ranks merge without clashes) and a thread per stream (tid = 0 for the
 * default stream, then creation order). Slices ("ph":"X") for kernels,
 * copies, memsets, host functions and collectives; instants ("ph":"i") for
 * event records and waits. Times are microseconds with nanosecond decimals.
 */
#include "internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

bool or_trace_on;

enum { TR_KERNEL, TR_COPY, TR_REMOTE_COPY, TR_MEMSET, TR_HOST_FUNC, TR_RECORD, TR_WAIT, TR_SLICE };

typedef struct tr_rec {
    uint64_t ts, dur; /* ns */
    uint64_t seq;     /* the op's place in its stream: orders equal times */
    uint64_t corr;    /* external correlation id (a profiler's), 0: none */
    const void *name; /* kernel: its name or function; slice: its name */
    int32_t pid, tid;
    uint8_t kind;
    bool named; /* name is text, not a function */
    bool declared;
    union {
        struct {
            uint32_t grid[3], block[3];
            double flops, bytes;
        } k;
        struct {
            uint64_t bytes;
            int32_t src, dst;
            int32_t value; /* memsets */
        } c;
        struct {
            uint64_t event, gen;
        } e;
        struct {
            const char *cat, *args;
        } x;
    } u;
} tr_rec;

#define TR_CHUNK 1024

typedef struct tr_chunk {
    _Atomic(struct tr_chunk *) next;
    _Atomic size_t n;
    tr_rec rec[TR_CHUNK];
} tr_chunk;

/* One per thread that records; outlives its thread. */
typedef struct tr_buf {
    struct tr_buf *next;
    tr_chunk *head, *tail; /* tail: owner only */
    size_t total;          /* owner only */
    _Atomic uint64_t dropped;
} tr_buf;

typedef struct {
    int pid, tid;
    char *name;
} tr_track;

static struct {
    pthread_mutex_t lock; /* buffers list, tracks, interned names, writing */
    char *path;
    size_t cap; /* records per thread */
    bool virtual_time;
    uint64_t origin; /* CLOCK_MONOTONIC at start */
    tr_buf *bufs;
    tr_track *tracks;
    size_t ntracks, cap_tracks;
    char **names;
    size_t nnames, cap_names;
} tr = {.lock = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local tr_buf *my_buf;

static tr_buf *thread_buf(void)
{
    if (my_buf)
        return my_buf;
    tr_buf *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    pthread_mutex_lock(&tr.lock);
    b->next = tr.bufs;
    tr.bufs = b;
    pthread_mutex_unlock(&tr.lock);
    return my_buf = b;
}

/* A slot for one record, or NULL (buffer full or out of memory: counted). */
static tr_rec *rec_slot(tr_buf **owner)
{
    tr_buf *b = thread_buf();
    if (!b)
        return NULL;
    *owner = b;
    if (b->total >= tr.cap) {
        atomic_fetch_add(&b->dropped, 1);
        return NULL;
    }
    if (!b->tail || atomic_load_explicit(&b->tail->n, memory_order_relaxed) == TR_CHUNK) {
        tr_chunk *c = calloc(1, sizeof *c);
        if (!c) {
            atomic_fetch_add(&b->dropped, 1);
            return NULL;
        }
        if (b->tail)
            atomic_store_explicit(&b->tail->next, c, memory_order_release);
        else {
            pthread_mutex_lock(&tr.lock); /* the writer reads head under the lock */
            b->head = c;
            pthread_mutex_unlock(&tr.lock);
        }
        b->tail = c;
    }
    return &b->tail->rec[atomic_load_explicit(&b->tail->n, memory_order_relaxed)];
}

static void rec_publish(tr_buf *b)
{
    b->total++;
    atomic_fetch_add_explicit(&b->tail->n, 1, memory_order_release);
}

const char *or_trace_intern(const char *s)
{
    if (!s)
        return NULL;
    pthread_mutex_lock(&tr.lock);
    const char *found = NULL;
    for (size_t i = 0; i < tr.nnames && !found; i++)
        if (strcmp(tr.names[i], s) == 0)
            found = tr.names[i];
    if (!found && tr.nnames == tr.cap_names) {
        size_t cap = tr.cap_names ? 2 * tr.cap_names : 16;
        char **grown = realloc(tr.names, cap * sizeof *grown);
        if (grown) {
            tr.names = grown;
            tr.cap_names = cap;
        }
    }
    if (!found && tr.nnames < tr.cap_names && (tr.names[tr.nnames] = strdup(s)))
        found = tr.names[tr.nnames++];
    pthread_mutex_unlock(&tr.lock);
    return found;
}

void or_trace_name_track(int pid, int tid, const char *name)
{
    pthread_mutex_lock(&tr.lock);
    if (tr.ntracks == tr.cap_tracks) {
        size_t cap = tr.cap_tracks ? 2 * tr.cap_tracks : 16;
        tr_track *grown = realloc(tr.tracks, cap * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&tr.lock);
            return;
        }
        tr.tracks = grown;
        tr.cap_tracks = cap;
    }
    char *copy = strdup(name);
    if (copy)
        tr.tracks[tr.ntracks++] = (tr_track){pid, tid, copy};
    pthread_mutex_unlock(&tr.lock);
}

void or_trace_op(const or_op *op, uint64_t wall_end)
{
    if (op->kind == OR_OP_HOST_FUNC && op->u.host.held)
        return; /* the layer that issued it records its own slices */
    tr_buf *b;
    tr_rec *r = rec_slot(&b);
    if (!r)
        return;
    const or_stream *s = op->stream;
    memset(r, 0, sizeof *r);
    r->pid = s->dev->global_id;
    r->tid = s->trace_tid;
    r->seq = op->seq;
    r->corr = op->correlation;
    if (tr.virtual_time) {
        r->ts = op->vt_start;
        r->dur = op->vt_end - op->vt_start;
    } else {
        wall_end -= tr.origin;
        uint64_t start = op->wall_start ? op->wall_start - tr.origin : wall_end;
        r->ts = start;
        r->dur = wall_end > start ? wall_end - start : 0;
    }
    switch (op->kind) {
    case OR_OP_KERNEL:
        r->kind = TR_KERNEL;
        r->named = op->u.kernel.name != NULL;
        r->name = r->named ? (const void *)op->u.kernel.name : (const void *)op->u.kernel.fn;
        r->declared = op->cost.declared;
        r->u.k.grid[0] = op->u.kernel.grid.x;
        r->u.k.grid[1] = op->u.kernel.grid.y;
        r->u.k.grid[2] = op->u.kernel.grid.z;
        r->u.k.block[0] = op->u.kernel.block.x;
        r->u.k.block[1] = op->u.kernel.block.y;
        r->u.k.block[2] = op->u.kernel.block.z;
        r->u.k.flops = op->cost.kernel_flops;
        r->u.k.bytes = op->cost.kernel_bytes;
        break;
    case OR_OP_COPY:
    case OR_OP_REMOTE_COPY:
    case OR_OP_MEMSET:
        r->kind = op->kind == OR_OP_COPY          ? TR_COPY
                  : op->kind == OR_OP_REMOTE_COPY ? TR_REMOTE_COPY
                                                  : TR_MEMSET;
        r->u.c.bytes = op->cost.bytes;
        r->u.c.src = op->cost.src;
        r->u.c.dst = op->cost.dst;
        r->u.c.value = op->kind == OR_OP_MEMSET ? op->u.memset.value : 0;
        break;
    case OR_OP_HOST_FUNC:
        r->kind = TR_HOST_FUNC;
        break;
    case OR_OP_EVENT_RECORD:
    case OR_OP_EVENT_WAIT:
        r->kind = op->kind == OR_OP_EVENT_RECORD ? TR_RECORD : TR_WAIT;
        r->u.e.event = op->u.event.event->handle;
        r->u.e.gen = op->u.event.gen;
        if (!tr.virtual_time) { /* an instant: when it happened */
            r->ts = wall_end;
            r->dur = 0;
        }
        break;
    }
    rec_publish(b);
}

void or_trace_slice(int pid, int tid, const char *name, const char *cat, uint64_t start,
                    uint64_t end, const char *args)
{
    if (!or_trace_on)
        return;
    if (!tr.virtual_time) { /* given in CLOCK_MONOTONIC */
        start -= tr.origin;
        end -= tr.origin;
    }
    const char *iname = or_trace_intern(name ? name : "slice");
    const char *icat = or_trace_intern(cat ? cat : "external");
    const char *iargs = args ? or_trace_intern(args) : NULL;
    tr_buf *b;
    tr_rec *r = rec_slot(&b);
    if (!r)
        return;
    memset(r, 0, sizeof *r);
    r->kind = TR_SLICE;
    r->pid = pid;
    r->tid = tid;
    r->ts = start;
    r->dur = end > start ? end - start : 0;
    r->named = true;
    r->name = iname;
    r->corr = or_activity_slice_correlation();
    r->u.x.cat = icat;
    r->u.x.args = iargs;
    rec_publish(b);
}

/* ---- writing --------------------------------------------------------------- */

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(f, "\\%c", *c);
        else if (*c < 0x20)
            fprintf(f, "\\u%04x", *c);
        else
            fputc(*c, f);
    }
    fputc('"', f);
}

static void json_time(FILE *f, uint64_t ns)
{
    fprintf(f, "%" PRIu64 ".%03u", ns / 1000, (unsigned)(ns % 1000));
}

const char *or_kernel_symbol(const void *fn, char *buf, size_t len)
{
    Dl_info info;
    if (dladdr(fn, &info) && info.dli_sname)
        return info.dli_sname;
    uintptr_t off = (uintptr_t)fn - (info.dli_fbase ? (uintptr_t)info.dli_fbase : 0);
    snprintf(buf, len, "kernel@0x%" PRIxPTR, off);
    return buf;
}

/* A kernel's name: given at launch, else or_kernel_symbol's. */
static void kernel_name(FILE *f, const tr_rec *r)
{
    char buf[48];
    json_str(f, r->named ? (const char *)r->name : or_kernel_symbol(r->name, buf, sizeof buf));
}

static void json_end(FILE *f, int32_t g)
{
    if (g == OR_VT_HOST)
        fputs("\"host\"", f);
    else
        fprintf(f, "%d", g);
}

const char *or_copy_name(int32_t src, int32_t dst, bool remote)
{
    static const char *const names[2][5] = {
        {"memcpy HtoH", "memcpy HtoD", "memcpy DtoH", "memcpy DtoD", "memcpy PtoP"},
        {"remote memcpy HtoH", "remote memcpy HtoD", "remote memcpy DtoH", "remote memcpy DtoD",
         "remote memcpy PtoP"}};
    int kind = src == OR_VT_HOST   ? (dst == OR_VT_HOST ? 0 : 1)
               : dst == OR_VT_HOST ? 2
               : src == dst        ? 3
                                   : 4;
    return names[remote][kind];
}

/* "HtoD", ...: the last word of the copy's name. */
static const char *copy_kind(const tr_rec *r)
{
    return strrchr(or_copy_name(r->u.c.src, r->u.c.dst, false), ' ') + 1;
}

/* The end of an event's args: the profiler's correlation id when it had one
 * (joins this trace to torch.profiler's), then the closing brace. */
static void args_close(FILE *f, const tr_rec *r, bool more)
{
    if (r->corr)
        fprintf(f, "%s\"correlation\":%" PRIu64, more ? "," : "", r->corr);
    fputc('}', f);
}

static void write_rec(FILE *f, const tr_rec *r)
{
    static const char *const cats[] = {"kernel", "copy", "copy", "memset", "host", "event", "event"};
    fputs("{\"name\":", f);
    switch (r->kind) {
    case TR_KERNEL: kernel_name(f, r); break;
    case TR_COPY:
    case TR_REMOTE_COPY:
        json_str(f, or_copy_name(r->u.c.src, r->u.c.dst, r->kind == TR_REMOTE_COPY));
        break;
    case TR_MEMSET: fputs("\"memset\"", f); break;
    case TR_HOST_FUNC: fputs("\"host function\"", f); break;
    case TR_RECORD: fputs("\"event record\"", f); break;
    case TR_WAIT: fputs("\"event wait\"", f); break;
    case TR_SLICE: json_str(f, r->name); break;
    }
    fputs(",\"cat\":", f);
    json_str(f, r->kind == TR_SLICE ? r->u.x.cat : cats[r->kind]);
    bool instant = r->kind == TR_RECORD || (r->kind == TR_WAIT && r->dur == 0);
    fprintf(f, ",\"ph\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":", instant ? "i" : "X", r->pid,
            r->tid);
    json_time(f, r->ts);
    if (instant) {
        fputs(",\"s\":\"t\"", f);
    } else {
        fputs(",\"dur\":", f);
        json_time(f, r->dur);
    }
    fputs(",\"args\":", f);
    switch (r->kind) {
    case TR_KERNEL:
        fprintf(f, "{\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u]", r->u.k.grid[0], r->u.k.grid[1],
                r->u.k.grid[2], r->u.k.block[0], r->u.k.block[1], r->u.k.block[2]);
        if (r->declared)
            fprintf(f, ",\"flops\":%.17g,\"bytes\":%.17g", r->u.k.flops, r->u.k.bytes);
        args_close(f, r, true);
        break;
    case TR_COPY:
    case TR_REMOTE_COPY:
    case TR_MEMSET:
        fprintf(f, "{\"bytes\":%" PRIu64, r->u.c.bytes);
        if (r->kind == TR_MEMSET) {
            fprintf(f, ",\"value\":%d", r->u.c.value);
        } else {
            fprintf(f, ",\"kind\":\"%s\",\"src\":", copy_kind(r));
            json_end(f, r->u.c.src);
            fputs(",\"dst\":", f);
            json_end(f, r->u.c.dst);
            fprintf(f, ",\"path\":\"%s\"", or_vclock_path(r->u.c.src, r->u.c.dst).type);
        }
        args_close(f, r, true);
        break;
    case TR_RECORD:
    case TR_WAIT:
        fprintf(f, "{\"event\":%" PRIu64 ",\"record\":%" PRIu64, r->u.e.event, r->u.e.gen);
        args_close(f, r, true);
        break;
    case TR_SLICE:
        if (r->u.x.args && strlen(r->u.x.args) > 2) { /* a layer's object, "{...}" */
            fwrite(r->u.x.args, 1, strlen(r->u.x.args) - 1, f);
            args_close(f, r, true);
        } else {
            fputc('{', f);
            args_close(f, r, false);
        }
        break;
    default:
        fputc('{', f);
        args_close(f, r, false);
        break;
    }
    fputs("}", f);
}

typedef struct {
    const tr_rec *r;
    size_t order; /* recording order, for equal times */
} tr_ref;

static int ref_cmp(const void *pa, const void *pb)
{
    const tr_ref *a = pa, *b = pb;
    if (a->r->pid != b->r->pid)
        return a->r->pid < b->r->pid ? -1 : 1;
    if (a->r->tid != b->r->tid)
        return a->r->tid < b->r->tid ? -1 : 1;
    if (a->r->ts != b->r->ts)
        return a->r->ts < b->r->ts ? -1 : 1;
    if (a->r->seq != b->r->seq)
        return a->r->seq < b->r->seq ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

static int track_cmp(const void *pa, const void *pb)
{
    const tr_track *a = pa, *b = pb;
    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    return a->tid < b->tid ? -1 : a->tid > b->tid;
}

void or_trace_flush(void)
{
    if (!or_trace_on)
        return;
    pthread_mutex_lock(&tr.lock);
    /* Snapshot what is published now; threads keep appending meanwhile. */
    size_t n = 0;
    uint64_t dropped = 0;
    for (tr_buf *b = tr.bufs; b; b = b->next) {
        dropped += atomic_load(&b->dropped);
        for (tr_chunk *c = b->head; c; c = atomic_load_explicit(&c->next, memory_order_acquire))
            n += atomic_load_explicit(&c->n, memory_order_acquire);
    }
    tr_ref *refs = malloc((n ? n : 1) * sizeof *refs);
    if (!refs) {
        pthread_mutex_unlock(&tr.lock);
        OR_WARN("trace", "out of memory writing %s", tr.path);
        return;
    }
    size_t k = 0;
    for (tr_buf *b = tr.bufs; b; b = b->next)
        for (tr_chunk *c = b->head; c; c = atomic_load_explicit(&c->next, memory_order_acquire)) {
            size_t m = atomic_load_explicit(&c->n, memory_order_acquire);
            for (size_t i = 0; i < m && k < n; i++, k++)
                refs[k] = (tr_ref){&c->rec[i], k};
        }
    n = k;
    qsort(refs, n, sizeof *refs, ref_cmp);
    qsort(tr.tracks, tr.ntracks, sizeof *tr.tracks, track_cmp);

    FILE *f = fopen(tr.path, "w");
    if (!f) {
        OR_WARN("trace", "cannot write %s: %s", tr.path, strerror(errno));
        free(refs);
        pthread_mutex_unlock(&tr.lock);
        return;
    }
    fputs("{\"traceEvents\":[\n", f);
    bool first = true;
    int last_pid = -1;
    for (size_t i = 0; i < tr.ntracks; i++) {
        const tr_track *t = &tr.tracks[i];
        fputs(first ? "" : ",\n", f);
        first = false;
        if (t->tid < 0) { /* a process: its name, and its place in the list */
            fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":",
                    t->pid);
            json_str(f, t->name);
            fprintf(f, "}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,"
                       "\"args\":{\"sort_index\":%d}}",
                    t->pid, t->pid);
            last_pid = t->pid;
        } else {
            fprintf(f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{"
                       "\"name\":",
                    t->pid, t->tid);
            json_str(f, t->name);
            fputs("}}", f);
        }
    }
    (void)last_pid;
    for (size_t i = 0; i < n; i++) {
        fputs(first ? "" : ",\n", f);
        first = false;
        write_rec(f, refs[i].r);
    }
    fprintf(f,
            "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"openreg\":{\"format\":1,"
            "\"rank\":%d,\"nranks\":%d,\"time\":\"%s\",\"origin_ns\":%" PRIu64
            ",\"records\":%zu,\"dropped\":%" PRIu64 "}}}\n",
            or_cl.rank, or_cl.nranks, tr.virtual_time ? "virtual" : "wall",
            tr.virtual_time ? 0 : tr.origin, n, dropped);
    bool ok = fflush(f) == 0 && !ferror(f);
    ok &= fclose(f) == 0;
    if (!ok)
        OR_WARN("trace", "error writing %s", tr.path);
    if (dropped)
        OR_WARN("trace", "%s: %" PRIu64 " records dropped (more than OPENREG_TRACE_BUFFER=%zu "
                         "in one thread)",
                tr.path, dropped, tr.cap);
    free(refs);
    pthread_mutex_unlock(&tr.lock);
}

/* file.json -> file.rankN.json; without a .json suffix, file.rankN. A
 * directory (existing, or named with a final '/') gets the file inside it,
 * DIR/trace.json or DIR/trace.rankN.json, not a sibling DIR.rankN. */
static char *rank_path(const char *path)
{
    size_t len = strlen(path), need = len + 48;
    char *out = malloc(need);
    if (!out)
        return NULL;
    struct stat st;
    if (path[len - 1] == '/' || (stat(path, &st) == 0 && S_ISDIR(st.st_mode))) {
        const char *sep = path[len - 1] == '/' ? "" : "/";
        if (or_cl.nranks <= 1)
            snprintf(out, need, "%s%strace.json", path, sep);
        else
            snprintf(out, need, "%s%strace.rank%d.json", path, sep, or_cl.rank);
    } else if (or_cl.nranks <= 1)
        snprintf(out, need, "%s", path);
    else if (len > 5 && strcmp(path + len - 5, ".json") == 0)
        snprintf(out, need, "%.*s.rank%d.json", (int)(len - 5), path, or_cl.rank);
    else
        snprintf(out, need, "%s.rank%d", path, or_cl.rank);
    return out;
}

orError_t or_trace_start(const char *path, long long per_thread_cap, bool virtual_time)
{
    tr.path = rank_path(path);
    if (!tr.path)
        return orErrorMemoryAllocation;
    FILE *f = fopen(tr.path, "w"); /* refuse now rather than lose the trace at exit */
    if (!f) {
        fprintf(stderr, "openreg: OPENREG_TRACE: cannot create %s: %s\n", tr.path,
                strerror(errno));
        free(tr.path);
        tr.path = NULL;
        return orErrorInitialization;
    }
    fclose(f);
    tr.cap = (size_t)per_thread_cap;
    tr.virtual_time = virtual_time;
    tr.origin = or_now_ns();
    or_trace_on = true;
    return orSuccess;
}

void or_trace_fini(void)
{
    if (!or_trace_on)
        return;
    or_trace_on = false;
    pthread_mutex_lock(&tr.lock);
    while (tr.bufs) {
        tr_buf *b = tr.bufs;
        tr.bufs = b->next;
        while (b->head) {
            tr_chunk *c = b->head;
            b->head = atomic_load(&c->next);
            free(c);
        }
        free(b);
    }
    for (size_t i = 0; i < tr.ntracks; i++)
        free(tr.tracks[i].name);
    free(tr.tracks);
    tr.tracks = NULL;
    tr.ntracks = tr.cap_tracks = 0;
    for (size_t i = 0; i < tr.nnames; i++)
        free(tr.names[i]);
    free(tr.names);
    tr.names = NULL;
    tr.nnames = tr.cap_names = 0;
    free(tr.path);
    tr.path = NULL;
    pthread_mutex_unlock(&tr.lock);
    my_buf = NULL;
}
