#!/usr/bin/env python3
"""The PyTorch + PyTorch Geometric training loop that ddgnn's bench_train is compared with.

SchNet built from PyG's own layers (torch_geometric.nn.models.schnet: GaussianSmearing,
InteractionBlock with CFConv, ShiftedSoftplus), a per-atom energy head summed per graph,
conservative forces by autograd with create_graph, MSE on energies and forces, Adam: the step
bench_train times, on the same shapes, batches built beforehand (graphs with periodic images by
an all-pairs search on the device, outside the timing). Prints graphs/s per shape.
usage: pyg_baseline.py [steps=30] [shapes=ab] [device=cuda] [precision=fp32|bf16]
"""
import sys
import time

import torch
from torch_geometric.nn.models.schnet import GaussianSmearing, InteractionBlock, ShiftedSoftplus
from torch_geometric.utils import scatter

SHAPES = {
    # name: (cells per axis, basis, a, displacement, batch, max_neighbours, hidden, layers,
    #        gaussians, filters)
    "a": ("(a) sc27", 3, 1, 3.8, 0.19, 64, 5, 32, 4, 10, 8),
    "b": ("(b) Cu108", 3, 4, 3.615, 0.1, 16, 0, 64, 3, 50, 64),
}
RADIUS = 5.0


def structure(n_rep, basis, a, disp, gen):
    fcc = torch.tensor([[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]],
                       dtype=torch.float64)[:basis]
    grid = torch.stack(torch.meshgrid(*[torch.arange(n_rep)] * 3, indexing="ij"), -1)
    pos = (grid.reshape(-1, 1, 3).double() + fcc).reshape(-1, 3) * a
    pos += disp * (2 * torch.rand(pos.shape, generator=gen, dtype=torch.float64) - 1)
    return pos, n_rep * a


def graph(pos, length, max_neighbours):
    """Edges j -> i with periodic images within RADIUS of a cubic cell; nearest max_neighbours."""
    n = pos.shape[0]
    r = torch.arange(-2, 3, dtype=torch.float64)
    images = torch.stack(torch.meshgrid(r, r, r, indexing="ij"), -1).reshape(-1, 3) * length
    vec = pos[None, :, None, :] - pos[:, None, None, :] + images[None, None, :, :]
    d = vec.norm(dim=-1)  # [i, j, image]
    d = torch.where(d < 1e-8, torch.full_like(d, float("inf")), d)
    i, j, s = torch.nonzero(d < RADIUS, as_tuple=True)
    dist = d[i, j, s]
    if max_neighbours > 0:
        order = torch.argsort(dist, stable=True)
        order = order[torch.argsort(i[order], stable=True)]
        i, j, s, dist = i[order], j[order], s[order], dist[order]
        first = torch.zeros(n + 1, dtype=torch.long)
        first[1:] = torch.cumsum(torch.bincount(i, minlength=n), 0)
        rank = torch.arange(i.numel()) - first[i]
        keep = rank < max_neighbours
        i, j, s = i[keep], j[keep], s[keep]
    return j, i, images[s]


def batch(shape, gen, device, dtype):
    _, n_rep, basis, a, disp, b, max_nb = shape[:7]
    pos, src, dst, shift, gidx = [], [], [], [], []
    offset = 0
    for g in range(b):
        p, length = structure(n_rep, basis, a, disp, gen)
        j, i, sh = graph(p, length, max_nb)
        pos.append(p)
        src.append(j + offset)
        dst.append(i + offset)
        shift.append(sh)
        gidx.append(torch.full((p.shape[0],), g, dtype=torch.long))
        offset += p.shape[0]
    pos = torch.cat(pos)
    n = pos.shape[0]
    return {
        "z": torch.full((n,), 29, dtype=torch.long, device=device),
        "pos": pos.to(device, dtype),
        "edge_index": torch.stack([torch.cat(src), torch.cat(dst)]).to(device),
        "shift": torch.cat(shift).to(device, dtype),
        "batch": torch.cat(gidx).to(device),
        "n_graphs": b,
        "energy": torch.rand(b, generator=gen, dtype=torch.float64).to(device, dtype),
        "forces": (2 * torch.rand(n, 3, generator=gen, dtype=torch.float64) - 1).to(device, dtype),
    }


class SchNet(torch.nn.Module):
    def __init__(self, hidden, layers, gaussians, filters):
        super().__init__()
        self.embedding = torch.nn.Embedding(100, hidden)
        self.distance_expansion = GaussianSmearing(0.0, RADIUS, gaussians)
        self.interactions = torch.nn.ModuleList(
            InteractionBlock(hidden, gaussians, filters, RADIUS) for _ in range(layers))
        self.head = torch.nn.Sequential(
            torch.nn.Linear(hidden, 60), ShiftedSoftplus(), torch.nn.Linear(60, 20),
            ShiftedSoftplus(), torch.nn.Linear(20, 1))

    def forward(self, z, pos, edge_index, shift, batch, n_graphs):
        j, i = edge_index
        vec = pos[j] - pos[i] + shift
        d = vec.norm(dim=-1)
        attr = self.distance_expansion(d)
        h = self.embedding(z)
        for block in self.interactions:
            h = h + block(h, edge_index, d, attr)
        return scatter(self.head(h).squeeze(-1), batch, dim=0, dim_size=n_graphs, reduce="sum")


def run(key, steps, device, precision):
    shape = SHAPES[key]
    name, hidden, layers, gaussians, filters = shape[0], *shape[7:]
    torch.manual_seed(0)
    model = SchNet(hidden, layers, gaussians, filters).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1)
    batches = [batch(shape, gen, device, torch.float32) for _ in range(4)]
    autocast = torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16,
                              enabled=precision == "bf16")

    def step(b):
        pos = b["pos"].requires_grad_(True)
        with autocast:
            e = model(b["z"], pos, b["edge_index"], b["shift"], b["batch"], b["n_graphs"])
        e = e.float()
        f = -torch.autograd.grad(e.sum(), pos, create_graph=True)[0]
        loss = torch.nn.functional.mse_loss(e, b["energy"]) + \
            torch.nn.functional.mse_loss(f, b["forces"])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for k in range(3):
        step(batches[k % 4])
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    sync()
    t0 = time.perf_counter()
    graphs = 0
    for k in range(steps):
        b = batches[k % 4]
        step(b)
        graphs += b["n_graphs"]
    sync()
    dt = time.perf_counter() - t0
    edges = batches[0]["edge_index"].shape[1]
    print(f"{name:<10} {'SchNet':<6} {graphs / dt:9.0f} {1e3 * dt / steps:8.2f} {edges:9d}  "
          f"pyg {precision}")


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    shapes = sys.argv[2] if len(sys.argv) > 2 else "ab"
    device = sys.argv[3] if len(sys.argv) > 3 else ("cuda" if torch.cuda.is_available() else "cpu")
    precision = sys.argv[4] if len(sys.argv) > 4 else "fp32"
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True
    print(f"PyTorch {torch.__version__}, device {device}, {steps} timed steps after 3 warm-up")
    print(f"{'shape':<10} {'type':<6} {'graphs/s':>9} {'step ms':>8} {'edges':>9}")
    for key in shapes:
        run(key, steps, device, precision)
    if device.startswith("cuda"):
        print(f"peak GPU memory {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
