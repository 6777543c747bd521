"""Per-level buffering (``levels.<level>.buffering``, issue 19 part 1): the field's rule (a bad
value is one line), the default that keeps every fingerprint, and the tile-level walk
(sim/cost/walk.py) following single / double / stream / auto against pipelines worked by hand."""
import dataclasses
import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sim.cost.movement import evaluate
from sim.cost.walk import walk
from sim.hw.config import HardwareConfig, HardwareError, load_hw
from sim.hw.config_hierarchy import hierarchy_of
from sim.hw.hierarchy import HierarchyError, StorageLevel, parse_buffering
from tests.sim.test_walk import _counts, _two_level, bounded_cases


def _with(buffer_words: int, mode: str, dram_bw: float = 1.0):
    """The walk tests' gemm M4 N1 K2 (DRAM loops over M, the buffer over K) with the buffer's
    buffering stated."""
    hier, nest, mapping = _two_level(buffer_words, dram_bw)
    dram, buf = hier.levels
    return dataclasses.replace(hier, levels=(dram, dataclasses.replace(buf, buffering=mode))), nest, mapping


@pytest.mark.parametrize("cap", [4, 8])
def test_the_walk_follows_the_stated_buffering(cap):
    """DRAM moves 1 word/cycle; per M step the buffer needs an Inputs row (2 words) and writes the
    previous output back (1 word); step 0 also loads the Weights (2 words); each row computes for
    2 cycles. The closed form: 10 words at 1 word/cycle = 10 cycles, whatever the buffering.

    - auto, capacity 10 (two tile sets of 5 words fit): double: 4 + 4 x 2 + 1 = 13;
    - auto, capacity 5: single: 4 + 2 + 3 x (2 + 2) + 1 = 19;
    - single stated at capacity 10: 19 (room for two tiles does not make it double);
    - double stated at capacity 5: 13 (the preset says it has the second buffer);
    - stream: every word flows in while the row that uses it computes: blocks of max(2, words on
      the port) = 4 + 2 + 2 + 2 = 10, the closed form, at every walk depth;
    - Inputs streamed, Weights and Outputs auto (double at capacity 10): the DRAM port carries the
      streamed row inside each block (2 cycles, the whole block), so the previous output's
      write-back (1 cycle) waits for it: 2 (weights) + 2 + 3 x (1 + 2) + 1 (last drain) = 14."""
    for words, mode, expect in ((10, "auto", 13), (5, "auto", 19), (10, "single", 19), (5, "double", 13),
                                (5, "stream", 10), (10, "stream", 10), (10, "Inputs:stream", 14)):
        hier, nest, mapping = _with(words, mode)
        w = walk(hier, nest, mapping, max_steps=cap)
        assert (mode, words, w.cycles) == (mode, words, expect)
        assert w.analytical_cycles == 10
    # the counts (hence the access energy) never depend on the buffering
    ref = walk(*_with(10, "auto")).evaluation.levels
    for mode in ("single", "double", "stream", "Weights:single,Inputs:stream"):
        got = walk(*_with(10, mode)).evaluation.levels
        assert [lv.tensors for lv in got] == [lv.tensors for lv in ref]


def test_stream_spreads_a_tile_over_its_walked_lifetime():
    """Walking the K loop too (cap 8: one MAC per block), a streamed row arrives over the two
    MACs that use it, not all before the first: blocks of max(1, 1 word) cycles, the weights' 2
    words over the first two: 2 + 2 + 6 x 1 = 10."""
    hier, nest, mapping = _with(5, "stream")
    assert walk(hier, nest, mapping, max_steps=8).cycles == 10
    assert walk(hier, nest, mapping, max_steps=8).steps == 8


def test_parse_buffering():
    assert parse_buffering("stream") == {"": "stream"}
    assert parse_buffering("Inputs:stream, Outputs:double") == {"": "auto", "Inputs": "stream", "Outputs": "double"}
    for bad, msg in (("triple", "unknown buffering mode 'triple'"), ("Inputs:fast", "unknown buffering mode 'fast'"),
                     ("Inputs:stream,Inputs:single", "Inputs is given twice"), (":stream", "is not Tensor:mode"),
                     ("", "short text"), (3, "short text")):
        with pytest.raises(HierarchyError, match=msg):
            parse_buffering(bad)
    with pytest.raises(HierarchyError, match=r"level 'b'\.buffering: unknown buffering mode"):
        StorageLevel("b", capacity_words=4, buffering="quadruple")


