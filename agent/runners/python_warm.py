# The warm Python runtime of an Airlock sandbox. The agent starts it as
# `python3 -c <this> MODULE...`: it imports the modules, says "ready" on
# fd 3, and waits there for one JSON line {"path", "cwd"}. The sandbox is
# checkpointed while it waits and restored per request, so everything that
# clones of one snapshot would share is renewed before the code runs.
import json
import os
import sys


def _airlock_warm():
    for name in sys.argv[1:]:
        try:
            __import__(name)
        except Exception as e:  # a missing module only costs speed
            print("airlock: preload %s: %s" % (name, e), file=sys.stderr)
    if "matplotlib" in sys.modules:
        import matplotlib.pyplot  # noqa: F401  (the slow part of a chart)
    if os.environ.pop("AIRLOCK_WARM_TRIM", "") == "1":
        # Before a checkpoint: collect what the imports left behind and
        # give the freed heap back to the kernel, so the snapshot saves
        # (and every restore loads) fewer pages. A booted sandbox is not
        # checkpointed and skips this (5 to 15 ms of CPU per start here).
        import gc
        gc.collect()
        gc.freeze()  # later collections skip what was imported here
        try:
            import ctypes
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except Exception:
            pass
    ctl = os.fdopen(3, "r+b", buffering=0)
    ctl.write(b"ready\n")
    line = b""
    while not line.endswith(b"\n"):
        chunk = ctl.read(65536)
        if not chunk:
            os._exit(70)
        line += chunk
    ctl.close()
    msg = json.loads(line)
    path = msg["path"]

    # Restored clones share the interpreter's memory: reseed everything
    # that was seeded before the checkpoint from the kernel's entropy.
    import random
    random.seed()
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed()
    if "_ssl" in sys.modules:
        # OpenSSL keeps its own generator in process memory.
        import ssl
        ssl.RAND_add(os.urandom(64), 64.0)
    tempfile = sys.modules.get("tempfile")
    if tempfile is not None:
        tempfile._name_sequence = None

    os.chdir(msg["cwd"])
    sys.argv = [path]
    sys.path[0] = os.path.dirname(path)
    import runpy
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as e:
        _exit(e.code)
    except BaseException as e:
        # Show the traceback from the user's file on, as python3 FILE would.
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != path:
            tb = tb.tb_next
        if tb is not None:
            e = e.with_traceback(tb)
        sys.excepthook(type(e), e, e.__traceback__)
        _exit(1)
    _exit(0)


def _exit(code):
    # Tearing down an interpreter with numpy, pandas and matplotlib loaded
    # takes longer than most programs run. Do what an exit must (atexit
    # handlers, flushed streams, the exit status python3 would give) and
    # leave the rest to the kernel.
    import atexit
    atexit._run_exitfuncs()
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code & 0xFF
    else:
        print(code, file=sys.stderr)
        status = 1
    try:
        sys.stdout.flush()
    except Exception:
        pass
    try:
        sys.stderr.flush()
    except Exception:
        pass
    os._exit(status)


_airlock_warm()
