/*
 * test_occl_config.c - occlConfig_t, occlCommInitRankConfig and
 * occlCommSplit's config in one process: a bad magic, size or field value
 * is refused with occlInvalidArgument and a reason; older and newer struct
 * versions are read as NCCL reads them; the communicator keeps the resolved
 * configuration (a split without one inherits its parent's); commName shows
 * in OCCL_DEBUG=INFO lines and in the reason of an asynchronous failure;
 * occlCommGrow within one process (a group) inherits or takes defaults.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "occl_internal.h"

#include "occl_checks.h"

static void setup(void) { cr_assert_eq(setenv("OCCL_TIMEOUT_MS", "10000", 1), 0); }

TestSuite(occl_config, .init = setup, .timeout = 60);

/* A communicator of one rank on device 0 with this config. */
static occlResult_t init_one(occlComm_t *c, occlConfig_t *config)
{
    occlUniqueId id;
    occlResult_t r = occlGetUniqueId(&id);
    if (r != occlSuccess)
        return r;
    orSetDevice(0);
    return occlCommInitRankConfig(c, 1, id, 0, config);
}

Test(occl_config, layout_matches_nccl)
{
    /* NCCL 2.31's ncclConfig_t on LP64: header, then the fields in order. */
    cr_assert_eq(offsetof(occlConfig_t, size), 0);
    cr_assert_eq(offsetof(occlConfig_t, magic), 8);
    cr_assert_eq(offsetof(occlConfig_t, version), 12);
    cr_assert_eq(offsetof(occlConfig_t, blocking), 16);
    cr_assert_eq(offsetof(occlConfig_t, netName), 32);
    cr_assert_eq(offsetof(occlConfig_t, commName), 48);
    cr_assert_eq(offsetof(occlConfig_t, graphStreamOrdering), 92);
    cr_assert_eq(sizeof(occlConfig_t), 96);
    occlConfig_t c = OCCL_CONFIG_INITIALIZER;
    cr_assert_eq(c.size, sizeof c);
    cr_assert_eq(c.magic, 0xcafebeef);
    cr_assert_eq(c.blocking, INT_MIN);
    cr_assert_null(c.commName);
    cr_assert_eq(c.graphStreamOrdering, INT_MIN);
    cr_assert_eq(OCCL_VERSION(2, 31, 0), 23100);
    cr_assert_eq(OCCL_VERSION(2, 8, 4), 2804);
    cr_assert_eq(OCCL_VERSION_CODE, OCCL_VERSION(OCCL_MAJOR, OCCL_MINOR, OCCL_PATCH));
    cr_assert_str_eq(OCCL_SUFFIX, "");
}

Test(occl_config, bad_header)
{
    occlComm_t c = NULL;
    occlConfig_t cfg = OCCL_CONFIG_INITIALIZER;
    cfg.magic = 0;
    EXPECT_BAD(init_one(&c, &cfg), "OCCL_CONFIG_INITIALIZER");
    cfg = (occlConfig_t)OCCL_CONFIG_INITIALIZER;
    cfg.size = 8;
    EXPECT_BAD(init_one(&c, &cfg), "too small");
    cfg.size = 0;
    EXPECT_BAD(init_one(&c, &cfg), "too small");
    cr_assert_null(c);
}

