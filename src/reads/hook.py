# exact-cache: records the files under the workspace that this Python process opens, so that the
# save step can name those that no input of the cache key covers; and, after a compile cache was
# restored, what torch's compile caches report as the process ends. exact-cache wrote this file
# and put its directory first on PYTHONPATH. It changes nothing else: its directory leaves
# sys.path again, and the sitecustomize it stands in front of (yours, or your Python's) runs right
# after it, as if this one were not there. It keeps no file open: each batch of records is
# appended to the log with an open, a write and a close. It never imports torch. On a Python
# without audit hooks (before 3.8) it does nothing. This file is plain ASCII and parses on Python
# 2.7 too.
#
# EXACT_CACHE_RECORD says what it records: `reads`, `torch` or both, comma-separated (unset:
# `reads`). The log, one record a line: `p <proc> <ancestor>...` (a process and the processes it
# descends from, nearest first), `r|w|l <proc> <path>` (read, wrote, loaded as a shared library;
# the path as its bytes, or in hex after `R|W|L` when it holds a line break), `c <proc> <count>`
# (the record was cut after that many files) and `! <note>`. A process is `<pid>-<start time>`
# where /proc has it, else `<pid>-t<random>`, and an ancestor whose start time is unknown is
# `<pid>`. Torch's figures, once per process that compiled: `t <proc> <name>=<count>...` (its
# counters, and `metrics-cut=1`/`files-cut=1` where what follows is incomplete), then for each
# compile whose FX graphs came from the cache `s <proc> <n> <microseconds|?>` (the compile time
# torch records as spared; `?`: this torch does not say) and `g|G <proc> <n> <path>` for each
# file of the FX graph cache that compile read.

def _exact_cache_reads():
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if not p or os.path.abspath(p) != here]
    log = os.environ.get("EXACT_CACHE_READS_LOG")
    if log:
        what = os.environ.get("EXACT_CACHE_RECORD", "reads").split(",")
        for name, install in (("reads", _install), ("torch", _torch)):
            if name in what:
                try:
                    install(os, sys, log)
                except Exception:
                    e = sys.exc_info()[1]
                    _append(os, log, "! the %s hook could not be installed (%s: %s)\n" % (name, type(e).__name__, e))
    return here


def _append(os, log, text):
    # One write to the log, never through a link, never blocking on something not a file.
    try:
        flags = os.O_WRONLY | os.O_APPEND
        for name in ("O_NOFOLLOW", "O_NONBLOCK", "O_CLOEXEC", "O_NOCTTY"):
            flags |= getattr(os, name, 0)
        fd = os.open(log, flags)
        try:
            if os.fstat(fd).st_mode & 0o170000 == 0o100000:
                data = text if isinstance(text, bytes) else text.encode("ascii", "replace")
                while data:
                    data = data[os.write(fd, data):]
        finally:
            os.close(fd)
    except Exception:
        pass


def _process(os):
    # This process and its ancestors, nearest first (up to 32), as the log names them.
    def started(pid):
        try:
            fd = os.open("/proc/%d/stat" % pid, os.O_RDONLY)
            try:
                fields = os.read(fd, 4096).rsplit(b")", 1)[1].split()
            finally:
                os.close(fd)
            return int(fields[1]), fields[19].decode("ascii")
        except Exception:
            return None

    me = os.getpid()
    own = started(me)
    if own is None:
        return "%d-t%s" % (me, os.urandom(6).hex()), ["%d" % os.getppid()]
    chain, pid = [], own[0]
    while pid > 0 and len(chain) < 32:
        up = started(pid)
        if up is None:
            chain.append("%d" % pid)
            break
        chain.append("%d-%s" % (pid, up[1]))
        pid = up[0]
    return "%d-%s" % (me, own[1]), chain


# The most files one process records (and raw paths it remembers): its memory stays bounded.
_CAP = 100000


