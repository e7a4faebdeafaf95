#!/usr/bin/env python3
"""HydraGNN's training step on the CPU, on bench_train's shape (a), for the speed comparison.

The same graphs, model sizes and step as `bench_train ... a` (one thread, float32): 64 graphs a
batch of 27 Cu atoms (3x3x3 simple-cubic cells, a = 3.8 A, coordinates displaced by up to
0.19 A, periodic box of 11.4 A), each atom's 5 nearest neighbours within 5 A (HydraGNN's own
RadiusGraphPBC: edge_index and edge_shifts), built beforehand; 4 batches cycled. HydraGNN's
create_model_config from a config dict: 4 layers, hidden_dim 32, a node head with
dim_headlayers [60, 20], enable_interatomic_potential (energy summed over the atoms, forces
-dE/dpos by autograd with create_graph, HydraGNN's energy_force_loss), loss MSE(E) + MSE(F)
against random targets, Adam 1e-3. One timed step: zero_grad, forward, forces, loss, backward,
optimizer step, as hydragnn.train.train_validate_test.train does; 3 warm-up steps.
Types: SchNet (10 Gaussians, 8 filters), MACE (max_ell 3, node_max_ell 1, correlation 2, 6 Bessel
functions: LayerSpec's defaults, which bench_train uses) and DimeNet (DimeNet++: 6 radial and 7
spherical functions, basis_emb_size 8, int_emb_size 64, out_emb_size 256, 1 + 2 residual layers).

usage: hydragnn_baseline.py --src DIR [--steps 10] [--types SchNet,MACE,DimeNet] [--arch KEY=VALUE]
       hydragnn_baseline.py --src DIR --fdcheck [--types ...]    (float64 forces against
                                                                 finite differences, one graph)
DIR holds checkouts of HydraGNN, pytorch_geometric (2.5.x for torch 1.13), e3nn (0.5.1, as
HydraGNN pins), opt_einsum and opt_einsum_fx; with Debian's python3-torch, -scipy, -sympy,
-mpi4py, -ase, -rdkit and the like (results/models.md lists the versions measured). Where the
compiled torch_scatter or vesin or torch 2's names are missing, bench/hydragnn_compat/ stands in
(plain-torch scatter sums, ASE's neighbour list, torch 1.13 under Python 3.11). --arch overrides
an Architecture key of every type (e.g. --arch max_ell=1: HydraGNN's example configs' MACE).

SchNet: HydraGNN's SchNet (SCFStack) builds a non-periodic radius graph in every layer through
torch_cluster; here its shared interaction_graph module returns the precomputed periodic graph,
distances recomputed from the live positions, so its time leaves out that search.
"""
import argparse
import os
import sys

os.environ["OMP_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"
os.environ["OPENBLAS_NUM_THREADS"] = "1"
# HydraGNN's config helpers: no torch.distributed / MPI reductions, fixed graph size.
os.environ.setdefault("HYDRAGNN_AGGR_BACKEND", "serial")
os.environ.setdefault("HYDRAGNN_USE_VARIABLE_GRAPH_SIZE", "0")

_parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
_parser.add_argument("--src", required=True, help="folder of the checkouts (see above)")
_parser.add_argument("--steps", type=int, default=10)
_parser.add_argument("--types", default="SchNet,MACE,DimeNet")
_parser.add_argument("--arch", action="append", default=[], metavar="KEY=VALUE")
_parser.add_argument("--fdcheck", action="store_true")
ARGS = _parser.parse_args()

for _name in ["HydraGNN", "pytorch_geometric", "e3nn", "opt_einsum", "opt_einsum_fx"]:
    _path = os.path.join(ARGS.src, _name)
    if not os.path.isdir(_path):
        sys.exit(f"hydragnn_baseline.py: {_path} is missing: --src names the folder of the checkouts")
    sys.path.insert(0, _path)
# Stand-ins last: an installed torch_scatter or vesin comes first.
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "hydragnn_compat"))