Test(occl_config, bad_fields)
{
    static const struct {
        size_t off;
        int value;
        const char *name;
    } bad[] = {
        {offsetof(occlConfig_t, blocking), 2, "blocking"},
        {offsetof(occlConfig_t, cgaClusterSize), -1, "cgaClusterSize"},
        {offsetof(occlConfig_t, minCTAs), 0, "minCTAs"},
        {offsetof(occlConfig_t, maxCTAs), -3, "maxCTAs"},
        {offsetof(occlConfig_t, splitShare), 5, "splitShare"},
        {offsetof(occlConfig_t, collnetEnable), 2, "collnetEnable"},
        {offsetof(occlConfig_t, CTAPolicy), 4, "CTAPolicy"},
        {offsetof(occlConfig_t, CTAPolicy), -1, "CTAPolicy"},
        {offsetof(occlConfig_t, shrinkShare), -1, "shrinkShare"},
        {offsetof(occlConfig_t, nvlsCTAs), 0, "nvlsCTAs"},
        {offsetof(occlConfig_t, nChannelsPerNetPeer), 65, "nChannelsPerNetPeer"},
        {offsetof(occlConfig_t, nvlinkCentricSched), 3, "nvlinkCentricSched"},
        {offsetof(occlConfig_t, graphUsageMode), 3, "graphUsageMode"},
        {offsetof(occlConfig_t, numRmaCtx), -1, "numRmaCtx"},
        {offsetof(occlConfig_t, maxP2pPeers), 0, "maxP2pPeers"},
        {offsetof(occlConfig_t, graphStreamOrdering), 2, "graphStreamOrdering"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        occlConfig_t cfg = OCCL_CONFIG_INITIALIZER;
        memcpy((char *)&cfg + bad[i].off, &bad[i].value, sizeof(int));
        occlComm_t c = NULL;
        EXPECT_BAD(init_one(&c, &cfg), bad[i].name);
        cr_assert_null(c);
    }
    occlConfig_t cfg = OCCL_CONFIG_INITIALIZER;
    cfg.minCTAs = 8;
    cfg.maxCTAs = 4;
    occlComm_t c = NULL;
    EXPECT_BAD(init_one(&c, &cfg), "minCTAs");
    cfg = (occlConfig_t)OCCL_CONFIG_INITIALIZER;
    cfg.netName = "IB";
    EXPECT_BAD(init_one(&c, &cfg), "netName");
    cfg = (occlConfig_t)OCCL_CONFIG_INITIALIZER;
    char longname[200];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    cfg.commName = longname;
    EXPECT_BAD(init_one(&c, &cfg), "commName");
    cr_assert_null(c);
}

Test(occl_config, resolved_values_kept)
{
    occlConfig_t cfg = OCCL_CONFIG_INITIALIZER;
    char name[] = "trainer";
    cfg.commName = name;
    cfg.netName = "mpi";
    cfg.blocking = 0;
    cfg.minCTAs = 2;
    cfg.maxCTAs = 16;
    cfg.CTAPolicy = OCCL_CTA_POLICY_EFFICIENCY | OCCL_CTA_POLICY_ZERO;
    occlComm_t c = NULL;
    cr_assert_eq(init_one(&c, &cfg), occlInProgress);
    occlResult_t async = occlInProgress;
    while (async == occlInProgress) {
        CHECK_OCCL(occlCommGetAsyncError(c, &async));
        usleep(1000);
    }
    cr_assert_eq(async, occlSuccess, "%s", occlGetLastError(c));
    name[0] = 'X'; /* the communicator has its own copy */
    cr_assert_str_eq(c->config.name, "trainer");
    cr_assert_eq(c->config.cfg.blocking, 0);
    cr_assert_eq(c->config.cfg.minCTAs, 2);
    cr_assert_eq(c->config.cfg.maxCTAs, 16);
    cr_assert_eq(c->config.cfg.CTAPolicy, 3);
    cr_assert_eq(c->config.cfg.splitShare, 0); /* defaults filled in */
    cr_assert_eq(c->config.cfg.cgaClusterSize, 4);
    CHECK_OCCL(occlCommDestroy(c));
    /* NULL config: NCCL's defaults, blocking. */
    CHECK_OCCL(init_one(&c, NULL));
    cr_assert_eq(c->config.cfg.blocking, 1);
    cr_assert_str_eq(c->config.name, "");
    CHECK_OCCL(occlCommDestroy(c));
}

Test(occl_config, older_and_newer_versions)
{
    /* A 2.26 config: CTAPolicy (added in 2.27) holds garbage and is ignored. */
    occlConfig_t cfg = OCCL_CONFIG_INITIALIZER;
    cfg.version = 22600;
    cfg.CTAPolicy = 99;
    cfg.blocking = 1;
    occlComm_t c = NULL;
    CHECK_OCCL(init_one(&c, &cfg));
    cr_assert_eq(c->config.cfg.CTAPolicy, OCCL_CTA_POLICY_DEFAULT);
    cr_assert_eq(c->config.cfg.blocking, 1);
    CHECK_OCCL(occlCommDestroy(c));
    /* A 2.14-sized config: only blocking; what follows is not read. */
    cfg = (occlConfig_t)OCCL_CONFIG_INITIALIZER;
    cfg.size = offsetof(occlConfig_t, cgaClusterSize);
    cfg.version = 21400;
    cfg.cgaClusterSize = -7;
    CHECK_OCCL(init_one(&c, &cfg));
    cr_assert_eq(c->config.cfg.cgaClusterSize, 4);
    CHECK_OCCL(occlCommDestroy(c));
    /* A newer, larger struct: the known fields are read. */
    struct {
        occlConfig_t known;
        int later[4];
    } big = {OCCL_CONFIG_INITIALIZER, {1, 2, 3, 4}};
    big.known.size = sizeof big;
    big.known.version = 23500;
    big.known.minCTAs = 3;
    CHECK_OCCL(init_one(&c, &big.known));
    cr_assert_eq(c->config.cfg.minCTAs, 3);
    CHECK_OCCL(occlCommDestroy(c));
}

Test(occl_config, nonblocking_init_completes_through_async_error)
{
    occlConfig_t cfg = OCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    occlComm_t c = NULL;
    cr_assert_eq(init_one(&c, &cfg), occlInProgress);
    cr_assert_not_null(c);
    occlResult_t async = occlInProgress;
    for (int i = 0; async == occlInProgress; i++) {
        CHECK_OCCL(occlCommGetAsyncError(c, &async));
        cr_assert_lt(i, 10000, "the init never ended");
        usleep(1000);
    }
    cr_assert_eq(async, occlSuccess);
    /* An ordinary communicator now: a collective runs on it. */
    float *buf, one = 1, got = 0;
    orStream_t s;
    cr_assert_eq(orMalloc((void **)&buf, sizeof(float)), orSuccess);
    cr_assert_eq(orStreamCreate(&s), orSuccess);
    cr_assert_eq(orMemcpy(buf, &one, sizeof one, orMemcpyHostToDevice), orSuccess);
    CHECK_OCCL(occlAllReduce(buf, buf, 1, occlFloat32, occlSum, c, s));
    cr_assert_eq(orStreamSynchronize(s), orSuccess);
    cr_assert_eq(orMemcpy(&got, buf, sizeof got, orMemcpyDeviceToHost), orSuccess);
    cr_assert_eq(got, 1.0f);
    CHECK_OCCL(occlCommFinalize(c));
    CHECK_OCCL(occlCommDestroy(c));
    orStreamDestroy(s);
    orFree(buf);
}

Test(occl_config, nonblocking_init_failure_reported_async)
{
    /* Two ranks but only one in this process and no MPI: the bootstrap
     * fails on the init's thread; the handle reports it, then is destroyed. */
    occlConfig_t cfg = OCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    cfg.commName = "half";
    occlUniqueId id;
    CHECK_OCCL(occlGetUniqueId(&id));
    occlComm_t c = NULL;
    cr_assert_eq(occlCommInitRankConfig(&c, 2, id, 0, &cfg), occlInProgress);
    occlResult_t async = occlInProgress;
    while (async == occlInProgress) {
        CHECK_OCCL(occlCommGetAsyncError(c, &async));
        usleep(1000);
    }
    cr_assert_eq(async, occlInvalidUsage);
    cr_assert(strstr(occlGetLastError(c), "needs an MPI job"), "%s", occlGetLastError(c));
    /* Not a communicator to run on; destroying it frees the handle. */
    float *buf;
    cr_assert_eq(orMalloc((void **)&buf, sizeof(float)), orSuccess);
    cr_assert_eq(occlAllReduce(buf, buf, 1, occlFloat32, occlSum, c, NULL), occlInvalidArgument);
    CHECK_OCCL(occlCommDestroy(c));
    cr_assert_eq(occlCommDestroy(c), occlInvalidArgument); /* gone */
    /* Argument errors are returned at once, as for a blocking init. */
    cr_assert_eq(occlCommInitRankConfig(&c, 2, id, 5, &cfg), occlInvalidArgument);
    orFree(buf);
}

Test(occl_config, comm_name_in_info_lines, .init = cr_redirect_stderr)
{
    cr_assert_eq(setenv("OCCL_DEBUG", "INFO", 1), 0);
    occlConfig_t cfg = OCCL_CONFIG_INITIALIZER;
    cfg.commName = "pipeline-stage-3";
    occlComm_t c = NULL;
    CHECK_OCCL(init_one(&c, &cfg));
    CHECK_OCCL(occlCommDestroy(c));
    fflush(stderr);
    FILE *f = cr_get_redirected_stderr();
    char line[1024];
    int found = 0;
    while (fgets(line, sizeof line, f))
        found |= strstr(line, "'pipeline-stage-3' rank 0/1") != NULL;
    cr_assert(found, "no INFO line names the communicator");
}

/* Two ranks in this process; the split runs on both at once, one thread each. */
typedef struct split_arg {
    occlComm_t parent, child;
    occlConfig_t *config;
    occlResult_t res;
    int dev;
    char why[256];
} split_arg;

static void *split_thread(void *p)
{
    split_arg *a = p;
    orSetDevice(a->dev);
    /* A color each: children of one rank (without MPI, a communicator's
     * ranks in one process are made together, which a split's are not). */
    a->res = occlCommSplit(a->parent, a->dev, 0, &a->child, a->config);
    if (a->res != occlSuccess)
        snprintf(a->why, sizeof a->why, "%s", occlGetLastError(NULL));
    return NULL;
}

static void split_both(occlComm_t parents[2], occlConfig_t *config, occlComm_t children[2])
{
    split_arg a[2];
    pthread_t t[2];
    for (int d = 0; d < 2; d++) {
        a[d] = (split_arg){parents[d], NULL, config, occlInternalError, d, ""};
        cr_assert_eq(pthread_create(&t[d], NULL, split_thread, &a[d]), 0);
    }
    for (int d = 0; d < 2; d++) {
        pthread_join(t[d], NULL);
        cr_assert_eq(a[d].res, occlSuccess, "split on device %d: %s", d, a[d].why);
        children[d] = a[d].child;
    }
}

static void init_two(occlComm_t c[2], occlConfig_t *config)
{
    occlUniqueId id;
    CHECK_OCCL(occlGetUniqueId(&id));
    CHECK_OCCL(occlGroupStart());
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orSetDevice(d), orSuccess);
        CHECK_OCCL(occlCommInitRankConfig(&c[d], 2, id, d, config));
    }
    CHECK_OCCL(occlGroupEnd());
}

