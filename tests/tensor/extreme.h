/* The extreme values and the outcome checks shared by the test_extreme*.c sweeps. */
#ifndef EMBER_TEST_EXTREME_H
#define EMBER_TEST_EXTREME_H

#include <limits.h>
#include <string.h>

#include "harness.h"

static const int64_t V64[] = {
    0,
    -1,
    1,
    2,
    INT64_MAX,
    INT64_MIN,
    INT64_MAX - 1,
    INT64_MIN + 1,
    (int64_t)1 << 31,
    (int64_t)1 << 32,
    ((int64_t)1 << 32) - 1,
    (int64_t)1 << 62,
    -((int64_t)1 << 62),
    INT32_MAX,
    INT32_MIN,
};
#define N64 ((int)(sizeof V64 / sizeof V64[0]))

static const int VINT[] = {0, -1, 1, 3, 4, 8, -9, INT_MAX, INT_MIN, 1 << 30, -(1 << 30)};
#define NINT ((int)(sizeof VINT / sizeof VINT[0]))

/* ---- checking ---------------------------------------------------------------------------- */

static bool ident_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* fn occurs in msg as a whole identifier ("em_add" is not found inside "em_add_scalar"). */
static bool names(const char *msg, const char *fn)
{
    size_t n = strlen(fn);
    for (const char *p = strstr(msg, fn); p; p = strstr(p + 1, fn))
        if ((p == msg || !ident_char(p[-1])) && !ident_char(p[n])) return true;
    return false;
}

/* What the current call was given, printed with a failure. */
static char args[256];
#define ARGS(...) snprintf(args, sizeof args, __VA_ARGS__)

/* A call returned; `ok` is its own success value. Success must leave no error pending; failure
 * must leave one whose message names fn. Clears the error. */
static bool outcome_(bool ok, const char *fn, const char *expr, int line)
{
    bool pending = em_failed();
    const char *msg = em_last_error();
    if (ok)
        h_check_(!pending, __FILE__, line, "%s [%s]: succeeded with an error pending: %s", expr,
                 args, msg);
    else
        h_check_(pending && names(msg, fn), __FILE__, line, "%s [%s]: failed with %s\"%s\"", expr,
                 args, pending ? "" : "no error recorded ", msg);
    em_clear_error();
    return ok;
}

/* A tensor-returning call: checked, then released. */
#define T(fn, e)                                                                                   \
    do {                                                                                           \
        em_tensor *r_ = (e);                                                                       \
        outcome_(r_ != NULL, fn, #e, __LINE__);                                                    \
        em_release(r_);                                                                            \
    } while (0)
/* A status-returning call. */
#define S(fn, e) outcome_((e) == EM_OK, fn, #e, __LINE__)
/* A call that must fail (naming fn). */
#define FAILS(fn, e)                                                                               \
    do {                                                                                           \
        em_tensor *r_ = (e);                                                                       \
        h_check_(r_ == NULL, __FILE__, __LINE__, "%s [%s]: expected a failure", #e, args);         \
        outcome_(r_ != NULL, fn, #e, __LINE__);                                                    \
        em_release(r_);                                                                            \
    } while (0)

#endif
