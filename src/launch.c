/* src/launch.c - kernel launches and host functions. */
#include "internal.h"

#include <math.h>
#include <string.h>

static bool dims_valid(orDim3 d, const unsigned max[3])
{
    return d.x && d.y && d.z && d.x <= max[0] && d.y <= max[1] && d.z <= max[2];
}

static bool cost_valid(const orLaunchCost *c)
{
    return !c || (isfinite(c->flops) && isfinite(c->bytes) && c->flops >= 0 && c->bytes >= 0);
}

static orError_t launch(orKernel_t kernel, orDim3 grid, orDim3 block, const void *args,
                        size_t argsSize, size_t sharedMem, orStream_t stream,
                        const orLaunchCost *cost, const char *name)
{
    static const unsigned max_grid[3] = {2147483647u, 65535u, 65535u};
    static const unsigned max_block[3] = {1024u, 1024u, 64u};
    if (!kernel || !dims_valid(grid, max_grid) || !dims_valid(block, max_block) ||
        (uint64_t)block.x * block.y * block.z > OR_MAX_BLOCK_THREADS ||
        sharedMem > OR_MAX_SHARED_MEM || (!args && argsSize) || argsSize > OR_MAX_KERNEL_ARGS ||
        !cost_valid(cost))
        return orErrorInvalidValue;
    or_stream *s;
    orError_t err = or_stream_resolve(stream, &s);
    if (err != orSuccess)
        return err;
    /* Memory of another node is only reachable by copies; a kernel that
     * dereferenced it would fault on a worker thread. */
    if (or_ipc_args_name_remote(args, argsSize)) {
        OR_WARN("launch", "kernel arguments hold a pointer to another node's memory (opened with "
                          "orIpcOpenMemHandle): copy it to local memory first");
        return orErrorNotSupported;
    }
    /* The name is kept (after the arguments) for fault reports. */
    size_t name_len = name ? strlen(name) + 1 : 0;
    or_op *op = or_op_new(OR_OP_KERNEL, argsSize + name_len);
    if (!op)
        return orErrorMemoryAllocation;
    if (name)
        op->u.kernel.label = memcpy(op->payload + argsSize, name, name_len);
    op->u.kernel.fn = kernel;
    op->u.kernel.grid = grid;
    op->u.kernel.block = block;
    op->u.kernel.shared_mem = sharedMem;
    op->u.kernel.nblocks = (uint64_t)grid.x * grid.y * grid.z;
    /* Arguments are copied now: the caller may reuse its struct at once. */
    op->u.kernel.args = argsSize ? memcpy(op->payload, args, argsSize) : NULL;
    if (cost) {
        op->cost.declared = true;
        op->cost.kernel_flops = cost->flops;
        op->cost.kernel_bytes = cost->bytes;
    }
    op->u.kernel.name = name && or_recording() ? or_trace_intern(name) : NULL;
    or_stream_enqueue(s, op);
    return orSuccess;
}

orError_t orLaunchKernel(orKernel_t kernel, orDim3 grid, orDim3 block, const void *args,
                         size_t argsSize, size_t sharedMem, orStream_t stream)
{
    OR_API_BEGIN();
    OR_RETURN(launch(kernel, grid, block, args, argsSize, sharedMem, stream, NULL, NULL));
}

orError_t orLaunchKernelEx(const orLaunchConfig *config, orKernel_t kernel, const void *args,
                           size_t argsSize)
{
    OR_API_BEGIN();
    if (!config)
        OR_RETURN(orErrorInvalidValue);
    OR_RETURN(launch(kernel, config->gridDim, config->blockDim, args, argsSize,
                     config->sharedMem, config->stream, config->cost, config->name));
}

orError_t orLaunchHostFunc(orStream_t stream, void (*fn)(void *userData), void *userData)
{
    OR_API_BEGIN();
    if (!fn)
        OR_RETURN(orErrorInvalidValue);
    or_stream *s;
    orError_t err = or_stream_resolve(stream, &s);
    if (err != orSuccess)
        OR_RETURN(err);
    or_op *op = or_op_new(OR_OP_HOST_FUNC, 0);
    if (!op)
        OR_RETURN(orErrorMemoryAllocation);
    op->u.host.fn = fn;
    op->u.host.data = userData;
    or_stream_enqueue(s, op);
    return orSuccess;
}
