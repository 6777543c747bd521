"""The one evolutionary loop (tuner.search.evolution) on a toy space: integer vectors, fitness the
squared distance to a target, so every step can be checked by hand."""
import numpy as np

from tuner.search.evolution import Breeding, Loop, breed, elitist, evolve, plus_tournament, tournament

TARGET = np.array([3, -2, 5, 0])


def mutate(space, rows, rng):
    return rows + rng.integers(-1, 2, rows.shape)


def cross(space, a, b, rng):
    return np.where(rng.random(a.shape) < 0.5, a, b)


def fitness(rows):
    return ((rows - TARGET) ** 2).sum(axis=1).astype(float)


def loop(survive, generations, on_generation=None, prepare=None, n_children=12):
    return Loop(rank=lambda f: f, fitness_of=fitness, concat=lambda a, b: np.concatenate([a, b]),
                take=lambda f, i: f[i], n_children=lambda p: n_children, keep_going=lambda g: g < generations,
                survive=survive, prepare=prepare, on_generation=on_generation)


def run(survive, seed=0, generations=30, **kw):
    rng = np.random.default_rng(seed)
    pop = rng.integers(-10, 10, (16, 4))
    return evolve(None, pop, fitness(pop), loop(survive, generations, **kw), Breeding(mutate, cross, 0.3), rng)


def test_tournament_picks_the_lower_of_each_pair():
    scores = np.array([5.0, 1.0, 3.0])
    rng = np.random.default_rng(1)
    won = tournament(scores, 200, rng)
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 3, 200), rng.integers(0, 3, 200)
    assert (won == np.where(scores[a] <= scores[b], a, b)).all()


def test_breed_mutates_the_first_parent_and_crosses_a_share():
    pop = np.arange(12).reshape(3, 4)
    kids = breed(None, pop, np.zeros(3), 50, lambda sp, r, rng: r * 10, lambda sp, a, b, rng: -a, 0.0,
                 np.random.default_rng(0))
    assert (kids % 10 == 0).all() and ((kids // 10)[:, None, :] == pop[None]).all(axis=2).any(axis=1).all()
    kids = breed(None, pop, np.zeros(3), 50, lambda sp, r, rng: r * 10, lambda sp, a, b, rng: -a - 1, 1.0,
                 np.random.default_rng(0))
    assert (kids < 0).all()   # every child a crossover


def test_same_seed_same_result_and_the_best_never_gets_worse():
    for survive in (elitist(lambda n: 2), plus_tournament(16, 4)):
        bests = []
        pop, fit, gens = run(survive, on_generation=lambda p, f: bests.append(f.min()))
        pop2, fit2, _ = run(survive)
        assert gens == 30 and (pop == pop2).all() and (fit == fit2).all()
        assert all(b2 <= b1 for b1, b2 in zip(bests, bests[1:]))
        assert fit.min() < 10 and (fit == fitness(pop)).all()


def test_elitist_keeps_the_best_parents_then_every_child():
    pop = np.array([[3, -2, 5, 0], [0, 0, 0, 0], [9, 9, 9, 9]])
    kids = np.array([[1, 1, 1, 1]])
    lp = loop(elitist(lambda n: 2), 1)
    new, f = lp.survive(lp, pop, fitness(pop), kids, fitness(kids), np.random.default_rng(0))
    assert new.tolist() == [[3, -2, 5, 0], [0, 0, 0, 0], [1, 1, 1, 1]] and (f == fitness(new)).all()


def test_plus_tournament_keeps_the_elite_of_parents_and_children():
    pop = np.array([[9, 9, 9, 9], [8, 8, 8, 8]])
    kids = np.array([[3, -2, 5, 0], [3, -2, 5, 1]])
    lp = loop(plus_tournament(3, 2), 1)
    new, f = lp.survive(lp, pop, fitness(pop), kids, fitness(kids), np.random.default_rng(0))
    assert new[:2].tolist() == kids.tolist() and len(new) <= 3 and (f == fitness(new)).all()


def test_prepare_returning_nothing_skips_the_generation():
    seen = []
    pop, fit, gens = run(elitist(lambda n: 2), generations=5, prepare=lambda k: k[:0],
                         on_generation=lambda p, f: seen.append(1))
    assert gens == 5 and not seen
