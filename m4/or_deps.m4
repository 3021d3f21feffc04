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

# --enable-sanitizers (=address) builds everything with ASan + UBSan;
# --enable-sanitizers=thread with ThreadSanitizer (the two cannot be mixed).
AC_DEFUN([OR_ENABLE_SANITIZERS], [
  AC_ARG_ENABLE([sanitizers],
    [AS_HELP_STRING([--enable-sanitizers@<:@=address|thread@:>@],
      [build with AddressSanitizer and UndefinedBehaviorSanitizer (yes, address), or with ThreadSanitizer (thread)])],
    [], [enable_sanitizers=no])
  SANITIZER_FLAGS=
  AS_CASE([$enable_sanitizers],
    [no], [],
    [yes|address], [enable_sanitizers=address
      SANITIZER_FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"],
    [thread], [SANITIZER_FLAGS="-fsanitize=thread -fno-omit-frame-pointer"],
    [AC_MSG_ERROR([--enable-sanitizers=$enable_sanitizers: expected address or thread (yes means address)])])
  AS_IF([test -n "$SANITIZER_FLAGS"], [
    AC_MSG_CHECKING([whether $CC links with $SANITIZER_FLAGS])
    or_save_CFLAGS=$CFLAGS
    or_save_LDFLAGS=$LDFLAGS
    CFLAGS="$CFLAGS $SANITIZER_FLAGS"
    LDFLAGS="$LDFLAGS $SANITIZER_FLAGS"
    AC_LINK_IFELSE([AC_LANG_PROGRAM([], [])], [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no])
       AC_MSG_ERROR([$CC cannot build with $SANITIZER_FLAGS (Debian: libasan, libubsan or libtsan of the compiler)])])
    CFLAGS=$or_save_CFLAGS
    LDFLAGS=$or_save_LDFLAGS])
  AC_SUBST([SANITIZER_FLAGS])
  AM_CONDITIONAL([ENABLE_SANITIZERS], [test "x$enable_sanitizers" != xno])
  AM_CONDITIONAL([ENABLE_TSAN], [test "x$enable_sanitizers" = xthread])
])

# Thread-local variables of the libraries (the current device, a thread's
# last error, the calls it checked) are read at every call: with TLS
# descriptors a read is a few instructions where the default dialect of a
# shared library calls __tls_get_addr each time (docs/occl-perf.md). Not
# with the sanitizers, whose runtimes find a thread's TLS their own way.
AC_DEFUN([OR_CHECK_TLS_DIALECT], [
  TLS_CFLAGS=
  AS_IF([test -z "$SANITIZER_FLAGS"], [
    AC_MSG_CHECKING([whether $CC takes -mtls-dialect=gnu2])
    or_save_CFLAGS=$CFLAGS
    CFLAGS="$CFLAGS -mtls-dialect=gnu2 -fPIC"
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[static _Thread_local int x;]], [[x++; return x - 1;]])],
      [AC_MSG_RESULT([yes]); TLS_CFLAGS=-mtls-dialect=gnu2], [AC_MSG_RESULT([no])])
    CFLAGS=$or_save_CFLAGS])
  AC_SUBST([TLS_CFLAGS])
])