Test(occl_config, split_honours_or_inherits_config)
{
    occlConfig_t cfg = OCCL_CONFIG_INITIALIZER;
    cfg.commName = "parent";
    cfg.maxCTAs = 8;
    occlComm_t parents[2], inherit[2], own[2];
    init_two(parents, &cfg);
    split_both(parents, NULL, inherit);
    occlConfig_t child_cfg = OCCL_CONFIG_INITIALIZER;
    child_cfg.commName = "child";
    child_cfg.splitShare = 1;
    split_both(parents, &child_cfg, own);
    for (int d = 0; d < 2; d++) {
        cr_assert_str_eq(inherit[d]->config.name, "parent");
        cr_assert_eq(inherit[d]->config.cfg.maxCTAs, 8);
        cr_assert_str_eq(own[d]->config.name, "child");
        cr_assert_eq(own[d]->config.cfg.splitShare, 1);
        cr_assert_eq(own[d]->config.cfg.maxCTAs, 64); /* not inherited when a config is given */
    }
    /* A bad config is refused before the split's exchange. */
    occlConfig_t bad = OCCL_CONFIG_INITIALIZER;
    bad.splitShare = 7;
    occlComm_t none = NULL;
    EXPECT_BAD(occlCommSplit(parents[0], 0, 0, &none, &bad), "splitShare");
    cr_assert_null(none);
    for (int d = 0; d < 2; d++) {
        CHECK_OCCL(occlCommDestroy(inherit[d]));
        CHECK_OCCL(occlCommDestroy(own[d]));
        CHECK_OCCL(occlCommDestroy(parents[d]));
    }
}

