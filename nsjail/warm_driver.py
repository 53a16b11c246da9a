# The warm interpreter's driver (nsjail/init_warm_linux.go), and the runner of
# every Python payload (python3 SCRIPT or -c CODE). It runs as
# `python3 -c <this file> MODULE...` inside a confined sandbox, as the
# payload's own process: it imports the preload modules, says so on fd 3,
# waits there for the payload's argv and environment, and then runs the
# payload as __main__ the way `python3 /workspace/NAME` or `python3 -c CODE`
# would. An uncaught exception is printed as the interpreter prints it,
# and reported to the init (the Result's error) on a unix socket it
# connects to only then, at the abstract address the handoff named: the
# payload runs with fds 0-2 alone. When the handoff gives the figures a
# budget (the profile's capture_figures), plt.show() and the figures left
# open at the end become PNGs in that report. Stdlib only, and only modules the interpreter has loaded at start,
# so that sys.modules holds nothing of the driver's. Shipped inside sbx
# (go:embed) and passed in argv, never read from the workspace.
def _sbx_error(e, tb, filename, lines):
    """Name, value and frames of e, NUL-separated."""
    import linecache

    def line(file, n):
        if file == filename and lines is not None:
            return lines[n - 1] if 0 < n <= len(lines) else ""
        return linecache.getline(file, n)

    frames = []
    while tb is not None:
        c = tb.tb_frame.f_code
        frames.append((c.co_filename, tb.tb_lineno, c.co_name))
        tb = tb.tb_next
    if not frames and isinstance(e, SyntaxError) and e.filename:
        frames.append((e.filename, e.lineno or 0, "<module>"))
    try:
        value = str(e)
    except BaseException:
        value = "<str() failed>"
    out = [type(e).__name__[:200], value[:4000]]
    for file, n, fn in frames[-64:]:
        out += [file[:1000], str(n), fn[:200], line(file, n).strip()[:1000]]
    return "\0".join(s.replace("\0", " ") for s in out).encode("utf-8", "replace")


def _sbx_report(rep, e, tb, filename, lines, figs=None, error=_sbx_error):
    """Writes what the payload left to the report socket as records of
    kind (1 byte), length (4, big-endian) and body: "e", the name, value
    and frames (file, line, function, code) of what killed it,
    NUL-separated; "f", one figure's PNG; "t", figures were left out
    (their cap); "z", the end: a report without it was cut."""
    out = []
    if e is not None:
        out.append((b"e", error(e, tb, filename, lines)[:60000]))
    if figs is not None:
        out += [(b"f", png) for png in figs[0]]
        if figs[1]:
            out.append((b"t", b""))
    out.append((b"z", b""))
    if not rep:
        return
    data = b"".join(k + len(b).to_bytes(4, "big") + b for k, b in out)
    import _socket

    # The init reads it as it comes (a figure can be larger than a
    # socket's buffer), and takes it once the payload is gone.
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect("\0" + rep)
    s.sendall(data)
    s.close()


