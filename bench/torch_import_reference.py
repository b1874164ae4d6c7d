# What the torch-inductor preset ran before it stopped importing torch (exact-cache < issue 14):
# torch's own answers, kept as the reference that the benchmark times and a test compares with.
import json
info = {"torch": None, "triton": None, "cuda": None, "hip": None, "cxx11-abi": None}
try:
    import torch
    info["torch"] = torch.__version__
    info["cuda"] = torch.version.cuda
    info["hip"] = getattr(torch.version, "hip", None)
    info["cxx11-abi"] = str(bool(torch._C._GLIBCXX_USE_CXX11_ABI))
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            major, minor = torch.cuda.get_device_capability(i)
            info["device%d" % i] = "%s, sm_%d%d" % (torch.cuda.get_device_name(i), major, minor)
except ImportError:
    pass
except Exception as e:  # installed but broken (a missing libcudart, …): recorded, not fatal
    info["torch-error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
try:
    import triton
    info["triton"] = triton.__version__
except ImportError:
    pass
except Exception as e:
    info["triton-error"] = type(e).__name__
print(json.dumps(info))
