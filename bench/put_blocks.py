#!/usr/bin/env python3
"""The blob store's block-upload ceiling: PUT `file` to a signed URL as 16 MiB blocks, 4 in flight,
each with curl, then Put Block List. Usage: put_blocks.py FILE SIGNED_URL"""
import base64
import subprocess
import sys
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

BLOCK = 16 << 20
path, url = sys.argv[1], sys.argv[2]
size = __import__("os").path.getsize(path)
ids = [base64.b64encode(f"bench-block-{i:010d}".encode()).decode() for i in range((size + BLOCK - 1) // BLOCK)]


def put(i):
    block_url = f"{url}&comp=block&blockid={urllib.parse.quote(ids[i], safe='')}"
    subprocess.run(
        f"tail -c +{i * BLOCK + 1} '{path}' | head -c {BLOCK} | curl -sSf -X PUT -H 'x-ms-version: 2025-01-05' "
        f"--data-binary @- -o /dev/null '{block_url}'", shell=True, check=True)


with ThreadPoolExecutor(4) as pool:
    list(pool.map(put, range(len(ids))))
xml = '<?xml version="1.0" encoding="utf-8"?><BlockList>' + "".join(f"<Latest>{i}</Latest>" for i in ids) + "</BlockList>"
subprocess.run(["curl", "-sSf", "-X", "PUT", "-H", "x-ms-version: 2025-01-05", "--data-binary", xml, "-o", "/dev/null",
                f"{url}&comp=blocklist"], check=True)
