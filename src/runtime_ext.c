/* src/runtime_ext.c - the runtime's services for the collectives layer. */
#include "runtime_ext.h"

#include "internal.h"

#include <math.h>

orError_t or_mem_export(const void *p, size_t bytes, or_mem_ref *ref)
{
    OR_API_BEGIN();
    or_mem_region r;
    orError_t err = or_mem_classify(p, bytes, &r);
    if (err != orSuccess)
        return err;
    if (r.cls == OR_MEM_DEVICE && r.dev) {
        *ref = (or_mem_ref){or_cl.rank, r.dev->id,
                            (uint64_t)((const unsigned char *)p - r.dev->hw.base)};
        return orSuccess;
    }
    if (r.cls == OR_MEM_DEVICE && r.map.rank < 0) /* the parent process's: not of this job */
        return orErrorNotSupported;
    if (r.cls == OR_MEM_DEVICE) { /* another rank's memory, opened here */
        *ref = (or_mem_ref){r.map.rank, r.map.device,
                            r.map.offset + (uint64_t)((const unsigned char *)p - r.map.addr)};
        return orSuccess;
    }
    return orErrorInvalidValue;
}

void *or_mem_import(const or_mem_ref *ref)
{
    if (ref->rank == or_cl.rank) {
        if (ref->device < 0 || ref->device >= or_rt.ndevices)
            return NULL;
        or_device *dev = &or_rt.devices[ref->device];
        return ref->offset < dev->hw.capacity ? dev->hw.base + ref->offset : NULL;
    }
    for (int i = 0; i < or_cl.npeers; i++) {
        const or_peer_arena *pa = &or_cl.peers[i];
        if (pa->rank == ref->rank && pa->device == ref->device)
            return ref->offset < pa->capacity ? pa->base + ref->offset : NULL;
    }
    return NULL;
}

orError_t or_job(or_job_view *view)
{
    OR_API_BEGIN();
    *view = (or_job_view){or_cl.mpi, or_cl.mpi ? or_cl.coll_comm : MPI_COMM_NULL,
                          or_cl.mpi ? or_cl.p2p_comm : MPI_COMM_NULL,
                          or_cl.mpi ? or_cl.ctl_comm : MPI_COMM_NULL, or_cl.rank, or_cl.nranks,
                          or_cl.node, or_cl.rank_node, or_cl.job_id,
                          or_cl.topo, or_cl.topo_device};
    return orSuccess;
}

orError_t or_job_identity(int *rank, uint64_t *job_id)
{
    if (!or_init_finished() && or_cluster_identity_alone(rank, job_id))
        return orSuccess;
    or_job_view view;
    orError_t err = or_job(&view);
    if (err != orSuccess)
        return err;
    *rank = view.rank;
    *job_id = view.job_id;
    return orSuccess;
}

void or_stream_fail(orStream_t stream, orError_t err)
{
    or_stream *s;
    if (or_stream_resolve(stream, &s) != orSuccess)
        return;
    int none = orSuccess;
    atomic_compare_exchange_strong(&s->async_error, &none, (int)err);
}

orError_t or_stream_ref_of(orStream_t stream, or_stream_ref *ref)
{
    OR_API_BEGIN();
    or_stream *s;
    orError_t err = or_stream_resolve(stream, &s);
    if (err == orSuccess)
        *ref = (or_stream_ref){s, s->dev->id};
    return err;
}

bool or_on_worker_thread(void) { return or_in_worker(); }

bool or_vclock_virtual(void) { return or_init() == orSuccess && or_vt_on; }

uint64_t or_stream_vclock(orStream_t stream)
{
    or_stream *s;
    if (!or_vclock_virtual() || or_stream_resolve(stream, &s) != orSuccess)
        return 0;
    return or_vclock_stream(s);
}

orError_t or_stream_advance_vclock(orStream_t stream, uint64_t start_ns, uint64_t cost_ns,
                                   uint64_t *end_ns)
{
    OR_API_BEGIN();
    or_stream *s;
    orError_t err = or_stream_resolve(stream, &s);
    if (err != orSuccess)
        return err;
    uint64_t end = or_vt_on ? or_vclock_advance(s, start_ns, cost_ns) : 0;
    if (end_ns)
        *end_ns = end;
    return orSuccess;
}

