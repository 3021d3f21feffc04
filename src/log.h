/* src/log.h - OPENREG_DEBUG logging. The library never printf()s otherwise. */
#ifndef OR_LOG_H
#define OR_LOG_H

typedef enum { OR_LOG_NONE = 0, OR_LOG_WARN, OR_LOG_INFO, OR_LOG_TRACE } or_log_level;

extern or_log_level or_log_threshold;
void or_log_set_level(or_log_level level);
void or_log_write(or_log_level level, const char *subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define OR_LOG(level, subsys, ...)                                   \
    do {                                                             \
        if ((level) <= or_log_threshold)                             \
            or_log_write((level), (subsys), __VA_ARGS__);            \
    } while (0)
#define OR_WARN(subsys, ...) OR_LOG(OR_LOG_WARN, subsys, __VA_ARGS__)
#define OR_INFO(subsys, ...) OR_LOG(OR_LOG_INFO, subsys, __VA_ARGS__)
#define OR_TRACE(subsys, ...) OR_LOG(OR_LOG_TRACE, subsys, __VA_ARGS__)

#endif
