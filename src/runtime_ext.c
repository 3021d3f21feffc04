/* src/runtime_ext.c - the runtime's services for the collectives layer. */
#include "runtime_ext.h"

#include "internal.h"

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
    *view = (or_job_view){or_cl.mpi, or_cl.mpi ? or_cl.coll_comm : MPI_COMM_NULL, or_cl.rank,
                          or_cl.nranks, or_cl.node, or_cl.rank_node, or_cl.job_id};
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

orError_t or_stream_device(orStream_t stream, int *device)
{
    OR_API_BEGIN();
    or_stream *s;
    orError_t err = or_stream_resolve(stream, &s);
    if (err == orSuccess)
        *device = s->dev->id;
    return err;
}

bool or_on_worker_thread(void) { return or_in_worker(); }
