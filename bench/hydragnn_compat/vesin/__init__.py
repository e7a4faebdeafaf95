"""Minimal stand-in for the compiled `vesin` neighbour-list package.

HydraGNN imports vesin unconditionally and only calls
vesin.ase_neighbor_list(quantities, atoms, cutoff), which vesin documents as a
drop-in replacement for ase.neighborlist.neighbor_list; delegate to ASE.
"""
__version__ = "0.0.0+shim"


def ase_neighbor_list(quantities, a, cutoff, self_interaction=False, max_nbins=0):
    from ase.neighborlist import neighbor_list
    return neighbor_list(quantities, a, cutoff, self_interaction=self_interaction)