def _install(os, sys, log):
    if not hasattr(sys, "addaudithook"):
        _append(os, log, "! Python %d.%d has no audit hooks (3.8 and later have): its reads are not seen\n" % tuple(sys.version_info[:2]))
        return
    import atexit
    from _thread import allocate_lock
    from time import monotonic

    fsdecode, fspath, abspath, normpath, getcwd = os.fsdecode, os.fspath, os.path.abspath, os.path.normpath, os.getcwd
    encoding, errors, sep = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors(), os.sep
    root = abspath(fsdecode(bytes.fromhex(ROOT)))
    top = root + sep
    # The workspace as it is named and as it is: a path under the second is named under the first.
    real = os.path.realpath(root) + sep
    real = real if real != top else None
    # The interpreter's own places inside the workspace (a venv), as the log names them.
    own = []
    for q in {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix}:
        for p in {abspath(q) + sep, os.path.realpath(q) + sep} if q else ():
            if real is not None and p.startswith(real):
                p = top + p[len(real):]
            if p.startswith(top) and p != top:
                own.append(p)
    own = tuple(own)
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
    state = {}
    # Raw paths handled already (until the working directory changes), for reads and for writes.
    done_r, done_w = set(), set()
    # By kind, the paths not yet in the log (upper case: a path holding a line break, in hex).
    pending = {"r": [], "w": [], "l": [], "R": [], "W": [], "L": []}

    def forget():
        # The raw paths handled: once the working directory changes, or at the cap.
        done_r.clear()
        done_w.clear()
        done_w.add(log)

    def start():
        proc, chain = _process(os)
        state.update(proc=proc, head="p %s %s\n" % (proc, " ".join(chain)), announced=False, cut=None)
        state.update(lock=allocate_lock(), since=None, eager=False, cwd=None, lines=0)
        forget()
        for paths in pending.values():
            del paths[:]

    def encoded(kind, paths):
        prefix = "%s %s " % (kind, state["proc"])
        if kind.isupper():
            paths = [p.encode(encoding, errors).hex() for p in paths]
        try:
            return (prefix + ("\n" + prefix).join(paths) + "\n").encode(encoding, errors)
        except UnicodeError:
            # A name no file can have (a lone surrogate): left out.
            lines = []
            for p in paths:
                try:
                    lines.append((prefix + p + "\n").encode(encoding, errors))
                except UnicodeError:
                    pass
            return b"".join(lines)

    def flush(announce=False):
        # Write what is pending (and, before a first record or a child, this process's line).
        if not announce and not state["cut"] and not any(pending.values()):
            return
        lock = state["lock"]
        if not lock.acquire(False):
            return
        try:
            out = []
            for kind, paths in pending.items():
                if paths:
                    taken = paths[:]
                    del paths[: len(taken)]
                    room = _CAP - state["lines"]
                    if len(taken) > room and state["cut"] is None:
                        taken = taken[:room]
                        state["cut"] = "c %s %d\n" % (state["proc"], _CAP)
                    if taken:
                        state["lines"] += len(taken)
                        out.append(encoded(kind, taken))
            if state["cut"]:
                out.append(state["cut"].encode("ascii"))
                state["cut"] = ""
            if not state["announced"] and (out or announce):
                out.insert(0, state["head"].encode("ascii"))
                state["announced"] = True
            state["since"] = None
            if out:
                _append(os, log, b"".join(out))
        finally:
            lock.release()

    def named(path, reading):
        # The absolute path, as the log names it, of an open's or another event's path: None
        # outside the workspace and in the interpreter's own places.
        if type(path) is not str:
            path = fsdecode(fspath(path))
        if sep != "/":
            path = abspath(path)
        elif path[:1] != "/":
            cwd = state["cwd"]
            if cwd is None:
                cwd = state["cwd"] = getcwd() + "/"
            path = cwd + path
        if "/." in path or "//" in path:
            path = normpath(path)
        if not path.startswith(top):
            if real is None or not path.startswith(real):
                return None
            path = top + path[len(real):]
        if own and path.startswith(own):
            return None
        if "-packages" in path or "__pycache__" in path:
            parts = path[len(top):].split(sep)
            if "site-packages" in parts or "dist-packages" in parts:
                return None
            if "__pycache__" in parts:
                # Bytecode is read as its source (`pkg/__pycache__/mod.cpython-311.pyc`, opened
                # where it is current, is `pkg/mod.py`); `__pycache__` is Python's own otherwise.
                if not reading or len(parts) < 2 or parts[-2] != "__pycache__" or not parts[-1].endswith(".pyc"):
                    return None
                return sep.join([root] + parts[:-2] + [parts[-1].split(".", 1)[0] + ".py"])
        return path

    def record(kind, path):
        if state["cut"] is not None:
            return
        paths = pending[kind if "\n" not in path else kind.upper()]
        paths.append(path)
        if state["eager"]:
            flush()
        elif state["since"] is None:
            state["since"] = monotonic()
        elif len(paths) >= 512 or len(paths) & 31 == 0 and monotonic() - state["since"] > 0.5:
            flush()

    spawning = frozenset(("os.exec", "os.posix_spawn", "os.spawn", "os.system", "subprocess.Popen"))

    def other(event, args):
        if event == "os.chdir":
            state["cwd"] = None
            forget()
            return
        if event in spawning:
            flush(True)
            return
        kind, path = "w", None
        if event == "ctypes.dlopen" or event == "import":
            # A shared library: `ctypes.CDLL` (what `torch.ops.load_library` does) or an extension
            # module (`import` names its file); a bare name the loader searches for is not seen.
            kind, path = "l", args[0] if event == "ctypes.dlopen" else args[1]
            if path is None or event == "ctypes.dlopen" and sep not in fsdecode(fspath(path)):
                return
        elif event == "os.mkdir":
            path = args[0]
        elif event == "os.rename" or event == "os.link" or event == "os.symlink":
            path = args[1]
        if isinstance(path, int):
            return
        path = named(path, False)
        if path is not None:
            record(kind, path)

    events = spawning | frozenset(("os.chdir", "ctypes.dlopen", "import", "os.mkdir", "os.rename", "os.link", "os.symlink"))

    def hook(event, args):
        # No event raised in here comes back but the log's own open, which `done_w` holds; no
        # error of ours ever reaches the user's program.
        if event == "open":
            try:
                path = args[0]
                done = done_w if args[2] & write_flags else done_r
                if path in done or state["cut"] is not None:
                    return
                if len(done) >= _CAP:
                    forget()
                done.add(path)
                if not isinstance(path, int):
                    reading = done is done_r
                    path = named(path, reading)
                    if path is not None:
                        record("r" if reading else "w", path)
            except Exception:
                pass
        elif event in events:
            try:
                if event != "import" or args[1] is not None:
                    other(event, args)
            except Exception:
                pass

    def forked():
        # A forked child (a worker of a pool) often ends with os._exit: it writes each record.
        start()
        state["eager"] = True

    start()
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(before=lambda: flush(True), after_in_child=forked)
    atexit.register(flush)
    sys.addaudithook(hook)


