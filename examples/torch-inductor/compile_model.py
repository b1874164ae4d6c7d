#!/usr/bin/env python3
"""Compile a small model with torch.compile (TorchInductor, CPU) and report whether the compiled
graph came from the FX graph cache. With EXPECT_WARM=true (the action's `reused` output) it
asserts that the warm run compiled nothing: fxgraph_cache_hit > 0 and fxgraph_cache_miss == 0."""
import json
import os
import sys
import time

import torch
import torch._dynamo.utils


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(64, 128)
        self.b = torch.nn.Linear(128, 32)

    def forward(self, x):
        return torch.nn.functional.gelu(self.b(torch.relu(self.a(x)))).sum(dim=-1)


torch.manual_seed(0)
model = Tiny().eval()
compiled = torch.compile(model)
x = torch.randn(8, 64)
started = time.perf_counter()
with torch.no_grad():
    out = compiled(x)
elapsed = time.perf_counter() - started
counters = torch._dynamo.utils.counters["inductor"]
report = {
    "compile_seconds": round(elapsed, 2),
    "fxgraph_cache_hit": counters["fxgraph_cache_hit"],
    "fxgraph_cache_miss": counters["fxgraph_cache_miss"],
    "cache_dir": os.environ.get("TORCHINDUCTOR_CACHE_DIR"),
    "torch": torch.__version__,
}
print("INDUCTOR " + json.dumps(report))
assert torch.allclose(out, model(x), atol=1e-5)
if os.environ.get("EXPECT_WARM") == "true":
    if report["fxgraph_cache_hit"] < 1 or report["fxgraph_cache_miss"] != 0:
        sys.exit(f"warm run recompiled: {report}")
    print("warm run: every graph came from the restored cache")
