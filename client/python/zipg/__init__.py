"""Python client of the ZipG-style graph store.

    import zipg
    with zipg.connect("127.0.0.1:9090", timeout=10.0) as g:
        g.obj_get(id=7)            # {"id": 7, "properties": {...}} or None
        g.assoc_range(id=7, type=0, pos=0, limit=10)

Every operation of the contract is a method of the same name and keyword arguments, returning
plain Python values shaped like the JSON results of `zipg query`; failures raise zipg.Error with
`.code` (one of zipg.CODES) and `.message`.
"""
# SPDX-License-Identifier: GPL-3.0-or-later

from zipg.client import CODES, MAX_REQUEST_BYTES, Error, Graph, connect

__all__ = ["CODES", "MAX_REQUEST_BYTES", "Error", "Graph", "connect"]
__version__ = "0.1.0"