Test(occl_config, comm_name_in_async_error)
{
    cr_assert_eq(setenv("OCCL_TIMEOUT_MS", "300", 1), 0);
    occlConfig_t cfg = OCCL_CONFIG_INITIALIZER;
    cfg.commName = "lonely";
    occlComm_t c[2];
    init_two(c, &cfg);
    /* Only rank 0 calls: it times out waiting for rank 1. */
    float *buf;
    orStream_t s;
    cr_assert_eq(orSetDevice(0), orSuccess);
    cr_assert_eq(orMalloc((void **)&buf, 16 * sizeof(float)), orSuccess);
    cr_assert_eq(orStreamCreate(&s), orSuccess);
    CHECK_OCCL(occlAllReduce(buf, buf, 16, occlFloat32, occlSum, c[0], s));
    orStreamSynchronize(s);
    occlResult_t async = occlSuccess;
    CHECK_OCCL(occlCommGetAsyncError(c[0], &async));
    cr_assert_eq(async, occlTimeout);
    cr_assert(strstr(occlGetLastError(c[0]), "comm 'lonely': "), "reason: %s", occlGetLastError(c[0]));
    occlCommAbort(c[0]);
    occlCommAbort(c[1]);
    orStreamDestroy(s);
    orFree(buf);
}

Test(occl_config, init_rank_scalable)
{
    occlUniqueId ids[2];
    CHECK_OCCL(occlGetUniqueId(&ids[0]));
    CHECK_OCCL(occlGetUniqueId(&ids[1]));
    occlComm_t c[2] = {NULL, NULL};
    EXPECT_BAD(occlCommInitRankScalable(&c[0], 2, 0, 0, ids, NULL), "nId 0");
    EXPECT_BAD(occlCommInitRankScalable(&c[0], 2, 0, 3, ids, NULL), "nId 3");
    EXPECT_BAD(occlCommInitRankScalable(&c[0], 2, 0, 1, NULL, NULL), "commIds is NULL");
    occlUniqueId junk[2] = {ids[0]};
    memset(&junk[1], 0x5a, sizeof junk[1]);
    EXPECT_BAD(occlCommInitRankScalable(&c[0], 2, 0, 2, junk, NULL), "commIds[1]");
    occlConfig_t bad = OCCL_CONFIG_INITIALIZER;
    bad.magic = 0;
    EXPECT_BAD(occlCommInitRankScalable(&c[0], 2, 0, 2, ids, &bad), "OCCL_CONFIG_INITIALIZER");
    /* Both ranks, two ids, a name: the communicator works. */
    occlConfig_t cfg = OCCL_CONFIG_INITIALIZER;
    cfg.commName = "scalable";
    CHECK_OCCL(occlGroupStart());
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orSetDevice(d), orSuccess);
        CHECK_OCCL(occlCommInitRankScalable(&c[d], 2, d, 2, ids, &cfg));
    }
    CHECK_OCCL(occlGroupEnd());
    for (int d = 0; d < 2; d++) {
        int n = 0;
        CHECK_OCCL(occlCommCount(c[d], &n));
        cr_assert_eq(n, 2);
        cr_assert_str_eq(c[d]->config.name, "scalable");
        CHECK_OCCL(occlCommDestroy(c[d]));
    }
}

