"""Contract suite every search strategy passes (ask/tell over frozen trials): same seed same
proposals, never a schedule it was told about, never a duplicate, always legal, exhausts a small
space exactly; plus what only the model-guided evolution promises."""
import numpy as np
import pytest

import sim
from tuner.search.strategies import (EvolutionarySearch, EvolutionConfig, MeasuredEvolution, RandomSearch, Trial,
                          make_strategy)
from tuner.search.space import ScheduleSpace

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


class CountingScorer:
    """The analytical prior, counting the rows it scores (equal scorers rank alike: see
    tuner.search.scoring), with an identity so two instances are two scorers."""

    def __init__(self, name):
        self.name, self.rows, self.calls = name, 0, 0

    def __call__(self, space, genes):
        from tuner.search.scoring import PriorScorer
        self.rows += len(genes)
        self.calls += 1
        return PriorScorer()(space, genes)


def test_an_unchanged_scorer_continues_the_evolution_and_a_new_one_restarts_it(space):
    cfg = EvolutionConfig(population=64, generations=3, continue_generations=1)
    strat = EvolutionarySearch(space, seed=0, config=cfg)
    a = CountingScorer("a")
    first = strat.ask(8, a)
    assert a.calls == cfg.generations + 1                  # initial population + 3 generations
    strat.tell([Trial(s, cost(s)) for s in first])
    second = strat.ask(8, a)
    assert a.calls == cfg.generations + 1 + cfg.continue_generations   # only the new generation is scored
    assert not set(first) & set(second)
    strat.tell([Trial(s, cost(s)) for s in second])
    b = CountingScorer("b")
    strat.ask(8, b)
    assert b.calls == cfg.generations + 1                  # another scorer: scores so far mean nothing


def test_proposals_are_the_best_scored_unmeasured_candidates_of_the_pool(space):
    strat = EvolutionarySearch(space, seed=1, config=EvolutionConfig(epsilon=0.0))
    first = strat.ask(8)
    strat.tell([Trial(s, cost(s)) for s in first])
    second = strat.ask(8)
    codes, genes, scores = strat._pool
    assert np.all(np.diff(scores) >= 0)                    # ranked
    assert len(np.unique(codes)) == len(codes)             # each candidate once
    measured = set(space.encode(np.stack([space.genes_of(s) for s in first])).tolist())
    unmeasured = [c for c in codes.tolist() if c not in measured]
    assert space.encode(np.stack([space.genes_of(s) for s in second])).tolist() == unmeasured[:8]