import copy
import time
import types
import warnings

import torch113_compat  # noqa: F401,E402  (before torch.distributed.fsdp and hydragnn)
import torch

torch.set_num_threads(1)
try:
    torch.set_num_interop_threads(1)
except RuntimeError:
    pass

warnings.filterwarnings("ignore")

from torch_geometric.data import Data, Batch
import hydragnn
from hydragnn.models.create import create_model_config
from hydragnn.preprocess.graph_samples_checks_and_updates import RadiusGraphPBC
from hydragnn.utils.input_config_parsing.config_utils import update_config

# ---------------------------------------------------------------- shape (a)
NCELL, A, DISP, Z = 3, 3.8, 0.19, 29
BOX = NCELL * A  # 11.4
RADIUS, MAX_NEIGH = 5.0, 5
BATCH, NBATCHES = 64, 4
NLAYERS, HIDDEN = 4, 32
WARMUP = 3


def make_graph(gen, dtype):
    g = torch.arange(NCELL, dtype=dtype)
    lat = torch.stack(torch.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3) * A
    pos = lat + (torch.rand(lat.shape, generator=gen, dtype=dtype) * 2 - 1) * DISP
    n = pos.shape[0]
    data = Data(
        x=torch.full((n, 1), float(Z), dtype=dtype),
        pos=pos,
        cell=torch.eye(3, dtype=dtype) * BOX,
        pbc=torch.tensor([True, True, True]),
        num_nodes=n,
    )
    data = RadiusGraphPBC(r=RADIUS, loop=False, max_num_neighbors=MAX_NEIGH)(data)
    data.edge_shifts = data.edge_shifts.to(dtype)
    # random targets
    data.energy = torch.randn(1, 1, generator=gen, dtype=dtype)
    data.forces = torch.randn(n, 3, generator=gen, dtype=dtype)
    data.y = data.energy.clone()
    data.y_loc = torch.tensor([[0, 1]], dtype=torch.int64)
    return data


def arch_config(mpnn_type):
    arch = {
        "mpnn_type": mpnn_type,
        "periodic_boundary_conditions": True,
        "radius": RADIUS,
        "max_neighbours": MAX_NEIGH,
        "hidden_dim": HIDDEN,
        "num_conv_layers": NLAYERS,
        "enable_interatomic_potential": True,
        "energy_weight": 1.0,
        "energy_peratom_weight": 0.0,
        "force_weight": 1.0,
        "output_heads": {
            "node": {"num_headlayers": 2, "dim_headlayers": [60, 20], "type": "mlp"}
        },
        "task_weights": [1],
    }
    if mpnn_type == "SchNet":
        arch.update(num_gaussians=10, num_filters=8)
    elif mpnn_type == "MACE":
        arch.update(max_ell=3, node_max_ell=1, correlation=2, num_radial=6,
                    radial_type="bessel", envelope_exponent=5)
        # avg_num_neighbors is computed by update_config from the dataset (= 5.0)
    elif mpnn_type == "DimeNet":
        arch.update(num_radial=6, num_spherical=7, basis_emb_size=8,
                    int_emb_size=64, out_emb_size=256, num_before_skip=1,
                    num_after_skip=2, envelope_exponent=5)
    else:
        raise ValueError(mpnn_type)
    for item in ARGS.arch:  # the keys this type has
        key, value = item.split("=", 1)
        if key in arch:
            arch[key] = type(arch[key])(value)
    return arch


def init_distributed():
    # HydraGNN's config helpers (update_config -> iterate_tqdm, ...) call
    # torch.distributed.get_rank(); a single-process gloo group, as
    # hydragnn.utils.distributed.setup_ddp() creates on a CPU-only machine.
    import torch.distributed as dist
    if not dist.is_initialized():
        os.environ.setdefault("HYDRAGNN_BACKEND", "gloo")
        os.environ.setdefault("HYDRAGNN_MASTER_PORT", str(20000 + os.getpid() % 20000))
        hydragnn.utils.distributed.setup_ddp()