Test(occl_config, shrink_checks_and_inherits)
{
    occlConfig_t cfg = OCCL_CONFIG_INITIALIZER;
    cfg.commName = "before";
    occlComm_t parents[2];
    init_two(parents, &cfg);
    occlComm_t child = NULL;
    int one = 1, self = 0, far = 2, twice[2] = {1, 1};
    EXPECT_BAD(occlCommShrink(parents[0], &one, 1, &child, NULL, 2), "shrinkFlags 2");
    EXPECT_BAD(occlCommShrink(parents[0], NULL, 1, &child, NULL, OCCL_SHRINK_DEFAULT), "list is NULL");
    EXPECT_BAD(occlCommShrink(parents[0], &one, -1, &child, NULL, OCCL_SHRINK_DEFAULT),
               "excludeRanksCount -1");
    EXPECT_BAD(occlCommShrink(parents[0], twice, 2, &child, NULL, OCCL_SHRINK_DEFAULT),
               "excludeRanksCount 2");
    EXPECT_BAD(occlCommShrink(parents[0], &far, 1, &child, NULL, OCCL_SHRINK_DEFAULT),
               "excludeRanksList[0] = 2");
    EXPECT_BAD(occlCommShrink(parents[0], &self, 1, &child, NULL, OCCL_SHRINK_DEFAULT),
               "excludeRanksList[0] = 0");
    occlConfig_t bad = OCCL_CONFIG_INITIALIZER;
    bad.shrinkShare = 3;
    EXPECT_BAD(occlCommShrink(parents[0], &one, 1, &child, &bad, OCCL_SHRINK_DEFAULT), "shrinkShare");
    cr_assert_null(child);
    /* Rank 1 excluded: rank 0 alone makes the child, inheriting the config. */
    cr_assert_eq(orSetDevice(0), orSuccess);
    CHECK_OCCL(occlCommShrink(parents[0], &one, 1, &child, NULL, OCCL_SHRINK_DEFAULT));
    int n = 0, rank = -1;
    CHECK_OCCL(occlCommCount(child, &n));
    CHECK_OCCL(occlCommUserRank(child, &rank));
    cr_assert_eq(n, 1);
    cr_assert_eq(rank, 0);
    cr_assert_str_eq(child->config.name, "before");
    CHECK_OCCL(occlCommDestroy(child));
    /* With a config of its own, after stopping the parent's calls. */
    occlConfig_t own = OCCL_CONFIG_INITIALIZER;
    own.commName = "after";
    CHECK_OCCL(occlCommShrink(parents[0], &one, 1, &child, &own, OCCL_SHRINK_ABORT));
    cr_assert_str_eq(child->config.name, "after");
    occlResult_t async = occlSuccess;
    CHECK_OCCL(occlCommGetAsyncError(parents[0], &async));
    cr_assert_eq(async, occlRemoteError, "the parent is stopped by OCCL_SHRINK_ABORT");
    CHECK_OCCL(occlCommDestroy(child));
    for (int d = 0; d < 2; d++)
        CHECK_OCCL(occlCommDestroy(parents[d]));
}

