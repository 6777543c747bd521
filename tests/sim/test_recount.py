"""movement.py (closed form) == recount.py (brute force over explicit point sets) on random
nests, hierarchies and mappings: random factorisations of every dim over temporal and spatial
loops of every level, random loop orders, random bypass, strided/dilated projections."""
import math

from hypothesis import HealthCheck, given, settings, strategies as st

from sim.hw.hierarchy import Arithmetic, Hierarchy, StorageLevel
from sim.mapping.mapping import LevelMapping, Mapping, prime_factors
from sim.cost.movement import evaluate
from sim.workload.nest import conv1d, conv2d, gemm, batch_matmul
from sim.validate.recount import recount


def _split(draw, n, parts):
    """n as an ordered product of ``parts`` factors."""
    out = [1] * parts
    for p in prime_factors(n):
        out[draw(st.integers(0, parts - 1))] *= p
    return out


@st.composite
def cases(draw):
    kind = draw(st.sampled_from(["conv1d", "conv2d", "gemm", "bmm"]))
    if kind == "conv1d":
        nest = conv1d(c=draw(st.sampled_from([1, 2, 3])), k=draw(st.sampled_from([1, 2, 4])),
                      r=draw(st.sampled_from([1, 2, 3])), p=draw(st.sampled_from([2, 3, 4, 6])),
                      stride=draw(st.sampled_from([1, 2])), dilation=draw(st.sampled_from([1, 2])))
    elif kind == "conv2d":
        nest = conv2d(c=draw(st.sampled_from([1, 2])), m=draw(st.sampled_from([1, 2])), r=draw(st.sampled_from([1, 2])),
                      s=draw(st.sampled_from([1, 3])), p=draw(st.sampled_from([2, 3])), q=draw(st.sampled_from([2, 4])),
                      stride=draw(st.sampled_from([1, 2])), groups=1)
    elif kind == "gemm":
        nest = gemm(draw(st.sampled_from([2, 3, 4])), draw(st.sampled_from([2, 4])), draw(st.sampled_from([2, 3, 6])))
    else:
        nest = batch_matmul(2, draw(st.sampled_from([2, 3])), 2, draw(st.sampled_from([2, 4])))
    nlev = draw(st.integers(1, 4))
    # slots: per level a temporal and an X and a Y spatial slot (spatial only where fan-out exists)
    spatial_ok = [draw(st.booleans()) for _ in range(nlev)]
    facs = {}
    for d, b in nest.dims:
        facs[d] = _split(draw, b, 3 * nlev)
    lms, fan = [], []
    for i in range(nlev):
        t = {d: facs[d][3 * i] for d in nest.dim_names}
        sx = {d: facs[d][3 * i + 1] for d in nest.dim_names} if spatial_ok[i] else {}
        sy = {d: facs[d][3 * i + 2] for d in nest.dim_names} if spatial_ok[i] else {}
        if not spatial_ok[i]:
            for d in nest.dim_names:
                t[d] *= facs[d][3 * i + 1] * facs[d][3 * i + 2]
        perm = tuple(draw(st.permutations(list(nest.dim_names))))
        byp = set()
        if i > 0:
            byp = {ds.name for ds in nest.data_spaces if draw(st.integers(0, 3)) == 0}
        lms.append(LevelMapping(temporal=t, permutation=perm, spatial_x=sx, spatial_y=sy, bypass=frozenset(byp)))
        fan.append((math.prod(sx.values()) if sx else 1, math.prod(sy.values()) if sy else 1))
    levels, mx, my = [], 1, 1
    for i in range(nlev):
        levels.append(StorageLevel(f"L{i}", instances=mx * my, mesh_x=mx, mesh_y=my))
        mx, my = mx * fan[i][0], my * fan[i][1]
    return Hierarchy(tuple(levels), Arithmetic(instances=mx * my, mesh_x=mx, mesh_y=my)), nest, Mapping(tuple(lms))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(cases())
def test_closed_form_equals_brute_force(case):
    hier, nest, mapping = case
    mapping.check(hier, nest)
    ev = evaluate(hier, nest, mapping)
    ref = recount(hier, nest, mapping)
    for i, lv in enumerate(ev.levels):
        got = {name: (c.reads, c.fills, c.updates) for name, c in lv.tensors}
        assert got == ref[i], (lv.name, got, ref[i])


def test_multicast_is_per_container_as_in_timeloop():
    """Inputs (index r + p) reach 4 MACs through two containers: R spread by L0, P by L1, which
    keeps nothing. MACs (r, p) = (0, 1) and (1, 0) need the same input, but they hang off
    different L1 instances, and Timeloop multicasts only among one container's siblings
    (tests/sim/test_hw_levels_oracle's eyeriss case shows it on real data): 4 reads, not 3."""
    nest = conv1d(c=1, k=1, r=2, p=2)
    one = {d: 1 for d in nest.dim_names}
    hier = Hierarchy((StorageLevel("L0", instances=1), StorageLevel("L1", instances=2, mesh_x=2),
                      StorageLevel("L2", instances=4, mesh_x=4)), Arithmetic(instances=4, mesh_x=4))
    everything = frozenset(ds.name for ds in nest.data_spaces)
    mapping = Mapping((LevelMapping(temporal=one, spatial_x={**one, "R": 2}),
                       LevelMapping(temporal=one, spatial_x={**one, "P": 2}, bypass=everything),
                       LevelMapping(temporal=one, bypass=everything)))
    ev = evaluate(hier, nest, mapping)
    assert ev.levels[0].tensor("Inputs").reads == 4
    assert recount(hier, nest, mapping)[0]["Inputs"] == (4, 0, 0)
