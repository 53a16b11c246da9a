# The warm interpreter's driver (nsjail/init_warm_linux.go), and the runner of
# every Python payload (python3 SCRIPT or -c CODE). It runs as
# `python3 -c <this file> MODULE...` inside a confined sandbox, as the
# payload's own process: it imports the preload modules, says so on fd 3,
# waits there for the payload's argv and environment, and then runs the
# payload as __main__ the way `python3 /workspace/NAME` or `python3 -c CODE`
# would. An uncaught exception is printed as the interpreter prints it,
# and reported to the init (the Result's error) on a unix socket it
# connects to only then, at the abstract address the handoff named: the
# payload runs with fds 0-2 alone. Stdlib only, and only modules the interpreter has loaded at start,
# so that sys.modules holds nothing of the driver's. Shipped inside sbx
# (go:embed) and passed in argv, never read from the workspace.
def _sbx_report(rep, e, tb, filename, lines, os=__import__("os")):
    """Writes name, value and the frames (file, line, function, code) of
    what killed the payload, NUL-separated, to the report socket."""
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
    data = "\0".join(s.replace("\0", " ") for s in out).encode("utf-8", "replace")
    if not rep:
        return
    import _socket

    # Within a socket buffer: the init accepts it once the payload is gone.
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    s.settimeout(2)
    s.connect("\0" + rep)
    s.sendall(data[:60000])
    s.close()


# report is bound here: the payload's globals, which are this module's,
# are emptied before it runs.
def _sbx_warm(os=__import__("os"), sys=__import__("sys"), report=_sbx_report):
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
    # The report's address, argc, argv..., env... separated by NUL (neither may contain one).
    parts = b"".join(chunks).split(b"\0")
    rep = os.fsdecode(parts.pop(0))
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
    try:
        code = compile(source, filename, "exec", dont_inherit=True)
        del source
        exec(code, g)
    except SystemExit:
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
        try:
            report(rep, e, tb, filename, lines)
        except BaseException:
            pass
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


_sbx_warm()
