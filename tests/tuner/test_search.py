"""Contract suite every search strategy passes (ask/tell over frozen trials): same seed same
proposals, never a schedule it was told about, never a duplicate, always legal, exhausts a small
space exactly; plus what only the model-guided evolution promises."""
import numpy as np
import pytest

import sim
from tuner.search import (EvolutionarySearch, EvolutionConfig, MeasuredEvolution, RandomSearch, Trial,
                          make_strategy)
from tuner.space import ScheduleSpace

STRATEGIES = [EvolutionarySearch, RandomSearch, MeasuredEvolution]
HW = sim.load_hw("edge-npu")
WL = sim.Workload.conv2d(1, 32, 28, 28, 64, 3, 3, pad=1)


@pytest.fixture(scope="module")
def space():
    return ScheduleSpace.build(WL, HW)


def cost(s):
    return float(sim.simulate(WL, HW, s).total_cycles)


def drive(strategy, rounds=5, n=8):
    """ask/tell rounds with the analytical simulator as the measurement; returns every proposal."""
    out = []
    for _ in range(rounds):
        batch = strategy.ask(n)
        out.append(batch)
        strategy.tell([Trial(s, cost(s)) for s in batch])
    return out


@pytest.mark.parametrize("cls", STRATEGIES)
def test_same_seed_same_proposals(cls, space):
    a = drive(cls(space, seed=7))
    b = drive(cls(space, seed=7))
    assert a == b


@pytest.mark.parametrize("cls", [RandomSearch, MeasuredEvolution])
def test_other_seed_other_proposals(cls, space):
    assert drive(cls(space, seed=1), rounds=1) != drive(cls(space, seed=2), rounds=1)


@pytest.mark.parametrize("cls", STRATEGIES)
def test_never_proposes_what_it_was_told_and_no_duplicates(cls, space):
    strat = cls(space, seed=3)
    told = set()
    # Tell it some schedules before it asks, as a resumed run does.
    pre = space.schedules(space.sample(20, np.random.default_rng(0)))
    strat.tell([Trial(s, cost(s)) for s in pre])
    told |= set(pre)
    for _ in range(6):
        batch = strat.ask(10)
        assert len(batch) == 10 == len(set(batch))
        assert not (set(batch) & told)
        for s in batch:
            s.check(WL, HW)
        strat.tell([Trial(s, cost(s)) for s in batch])
        told |= set(batch)


@pytest.mark.parametrize("cls", STRATEGIES)
def test_exhausts_a_tiny_space_exactly(cls):
    wl = sim.Workload.gemm(4, 3, 2)
    sp = ScheduleSpace.build(wl, HW)
    strat = cls(sp, seed=0, config=EvolutionConfig(population=64, generations=1)) if cls is EvolutionarySearch \
        else cls(sp, seed=0)
    seen = []
    for _ in range(sp.size):
        batch = strat.ask(7)
        if not batch:
            break
        seen += batch
        strat.tell([Trial(s, 1.0 + i) for i, s in enumerate(batch)])
    assert len(seen) == len(set(seen)) == sp.size
    assert strat.ask(7) == []


@pytest.mark.parametrize("cls", STRATEGIES)
def test_tell_ignores_schedules_outside_the_space(cls, space):
    strat = cls(space, seed=0)
    alien = sim.Schedule("os", ("m", "n"), 3, 5, 7, "mnk", False)   # tiles not among the candidates
    assert space.genes_of(alien) is None
    strat.tell([Trial(alien, 123.0)])
    assert strat.n_told == 0 and len(strat.ask(4)) == 4


def test_model_free_evolution_starts_at_the_analytical_optimum():
    """Untrained, the fitness is the analytical simulator: the first proposal must be the best
    schedule of the space under it (found here by enumerating the space)."""
    wl = sim.Workload.gemm(48, 40, 24)
    sp = ScheduleSpace.build(wl, HW)
    rows = np.concatenate(list(sp.enumerate()))
    best = sim.simulate_batch(wl, HW, sp.arrays(rows))["total_cycles"].min()
    strat = EvolutionarySearch(sp, seed=0, config=EvolutionConfig(epsilon=0.0, generations=6))
    first = strat.ask(4)
    assert sim.simulate(wl, HW, first[0]).total_cycles == best


def test_epsilon_share_is_random():
    """With epsilon = 1 the evolutionary search proposes uniform samples: far from the best."""
    sp = ScheduleSpace.build(WL, HW)
    greedy = EvolutionarySearch(sp, seed=0, config=EvolutionConfig(epsilon=0.0)).ask(16)
    explore = EvolutionarySearch(sp, seed=0, config=EvolutionConfig(epsilon=1.0)).ask(16)
    assert np.median([cost(s) for s in explore]) > 1.2 * np.median([cost(s) for s in greedy])


def test_make_strategy_names():
    sp = ScheduleSpace.build(sim.Workload.gemm(4, 3, 2), HW)
    assert isinstance(make_strategy("random", sp), RandomSearch)
    with pytest.raises(ValueError, match="search strategy must be one of evolution, random, measured-evolution"):
        make_strategy("annealing", sp)