/* occlCommGrow with every rank in this process (a group): the existing rank
 * inherits its parent's config, the new one gets the defaults, and the
 * grown communicator reduces across both devices. */
Test(occl_config, grow_in_one_process)
{
    occlConfig_t cfg = OCCL_CONFIG_INITIALIZER;
    cfg.commName = "parent";
    occlComm_t parent, grown[2];
    CHECK_OCCL(init_one(&parent, &cfg));
    occlUniqueId id;
    CHECK_OCCL(occlCommGetUniqueId(parent, &id));
    CHECK_OCCL(occlGroupStart());
    cr_assert_eq(orSetDevice(0), orSuccess);
    CHECK_OCCL(occlCommGrow(parent, 2, &id, -1, &grown[0], NULL));
    cr_assert_eq(orSetDevice(1), orSuccess);
    CHECK_OCCL(occlCommGrow(NULL, 2, &id, 1, &grown[1], NULL));
    CHECK_OCCL(occlGroupEnd());
    float *buf[2];
    orStream_t s[2];
    for (int d = 0; d < 2; d++) {
        int n = 0, rank = -1;
        CHECK_OCCL(occlCommCount(grown[d], &n));
        CHECK_OCCL(occlCommUserRank(grown[d], &rank));
        cr_assert_eq(n, 2);
        cr_assert_eq(rank, d);
        cr_assert_eq(orSetDevice(d), orSuccess);
        cr_assert_eq(orStreamCreate(&s[d]), orSuccess);
        cr_assert_eq(orMalloc((void **)&buf[d], 64 * sizeof(float)), orSuccess);
        float host[64];
        for (int i = 0; i < 64; i++)
            host[i] = (float)(d * 100 + i);
        cr_assert_eq(orMemcpy(buf[d], host, sizeof host, orMemcpyHostToDevice), orSuccess);
    }
    cr_assert_str_eq(grown[0]->config.name, "parent");
    cr_assert_str_eq(grown[1]->config.name, "");
    CHECK_OCCL(occlGroupStart());
    for (int d = 0; d < 2; d++)
        CHECK_OCCL(occlAllReduce(buf[d], buf[d], 64, occlFloat, occlSum, grown[d], s[d]));
    CHECK_OCCL(occlGroupEnd());
    for (int d = 0; d < 2; d++) {
        cr_assert_eq(orSetDevice(d), orSuccess);
        cr_assert_eq(orStreamSynchronize(s[d]), orSuccess);
        float host[64];
        cr_assert_eq(orMemcpy(host, buf[d], sizeof host, orMemcpyDeviceToHost), orSuccess);
        for (int i = 0; i < 64; i++)
            cr_assert_eq(host[i], (float)(100 + 2 * i));
        orFree(buf[d]);
        orStreamDestroy(s[d]);
        CHECK_OCCL(occlCommDestroy(grown[d]));
    }
    /* The id was used up; the parent still works alone. */
    occlComm_t again = NULL;
    EXPECT_BAD(occlCommGrow(parent, 2, &id, -1, &again, NULL), "used by an earlier grow");
    cr_assert_null(again);
    CHECK_OCCL(occlCommDestroy(parent));
}