def build_model(mpnn_type, dataset, precision="fp32"):
    init_distributed()
    config = {
        "Verbosity": {"level": 0},
        "NeuralNetwork": {
            "Architecture": arch_config(mpnn_type),
            "Variables_of_interest": {
                "input_node_features": [0],
                "output_index": [0],
                "type": ["node"],
                "output_dim": [1],
                "output_names": ["graph_energy"],
                "denormalize_output": False,
            },
            "Training": {
                "num_epoch": 1,
                "batch_size": BATCH,
                "loss_function_type": "mse",
                "precision": precision,
                "Optimizer": {"type": "Adam", "learning_rate": 1e-3},
                "conv_checkpointing": False,
            },
        },
    }

    class _L:  # update_config only looks at loader.dataset
        pass

    loader = _L()
    loader.dataset = dataset
    config = update_config(config, loader, loader, loader)
    model = create_model_config(config=config["NeuralNetwork"], verbosity=0,
                                use_gpu=False)
    if mpnn_type == "SchNet":
        install_pbc_graph_for_schnet(model)
    return model, config


def install_pbc_graph_for_schnet(model):
    """HydraGNN's SchNet (SCFStack, no edge features) rebuilds a NON-periodic
    radius graph inside every conv layer with PyG's RadiusInteractionGraph
    (-> torch_cluster.radius_graph, not installable here), and it zeroes
    edge_shifts when edge features are used (which the interatomic-potential
    mode forbids anyway).  To run shape (a) we replace that per-layer graph
    builder (one shared module instance) by one that returns the precomputed
    periodic graph: edge_index from RadiusGraphPBC and edge_weight =
    |pos[dst] - pos[src] + edge_shifts| recomputed from the live pos tensor
    (so forces flow through it)."""
    ig = model.model.interaction_graph

    def forward(self, pos, batch):
        ei, sh = self._pbc_edge_index, self._pbc_edge_shifts
        vec = pos[ei[1]] - pos[ei[0]] + sh
        return ei, vec.norm(dim=-1)

    ig.forward = types.MethodType(forward, ig)
    ig._pbc_edge_index = None
    ig._pbc_edge_shifts = None


def set_batch_graph(model, data):
    ig = getattr(model.model, "interaction_graph", None)
    if ig is not None and hasattr(ig, "_pbc_edge_index"):
        ig._pbc_edge_index = data.edge_index
        ig._pbc_edge_shifts = data.edge_shifts


def make_batches(dtype, nbatches=NBATCHES, bsize=BATCH, seed=1234):
    gen = torch.Generator().manual_seed(seed)
    graphs = [make_graph(gen, dtype) for _ in range(nbatches * bsize)]
    batches = [Batch.from_data_list(graphs[i * bsize:(i + 1) * bsize])
               for i in range(nbatches)]
    return graphs, batches


def train_step(model, opt, batch, pos0):
    # mirrors hydragnn.train.train_validate_test.train() for compute_grad_energy
    opt.zero_grad()
    batch.pos = pos0.clone()          # fresh leaf (MACE re-centres data.pos in place)
    batch.pos.requires_grad = True
    set_batch_graph(model, batch)
    pred = model(batch)
    loss, tasks_loss = model.energy_force_loss(pred, batch)  # forces: autograd, create_graph=True
    loss.backward()
    opt.step()
    return loss


def bench(mpnn_type, steps, graphs, batches):
    torch.manual_seed(0)
    model, config = build_model(mpnn_type, graphs)
    if mpnn_type == "MACE":
        print(f"MACE avg_num_neighbors (from update_config) = "
              f"{config['NeuralNetwork']['Architecture']['avg_num_neighbors']}", flush=True)
    model.train()
    nparam = sum(p.numel() for p in model.parameters())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    pos0 = [b.pos.detach().clone() for b in batches]
    nb = len(batches)
    for i in range(WARMUP):
        train_step(model, opt, batches[i % nb], pos0[i % nb])
    t0 = time.perf_counter()
    for i in range(steps):
        loss = train_step(model, opt, batches[i % nb], pos0[i % nb])
    dt = time.perf_counter() - t0
    ms = 1e3 * dt / steps
    gps = BATCH * steps / dt
    print(f"{mpnn_type:8s} params={nparam:8d} steps={steps} ms/step={ms:9.1f} "
          f"graphs/s={gps:8.2f} loss={loss.item():.4g}", flush=True)
    return ms, gps


