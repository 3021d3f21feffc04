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

# PyTorch: the torch_openreg extension (backend/) builds when a Python with
# torch is found. --with-torch=PYTHON names the interpreter, --without-torch
# skips the extension; the default probes /usr/bin/python3 quietly. Under
# --enable-sanitizers the default is off: an ASan-built Python extension only
# loads into an interpreter started with libasan preloaded.
AC_DEFUN([OR_CHECK_TORCH], [
  AC_ARG_WITH([torch],
    [AS_HELP_STRING([--with-torch@<:@=PYTHON@:>@],
      [build the torch_openreg PyTorch extension with PYTHON (default: /usr/bin/python3 when it has torch)])],
    [], [with_torch=auto])
  have_torch=no
  AS_CASE([$with_torch],
    [no], [],
    [yes], [TORCH_PYTHON=/usr/bin/python3],
    [auto], [AS_IF([test "x$enable_sanitizers" = xyes],
               [AC_MSG_NOTICE([sanitizer build: torch_openreg not built (use --with-torch to force it)])
                with_torch=no],
               [TORCH_PYTHON=/usr/bin/python3])],
    [TORCH_PYTHON=$with_torch])
  AS_IF([test "x$with_torch" != xno], [
    AC_MSG_CHECKING([for torch in $TORCH_PYTHON])
    or_torch_probe='
import shlex, sysconfig, torch, torch.utils.cpp_extension as ext
incs = @<:@sysconfig.get_paths()@<:@"include"@:>@@:>@ + ext.include_paths()
print("TORCH_VERSION=%s" % torch.__version__)
print("TORCH_INCLUDES=%s" % shlex.quote(" ".join("-isystem " + p for p in incs)))
print("TORCH_LIBDIR=%s" % shlex.quote(ext.library_paths()@<:@0@:>@))
print("TORCH_CXX11_ABI=%d" % int(torch._C._GLIBCXX_USE_CXX11_ABI))
base = "@S|@{prefix}"
print("or_torch_pydir=%s" % shlex.quote(sysconfig.get_path("platlib", "posix_prefix", vars=dict(base=base, platbase=base))))
'
    AS_IF([or_torch_vars=`"$TORCH_PYTHON" -c "$or_torch_probe" 2>/dev/null`],
      [eval "$or_torch_vars"
       have_torch=yes
       AC_MSG_RESULT([$TORCH_VERSION])],
      [AC_MSG_RESULT([no])
       AS_IF([test "x$with_torch" != xauto],
         [AC_MSG_ERROR([--with-torch: '$TORCH_PYTHON' cannot import torch (Debian: apt-get install python3-torch libtorch-dev)])])])
  ])
  AS_IF([test "x$have_torch" = xyes], [
    TORCH_CPPFLAGS="$TORCH_INCLUDES -DTORCH_API_INCLUDE_EXTENSION_H -DTORCH_EXTENSION_NAME=_C -D_GLIBCXX_USE_CXX11_ABI=$TORCH_CXX11_ABI"
    TORCH_LIBS="-L$TORCH_LIBDIR -ltorch_python -ltorch -ltorch_cpu -lc10"
    AS_IF([test -z "$TORCH_PYEXECDIR"], [TORCH_PYEXECDIR=$or_torch_pydir])
    AC_LANG_PUSH([C++])
    or_save_CPPFLAGS=$CPPFLAGS
    CPPFLAGS="$CPPFLAGS $TORCH_CPPFLAGS"
    AC_CHECK_HEADER([c10/core/Device.h], [],
      [AC_MSG_ERROR([torch found in $TORCH_PYTHON but not its C++ headers (Debian: apt-get install libtorch-dev)])])
    CPPFLAGS=$or_save_CPPFLAGS
    AC_LANG_POP([C++])
  ])
  AC_SUBST([TORCH_PYTHON])
  AC_SUBST([TORCH_CPPFLAGS])
  AC_SUBST([TORCH_LIBS])
  AC_ARG_VAR([TORCH_PYEXECDIR], [where 'make install' puts the torch_openreg package])
  AM_CONDITIONAL([HAVE_TORCH], [test "x$have_torch" = xyes])
])
