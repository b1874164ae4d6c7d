# What the `torch` component records, read from the installed files: torch and triton are
# located (importlib.util.find_spec imports neither) and never imported. src/fingerprint/torch.rs
# says why and where this differs from importing them. Prints one JSON object.
import json
import os
import sys
from importlib.util import find_spec

UNSET = object()


class Unreadable(Exception):
    pass


def package_dir(name):
    spec = find_spec(name)
    if spec is None:
        return None
    if spec.origin and os.path.basename(spec.origin).startswith("__init__."):
        return os.path.dirname(spec.origin)
    locations = list(spec.submodule_search_locations or [])
    if not locations:
        raise Unreadable("%s is a module, not a package" % name)
    return locations[0]


def literals(path, label):
    """Top-level `name = <literal>` and `name: T = <literal>` of a file; UNSET for others."""
    import ast

    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as e:
        raise Unreadable("cannot read %s (%s)" % (label, e.strerror))
    values = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        else:
            continue
        try:
            value = ast.literal_eval(node.value)
        except ValueError:
            value = UNSET
        for target in targets:
            if isinstance(target, ast.Name):
                values[target.id] = value
    return values


def dynamic_names(path):
    """The dynamic string table (symbol names) of an ELF file; None when it has none."""
    import struct

    with open(path, "rb") as f:
        head = f.read(64)
        if len(head) < 52 or head[:4] != b"\x7fELF":
            return None
        wide = head[4] == 2
        order = "<" if head[5] == 1 else ">"
        if wide:
            (table_at,) = struct.unpack_from(order + "Q", head, 0x28)
            entry, count = struct.unpack_from(order + "HH", head, 0x3A)
        else:
            (table_at,) = struct.unpack_from(order + "I", head, 0x20)
            entry, count = struct.unpack_from(order + "HH", head, 0x2E)
        f.seek(table_at)
        table = f.read(entry * count)
        if len(table) < entry * count:
            return None

        def section(i):
            at = i * entry
            (kind,) = struct.unpack_from(order + "I", table, at + 4)
            if wide:
                offset, size = struct.unpack_from(order + "QQ", table, at + 0x18)
                (link,) = struct.unpack_from(order + "I", table, at + 0x28)
            else:
                offset, size, link = struct.unpack_from(order + "III", table, at + 0x10)
            return kind, offset, size, link

        for i in range(count):
            kind, _, _, link = section(i)
            if kind == 11 and link < count:  # SHT_DYNSYM, linked to its string table
                _, offset, size, _ = section(link)
                f.seek(offset)
                return f.read(size)
    return None


def abi_hardcoded(torch_dir):
    """Returns "True" where torch.compiled_with_cxx11_abi() is `return True`: torch builds that
    only have the C++11 ABI (as 2.10 and later) hard-code torch._C._GLIBCXX_USE_CXX11_ABI too."""
    try:
        with open(os.path.join(torch_dir, "__init__.py"), encoding="utf-8") as f:
            text = f.read()
    except (OSError, ValueError):
        return None
    start = text.find("\ndef compiled_with_cxx11_abi(")
    if start < 0:
        return None
    end = text.find("\ndef ", start + 1)
    body = text[start : end if end > 0 else len(text)]
    return "True" if "return True" in body and "_C." not in body else None


def cxx11_abi(torch_dir):
    """str(bool(torch._C._GLIBCXX_USE_CXX11_ABI)) without importing torch."""
    if sys.platform.startswith("linux"):
        libs = (os.path.join(torch_dir, "lib", "libc10.so"), os.path.join(sys.prefix, "lib", "libc10.so"))
        for lib in libs:
            try:
                names = dynamic_names(lib) if os.path.isfile(lib) else None
            except Exception:  # unreadable or malformed: try the next
                names = None
            if names is not None:
                return str(b"__cxx11" in names)
        return abi_hardcoded(torch_dir)
    return abi_hardcoded(torch_dir) or "False"


def error(e):
    text = str(e).splitlines()[0] if str(e) else ""
    return text if isinstance(e, Unreadable) else "%s: %s" % (type(e).__name__, text)


info = {"torch": None, "triton": None, "cuda": None, "hip": None, "cxx11-abi": None}
try:
    torch_dir = package_dir("torch")
    if torch_dir is not None:
        version = literals(os.path.join(torch_dir, "version.py"), "torch/version.py")
        for key, name in (("torch", "__version__"), ("cuda", "cuda"), ("hip", "hip")):
            value = version.get(name, None if name == "hip" else UNSET)
            if value is UNSET:
                raise Unreadable("torch/version.py has no literal `%s`" % name)
            info[key] = None if value is None else str(value)
        info["cxx11-abi"] = cxx11_abi(torch_dir)
except Exception as e:
    info["torch-error"] = error(e)
try:
    triton_dir = package_dir("triton")
    if triton_dir is not None:
        version = literals(os.path.join(triton_dir, "__init__.py"), "triton/__init__.py").get("__version__")
        if not isinstance(version, str):
            from importlib import metadata

            for dist in ("triton", "pytorch-triton", "pytorch-triton-rocm", "pytorch-triton-xpu"):
                try:
                    version = metadata.version(dist)
                    break
                except metadata.PackageNotFoundError:
                    pass
            else:
                raise Unreadable("triton/__init__.py has no literal `__version__`")
        info["triton"] = version
except Exception as e:
    info["triton-error"] = error(e)
print(json.dumps(info))