def _sbx_figures(figs, sys=__import__("sys")):
    """Renders every open matplotlib figure as a PNG into figs (a list of
    PNGs and whether one was left out), within its byte budget and
    count, and closes them: what a notebook shows of a script, and what
    a session's cell gives (session_driver.py). Only when the payload
    imported pyplot: the runner imports nothing of its own."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    import io

    for num in plt.get_fignums():
        if len(figs[0]) >= figs[3]:
            figs[1] = True
            break
        try:
            buf = io.BytesIO()
            plt.figure(num).savefig(buf, format="png")
        except Exception:
            continue
        png = buf.getvalue()
        if len(png) > figs[2]:
            figs[1] = True
            continue
        figs[2] -= len(png)
        figs[0].append(png)
    plt.close("all")


def _sbx_hook_show(figs, sys=__import__("sys"), grab=_sbx_figures):
    """Makes plt.show() render the open figures (Agg, sbx's MPLBACKEND,
    shows nothing): at once if pyplot is loaded (a warm preload), else
    when the payload imports it, through a finder in sys.meta_path that
    removes itself (importlib's find_spec protocol, PEP 451)."""

    def patch(plt):
        plt.show = lambda *a, **k: grab(figs)

    if "matplotlib.pyplot" in sys.modules:
        patch(sys.modules["matplotlib.pyplot"])
        return

    class ShowFinder:
        def find_spec(self, name, path=None, target=None):
            if name != "matplotlib.pyplot":
                return None
            sys.meta_path.remove(self)
            for f in sys.meta_path:
                spec = f.find_spec(name, path, target) if hasattr(f, "find_spec") else None
                if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    run = spec.loader.exec_module

                    def exec_module(module):
                        run(module)
                        patch(module)

                    spec.loader.exec_module = exec_module
                    return spec
            return None

    sys.meta_path.insert(0, ShowFinder())


def _sbx_left(rep, e, tb, filename, lines, figs, report=_sbx_report, grab=_sbx_figures):
    """Reports the error e (or None) and the figures still open; nothing
    of it may fail the payload's own exit."""
    try:
        if figs is not None:
            grab(figs)
    except BaseException:
        pass
    try:
        report(rep, e, tb, filename, lines, figs)
    except BaseException:
        pass


# left and hook are bound here: the payload's globals, which are this module's,
# are emptied before it runs.
def _sbx_warm(os=__import__("os"), sys=__import__("sys"), left=_sbx_left, hook=_sbx_hook_show):
    me = sys._getframe().f_code
    preload = sys.argv[1:]
    if "--" in preload:
        # A cold payload's own argv follows, only for /proc/PID/cmdline
        # (ps, and what a host's tools match on): it comes on fd 3.
        del preload[preload.index("--") :]
    # Nothing is imported from the (still empty) workspace while preloading.
    head = sys.path.pop(0)
    try:
        for name in preload:
            __import__(name)
    except BaseException as e:
        os.write(3, ("error preload %s: %s: %s\n" % (name, type(e).__name__, e)).encode("utf-8", "replace")[:4000])
        os._exit(1)
    sys.path.insert(0, head)
    if preload:
        # What the preload made lives until the end: out of the
        # collector's way (gc.freeze, the pre-fork servers' tool), it
        # costs neither the payload's collections nor the interpreter's
        # exit, which walks every tracked object (pandas: 200-300 ms).
        had_gc = "gc" in sys.modules
        __import__("gc").freeze()
        if not had_gc:
            del sys.modules["gc"]
    # fds 0-2 only: a preload that keeps a file open fails the warm start
    # (fail closed) rather than hand it to the payload.
    extra = []
    for fd in os.listdir("/proc/self/fd"):
        fd = int(fd)
        if fd > 3:
            try:
                target = os.readlink("/proc/self/fd/%d" % fd)
            except OSError:
                continue  # the listing's own fd, closed by now
            extra.append("%d -> %s" % (fd, target))
    if extra:
        os.write(3, ("error the preload left fds open: %s\n" % ", ".join(extra)).encode("utf-8", "replace")[:4000])
        os._exit(1)
    os.write(3, b"ready\n")
    chunks = []
    while True:
        b = os.read(3, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(3)
    # The report's address, the figures' budget (bytes; 0: not asked
    # for), argc, argv..., env... separated by NUL (neither may contain one).
    parts = b"".join(chunks).split(b"\0")
    rep = os.fsdecode(parts.pop(0))
    budget = int(parts.pop(0))
    # [PNGs, one left out, bytes left, most figures]
    figs = [[], False, budget, 64] if budget > 0 else None
    n = int(parts[0])
    argv = [os.fsdecode(a) for a in parts[1 : 1 + n]]
    env = parts[1 + n :]
    if env == [b""]:
        env = []
    os.environ.clear()
    for kv in env:
        k, _, v = kv.partition(b"=")
        os.environ[os.fsdecode(k)] = os.fsdecode(v)
    sys.orig_argv[:] = argv
    ext = sys.modules["_frozen_importlib_external"]
    g = sys.modules["__main__"].__dict__
    builtins = g["__builtins__"]
    g.clear()
    g.update(__name__="__main__", __doc__=None, __package__=None, __spec__=None, __annotations__={}, __builtins__=builtins)
    if argv[1] == "-c":
        sys.argv[:] = ["-c"] + argv[3:]
        g["__loader__"] = sys.modules["_frozen_importlib"].BuiltinImporter
        filename, source = "<string>", argv[2]
        lines = source.splitlines()
    else:
        sys.argv[:] = argv[1:]
        # CPython makes the script's path absolute (3.9+), joined to the
        # cwd but not normalised: __file__, tracebacks and the loader say
        # /workspace/NAME.
        path = argv[1] if argv[1].startswith("/") else os.getcwd() + "/" + argv[1]
        sys.path[0] = os.path.dirname(os.path.realpath(path))
        g["__loader__"] = ext.SourceFileLoader("__main__", path)
        g["__file__"], g["__cached__"] = path, None
        filename, lines = path, None
        try:
            with open(path, "rb") as f:
                source = f.read()
        except OSError as e:
            sys.stderr.write("%s: can't open file %r: [Errno %d] %s\n" % (argv[0], path, e.errno, e.strerror))
            raise SystemExit(2)
    del chunks, parts, env, preload, extra
    if figs is not None:
        hook(figs)
    try:
        code = compile(source, filename, "exec", dont_inherit=True)
        del source
        exec(code, g)
    except SystemExit:
        if figs is not None:
            left(rep, None, None, filename, lines, figs)
        raise
    except BaseException as e:
        # Print it as the interpreter would, without this frame (a
        # SyntaxError from compile has none of the payload's).
        tb = e.__traceback__
        if tb is not None and tb.tb_frame.f_code is me:
            tb = tb.tb_next
        e.__traceback__ = tb
        sys.last_type, sys.last_value, sys.last_traceback = type(e), e, tb
        sys.excepthook(type(e), e, tb)
        left(rep, e, tb, filename, lines, figs)
        del tb
        if isinstance(e, KeyboardInterrupt):
            # An uncaught KeyboardInterrupt ends the interpreter with
            # SIGINT (CPython 3.8+, after its exit handlers).
            import atexit, signal

            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        raise SystemExit(1) from None
    else:
        if figs is not None:
            left(rep, None, None, filename, lines, figs)


_sbx_warm()
