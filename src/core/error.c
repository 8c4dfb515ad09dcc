/* Thread-local error state: the first error of a chain wins, so a chain of ops can be checked
 * once at its end. */
#include <stdio.h>
#include <string.h>

#include "core_impl.h"

#define EM_ERR_MSG_CAP 512

static EM_THREAD_LOCAL em_status err_code;
static EM_THREAD_LOCAL char err_msg[EM_ERR_MSG_CAP];
/* em_error calls on this thread, counting those that kept an earlier pending error. */
static EM_THREAD_LOCAL uint64_t err_count;
static EM_THREAD_LOCAL uint64_t err_recorded_at; /* err_count when the pending error came */

em_status em_error(em_status code, const char *fmt, ...)
{
    err_count++;
    if (err_code != EM_OK) return code;
    err_code = code;
    err_recorded_at = err_count;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_msg, sizeof err_msg, fmt, ap);
    va_end(ap);
    em_log_msg("core", EM_LOG_DEBUG, "error: %s", err_msg);
    return code;
}

uint64_t core_error_mark(void)
{
    return err_count;
}

bool core_failed_since(uint64_t mark)
{
    return err_count != mark && err_code != EM_OK;
}

void core_error_forget(uint64_t mark)
{
    if (err_code != EM_OK && err_recorded_at > mark) em_clear_error();
    err_count = mark;
}

uint64_t em_error_mark(void)
{
    return core_error_mark();
}

bool em_failed_since(uint64_t mark)
{
    return core_failed_since(mark);
}

void em_error_forget(uint64_t mark)
{
    core_error_forget(mark);
}

const char *em_last_error(void)
{
    return err_code == EM_OK ? "" : err_msg;
}

em_status em_last_status(void)
{
    return err_code;
}

bool em_failed(void)
{
    return err_code != EM_OK;
}

void em_clear_error(void)
{
    err_code = EM_OK;
    err_msg[0] = '\0';
}

const char *em_status_name(em_status code)
{
    switch (code) {
    case EM_OK: return "ok";
    case EM_ERR_INVALID_ARG: return "invalid argument";
    case EM_ERR_SHAPE: return "shape error";
    case EM_ERR_DTYPE: return "dtype error";
    case EM_ERR_INDEX: return "index out of range";
    case EM_ERR_OOM: return "out of memory";
    case EM_ERR_DEVICE: return "device error";
    case EM_ERR_UNSUPPORTED: return "unsupported";
    case EM_ERR_IO: return "i/o error";
    case EM_ERR_FORMAT: return "format error";
    case EM_ERR_STATE: return "invalid state";
    case EM_ERR_INTERNAL: return "internal error";
    }
    return "unknown error";
}

const char *em_version(void)
{
    return "0.1.0";
}
