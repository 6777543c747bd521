"""Another tenant on demand: bursts of memory traffic on one core, for timing a host calibration
the way a shared machine disturbs it (issue 19, docs/TUNING.md: the runs K57 and K59 of
experiments/results/calibration_unseen/runs.md).

    python experiments/contention.py [--on 4] [--off 4] [--seed 1] [--seconds S] [--log FILE] &
    accel-tune calibrate --host -o contended.cal.json [--reference calm.cal.json]
    kill %1      # then check the calibration on a quiet machine (experiments/calibration_unseen.py)

Bursts and the gaps between them last an exponentially distributed time (means ``--on`` and
``--off`` seconds); during a burst one process copies a 128 MB array over and over (a core and
the memory bus taken). On a 2-core EPYC guest (2026-12-01) the phase probe of ``calibrate --host``
(``tuner.calibrate_context.PHASE_PROBE``) read 0.224-0.228 ms between bursts and 0.37-0.42 ms in
them, as it reads in the machine's own fast and slow phases. On a 2-core Zen 1 guest it read
0.65-0.75 ms in a burst as out of it, while resnet50 ran 2.6x slower: there only the models' own
runs and ``--reference`` tell a burst (runs.md, twenty-second session). ``--log``: one line per
burst (start time, length). Stops after ``--seconds`` (default: never) or when killed.
"""
from __future__ import annotations

import argparse
import random
import sys
import time

import numpy as np


def bursts(on_s: float, off_s: float, seed: int):
    """(gap, burst) lengths in seconds, forever: exponential with means ``off_s`` and ``on_s``."""
    rnd = random.Random(seed)
    while True:
        yield rnd.expovariate(1 / off_s), rnd.expovariate(1 / on_s)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--on", type=float, default=4.0, help="mean burst length, seconds (default 4)")
    ap.add_argument("--off", type=float, default=4.0, help="mean gap between bursts, seconds (default 4)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=float("inf"), help="stop after this long (default: never)")
    ap.add_argument("--log", help="write one line per burst: its start (Unix time) and length")
    a = ap.parse_args(argv)
    if not (a.on > 0 and a.off > 0 and a.seconds > 0):
        print("contention: --on, --off and --seconds must be > 0", file=sys.stderr)
        return 2
    src = np.ones(16 * 1024 * 1024)   # 128 MB, well over the last-level cache
    dst = np.empty_like(src)
    log = open(a.log, "w") if a.log else None
    end = time.time() + a.seconds
    try:
        for gap, burst in bursts(a.on, a.off, a.seed):
            time.sleep(max(0.0, min(gap, end - time.time())))
            t0 = time.time()
            if t0 >= end:
                return 0
            if log:
                log.write(f"{t0:.3f} {burst:.3f}\n")
                log.flush()
            while time.time() - t0 < burst and time.time() < end:
                np.copyto(dst, src)
    except KeyboardInterrupt:
        return 0
    finally:
        if log:
            log.close()


if __name__ == "__main__":
    raise SystemExit(main())