# The most files of torch's FX graph cache one process remembers reading.
_TORCH_CAP = 10000

# Torch's counters reported, as `t` records name them.
_COUNTERS = (
    ("inductor", "fxgraph_cache_hit", "fx-hit"),
    ("inductor", "fxgraph_cache_miss", "fx-miss"),
    ("inductor", "fxgraph_cache_bypass", "fx-bypass"),
    ("aot_autograd", "autograd_cache_hit", "aot-hit"),
    ("aot_autograd", "autograd_cache_miss", "aot-miss"),
    ("aot_autograd", "autograd_cache_bypass", "aot-bypass"),
)


def _torch(os, sys, log):
    # As the process ends, what torch's compile caches report: its counters, and for each compile
    # (torch's CompilationMetrics) the compile time its FX graph cache hits spared, with the cache
    # files read meanwhile (an audit hook sees their opens). Only what torch has in memory is
    # read, and only where the process imported it.
    if not hasattr(sys, "addaudithook"):
        return
    import atexit
    from time import time

    abspath = os.path.abspath
    marker = os.sep + "fxgraph" + os.sep
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
    encoding, errors = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()
    # (time, path) of each read of the FX graph cache; what a forked child inherited.
    reads, inherited = [], {}

    def hook(event, args):
        if event == "open":
            try:
                path = args[0]
                if type(path) is str and marker in path and not args[2] & write_flags:
                    if len(reads) < _TORCH_CAP:
                        reads.append((time(), abspath(path)))
                    else:
                        inherited["cut"] = True
            except Exception:
                pass

    def current():
        # Torch's counters and compile records, or None where torch compiled nothing here.
        utils = sys.modules.get("torch._dynamo.utils")
        counters = getattr(utils, "counters", None)
        if counters is None:
            return None
        numbers = []
        for group, name, _ in _COUNTERS:
            numbers.append(int((counters.get(group) or {}).get(name, 0)))
        return numbers, getattr(utils, "_compilation_metrics", None)

    def forked():
        # A child starts with its parent's counters and records: only what it adds is its own.
        try:
            del reads[:]
            inherited.pop("cut", None)
            got = current()
            if got is not None:
                inherited["numbers"], inherited["records"] = got[0], list(got[1] or ())
        except Exception:
            pass

    def window(record):
        start, end = getattr(record, "start_time_us", None), getattr(record, "end_time_us", None)
        if start is None and getattr(record, "start_time", None) is not None:
            start = record.start_time * 1e6
        if end is None and start is not None:
            took = getattr(record, "duration_us", None)
            if took is None and getattr(record, "entire_frame_compile_time_s", None) is not None:
                took = record.entire_frame_compile_time_s * 1e6
            end = start + took if took is not None else None
        return start, end

    def line(kind, proc, n, path):
        if "\n" in path:
            kind, path = kind.upper(), path.encode(encoding, errors).hex()
        try:
            return ("%s %s %d %s\n" % (kind, proc, n, path)).encode(encoding, errors)
        except UnicodeError:
            return b""

    def report():
        # No error of ours ever reaches the user's program or its output.
        try:
            write()
        except Exception:
            pass

    def write():
        got = current()
        if got is None:
            return
        numbers, records = got
        before = inherited.get("numbers") or [0] * len(numbers)
        numbers = [now - was for now, was in zip(numbers, before)]
        if not any(numbers):
            return
        maxlen = getattr(records, "maxlen", None)
        full = maxlen is not None and len(records) >= maxlen
        seen = inherited.get("records") or []
        records = [r for r in (records or ()) if not any(r is s for s in seen)]
        proc = _process(os)[0]
        fields = ["%s=%d" % (short, n) for (_, _, short), n in zip(_COUNTERS, numbers)]
        fields += ["metrics-cut=1"] * full + ["files-cut=1"] * ("cut" in inherited)
        out = [("t %s %s\n" % (proc, " ".join(fields))).encode("ascii")]
        for n, record in enumerate(records):
            if hasattr(record, "distributed_ephemeral_timeout_us"):
                saved = record.distributed_ephemeral_timeout_us
                if not saved:
                    continue
                saved = "%d" % saved
            elif not getattr(record, "inductor_fx_local_cache_hit_count", 1):
                continue
            else:
                saved = "?"
            start, end = window(record)
            files = set()
            if start is not None:
                files = set(p for t, p in reads if start <= t * 1e6 and (end is None or t * 1e6 <= end))
            out.append(("s %s %d %s\n" % (proc, n, saved)).encode("ascii"))
            out.extend(line("g", proc, n, p) for p in sorted(files))
        _append(os, log, b"".join(out))

    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=forked)
    atexit.register(report)
    sys.addaudithook(hook)


def _exact_cache_chain(here):
    # The sitecustomize this one stands in front of: the next on sys.path. The import system's
    # own modules are loaded already; `importlib` would cost every process a few milliseconds.
    import sys

    bootstrap, external = sys.modules.get("_frozen_importlib"), sys.modules.get("_frozen_importlib_external")
    if bootstrap is None or external is None:
        _exact_cache_chain_2(sys)
        return
    spec = external.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None:
        # As if there were no sitecustomize: `site` takes this error for its absence.
        raise ImportError("No module named 'sitecustomize'", name="sitecustomize")
    module = bootstrap.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def _exact_cache_chain_2(sys):
    # Python 2.7: `site` ignores an ImportError from sitecustomize.
    import imp

    found = imp.find_module("sitecustomize", sys.path)
    del sys.modules["sitecustomize"]
    try:
        imp.load_module("sitecustomize", *found)
    finally:
        if found[0] is not None:
            found[0].close()


ROOT = "__EXACT_CACHE_ROOT__"
_exact_cache_chain(_exact_cache_reads())