def fdcheck(mpnn_type):
    """float64: compare -dE/dpos from autograd (as in energy_force_loss) with a
    central finite difference of the energy, on one graph; also check that
    HydraGNN's energy_force_loss equals MSE(E) + MSE(F) with those forces."""
    torch.set_default_dtype(torch.float64)
    graphs, _ = make_batches(torch.float64, nbatches=1, bsize=2, seed=99)
    torch.manual_seed(0)
    model, _ = build_model(mpnn_type, graphs, precision="fp64")
    model.train()
    assert next(model.parameters()).dtype == torch.float64
    data = Batch.from_data_list([graphs[0]])
    pos0 = data.pos.detach().clone()

    def energy(pos, need_grad):
        d = copy.copy(data)
        d.pos = pos.clone().requires_grad_(need_grad) if need_grad else pos.clone()
        leaf = d.pos
        set_batch_graph(model, d)
        pred = model(d)
        e = pred[0].sum()
        return e, leaf, d, pred

    e, leaf, d, pred = energy(pos0, True)
    f_auto = -torch.autograd.grad(e, leaf, create_graph=True)[0]
    # HydraGNN's own path on the same input
    loss_hg, tasks = model.energy_force_loss(pred, d)
    mse = torch.nn.functional.mse_loss
    loss_ref = mse(e.reshape(()), d.energy.reshape(())) + mse(f_auto, d.forces)
    h = 1e-5
    errs = []
    with torch.no_grad():
        for atom, comp in [(0, 0), (5, 1), (13, 2), (26, 0), (20, 1)]:
            pp = pos0.clone(); pp[atom, comp] += h
            pm = pos0.clone(); pm[atom, comp] -= h
            ep, *_ = energy(pp, False)
            em, *_ = energy(pm, False)
            f_fd = -(ep - em) / (2 * h)
            fa = f_auto[atom, comp].item()
            errs.append(abs(f_fd.item() - fa))
            print(f"  atom {atom:2d} comp {comp}: autograd F={fa:+.10e}  FD F={f_fd.item():+.10e}")
    print(f"{mpnn_type}: max |F_auto - F_fd| = {max(errs):.3e}; "
          f"|sum F| = {f_auto.sum(0).abs().max().item():.2e}; "
          f"energy_force_loss={loss_hg.item():.12g} vs MSE(E)+MSE(F)={loss_ref.item():.12g}")


def main():
    types_ = ARGS.types.split(",")
    if ARGS.fdcheck:
        for t in types_:
            fdcheck(t)
        return
    steps = ARGS.steps
    print(f"torch {torch.__version__}, threads={torch.get_num_threads()}, "
          f"batch={BATCH} graphs x {NCELL**3} atoms, {NBATCHES} batches cycled, "
          f"warmup={WARMUP}, arch overrides {ARGS.arch}", flush=True)
    t = time.perf_counter()
    graphs, batches = make_batches(torch.float32)
    ne = batches[0].edge_index.shape[1]
    print(f"built {len(graphs)} graphs in {time.perf_counter()-t:.1f}s; "
          f"edges/batch={ne} ({ne/(BATCH*NCELL**3):.2f}/atom), "
          f"nonzero shifts/batch={(batches[0].edge_shifts.abs().sum(1)>0).sum().item()}",
          flush=True)
    for tname in types_:
        bench(tname, steps, graphs, batches)


if __name__ == "__main__":
    main()
