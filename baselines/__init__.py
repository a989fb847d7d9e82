"""The baseline zoo: one module per federated method, all on the Method API (baselines.base)."""

from baselines import (  # noqa: F401  (registration)
    clip_adapter,
    clip_lora,
    ditto,
    fedavg,
    feddat,
    feddpa,
    fedmkt,
    fedotp,
    fedpgp,
    fedsim,
    hetrank,
    perada,
    perfedavg,
    pfedmma,
    pfedmoap,
    promptfl,
    sft,
    takfl,
    tap,
    zeroshot,
)
from baselines.base import (
    AdapterConfig,
    ClientInfo,
    Method,
    Payload,
    get_method,
    method_names,
    weighted_average,
)
from baselines.fedmosaic import method as _fedmosaic  # noqa: F401  (registration)

__all__ = ["AdapterConfig", "ClientInfo", "Method", "Payload", "get_method", "method_names",
           "weighted_average"]
