/*
 * test_occl_param.c - NCCL 2.31's parameter API over OCCL's settings: every
 * OCCL_* key is listed and reads its default when unset and the
 * environment's value when set (typed and as text, NCCL's alias for the
 * plugins included); NCCL's errors: an unknown key, NULL arguments, a
 * handle not from occlParamBind, a typed read of another type, a buffer
 * too small, a value that is not of the key's type.
 */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "occl_checks.h"

static const char *const documented[] = {
    "OCCL_TIMEOUT_MS", "OCCL_ALGO", "OCCL_PROTO", "OCCL_CHECK_CALLS", "OCCL_TUNER_PLUGIN",
    "OCCL_PROFILER_PLUGIN", "OCCL_LL_MAX_BYTES", "OCCL_CALLER_WAIT_US", "OCCL_LL_NAP_US",
    "OCCL_DEBUG", "OCCL_DEBUG_SUBSYS", "OCCL_DEBUG_FILE"};
#define NDOC (int)(sizeof documented / sizeof documented[0])

static void unset_all(void)
{
    for (int i = 0; i < NDOC; i++)
        unsetenv(documented[i]);
    unsetenv("NCCL_TUNER_PLUGIN");
}

Test(occl_param, every_setting_listed)
{
    const char **keys;
    int n;
    CHECK_OCCL(occlParamGetAllParameterKeys(&keys, &n));
    cr_assert_eq(n, NDOC);
    for (int i = 0; i < NDOC; i++) {
        bool found = false;
        for (int j = 0; j < n; j++)
            found |= strcmp(keys[j], documented[i]) == 0;
        cr_assert(found, "%s not listed", documented[i]);
        occlParamHandle_t h;
        CHECK_OCCL(occlParamBind(&h, documented[i]));
    }
    EXPECT_BAD(occlParamGetAllParameterKeys(NULL, &n), "NULL");
    EXPECT_BAD(occlParamGetAllParameterKeys(&keys, NULL), "NULL");
}

Test(occl_param, defaults_then_environment)
{
    unset_all();
    occlParamHandle_t to, cc, ll, algo, dbg;
    CHECK_OCCL(occlParamBind(&to, "OCCL_TIMEOUT_MS"));
    CHECK_OCCL(occlParamBind(&cc, "OCCL_CHECK_CALLS"));
    CHECK_OCCL(occlParamBind(&ll, "OCCL_LL_MAX_BYTES"));
    CHECK_OCCL(occlParamBind(&algo, "OCCL_ALGO"));
    CHECK_OCCL(occlParamBind(&dbg, "OCCL_DEBUG"));
    int64_t i64;
    int32_t i32;
    uint64_t u64;
    const char *str;
    CHECK_OCCL(occlParamGetI64(to, &i64));
    cr_assert_eq(i64, 300000);
    CHECK_OCCL(occlParamGetI32(cc, &i32));
    cr_assert_eq(i32, 1);
    CHECK_OCCL(occlParamGetU64(ll, &u64));
    cr_assert_eq(u64, 4096);
    CHECK_OCCL(occlParamGetStr(algo, &str));
    cr_assert_str_eq(str, "");
    CHECK_OCCL(occlParamGetStr(dbg, &str));
    cr_assert_str_eq(str, "WARN");

    setenv("OCCL_TIMEOUT_MS", "1234", 1);
    setenv("OCCL_CHECK_CALLS", "0", 1);
    setenv("OCCL_LL_MAX_BYTES", "0", 1);
    setenv("OCCL_ALGO", "allreduce:tree", 1);
    CHECK_OCCL(occlParamGetI64(to, &i64));
    cr_assert_eq(i64, 1234);
    CHECK_OCCL(occlParamGetI32(cc, &i32));
    cr_assert_eq(i32, 0);
    CHECK_OCCL(occlParamGetU64(ll, &u64));
    cr_assert_eq(u64, 0);
    CHECK_OCCL(occlParamGetStr(algo, &str));
    cr_assert_str_eq(str, "allreduce:tree");

    /* By key, as text, whatever the type. */
    const char *v;
    int len;
    CHECK_OCCL(occlParamGetParameter("OCCL_TIMEOUT_MS", &v, &len));
    cr_assert_str_eq(v, "1234");
    cr_assert_eq(len, 4);
    CHECK_OCCL(occlParamGetParameter("OCCL_CALLER_WAIT_US", &v, &len));
    cr_assert_str_eq(v, "200");

    /* Raw bytes. */
    char buf[64];
    CHECK_OCCL(occlParamGet(to, buf, sizeof buf, &len));
    cr_assert_eq(len, 8);
    memcpy(&i64, buf, 8);
    cr_assert_eq(i64, 1234);
    CHECK_OCCL(occlParamGet(algo, buf, sizeof buf, &len));
    cr_assert_eq(len, (int)strlen("allreduce:tree") + 1);
    cr_assert_str_eq(buf, "allreduce:tree");
    EXPECT_BAD(occlParamGet(algo, buf, 4, &len), "needs 15 bytes");
    cr_assert_eq(len, 15);

    /* NCCL's name for the tuner plugin, when OCCL's is unset. */
    occlParamHandle_t tuner;
    CHECK_OCCL(occlParamBind(&tuner, "OCCL_TUNER_PLUGIN"));
    setenv("NCCL_TUNER_PLUGIN", "libmytuner.so", 1);
    CHECK_OCCL(occlParamGetStr(tuner, &str));
    cr_assert_str_eq(str, "libmytuner.so");
    unset_all();
}

