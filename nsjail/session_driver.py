# The session driver (nsjail/session_linux.go). It runs as
# `python3 -c <this file>`, the payload of a session sandbox, in two
# processes:
#
# - the keeper (this process, the payload): it holds fd 3, the
#   supervisor's SOCK_SEQPACKET socket, forks the kernel, relays the
#   kernel's stdout and stderr (pipes, its fds 1 and 2) and its frames to
#   the supervisor, interrupts it (SIGINT) and restarts it (kill(-1),
#   which reaches every process of the sandbox but the init and the
#   keeper: kill(2)), and moves workspace files in and out;
# - the kernel: one globals dict, each cell run as <cell-N> (registered in
#   linecache, so tracebacks show the code), its results, display()s,
#   figures and error sent to the keeper on a socket of its own.
#
# Frames, both ways: kind (1 byte), seq (4, big-endian: the cell or the
# request), flags (1: 1 = more fragments follow), body (at most FRAG
# bytes). The supervisor trusts none of it: it caps every size, and what
# the Execution vouches for (its count, status, usage, state_lost) is its
# own. Stdlib only; shipped inside sbx (go:embed) and passed in argv,
# never read from the workspace.
import os, sys, signal, select, struct

FRAG = 60000
HOST = 3


def frames(kind, seq, body):
    """The frames of one message, FRAG bytes of body each."""
    out = []
    i = 0
    while True:
        part = body[i : i + FRAG]
        i += FRAG
        more = i < len(body)
        out.append(bytes([kind]) + struct.pack(">I", seq & 0xFFFFFFFF) + bytes([1 if more else 0]) + part)
        if not more:
            return out


def send(fd, kind, seq, body):
    for f in frames(kind, seq, body):
        os.write(fd, f)


def jdump(v):
    import json

    return json.dumps(v, default=repr).encode()


# ---------------------------------------------------------------- kernel


