"""Minimal pure-PyTorch stand-in for the compiled `torch_scatter` package.

Only what HydraGNN (and PyG 2.5.3's fallback paths) call is provided:
scatter(src, index, dim, out, dim_size, reduce), scatter_add/sum/mean/mul,
scatter_max/scatter_min (returning (values, argindex)).  Built on
torch.Tensor.scatter_reduce / index_add (torch >= 1.12), differentiable.
"""
import torch

__version__ = "0.0.0+shim"


def _broadcast(index, src, dim):
    dim = dim % src.dim() if src.dim() > 0 else 0
    if index.dim() == 1:
        shape = [1] * src.dim()
        shape[dim] = -1
        index = index.view(shape)
    return index.expand_as(src)


def _out_size(src, index, dim, dim_size):
    if dim_size is None:
        dim_size = int(index.max()) + 1 if index.numel() > 0 else 0
    size = list(src.size())
    size[dim] = dim_size
    return size


def scatter(src, index, dim=-1, out=None, dim_size=None, reduce="sum"):
    dim = dim % src.dim()
    if reduce in ("sum", "add"):
        return scatter_add(src, index, dim, out, dim_size)
    if reduce == "mean":
        return scatter_mean(src, index, dim, out, dim_size)
    if reduce == "mul":
        return scatter_mul(src, index, dim, out, dim_size)
    if reduce == "max":
        return scatter_max(src, index, dim, out, dim_size)[0]
    if reduce == "min":
        return scatter_min(src, index, dim, out, dim_size)[0]
    raise ValueError(f"unsupported reduce {reduce!r}")


def scatter_add(src, index, dim=-1, out=None, dim_size=None):
    dim = dim % src.dim()
    if out is not None:
        return out.scatter_add_(dim, _broadcast(index, src, dim), src)
    if index.dim() == 1:
        if dim_size is None:
            dim_size = int(index.max()) + 1 if index.numel() > 0 else 0
        size = list(src.size())
        size[dim] = dim_size
        return src.new_zeros(size).index_add(dim, index, src)
    size = _out_size(src, index, dim, dim_size)
    return src.new_zeros(size).scatter_add(dim, _broadcast(index, src, dim), src)


scatter_sum = scatter_add


def scatter_mean(src, index, dim=-1, out=None, dim_size=None):
    dim = dim % src.dim()
    s = scatter_add(src, index, dim, out, dim_size)
    ones = torch.ones_like(src)
    cnt = scatter_add(ones, index, dim, None, s.size(dim)).clamp_(min=1)
    return s / cnt if out is None else out.copy_(s / cnt)


def _scatter_reduce(src, index, dim, out, dim_size, how):
    dim = dim % src.dim()
    idx = _broadcast(index, src, dim)
    size = _out_size(src, index, dim, dim_size) if out is None else out.size()
    base = src.new_zeros(size)
    res = base.scatter_reduce(dim, idx, src, reduce=how, include_self=False)
    if out is not None:
        out.copy_(res)
        return out
    return res


def scatter_mul(src, index, dim=-1, out=None, dim_size=None):
    return _scatter_reduce(src, index, dim, out, dim_size, "prod")


def _arg(src, index, dim, res):
    dim = dim % src.dim()
    idx = _broadcast(index, src, dim)
    hit = src == res.gather(dim, idx)
    n = src.size(dim)
    pos = torch.arange(n, device=src.device).view(
        [-1 if d == dim else 1 for d in range(src.dim())]).expand_as(src)
    pos = torch.where(hit, pos, torch.full_like(pos, n))
    arg = torch.full(res.size(), n, dtype=torch.long, device=src.device)
    return arg.scatter_reduce(dim, idx, pos, reduce="amin", include_self=True)


def scatter_max(src, index, dim=-1, out=None, dim_size=None):
    res = _scatter_reduce(src, index, dim, out, dim_size, "amax")
    return res, _arg(src, index, dim, res)


def scatter_min(src, index, dim=-1, out=None, dim_size=None):
    res = _scatter_reduce(src, index, dim, out, dim_size, "amin")
    return res, _arg(src, index, dim, res)