@pytest.mark.parametrize("value, msg", [
    ("triple", "must be one of auto, single, double, stream, or Tensor:mode pairs"),
    ("Weights:double", "names Weights, which the level does not keep"),
    ("Inputs:sometimes", "unknown buffering mode 'sometimes'"),
    (2, "must be one of auto"),
])
def test_a_bad_buffering_is_one_line(value, msg):
    with pytest.raises(HardwareError, match=msg) as e:
        load_hw("eyeriss").with_overrides({"levels.ifmap_spad.buffering": value})
    assert "\n" not in str(e.value) and str(e.value).startswith("hardware.levels.ifmap_spad.buffering")


def test_a_bad_buffering_in_a_file_is_one_line_on_the_cli(tmp_path, capsys):
    from tuner.cli import main
    d = load_hw("eyeriss").to_dict()
    d["levels"][2]["buffering"] = "sliding"
    f = tmp_path / "hw.json"
    f.write_text(json.dumps(d))
    assert main(["hw", "show", str(f)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("accel-tune: error:") and "buffering" in err and "sliding" in err and "\n" not in err


def test_default_keeps_fingerprints_and_files_round_trip():
    hw = load_hw("eyeriss")
    # auto, stated or not, is the same machine: to_dict leaves it out, as configs before the field
    auto = hw.with_overrides({f"levels.{lv.name}.buffering": "auto" for lv in hw.levels})
    assert all("buffering" not in lv for lv in auto.to_dict()["levels"])
    bare = HardwareConfig.from_dict({**auto.to_dict()})
    assert bare.fingerprint() == auto.fingerprint()
    # a stated mode is part of the machine and survives a round trip
    assert hw.fingerprint() != auto.fingerprint()
    back = HardwareConfig.from_dict(hw.to_dict())
    assert back.fingerprint() == hw.fingerprint() and back.levels == hw.levels
    assert [lv.buffering for lv in hierarchy_of(hw).levels] == [lv.buffering for lv in hw.levels]
    # one-buffer configs never carry it
    assert "levels" not in load_hw("edge-npu").to_dict()


def test_eyeriss_states_what_the_chip_does():
    """The spads take their words through the PE's FIFOs (stream); the GLB's room decides."""
    modes = {lv.name: lv.buffering for lv in load_hw("eyeriss").levels}
    assert modes == {"DRAM": "auto", "shared_glb": "auto", "ifmap_spad": "stream", "weights_spad": "stream",
                     "psum_spad": "stream"}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(bounded_cases(), st.sampled_from([1, 4, 1 << 14]), st.data())
def test_any_stated_buffering_keeps_the_counts_and_the_bound(case, cap, data):
    """Random nests, hierarchies with bounded ports and random per-level modes: the counts are
    the closed form's and the walk is never faster than the closed form; streaming every level
    (no transfer ever holds a block up) never costs more than single-buffering every level."""
    hier, nest, mapping = case
    modes = ("auto", "single", "double", "stream")
    levels = tuple(dataclasses.replace(lv, buffering=data.draw(st.sampled_from(modes))) for lv in hier.levels)
    stated = dataclasses.replace(hier, levels=levels)
    ev = evaluate(stated, nest, mapping)
    w = walk(stated, nest, mapping, max_steps=cap)
    assert _counts(w.evaluation.levels) == _counts(ev.levels)
    assert w.cycles >= ev.cycles
    # streaming everywhere never costs more than single-buffering everywhere
    every = {m: walk(dataclasses.replace(hier, levels=tuple(dataclasses.replace(lv, buffering=m) for lv in
                                                                   hier.levels)), nest, mapping, max_steps=cap).cycles
             for m in ("single", "stream")}
    assert ev.cycles <= every["stream"] <= every["single"]