def kernel(sock, gen):
    import ast, base64, io, json, linecache, traceback, types, warnings

    nonce = [b""]
    # The cells' module: a fresh __main__ (pickle finds what a cell
    # defines there), not the driver's, whose functions keep their own.
    main = types.ModuleType("__main__")
    main.__builtins__ = __builtins__
    sys.modules["__main__"] = main
    g = main.__dict__
    for s in (sys.stdout, sys.stderr):
        try:
            # Whole lines: PYTHONUNBUFFERED (sbx's base environment) would
            # make print("a") two writes, and two log chunks.
            s.reconfigure(line_buffering=True, write_through=False)
        except Exception:
            pass
    warnings.filterwarnings("ignore", message=".*non-interactive.*")
    cur = [0]

    def out(kind, body):
        # The nonce ties a frame to the cell the keeper is running: a
        # frame left in the socket by an earlier cell is dropped.
        for f in frames(kind, cur[0], body):
            os.write(sock, nonce[0] + f)

    mimes = [
        ("html", "_repr_html_"),
        ("markdown", "_repr_markdown_"),
        ("svg", "_repr_svg_"),
        ("png", "_repr_png_"),
        ("jpeg", "_repr_jpeg_"),
        ("json", "_repr_json_"),
        ("latex", "_repr_latex_"),
    ]

    def bundle(obj):
        b = {}
        mpl = sys.modules.get("matplotlib.figure")
        if mpl is not None and isinstance(obj, mpl.Figure):
            buf = io.BytesIO()
            obj.savefig(buf, format="png")
            b["png"] = base64.b64encode(buf.getvalue()).decode()
        fn = getattr(type(obj), "_repr_mimebundle_", None)
        if fn is not None:
            try:
                d = obj._repr_mimebundle_()
                if isinstance(d, tuple):
                    d = d[0]
                for mime, key in (("text/plain", "text"), ("text/html", "html"), ("text/markdown", "markdown"), ("image/svg+xml", "svg"), ("image/png", "png"), ("image/jpeg", "jpeg"), ("application/json", "json"), ("text/latex", "latex")):
                    if mime in (d or {}):
                        b[key] = d[mime]
            except Exception:
                pass
        for key, meth in mimes:
            if key in b:
                continue
            fn = getattr(type(obj), meth, None)
            if fn is None:
                continue
            try:
                v = getattr(obj, meth)()
            except Exception:
                continue
            if isinstance(v, tuple):
                v = v[0]
            if v is None:
                continue
            if isinstance(v, bytes):
                v = base64.b64encode(v).decode()
            elif key == "json" and not isinstance(v, str):
                v = json.dumps(v, default=repr)
            b[key] = v
        if "text" not in b:
            try:
                b["text"] = repr(obj)
            except Exception as e:
                b["text"] = "<repr failed: %s: %s>" % (type(e).__name__, e)
        for k, v in list(b.items()):
            if not isinstance(v, str):
                b[k] = str(v)
        return b

    def result(obj, main):
        sys.stdout.flush()
        sys.stderr.flush()
        b = bundle(obj)
        b["is_main_result"] = main
        out(ord("r"), jdump(b))

    def display(*objs, **kw):
        for o in objs:
            result(o, False)

    def figures():
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        for num in plt.get_fignums():
            try:
                result(plt.figure(num), False)
            except Exception:
                pass
        plt.close("all")

    def frames_of(tb):
        fs = traceback.extract_tb(tb)
        for i, f in enumerate(fs):
            if f.filename.startswith("<cell-"):
                fs = fs[i:]
                break
        else:
            fs = []
        return [{"file": f.filename, "line": f.lineno, "function": f.name, "code": (f.line or "")} for f in fs]

    def error(e):
        sys.stdout.flush()
        sys.stderr.flush()
        if isinstance(e, SyntaxError) and e.filename and e.filename.startswith("<cell-"):
            tb = [{"file": e.filename, "line": e.lineno or 0, "function": "<module>", "code": (e.text or "").strip()}]
        else:
            tb = frames_of(e.__traceback__)
        try:
            value = str(e)
        except Exception:
            value = "<str failed>"
        out(ord("x"), jdump({"name": type(e).__name__, "value": value, "traceback": tb}))

    g["display"] = display
    shown = {}

    def patch_show():
        # plt.show() under Agg does nothing: in a session it becomes the
        # figures' PNGs, as in a notebook.
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is not None and not shown:
            shown["orig"] = plt.show
            plt.show = lambda *a, **k: figures()

    def run(n, code, env):
        filename = "<cell-%d>" % n
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        saved = {}
        for k, v in env.items():
            saved[k] = os.environ.get(k)
            os.environ[k] = v
        status = "ok"
        try:
            try:
                tree = ast.parse(code, filename, "exec")
                last = None
                if tree.body and isinstance(tree.body[-1], ast.Expr):
                    last = ast.Expression(tree.body.pop().value)
                patch_show()
                exec(compile(tree, filename, "exec"), g)
                if last is not None:
                    v = eval(compile(last, filename, "eval"), g)
                    patch_show()
                    if v is not None:
                        g["_"] = v
                        result(v, True)
                patch_show()
                figures()
            except BaseException as e:
                status = "interrupted" if isinstance(e, KeyboardInterrupt) else "error"
                error(e)
                try:
                    figures()
                except BaseException:
                    pass
                del e
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            sys.stdout.flush()
            sys.stderr.flush()
        out(ord("d"), jdump({"status": status}))

    buf = []
    while True:
        try:
            m = os.read(sock, FRAG + 64)
            if not m:
                os._exit(0)
            if len(m) < 6:
                continue
            kind, seq, more = m[0], struct.unpack(">I", m[1:5])[0], m[5]
            if kind == ord("n"):  # the keeper's nonce for the next cell
                nonce[0] = m[6:]
                continue
            buf.append(m[6:])
            if more:
                continue
            body = b"".join(buf)
            buf = []
            if kind == ord("c"):
                req = json.loads(body)
                cur[0] = seq
                run(seq, req["code"], req.get("env") or {})
        except KeyboardInterrupt:
            # A SIGINT that came after its cell ended.
            continue


# ---------------------------------------------------------------- keeper


