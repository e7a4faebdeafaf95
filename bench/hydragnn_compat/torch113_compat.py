"""Compatibility shims for HydraGNN on Debian 12 (torch 1.13.1, Python 3.11).

--- 1. Work around PyTorch 1.13 x Python 3.11 incompatibility (Debian bookworm's
python3-torch 1.13.1 on python3.11).

torch/distributed/_shard/sharded_tensor/metadata.py declares a dataclass field
whose default is another (unhashable) dataclass instance; Python 3.11's
dataclasses rejects that ("mutable default ... use default_factory"), so any
`import torch.distributed.fsdp` fails.  (Fixed upstream in PyTorch 2.0 by
using default_factory.)  HydraGNN imports torch.distributed.fsdp at module
level.  This module makes dataclasses accept such defaults *only for classes
defined in torch.* modules*, i.e. the Python <= 3.10 behaviour torch 1.13 was
written for.  Import it before torch.distributed.fsdp / hydragnn.
"""
import dataclasses
import sys

if sys.version_info >= (3, 11) and not getattr(dataclasses, "_torch113_patched", False):
    _orig_get_field = dataclasses._get_field

    def _get_field(cls, a_name, a_type, *args, **kwargs):
        try:
            return _orig_get_field(cls, a_name, a_type, *args, **kwargs)
        except ValueError as e:
            default = cls.__dict__.get(a_name, dataclasses.MISSING)
            if isinstance(default, dataclasses.Field):
                default = default.default
            if ("mutable default" not in str(e)
                    or not cls.__module__.startswith("torch.")
                    or default is dataclasses.MISSING):
                raise
            dcls = type(default)
            dcls.__hash__ = object.__hash__      # pass the 3.11 check ...
            try:
                return _orig_get_field(cls, a_name, a_type, *args, **kwargs)
            finally:
                dcls.__hash__ = None             # ... and restore eq-dataclass semantics

    dataclasses._get_field = _get_field
    dataclasses._torch113_patched = True


# --- 2. tensorboard is not packaged in Debian 12 and PyPI is unreachable.
# hydragnn/utils/model/model.py does `from torch.utils.tensorboard import
# SummaryWriter` at module level (used only for training logs, not by the
# benchmark).  Register a stub torch.utils.tensorboard whose SummaryWriter is a
# no-op, unless the real tensorboard is importable.
try:
    import tensorboard  # noqa: F401
except ImportError:
    import types as _types

    class SummaryWriter:  # no-op stand-in
        def __init__(self, *args, **kwargs):
            pass

        def __getattr__(self, name):
            return lambda *args, **kwargs: None

    _tb = _types.ModuleType("torch.utils.tensorboard")
    _tb.SummaryWriter = SummaryWriter
    _tb.__file__ = __file__
    sys.modules["torch.utils.tensorboard"] = _tb


# --- 3. torch.distributed.fsdp.api appeared in torch 2.0; in 1.13 the same
# ShardingStrategy enum lives in torch.distributed.fsdp.  HydraGNN's
# models/MultiTaskModelMP.py imports it from .api at module level (FSDP itself
# is not used by the benchmark).  Alias the module.
import torch.distributed.fsdp as _fsdp
if "torch.distributed.fsdp.api" not in sys.modules:
    try:
        import torch.distributed.fsdp.api  # noqa: F401
    except ImportError:
        sys.modules["torch.distributed.fsdp.api"] = _fsdp
        _fsdp.api = _fsdp


# --- 4. torch 2.x-only names that HydraGNN's models/MultiTaskModelMP.py
# (multi-task model-parallel training, not used by the benchmark) imports at
# module level: torch.distributed.fsdp.fully_shard and
# torch.distributed.device_mesh.DeviceMesh.  Provide placeholders that raise if
# actually used.
def _unavailable(name):
    def _f(*args, **kwargs):
        raise NotImplementedError(f"{name} needs torch >= 2 (stub from torch113_compat)")
    return _f

if not hasattr(_fsdp, "fully_shard"):
    _fsdp.fully_shard = _unavailable("torch.distributed.fsdp.fully_shard")
try:
    import torch.distributed.device_mesh  # noqa: F401
except ImportError:
    import types as _types
    _dm = _types.ModuleType("torch.distributed.device_mesh")

    class DeviceMesh:
        def __init__(self, *args, **kwargs):
            raise NotImplementedError("DeviceMesh needs torch >= 2 (stub from torch113_compat)")

    _dm.DeviceMesh = DeviceMesh
    _dm.init_device_mesh = _unavailable("init_device_mesh")
    sys.modules["torch.distributed.device_mesh"] = _dm
