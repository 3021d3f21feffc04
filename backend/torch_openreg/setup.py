"""Builds torch_openreg: the openreg devices as PyTorch's PrivateUse1 device.

    python -m pip install --no-build-isolation -e backend/torch_openreg
    python -m pip install --no-build-isolation backend/torch_openreg

build against the torch of the running interpreter and the project's
libraries found with pkg-config (openreg, occl): an installed prefix, or the
build tree (configure writes openreg-uninstalled.pc and occl-uninstalled.pc
there; put that directory on PKG_CONFIG_PATH). The Autotools build runs
this same file (`setup.py build_ext`), so there is one recipe.
"""
import glob
import os
import shlex
import subprocess
import sys

from setuptools import setup

# Building imports torch, which would autoload an installed torch_openreg (or
# the half-built one beside this file): the build must not load itself.
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"

HERE = os.path.dirname(os.path.abspath(__file__))
PKG_CONFIG_MODULES = ["occl", "openreg"]


def pkg_config(*args):
    cmd = [os.environ.get("PKG_CONFIG", "pkg-config"), *args, *PKG_CONFIG_MODULES]
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    except FileNotFoundError:
        sys.exit("torch_openreg: pkg-config is not installed (Debian: apt-get install pkg-config)")
    except subprocess.CalledProcessError as e:
        sys.exit(
            "torch_openreg: pkg-config cannot find %s: %s\n"
            "Build the project first (scripts/setup.sh), then point PKG_CONFIG_PATH at its "
            "build directory (or at PREFIX/lib/pkgconfig after 'make install')."
            % (" and ".join(PKG_CONFIG_MODULES), e.stderr.strip()))
    return shlex.split(out)


def extension():
    # Imported here so that `setup.py --help` works without torch.
    from torch.utils.cpp_extension import CppExtension

    cflags, libs = pkg_config("--cflags"), pkg_config("--libs")
    libdirs = [f[2:] for f in libs if f.startswith("-L")]
    sources = sorted(glob.glob("csrc/**/*.cpp", recursive=True))
    return CppExtension(
        "torch_openreg._C",
        sources,
        include_dirs=[os.path.join(HERE, "csrc")] + [f[2:] for f in cflags if f.startswith("-I")],
        library_dirs=libdirs,
        libraries=[f[2:] for f in libs if f.startswith("-l")],
        # The libraries' own directory, so that the module loads without
        # LD_LIBRARY_PATH from a build tree or a prefix outside ld.so.conf.
        runtime_library_dirs=libdirs,
        extra_compile_args=["-fvisibility=hidden", "-Wall", "-Wextra", "-Wno-unused-parameter"]
        + [f for f in cflags if not f.startswith("-I")],
        depends=sorted(glob.glob("csrc/**/*.h", recursive=True)),
    )


def main():
    from torch.utils.cpp_extension import BuildExtension

    setup(
        ext_modules=[extension()],
        cmdclass={"build_ext": BuildExtension.with_options(no_python_abi_suffix=True)},
    )


os.chdir(HERE)
main()
