"""Builds the `zipg` package; the Thrift code is generated here, not committed.

build_py runs `thrift --gen py` on the IDL (../../thrift/zipg.thrift relative to this file, or
$ZIPG_THRIFT_IDL) into a temporary directory and copies the generated package `zipg/rpc` into the
build as `zipg/rpc`. Thrift also emits `zipg/__init__.py` (and a top-level `__init__.py` and
`*-remote` scripts): those are dropped, so the hand-written `zipg/__init__.py` stays. An editable
install (`pip install -e`) writes `zipg/rpc` next to the sources instead (ignored by git).
The compiler is `thrift` on PATH, or $THRIFT.
"""
# SPDX-License-Identifier: GPL-3.0-or-later

import os
import shutil
import subprocess
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py as _build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def _idl_path():
    path = os.environ.get("ZIPG_THRIFT_IDL") or os.path.join(HERE, "..", "..", "thrift",
                                                             "zipg.thrift")
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise SystemExit("zipg: the Thrift IDL %s does not exist (build from the repository, "
                         "or set ZIPG_THRIFT_IDL)" % path)
    return path


def _thrift_compiler():
    compiler = os.environ.get("THRIFT") or shutil.which("thrift")
    if not compiler:
        raise SystemExit("zipg: the Thrift compiler `thrift` is not on PATH (install the "
                         "thrift-compiler package, or set THRIFT)")
    return compiler


def generate_rpc(dest):
    """Generates the Python Thrift code and copies the zipg/rpc modules into `dest`."""
    with tempfile.TemporaryDirectory(prefix="zipg-thrift-") as tmp:
        subprocess.run([_thrift_compiler(), "--gen", "py", "-out", tmp, _idl_path()], check=True)
        src = os.path.join(tmp, "zipg", "rpc")
        os.makedirs(dest, exist_ok=True)
        written = []
        for name in sorted(os.listdir(src)):
            if name.endswith(".py"):  # not the GraphService-remote scripts
                shutil.copyfile(os.path.join(src, name), os.path.join(dest, name))
                written.append(os.path.join(dest, name))
        if not written:
            raise SystemExit("zipg: thrift generated nothing in %s" % src)
        return written


class build_py(_build_py):
    def run(self):
        super().run()
        if self.dry_run:
            return
        if getattr(self, "editable_mode", False):
            dest = os.path.join(HERE, "zipg", "rpc")
        else:
            dest = os.path.join(self.build_lib, "zipg", "rpc")
        self._generated = generate_rpc(dest)

    def get_outputs(self, include_bytecode=True):
        outputs = list(super().get_outputs(include_bytecode))
        if getattr(self, "editable_mode", False):
            return outputs
        return outputs + [p for p in getattr(self, "_generated", []) if p not in outputs]


setup(cmdclass={"build_py": build_py})
