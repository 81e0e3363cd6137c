"""Starts py_harness.py from the byte code the scorer compiled (saves compiling it every run).

Usage: python3 -I py_run.py MAGIC job.marshal. MAGIC is the hex of the byte-code magic number of
the interpreter that compiled `py_harness.bin`; any other interpreter compiles `py_harness.py`.
"""

import marshal
import sys

_bootstrap = sys.modules.get("_frozen_importlib_external")
if getattr(_bootstrap, "MAGIC_NUMBER", b"").hex() == sys.argv[1]:
    with open("py_harness.bin", "rb") as f:
        code = marshal.load(f)
else:
    with open("py_harness.py", "rb") as f:
        code = compile(f.read(), "py_harness.py", "exec")
sys.argv = ["py_harness.py", *sys.argv[2:]]
exec(code, {"__name__": "__main__", "__builtins__": __builtins__})