Test(occl_param, errors)
{
    unset_all();
    occlParamHandle_t h, to;
    EXPECT_BAD(occlParamBind(&h, "NCCL_ALGO"), "no parameter 'NCCL_ALGO'");
    EXPECT_BAD(occlParamBind(&h, "OCCL_NO_SUCH"), "no parameter");
    EXPECT_BAD(occlParamBind(NULL, "OCCL_ALGO"), "NULL");
    EXPECT_BAD(occlParamBind(&h, NULL), "NULL");
    const char *v = "x";
    int len = 7;
    EXPECT_BAD(occlParamGetParameter("OCCL_NOPE", &v, &len), "no parameter 'OCCL_NOPE'");
    cr_assert(v == NULL && len == 0);
    EXPECT_BAD(occlParamGetParameter(NULL, &v, &len), "NULL");

    CHECK_OCCL(occlParamBind(&to, "OCCL_TIMEOUT_MS"));
    int64_t i64;
    int32_t i32;
    int8_t i8;
    int16_t i16;
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    const char *str;
    EXPECT_BAD(occlParamGetI32(to, &i32), "OCCL_TIMEOUT_MS is a int64 parameter, not a int32");
    EXPECT_BAD(occlParamGetU64(to, &u64), "not a uint64");
    EXPECT_BAD(occlParamGetStr(to, &str), "not a string");
    EXPECT_BAD(occlParamGetI8(to, &i8), "not a int8");
    EXPECT_BAD(occlParamGetI16(to, &i16), "not a int16");
    EXPECT_BAD(occlParamGetU8(to, &u8), "not a uint8");
    EXPECT_BAD(occlParamGetU16(to, &u16), "not a uint16");
    EXPECT_BAD(occlParamGetU32(to, &u32), "not a uint32");
    EXPECT_BAD(occlParamGetI64(to, NULL), "NULL");
    /* A handle occlParamBind did not give is refused, never read. */
    occlParamHandle_t bogus = (occlParamHandle_t)&i64;
    EXPECT_BAD(occlParamGetI64(bogus, &i64), "not a handle");
    EXPECT_BAD(occlParamGetI64(NULL, &i64), "not a handle");
    char buf[8];
    EXPECT_BAD(occlParamGet(bogus, buf, 8, &len), "not a handle");
    EXPECT_BAD(occlParamGet(to, buf, 4, &len), "needs 8 bytes");
    /* A value that is not of the key's type. */
    setenv("OCCL_TIMEOUT_MS", "5s", 1);
    EXPECT_BAD(occlParamGetI64(to, &i64), "OCCL_TIMEOUT_MS='5s' is not a int64");
    CHECK_OCCL(occlParamGetParameter("OCCL_TIMEOUT_MS", &v, &len));
    cr_assert_str_eq(v, "5s");
    unset_all();
}
