# Dependency checks, one macro per area.

# pthreads: glibc has them in libc; -pthread keeps other libcs honest.
AC_DEFUN([AX_PTHREAD_SIMPLE], [
  AC_CHECK_HEADER([pthread.h], [], [AC_MSG_ERROR([pthread.h is required])])
  PTHREAD_CFLAGS=-pthread
  PTHREAD_LIBS=-pthread
  AC_SUBST([PTHREAD_CFLAGS])
  AC_SUBST([PTHREAD_LIBS])
])

# hwloc places and binds devices; always required.
AC_DEFUN([OR_CHECK_HWLOC], [
  PKG_CHECK_MODULES([HWLOC], [hwloc >= 2.0], [],
    [AC_MSG_ERROR([hwloc >= 2.0 not found (Debian: apt-get install libhwloc-dev)])])
])

# libxml2 reads topology files (the XML parser hwloc itself uses).
AC_DEFUN([OR_CHECK_LIBXML2], [
  PKG_CHECK_MODULES([LIBXML2], [libxml-2.0 >= 2.9],  [],
    [AC_MSG_ERROR([libxml2 not found (Debian: apt-get install libxml2-dev)])])
])

# Criterion runs the unit tests; without it the library still builds but
# 'make check' refuses to run.
AC_DEFUN([OR_CHECK_CRITERION], [
  PKG_CHECK_MODULES([CRITERION], [criterion >= 2.3],
    [have_criterion=yes],
    [have_criterion=no
     AC_MSG_WARN([Criterion not found: 'make check' is disabled (Debian: apt-get install libcriterion-dev)])])
  AM_CONDITIONAL([HAVE_CRITERION], [test "x$have_criterion" = xyes])
])

# --enable-sanitizers builds everything with ASan + UBSan.
AC_DEFUN([OR_ENABLE_SANITIZERS], [
  AC_ARG_ENABLE([sanitizers],
    [AS_HELP_STRING([--enable-sanitizers], [build with AddressSanitizer and UndefinedBehaviorSanitizer])],
    [], [enable_sanitizers=no])
  SANITIZER_FLAGS=
  AS_IF([test "x$enable_sanitizers" = xyes],
    [SANITIZER_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"])
  AC_SUBST([SANITIZER_FLAGS])
  AM_CONDITIONAL([ENABLE_SANITIZERS], [test "x$enable_sanitizers" = xyes])
])
