# exact-cache: records the files under the workspace that this Python process opens, so that the
# save step can name those that no input of the cache key covers. exact-cache wrote this file on a
# cache miss and put its directory first on PYTHONPATH. It changes nothing else: its directory
# leaves sys.path again, and the sitecustomize it stands in front of (yours, or your Python's) runs
# right after it, as if this one were not there.
def _exact_cache_reads():
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if not p or os.path.abspath(p) != here]
    log = os.environ.get("EXACT_CACHE_READS_LOG")
    if log:
        try:
            _install(os, sys, log, ROOT)
        except Exception as e:
            _note(os, log, "the audit hook could not be installed (%s: %s)" % (type(e).__name__, e))
    return here


def _note(os, log, text):
    try:
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, ('["!", %s]\n' % _quote(text)).encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except OSError:
        pass


def _quote(text):
    # A JSON string: what is not printable, quotes and backslashes as \u escapes.
    return '"' + "".join(c if c.isprintable() and c not in '"\\' else "\\u%04x" % ord(c) for c in text) + '"'


def _install(os, sys, log, root):
    if not hasattr(sys, "addaudithook"):
        _note(os, log, "Python %d.%d has no audit hooks (3.8 and later have): its reads are not seen" % sys.version_info[:2])
        return
    from _thread import get_ident

    roots = sorted({root, os.path.realpath(root)}, key=len, reverse=True)
    # The interpreter's own places (a venv in the workspace), unless one holds the workspace.
    own = tuple(
        p
        for p in (q.rstrip(os.sep) + os.sep for q in {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix} if q)
        if not (root + os.sep).startswith(p)
    )
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
    seen = set()
    busy = set()
    fd = []
    fspath, fsdecode, abspath, sep = os.fspath, os.fsdecode, os.path.abspath, os.sep

    def hook(event, args):
        if event != "open":
            return
        thread = get_ident()
        if thread in busy:
            return
        busy.add(thread)
        try:
            path, mode, flags = args[0], args[1], args[2]
            if isinstance(path, int):
                return
            path = abspath(fsdecode(fspath(path)))
            for r in roots:
                if path.startswith(r + sep):
                    path = root + path[len(r):]
                    break
            else:
                return
            if path.startswith(own) or "__pycache__" in path or "site-packages" in path or "dist-packages" in path:
                return
            if mode is None:
                kind = "w" if flags & write_flags else "r"
            else:
                kind = "w" if any(c in mode for c in "wax+") else "r"
            if (kind, path) in seen:
                return
            seen.add((kind, path))
            if not fd:
                fd.append(os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600))
            os.write(fd[0], ('["%s", %s]\n' % (kind, _quote(path))).encode("utf-8", "surrogateescape"))
        except Exception:
            pass
        finally:
            busy.discard(thread)

    sys.addaudithook(hook)


def _exact_cache_chain(here):
    # The sitecustomize this one stands in front of: the next on sys.path. The import system's
    # own modules are loaded already; `importlib` would cost every process a few milliseconds.
    import sys

    bootstrap, external = sys.modules["_frozen_importlib"], sys.modules["_frozen_importlib_external"]
    spec = external.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None:
        # As if there were no sitecustomize: `site` takes this error for its absence.
        raise ImportError("No module named 'sitecustomize'", name="sitecustomize")
    module = bootstrap.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


ROOT = "__EXACT_CACHE_ROOT__"
_exact_cache_chain(_exact_cache_reads())
