/* src/log.c - one line per message on stderr, prefixed with pid and subsystem. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

or_log_level or_log_threshold = OR_LOG_WARN;

static const char *const level_names[] = {"NONE", "WARN", "INFO", "TRACE"};

void or_log_set_level(or_log_level level) { or_log_threshold = level; }

void or_log_write(or_log_level level, const char *subsys, const char *fmt, ...)
{
    char line[1024];
    int n = snprintf(line, sizeof line, "openreg[%d] %s %s: ", (int)getpid(),
                     level_names[level], subsys);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < sizeof line)
        vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    /* One fprintf per line keeps lines of concurrent threads whole. */
    fprintf(stderr, "%s\n", line);
}
