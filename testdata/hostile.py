# hostile.py MODE [ARG]: leave a hostile workspace behind for the output
# walk. Every mode prints "done" when its traps are set.
import os, socket, stat, subprocess, sys, time

mode = sys.argv[1]
arg = sys.argv[2] if len(sys.argv) > 2 else ""
os.chdir("/workspace")

if mode == "symlinks":
    # arg: the host path of a canary file (invisible in here, on purpose).
    os.symlink(arg, "canary-abs")
    os.symlink("../../../../../../.." + arg, "canary-rel")
    os.symlink("/etc/shadow", "shadow")
    os.symlink("/proc/self/environ", "environ")
    os.symlink("/", "root")
    os.symlink("/dev/zero", "zero")
    os.symlink("loop-b", "loop-a")
    os.symlink("loop-a", "loop-b")
    os.symlink("real.txt", "chain-0")
    for i in range(1, 41):
        os.symlink("chain-%d" % (i - 1), "chain-%d" % i)
    open("real.txt", "w").write("real\n")
    os.mkdir("dir")
    os.symlink("/", "dir/up")
elif mode == "swap":
    # A process that keeps swapping a file and a symlink until it is killed.
    open("victim", "w").write("plain\n")
    os.symlink("/etc/passwd", "link")
    if os.fork() == 0:
        while True:
            try:
                os.rename("victim", "tmp"); os.rename("link", "victim"); os.rename("tmp", "link")
            except OSError:
                pass
    time.sleep(0.2)
elif mode == "hardlinks":
    with open("big", "wb") as f:
        f.write(os.urandom(1 << 20) * 16)
    for i in range(2048):
        os.link("big", "link-%04d" % i)
elif mode == "special":
    os.mkfifo("fifo")
    s = socket.socket(socket.AF_UNIX)
    s.bind("/workspace/sock")
    os.symlink("/dev/null", "null")
    os.symlink("/dev/urandom", "urandom")
    # A FIFO with a writer still attached must not block the walk.
    os.mkfifo("fifo-open")
    if os.fork() == 0:
        open("fifo-open", "w")
        os._exit(0)
elif mode == "sparse":
    with open("sparse", "wb") as f:
        f.truncate(1 << 40)
    open("small.txt", "w").write("ok\n")
elif mode == "sparse-many":
    # arg: how many sparse 128 MiB files, each with 4 KiB of its own data
    # and holes after it: cheap to make, costly to hash and copy dense.
    for i in range(int(arg)):
        with open("sparse-%04d" % i, "wb") as f:
            f.write(os.urandom(4096))
            f.truncate(128 << 20)
elif mode == "sparse-links":
    # Four sparse 128 MiB files (256 KiB of data each), two more names
    # for each.
    for i in range(4):
        name = "sparse-%d" % i
        with open(name, "wb") as f:
            f.write(os.urandom(256 << 10))
            f.truncate(128 << 20)
        for j in range(2):
            os.link(name, "%s-link-%d" % (name, j))
elif mode == "collide":
    # Two names that one escaping, with '%' kept as it is, maps to one.
    with open(b"a\n", "w") as f:
        f.write("one\n")
    with open(b"a%0A", "w") as f:
        f.write("two\n")
elif mode == "many":
    n = int(arg)
    for i in range(n):
        os.close(os.open("f%07d" % i, os.O_CREAT | os.O_WRONLY, 0o644))
elif mode == "deep":
    depth = int(arg)
    fd = os.open(".", os.O_RDONLY)
    for i in range(depth):
        os.mkdir("d", dir_fd=fd)
        nfd = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nfd
    os.close(os.open("leaf", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
elif mode == "names":
    for name in [b"new\nline.txt", b"esc\x1b[31mred\x1b[0m.txt", b"inv\xff\xfe.txt", b'quote"back\\slash.txt',
                 b"json}{,[.txt", b"tab\there.txt", b"rtl\xe2\x80\xaegnp.exe", b"%41.txt"]:
        with open(name, "wb") as f:
            f.write(name)
elif mode == "modes":
    for name, mode_bits in [("setuid", 0o4755), ("setgid", 0o2755), ("world", 0o666), ("exec", 0o755), ("sticky-dir-file", 0o1777)]:
        with open(name, "w") as f:
            f.write(name)
        os.chmod(name, mode_bits)
else:
    sys.exit("unknown mode " + mode)
print("done", flush=True)