# PyTorch: the torch_openreg extension (backend/) is part of the build unless
# --without-torch says otherwise; a Python that cannot build it stops
# configure with the reason (never a quiet skip). --with-torch=PYTHON names
# the interpreter; the default is $PYTHON, else the venv scripts/setup.sh
# makes (.venv/bin/python of the source tree), else python3. Under
# --enable-sanitizers the default is off: an ASan-built Python extension only
# loads into an interpreter started with libasan preloaded.
AC_DEFUN([OR_CHECK_TORCH], [
  AC_ARG_WITH([torch],
    [AS_HELP_STRING([--with-torch@<:@=PYTHON@:>@],
      [build the torch_openreg PyTorch extension with PYTHON (default: yes, with $PYTHON, SRCDIR/.venv/bin/python or python3)])],
    [], [with_torch=default])
  have_torch=no
  or_default_python() {
    if test -n "$PYTHON"; then echo "$PYTHON"
    elif test -x "$srcdir/.venv/bin/python"; then (cd "$srcdir" && echo "`pwd`/.venv/bin/python")
    else echo python3; fi
  }
  AS_CASE([$with_torch],
    [no], [],
    [yes], [TORCH_PYTHON=`or_default_python`],
    [default], [AS_IF([test "x$enable_sanitizers" != xno],
                 [AC_MSG_NOTICE([sanitizer build: torch_openreg is not built (--with-torch builds it)])
                  with_torch=no],
                 [TORCH_PYTHON=`or_default_python`])],
    [TORCH_PYTHON=$with_torch])
  AS_IF([test "x$with_torch" != xno], [
    AC_MSG_CHECKING([for torch and its C++ extension builder in $TORCH_PYTHON])
    or_torch_probe='
import sys
try:
    import torch
except Exception as e:
    sys.exit("cannot import torch (%s)" % e)
try:
    import torch.utils.cpp_extension
except Exception as e:
    sys.exit("torch %s cannot build extensions: torch.utils.cpp_extension fails to import (%s)" % (torch.__version__, e))
v = tuple(int(p) for p in torch.__version__.split("+")@<:@0@:>@.split(".")@<:@:2@:>@)
if v < (2, 13):
    sys.exit("torch %s is too old: torch_openreg needs torch >= 2.13" % torch.__version__)
print(torch.__version__)
'
    # (Autoload off: the probe asks about torch, not about a torch_openreg
    # already installed in that Python, whose build may be out of date.)
    AS_IF([or_torch_out=`TORCH_DEVICE_BACKEND_AUTOLOAD=0 "$TORCH_PYTHON" -c "$or_torch_probe" 2>&1`],
      [have_torch=yes
       AC_MSG_RESULT([torch $or_torch_out])],
      [AC_MSG_RESULT([no])
       AC_MSG_ERROR([torch_openreg cannot be built with '$TORCH_PYTHON': $or_torch_out.
Run scripts/setup.sh (it makes the venv .venv with torch==2.13.0 and what building needs),
give --with-torch=PYTHON for a Python that has them, or --without-torch to build without PyTorch.])])
  ])
  AC_SUBST([TORCH_PYTHON])
  AM_CONDITIONAL([HAVE_TORCH], [test "x$have_torch" = xyes])
])

# MPICH, explicitly: Debian's mpicc and mpiexec are alternatives that
# installing Open MPI (for the baselines) switches to Open MPI. The build
# uses MPICH's compiler wrapper (checked by its mpi.h), the tests and orrun
# MPICH's Hydra mpiexec (MPIEXEC, checked by its --version). Open MPI's
# mpicc.openmpi and mpirun.openmpi, if present, build and run the Open MPI
# baseline of the benchmarks (OMPI_CC, OMPI_RUN).
AC_DEFUN([OR_CHECK_MPICH], [
  AC_ARG_VAR([MPIEXEC], [MPICH's mpiexec (Hydra), for the tests and orrun (default: mpiexec.mpich)])
  AS_IF([test -z "$MPIEXEC"], [AC_PATH_PROGS([MPIEXEC], [mpiexec.mpich mpiexec.hydra mpiexec])])
  AS_IF([test -z "$MPIEXEC"],
        [AC_MSG_ERROR([MPICH's mpiexec is not found: install Debian's mpich (scripts/setup.sh does)])])
  AC_MSG_CHECKING([whether $MPIEXEC is MPICH's Hydra])
  AS_IF([$MPIEXEC --version 2>&1 | grep -q HYDRA],
        [AC_MSG_RESULT([yes])],
        [AC_MSG_RESULT([no])
         AC_MSG_ERROR([$MPIEXEC is not MPICH's mpiexec (Hydra): set MPIEXEC=/usr/bin/mpiexec.mpich])])
  AC_MSG_CHECKING([whether $CC compiles against MPICH])
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>
#ifndef MPICH_VERSION
#error the compiler's mpi.h is not MPICH's
#endif]], [[return MPI_Init(0, 0);]])],
        [AC_MSG_RESULT([yes])],
        [AC_MSG_RESULT([no])
         AC_MSG_ERROR([$CC does not compile against MPICH's mpi.h (Open MPI's mpicc?): set CC=mpicc.mpich])])
  AC_PATH_PROGS([OMPI_CC], [mpicc.openmpi])
  AC_PATH_PROGS([OMPI_RUN], [mpirun.openmpi])
  AM_CONDITIONAL([HAVE_OPENMPI], [test -n "$OMPI_CC" && test -n "$OMPI_RUN"])
])
