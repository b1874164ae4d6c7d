#!/usr/bin/env python3
"""Compile small models with torch.compile (TorchInductor) and report whether the compiled graphs
came from the FX graph cache. MODELS names them (`a`, `b` or `a,b`; default `a`); DEVICE is where
they run (`cpu`, the default, or `cuda`: Triton kernels, whose cache the preset keeps too). With
EXPECT_WARM=true (the action's `reused` output) it asserts that the warm run compiled at most
NEW_MODELS graphs (default 0): fxgraph_cache_hit > 0 and fxgraph_cache_miss <= NEW_MODELS."""
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


class Other(torch.nn.Module):
    """A second model with another graph: what a test suite gains from one week to the next."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(64, 96)

    def forward(self, x):
        return torch.tanh(self.a(x)).softmax(dim=-1).amax(dim=-1)


MODELS = {"a": Tiny, "b": Other}
DEVICE = os.environ.get("DEVICE", "cpu")
torch.manual_seed(0)
x = torch.randn(8, 64, device=DEVICE)
elapsed = 0.0
for name in os.environ.get("MODELS", "a").split(","):
    model = MODELS[name.strip()]().eval().to(DEVICE)
    compiled = torch.compile(model)
    started = time.perf_counter()
    with torch.no_grad():
        out = compiled(x)
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    elapsed += time.perf_counter() - started
    assert torch.allclose(out, model(x), atol=1e-4 if DEVICE == "cuda" else 1e-5)
counters = torch._dynamo.utils.counters["inductor"]
report = {
    "compile_seconds": round(elapsed, 2),
    "fxgraph_cache_hit": counters["fxgraph_cache_hit"],
    "fxgraph_cache_miss": counters["fxgraph_cache_miss"],
    "cache_dir": os.environ.get("TORCHINDUCTOR_CACHE_DIR"),
    "torch": torch.__version__,
    "models": os.environ.get("MODELS", "a"),
    "device": torch.cuda.get_device_name() if DEVICE == "cuda" else DEVICE,
}
print("INDUCTOR " + json.dumps(report))
if os.environ.get("EXPECT_WARM") == "true":
    new = int(os.environ.get("NEW_MODELS") or 0)
    if report["fxgraph_cache_hit"] < 1 or report["fxgraph_cache_miss"] > new:
        sys.exit(f"warm run recompiled: {report}")
    if report["fxgraph_cache_miss"] == 0:
        print("warm run: every graph came from the restored cache")
