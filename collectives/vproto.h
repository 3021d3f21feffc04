/*
 * collectives/vproto.h - NCCL's three protocols (LL, LL128, Simple) in the
 * virtual-time model: what each costs per collective, per hop and per byte
 * (docs/virtual-time.md#protocols), and OCCL_PROTO, which restricts them
 * with NCCL_PROTO's syntax.
 *
 * Protocols change only what a collective is charged in virtual time: the
 * data OCCL moves, and how it moves it, are the same whatever the protocol
 * (an 8-byte flag per 8 bytes of data, LL's trick to skip a fence, buys
 * nothing on the host). Pure functions, no state but OCCL_PROTO's parse.
 */
#ifndef OCCL_VPROTO_H
#define OCCL_VPROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { OCCL_PROTO_LL, OCCL_PROTO_LL128, OCCL_PROTO_SIMPLE, OCCL_NUM_PROTOS } occl_proto;

#define OCCL_PROTO_ALL ((1u << OCCL_NUM_PROTOS) - 1)

/* "LL", "LL128", "Simple" (NCCL's spelling); "?" out of range. */
const char *occl_proto_name(occl_proto p);

/* The link classes of NCCL's hwLat table: a path's type (or_vpath.type)
 * NVL/NVB is NVLink, NET the network, anything else PCI. */
typedef enum { OCCL_HW_NVLINK, OCCL_HW_PCI, OCCL_HW_NET } occl_hw;
occl_hw occl_proto_hw(const char *path_type);

/* The algorithm families of NCCL's tables that OCCL's algorithms take their
 * constants from (vproto.c says which is which). */
typedef enum { OCCL_PFAM_RING, OCCL_PFAM_TREE, OCCL_PFAM_NVLS } occl_pfam;

/* Whether NCCL runs family f with protocol p (NVLS: Simple only). */
bool occl_proto_supported(occl_pfam f, occl_proto p);

/* Base latency of one collective, ns (NCCL's baseLat). */
uint64_t occl_proto_base_ns(occl_pfam f, occl_proto p);

/* Latency a hop of class hw adds to its path's own, ns (NCCL's hwLat). */
uint64_t occl_proto_hop_ns(occl_pfam f, occl_proto p, occl_hw hw);

/* Bytes the links carry for `bytes` of data of a transfer of family f on
 * nranks ranks: LL sends 8 bytes of flags per 8 of data (x2), LL128 8 per
 * 120 (x128/120), Simple none; on NVLink every protocol also pays NCCL's
 * ~20 % protocol overhead (25 -> 20 GB/s a link). NVLS on a switch that
 * reduces (sharp): the switch reduces and multicasts, so a GPU moves S each way where OCCL's nvls schedule
 * carries the ring's 2(n-1)/n S: its transfers count n / (2(n-1)) of their
 * bytes, at NCCL's NVLS efficiency (0.85 on Hopper). Rounded up, so 1 byte
 * is never free. */
uint64_t occl_proto_wire_bytes(occl_pfam f, occl_proto p, occl_hw hw, int nranks, bool sharp,
                               uint64_t bytes);

/* Whether an NVLink path of path_bps bytes/s a direction reduces in the
 * switch (NVLink SHARP, NVSwitch 3 and later: 18 NVLink4 links, 450 GB/s,
 * and up). NCCL rates NVLS at 0 on Ampere (nvlsEfficiency), so an A100-class
 * path carries nvls's transfers as they are: sharp is false there. */
#define OCCL_NVLS_SHARP_BPS 450000000000ull
bool occl_proto_sharp(occl_hw hw, uint64_t path_bps);

/* NCCL's NVLS all-reduce on one node as its kernel runs it: nvlsChannels
 * channels (16 on Hopper: NCCL_NVLS_NCHANNELS, NVLS_NCHANNELS_SM90), each
 * rank a head (the NVLS graph has one channel per GPU, so nHeads = the
 * node's ranks). The data goes in loops of channels x heads x chunk bytes;
 * channel c takes bytes [c x heads x chunk, (c+1) x heads x chunk) of each
 * loop, one chunk per head, so a call smaller than a loop runs on its first
 * channels only. chunk is 128 KiB, cut to 64 KiB below 64 x channels x
 * heads x 128 KiB bytes, to 32 KiB below 8 x ... x 64 KiB, to 16 KiB below
 * 2 x ... x 32 KiB (src/enqueue.cc, NCCL_ALGO_NVLS's chunkSize). Each
 * channel runs three groups of warps, scatter to the heads, the head's
 * reduction and multicast through the switch, gather, as a pipeline over
 * its loops (src/device/all_reduce.h): OCCL_NVLS_STAGES. */
#define OCCL_NVLS_CHANNELS 16
#define OCCL_NVLS_STAGES 3

typedef struct occl_nvls_loops {
    uint64_t chunk;  /* bytes of a head's part of a channel's loop */
    uint64_t loop;   /* bytes of one loop: channels x heads x chunk */
    uint64_t nloops; /* loops of the call, the last possibly partial */
} occl_nvls_loops;

/* The loops of an NVLS all-reduce of `bytes` over nheads heads (>= 1). */
occl_nvls_loops occl_nvls_shape(uint64_t bytes, int nheads);

/* The bytes the first channel, the busiest, moves in loop l (< nloops) of
 * an all-reduce of `bytes` shaped as s: heads x chunk, or what is left. */
uint64_t occl_nvls_channel_bytes(const occl_nvls_loops *s, int nheads, uint64_t bytes, uint64_t l);

/* Parses an OCCL_PROTO value (NCCL_PROTO's syntax: "LL,Simple", "^LL128",
 * per collective "LL;allreduce:^LL", names in any case) into mask[c] for
 * each collective c of ncoll, whose names are coll_names[c]. 0, or -1 with
 * the reason in why (an unknown protocol or collective, an entry after the
 * first without a collective, a list that leaves a collective no protocol). */
int occl_proto_parse(const char *value, const char *const *coll_names, int ncoll, unsigned *mask,
                     char *why, size_t why_size);

#endif
