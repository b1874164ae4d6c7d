#!/usr/bin/env python3
"""Independent reference implementation of exact-cache's fingerprint encoding (format 1).

Written from the specification in src/fingerprint/mod.rs, not from the Rust code:

    str(s) = u64le(len(utf8(s))) + utf8(s)
    encoding = str("exact-cache fingerprint v1") + u64le(#components)
               + for each component sorted bytewise by name:
                   str(name) + u64le(#values)
                   + for each (label, value) sorted bytewise by label:
                       str(label) + (b"\\x00" if value is None else b"\\x01" + str(value))
    digest = sha256(encoding).hexdigest()

Usage: reference.py --check   verify the digests frozen in fingerprint-vectors.json
       reference.py --write   recompute them (only when the format deliberately changes)
"""
import hashlib
import json
import pathlib
import struct
import sys

VECTORS = pathlib.Path(__file__).with_name("fingerprint-vectors.json")


def put_str(out: bytearray, s: str) -> None:
    data = s.encode("utf-8")
    out += struct.pack("<Q", len(data))
    out += data


def encode(components: dict) -> bytes:
    out = bytearray()
    put_str(out, "exact-cache fingerprint v1")
    out += struct.pack("<Q", len(components))
    for name in sorted(components, key=lambda n: n.encode("utf-8")):
        values = components[name]
        put_str(out, name)
        out += struct.pack("<Q", len(values))
        for label in sorted(values, key=lambda l: l.encode("utf-8")):
            put_str(out, label)
            value = values[label]
            if value is None:
                out += b"\x00"
            else:
                out += b"\x01"
                put_str(out, value)
    return bytes(out)


def main() -> int:
    cases = json.loads(VECTORS.read_text())
    mode = sys.argv[1] if len(sys.argv) > 1 else "--check"
    bad = 0
    for case in cases:
        digest = hashlib.sha256(encode(case["components"])).hexdigest()
        if mode == "--write":
            case["digest"] = digest
        elif digest != case["digest"]:
            print(f"{case['name']}: reference computes {digest}, file says {case['digest']}")
            bad += 1
    if mode == "--write":
        VECTORS.write_text(json.dumps(cases, indent=2, ensure_ascii=False) + "\n")
        print(f"wrote {len(cases)} vectors")
    elif bad == 0:
        print(f"{len(cases)} vectors agree with the reference implementation")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
