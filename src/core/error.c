/* Thread-local error state: the first error of a chain wins, so a chain of ops can be checked
 * once at its end. */
#include <stdio.h>
#include <string.h>

#include "core_impl.h"

#define EM_ERR_MSG_CAP 512

static EM_THREAD_LOCAL em_status err_code;
static EM_THREAD_LOCAL char err_msg[EM_ERR_MSG_CAP];

em_status em_error(em_status code, const char *fmt, ...)
{
    if (err_code != EM_OK) return code;
    err_code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_msg, sizeof err_msg, fmt, ap);
    va_end(ap);
    em_log_msg("core", EM_LOG_DEBUG, "error: %s", err_msg);
    return code;
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
