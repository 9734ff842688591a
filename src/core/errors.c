/* Status names and the per-thread message behind glt_last_error(). */
#include "core/core.h"

#include <stdio.h>

/* Thread-local so that two threads reading different captures never see each other's message. */
static _Thread_local char last_message[1024];

const char *glt_status_name(glt_status status) {
    switch (status) {
#define GLT_STATUS_NAME_(name, text) \
    case GLT_##name:                 \
        return "GLT_" #name;
        GLT_STATUS_MAP(GLT_STATUS_NAME_)
#undef GLT_STATUS_NAME_
    default:
        return "GLT_UNKNOWN_STATUS";
    }
}

const char *glt_status_description(glt_status status) {
    switch (status) {
#define GLT_STATUS_TEXT_(name, text) \
    case GLT_##name:                 \
        return text;
        GLT_STATUS_MAP(GLT_STATUS_TEXT_)
#undef GLT_STATUS_TEXT_
    default:
        return "unknown status";
    }
}

const char *glt_last_error(void) { return last_message; }

void glt_clear_error(void) { last_message[0] = '\0'; }

glt_status glt_fail(glt_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_message, sizeof last_message, fmt, ap);
    va_end(ap);
    return status;
}