class Keeper:
    def __init__(self):
        os.set_inheritable(HOST, False)
        self.ws = os.getcwd()
        self.gen = 0
        self.cell = 0  # the running cell's seq, 0 when idle
        self.nonce = b""
        self.pid = 0
        self.inbuf = {}
        self.put = None
        self.start_kernel()

    def start_kernel(self):
        import socket

        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        self.gen += 1
        pid = os.fork()
        if pid == 0:
            try:
                os.close(HOST)
                a.close()
                os.close(out_r)
                os.close(err_r)
                null = os.open(os.devnull, os.O_RDONLY)
                os.dup2(null, 0)
                os.dup2(out_w, 1)
                os.dup2(err_w, 2)
                for fd in (null, out_w, err_w):
                    os.close(fd)
                fd = b.detach()
                os.set_inheritable(fd, False)
                # Its own process group: the keeper's SIGINT is for it.
                os.setpgid(0, 0)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                kernel(fd, self.gen)
            except BaseException:
                pass
            os._exit(1)
        b.close()
        os.close(out_w)
        os.close(err_w)
        self.pid = pid
        self.ksock = a.detach()
        self.out, self.err = out_r, err_r
        send(HOST, ord("R"), self.gen, jdump({"pid": pid}))

    def kill_kernel(self):
        # Every process of the sandbox but the init and this one: the
        # kernel, and whatever its cells started or daemonised.
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        try:
            os.waitpid(self.pid, 0)
        except OSError:
            pass
        for fd in (self.ksock, self.out, self.err):
            try:
                os.close(fd)
            except OSError:
                pass
        self.ksock = self.out = self.err = -1

    def relay(self, fd, kind):
        try:
            b = os.read(fd, FRAG)
        except BlockingIOError:
            return False
        if not b:
            # The kernel closed it: nothing more comes (its death is
            # seen on its socket).
            os.close(fd)
            if fd == self.out:
                self.out = -1
            else:
                self.err = -1
            return False
        if self.cell:
            send(HOST, kind, self.cell, b)
        return True

    def drain(self):
        for kind in (ord("o"), ord("e")):
            fd = self.out if kind == ord("o") else self.err
            if fd < 0:
                continue
            os.set_blocking(fd, False)
            while self.relay(fd, kind):
                pass
            if fd in (self.out, self.err):
                os.set_blocking(fd, True)

    def from_kernel(self):
        try:
            m = os.read(self.ksock, FRAG + 64)
        except OSError:
            m = b""
        if not m:
            self.kernel_died()
            return
        n = len(self.nonce)
        if not self.cell or len(m) < n + 6 or m[:n] != self.nonce:
            return  # not of the running cell: dropped
        f = m[n:]
        kind = f[0]
        if struct.unpack(">I", f[1:5])[0] != self.cell or kind not in b"rxd":
            return
        if kind == ord("d"):
            self.drain()
            os.write(HOST, bytes([kind]) + struct.pack(">I", self.cell) + b"\x00" + f[6:][:4096])
            self.cell = 0
            return
        os.write(HOST, bytes([kind]) + struct.pack(">I", self.cell) + f[5:])

    def kernel_died(self):
        _, ws = os.waitpid(self.pid, 0)
        how = "exit status %d" % os.WEXITSTATUS(ws) if os.WIFEXITED(ws) else "killed by signal %d" % os.WTERMSIG(ws) if os.WIFSIGNALED(ws) else "wait status %d" % ws
        self.drain()
        cell = self.cell
        self.kill_kernel()
        if cell:
            send(HOST, ord("d"), cell, jdump({"status": "died", "detail": "the interpreter ended: " + how}))
            self.cell = 0
        self.start_kernel()

    def from_host(self):
        m = os.read(HOST, FRAG + 64)
        if not m:
            os._exit(0)
        if len(m) < 6:
            return
        kind, seq, more = m[0], struct.unpack(">I", m[1:5])[0], m[5]
        if kind == ord("p"):
            return self.put_part(seq, m[6:], more)
        parts = self.inbuf.setdefault(kind, [])
        parts.append(m[6:])
        if more:
            return
        body = b"".join(parts)
        del self.inbuf[kind]
        if kind == ord("c"):
            self.cell = seq
            self.nonce = os.urandom(16)
            os.write(self.ksock, b"n" + struct.pack(">I", seq) + b"\x00" + self.nonce)
            send(self.ksock, ord("c"), seq, body)
        elif kind == ord("i"):
            if self.cell and self.cell == seq:
                try:
                    os.kill(self.pid, signal.SIGINT)
                except OSError:
                    pass
        elif kind == ord("k"):
            cell = self.cell
            self.cell = 0
            self.kill_kernel()
            self.start_kernel()
        elif kind in b"glu":
            self.file_op(kind, seq, body)

    # ------------------------------------------------------- workspace

    def walk(self, path, create=False):
        """The parent directory's fd and the last name of a workspace path,
        every component opened O_NOFOLLOW below the workspace."""
        names = path.split("/")
        if path.startswith("/") or not path or any(n in ("", ".", "..") for n in names):
            raise ValueError("not a relative workspace path: %r" % path)
        d = os.open(self.ws, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for n in names[:-1]:
                try:
                    nd = os.open(n, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=d)
                except FileNotFoundError:
                    if not create:
                        raise
                    os.mkdir(n, 0o755, dir_fd=d)
                    nd = os.open(n, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=d)
                os.close(d)
                d = nd
        except BaseException:
            os.close(d)
            raise
        return d, names[-1]

    def reply(self, seq, v):
        send(HOST, ord("F"), seq, jdump(v))

    def put_part(self, seq, body, more):
        import hashlib, json, stat

        p = self.put
        try:
            if p is None or p["seq"] != seq:
                if p is not None and p.get("fd") is not None:
                    os.close(p["fd"])
                p = self.put = {"seq": seq, "fd": None, "h": hashlib.sha256(), "n": 0, "err": None}
                k = struct.unpack(">I", body[:4])[0]
                hdr = json.loads(body[4 : 4 + k])
                body = body[4 + k :]
                d, name = self.walk(hdr["path"], create=True)
                try:
                    p["fd"] = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, int(hdr.get("mode") or 0o644) & 0o777, dir_fd=d)
                finally:
                    os.close(d)
                if not stat.S_ISREG(os.fstat(p["fd"]).st_mode):
                    raise OSError("not a regular file: %s" % hdr["path"])
            if p["err"] is None:
                mv = memoryview(body)
                while mv:
                    mv = mv[os.write(p["fd"], mv) :]
                p["h"].update(body)
                p["n"] += len(body)
        except Exception as e:
            # The rest of this put is read and dropped; the error is the
            # reply.
            p["err"] = "%s: %s" % (type(e).__name__, e)
        if not more:
            if p["fd"] is not None:
                os.close(p["fd"])
            self.put = None
            self.reply(seq, {"error": p["err"]} if p["err"] else {"size": p["n"], "sha256": p["h"].hexdigest()})

    def file_op(self, kind, seq, body):
        import hashlib, json, stat

        try:
            req = json.loads(body)
            if kind == ord("l"):
                files, limit = [], int(req.get("max") or 10000)
                for root, dirs, names in os.walk(self.ws):
                    dirs.sort()
                    for n in sorted(names):
                        p = os.path.join(root, n)
                        st = os.lstat(p)
                        if not stat.S_ISREG(st.st_mode):
                            continue
                        h = hashlib.sha256()
                        with open(p, "rb") as f:
                            for chunk in iter(lambda: f.read(1 << 20), b""):
                                h.update(chunk)
                        files.append({"path": os.path.relpath(p, self.ws), "size": st.st_size, "sha256": h.hexdigest()})
                        if len(files) >= limit:
                            return self.reply(seq, {"files": files, "truncated": True})
                return self.reply(seq, {"files": files})
            d, name = self.walk(req["path"])
            try:
                if kind == ord("u"):
                    os.unlink(name, dir_fd=d)
                    return self.reply(seq, {})
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=d)
            finally:
                os.close(d)
            try:
                st = os.fstat(fd)
                if stat.S_ISDIR(st.st_mode):
                    raise IsADirectoryError("is a directory: %s" % req["path"])
                if not stat.S_ISREG(st.st_mode):
                    raise OSError("not a regular file: %s" % req["path"])
                left, h, size = int(req.get("max") or 0), hashlib.sha256(), 0
                while True:
                    b = os.read(fd, FRAG)
                    if not b:
                        break
                    size += len(b)
                    if size > left:
                        raise OSError("larger than %d bytes" % left)
                    h.update(b)
                    os.write(HOST, b"G" + struct.pack(">I", seq) + b"\x01" + b)
            finally:
                os.close(fd)
            self.reply(seq, {"size": size, "sha256": h.hexdigest()})
        except Exception as e:
            self.reply(seq, {"error": "%s: %s" % (type(e).__name__, e)})

    def loop(self):
        while True:
            fds = [f for f in (HOST, self.ksock, self.out, self.err) if f >= 0]
            try:
                r, _, _ = select.select(fds, [], [])
            except InterruptedError:
                continue
            if self.out >= 0 and self.out in r:
                self.relay(self.out, ord("o"))
            if self.err >= 0 and self.err in r:
                self.relay(self.err, ord("e"))
            if self.ksock in r:
                self.from_kernel()
            if HOST in r:
                self.from_host()


signal.signal(signal.SIGINT, signal.SIG_IGN)
Keeper().loop()
