/*
 * src/cluster.h - the MPI job seen as one cluster of devices.
 *
 * MPI starts on the first runtime call when the process was launched by an
 * MPI launcher (or is adopted when the application initialized it first); a
 * process started alone is a one-rank cluster that never touches MPI.
 * Ranks are grouped into virtual nodes: all ranks of a real host by default,
 * OPENREG_RANKS_PER_NODE consecutive ranks, or the nodes of OPENREG_TOPO. Within a virtual node device
 * memory is shared; across nodes everything moves through MPI.
 */
#ifndef OR_CLUSTER_H
#define OR_CLUSTER_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "openreg.h"

#define OR_SHM_NAME_MAX 64

typedef struct or_peer_arena {
    int rank; /* world rank of the owner */
    int device; /* the owner's device ordinal */
    unsigned char *base;
    size_t capacity;
} or_peer_arena;

typedef struct or_cluster {
    bool mpi;       /* MPI is in use */
    bool mpi_owned; /* the runtime initialized it, so it finalizes it */
    MPI_Comm comm;  /* duplicate of MPI_COMM_WORLD for the runtime's traffic */
    MPI_Comm coll_comm; /* another, for the collectives layer */
    MPI_Comm p2p_comm;  /* and one for its point-to-point calls */
    MPI_Comm ctl_comm;  /* and one for its notices of failed calls */
    MPI_Comm node_comm; /* the ranks of this virtual node */
    int rank, nranks;
    int host_rank, host_nranks; /* among the ranks of this real host */
    int node, nnodes;
    int node_rank, node_nranks;
    int *node_ranks; /* world rank of each node rank */
    int *rank_node;  /* virtual node of each world rank */
    int *first_device; /* first global device id of each rank, [nranks + 1] */
    uint64_t job_id;   /* random, the same on every rank */
    uint64_t job_key[2]; /* secret of the job: authenticates IPC handles */
    or_peer_arena *peers; /* arenas of the other ranks of this virtual node */
    int npeers;
    /* OPENREG_TOPO (else NULL): the topology, and the topology device of
     * every global device (topo_device[first_device[r] + d]); the virtual
     * nodes are the topology's nodes the job uses, in order. */
    struct or_topo *topo;
    int *topo_device;
    uint64_t timeout_ns; /* OPENREG_TIMEOUT_MS: longest wait for the other ranks */
    bool stalled; /* start-up timed out: a request is pending, MPI is not used again */
} or_cluster;

extern or_cluster or_cl;

/* Start (or adopt) MPI and work out ranks, hosts and nodes. ndevices is this
 * rank's device count. config_ok false (this rank's settings are bad) still
 * joins the other ranks, so that they all fail together instead of waiting.
 * Prints the reason and returns orErrorInitialization on failure. */
orError_t or_cluster_init(const or_config *cfg, int ndevices, bool config_ok);
/* Before start-up, without the other ranks: this process's world rank and
 * the job's identity, when it can know them alone (under an MPI the
 * application initialized at MPI_THREAD_MULTIPLE, on world rank 0, which
 * draws the identity every rank gets at start-up); false otherwise. */
bool or_cluster_identity_alone(int *rank, uint64_t *job_id);
/* Collective: true if every rank is ok, so that one rank's failure at
 * start-up fails all of them instead of leaving them waiting. */
bool or_cluster_agree(bool ok);
/* Map the arenas of the node's other ranks; shm_names[d] names device d's
 * segment (empty when the node has one rank). Unlinks the names once every
 * rank of the node has mapped them. */
orError_t or_cluster_map_peers(int ndevices, char (*shm_names)[OR_SHM_NAME_MAX],
                               const size_t *capacities);
/* The peer arena holding p, or NULL. */
const or_peer_arena *or_cluster_peer_of(const void *p);
/* Called when the application's MPI_Finalize is about to take MPI away. */
extern void (*or_cluster_before_finalize)(void);
/* Tear down: unmap peers, free communicators, finalize MPI if owned. */
void or_cluster_fini(void);
/* Only MPI's part of or_cluster_fini: its objects released, and MPI
 * finalized if the runtime started it. */
void or_cluster_finalize_mpi(void);

#endif
