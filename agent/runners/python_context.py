# The Python code context of an Airlock session: a persistent interpreter
# the agent starts as `python3 -u -c <this>`. It speaks JSON lines: it
# reads cells {"code", "mark"} on fd 3 and answers on fd 4, first
# {"ready": true}, then one result per cell {"value", "error", "outputs",
# "dropped"}. The cell's own printing goes to fd 1 and 2 as it happens; at
# the end of each cell the mark is written to both, so the agent knows all
# of the cell's output has arrived before it sends the result.
#
# Like a notebook: the value of a final expression comes back as text;
# every matplotlib figure the cell made comes back as PNG (no savefig
# needed) and is closed; pandas DataFrames (and anything with
# _repr_html_) come back as text and HTML; display(obj) adds an output.
# SIGINT interrupts the running cell with KeyboardInterrupt and the
# context lives on.
import ast
import base64
import builtins
import io
import json
import linecache
import os
import signal
import sys
import traceback
import types
import warnings

MAX_OUTPUTS = 64
MAX_OUTPUT_BYTES = 8 << 20
MAX_VALUE = 1 << 20


def _airlock_context():
    ctl = os.fdopen(3, "rb", buffering=0)
    res = os.fdopen(4, "wb", buffering=0)
    os.environ.setdefault("MPLBACKEND", "Agg")
    # With the Agg backend plt.show() only warns; figures are shown at the
    # end of the cell instead.
    warnings.filterwarnings("ignore", message=".*non-GUI backend.*")
    warnings.filterwarnings("ignore", message=".*non-interactive.*")

    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    ns = main.__dict__
    sys.path[0] = ""
    sys.argv = [""]

    state = {"in_cell": False, "outputs": [], "dropped": 0}

    def on_sigint(signum, frame):
        if state["in_cell"]:
            raise KeyboardInterrupt
    signal.signal(signal.SIGINT, on_sigint)

    def add_output(typ, data):
        if len(state["outputs"]) >= MAX_OUTPUTS or len(data) > MAX_OUTPUT_BYTES:
            state["dropped"] += 1
            return
        state["outputs"].append({"type": typ, "data": data})

    def rich(obj):
        html = getattr(obj, "_repr_html_", None)
        if callable(html):
            try:
                h = html()
                if isinstance(h, str):
                    add_output("text/html", h)
            except Exception:
                pass
        png = getattr(obj, "_repr_png_", None)
        if callable(png):
            try:
                b = png()
                if isinstance(b, bytes):
                    add_output("image/png", base64.b64encode(b).decode("ascii"))
            except Exception:
                pass

    def display(*objs):
        for obj in objs:
            fig = _figure_png(obj)
            if fig is not None:
                add_output("image/png", fig)
                continue
            add_output("text/plain", _text(obj))
            rich(obj)
    builtins.display = display

    def send(msg):
        res.write(json.dumps(msg).encode("ascii") + b"\n")

    send({"ready": True})
    count = 0
    buf = b""
    while True:
        while b"\n" not in buf:
            try:
                chunk = ctl.read(1 << 20)
            except KeyboardInterrupt:
                continue
            if not chunk:
                return
            buf += chunk
        line, buf = buf.split(b"\n", 1)
        msg = json.loads(line)
        count += 1
        state["outputs"], state["dropped"] = [], 0
        value, error = _run(msg["code"], count, ns, state)
        if value is not None:
            try:
                ns["_"] = value
                text = _text(value)
                rich(value)
            except BaseException as e:
                text, error = None, _error(e)
        else:
            text = None
        try:
            _collect_figures(add_output)
        except BaseException as e:
            if error is None:
                error = _error(e)
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                stream.flush()
            except Exception:
                pass
        mark = msg["mark"].encode("ascii")
        for fd in (1, 2):
            try:
                os.write(fd, mark)
            except OSError:
                pass
        send({"value": text, "error": error, "outputs": state["outputs"], "dropped": state["dropped"]})


def _run(code, count, ns, state):
    name = "<cell %d>" % count
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    state["in_cell"] = True
    try:
        try:
            tree = ast.parse(code, filename=name, mode="exec")
        except SyntaxError as e:
            return None, _error(e, syntax=True)
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        try:
            if tree.body:
                exec(compile(tree, name, "exec"), ns)
            if last is not None:
                return eval(compile(last, name, "eval"), ns), None
            return None, None
        except BaseException as e:  # KeyboardInterrupt and SystemExit too
            return None, _error(e)
    finally:
        state["in_cell"] = False


def _error(e, syntax=False):
    tb = e.__traceback__
    if not syntax:
        # Start the traceback at the cell, leaving out this runner.
        while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell "):
            tb = tb.tb_next
    lines = traceback.format_exception(type(e), e, tb)
    value = str(e)
    return {"name": type(e).__name__, "value": value[:65536], "traceback": "".join(lines)[-65536:]}


def _text(obj):
    try:
        s = repr(obj)
    except BaseException as e:
        s = "<repr failed: %s: %s>" % (type(e).__name__, e)
    return s[:MAX_VALUE]


def _figure_png(obj):
    mpl_figure = sys.modules.get("matplotlib.figure")
    if mpl_figure is None or not isinstance(obj, mpl_figure.Figure):
        return None
    buf = io.BytesIO()
    obj.savefig(buf, format="png", bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _collect_figures(add_output):
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    try:
        for num in plt.get_fignums():
            png = _figure_png(plt.figure(num))
            if png is not None:
                add_output("image/png", png)
    finally:
        plt.close("all")


_airlock_context()
