/*
 * collectives/group.h - occlGroupStart/End: calls made in between are kept
 * per thread and launched together when the outermost group ends.
 */
#ifndef OCCL_GROUP_H
#define OCCL_GROUP_H

#include "occl.h"

int occl_group_depth(void);
/* Keep a communicator init (an opaque record of comm.c) for occlGroupEnd. */
occlResult_t occl_group_add_init(const void *init, size_t size);
/* A call of the current group failed: occlGroupEnd launches nothing and
 * returns res. Outside a group it just returns res. */
occlResult_t occl_group_fail(occlResult_t res);
/* Run the kept inits together (comm.c). */
occlResult_t occl_group_run_inits(void *inits, int n);

#endif