bool or_trace_enabled(void) { return or_init() == orSuccess && or_recording(); }

uint64_t or_trace_now(void) { return or_now_ns(); }

void or_trace_stream_slice(orStream_t stream, const char *name, const char *category,
                           uint64_t start_ns, uint64_t end_ns, const char *args_json)
{
    or_stream *s;
    if (!or_trace_enabled() || or_stream_resolve(stream, &s) != orSuccess)
        return;
    if (or_trace_on)
        or_trace_slice(s->dev->global_id, s->trace_tid, name, category, start_ns, end_ns,
                       args_json);
    or_activity_slice(s->dev->id, s->trace_tid, name, category, start_ns, end_ns, args_json);
}

static orError_t launch_held(orStream_t stream, void (*fn)(void *),
                             void (*start)(void *, or_op *), void *data, uint64_t *entry_ns)
{
    OR_API_BEGIN();
    if (!fn && !start)
        return orErrorInvalidValue;
    or_stream *s;
    orError_t err = or_stream_resolve(stream, &s);
    if (err != orSuccess)
        return err;
    or_op *op = or_op_new(OR_OP_HOST_FUNC, 0);
    if (!op)
        return orErrorMemoryAllocation;
    op->u.host.fn = fn;
    op->u.host.start = start;
    op->u.host.data = data;
    op->u.host.held = true;
    op->u.host.entry_out = entry_ns;
    if (entry_ns)
        *entry_ns = 0;
    or_stream_enqueue(s, op);
    return orSuccess;
}

orError_t or_launch_host_func_held(orStream_t stream, void (*fn)(void *), void *data,
                                   uint64_t *entry_ns)
{
    return launch_held(stream, fn, NULL, data, entry_ns);
}

orError_t or_launch_handed_task_held(orStream_t stream,
                                     void (*start)(void *data, or_handed_task task), void *data,
                                     uint64_t *entry_ns)
{
    return launch_held(stream, NULL, start, data, entry_ns);
}

void or_handed_task_begin(or_handed_task task) { or_stream_op_begin(task); }

void or_handed_task_done(or_handed_task task) { or_stream_op_done(task); }

bool or_inline_task_begin(orStream_t stream, or_inline_task *task)
{
    or_stream *s;
    if (or_stream_resolve(stream, &s) != orSuccess)
        return false;
    task->stream = s;
    return or_stream_inline_begin(s, &task->seq);
}

bool or_inline_task_begin_ref(const or_stream_ref *ref, or_inline_task *task)
{
    task->stream = ref->stream;
    return or_stream_inline_begin(ref->stream, &task->seq);
}

void or_inline_task_end(or_inline_task *task) { or_stream_inline_end(task->stream, task->seq); }

or_handed_task or_inline_task_hand(or_inline_task *task)
{
    return or_stream_inline_hand(task->stream, task->seq);
}

int or_bind_thread_to_device(int device)
{
    if (or_init() != orSuccess || device < 0 || device >= or_rt.ndevices)
        return -1;
    or_device *dev = &or_rt.devices[device];
    return or_placement_bind_thread(&dev->hw.place, dev->hw.bind, -1);
}

void or_stream_release_vclock(orStream_t stream, uint64_t end_ns)
{
    or_stream *s;
    if (!or_vt_on || or_stream_resolve(stream, &s) != orSuccess)
        return;
    or_vclock_release(s, end_ns);
}

int or_global_device(int world_rank, int device)
{
    if (or_init() != orSuccess || world_rank < 0 || world_rank >= or_cl.nranks)
        return -1;
    return or_cl.first_device[world_rank] + device;
}

orError_t or_device_memory_bps(int device, uint64_t *bytes_per_s)
{
    OR_API_BEGIN();
    if (device < 0 || device >= or_rt.ndevices)
        return orErrorInvalidDevice;
    *bytes_per_s = (uint64_t)llround(or_rt.devices[device].prop.memoryBandwidthGBs * 1e9);
    return orSuccess;
}
