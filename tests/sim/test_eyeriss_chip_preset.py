"""The eyeriss-chip preset holds the published parameters of the fabricated chip (Chen et al.,
IEEE JSSC 52(1) 2017, Table IV and Sec. VI), each checked here against the paper's figure."""
from sim.hw import presets
from sim.hw.config import load_hw


def test_the_preset_is_the_papers_chip():
    hw = load_hw("eyeriss-chip")
    assert "eyeriss-chip" in presets.names()
    assert (hw.array.rows, hw.array.cols, hw.pes) == (12, 14, 168)
    assert hw.array.word_bytes == 2 and hw.array.mac_dtype == "int16"             # 16-bit fixed point
    assert hw.clock.freq_mhz == 200.0                                              # the measurements' core clock
    lv = {x.name: x for x in hw.levels}
    assert [x.name for x in hw.levels] == ["DRAM", "shared_glb", "ifmap_spad", "weights_spad", "psum_spad"]
    assert all(x.word_bits == 16 for x in hw.levels)
    assert lv["shared_glb"].capacity_words * 2 == 108 * 1024                       # 108 KB global buffer
    assert set(lv["shared_glb"].keeps) == {"Inputs", "Outputs"}                    # filters go to the PEs
    assert (lv["ifmap_spad"].capacity_words, lv["weights_spad"].capacity_words,
            lv["psum_spad"].capacity_words) == (12, 224, 24)                       # per-PE spads, 16-bit words
    # the off-chip link: 64 bits at 60 MHz, in 16-bit words per 200 MHz core cycle
    link_words_per_cycle = 64 / 16 * 60e6 / (hw.clock.freq_mhz * 1e6)
    assert lv["DRAM"].read_bandwidth == lv["DRAM"].write_bandwidth == link_words_per_cycle == 1.2
    assert hw.link.bytes_per_s == 64 / 8 * 60e6
    assert hw.dram.bytes_per_cycle == 64 / 8 * 60e6 / 200e6
    assert [x.buffering for x in hw.levels][2:] == ["stream"] * 3
    # the GLB <-> array networks (JSSC's NoC section): ifmap GIN 16 b and psum GIN 64 b read the GLB,
    # the psum GON (64 b) writes it, in 16-bit words per cycle
    assert lv["shared_glb"].read_bandwidth == (16 + 64) / 16 and lv["shared_glb"].write_bandwidth == 64 / 16
    assert hw.mapspace.family == "row_stationary"                                 # the chip runs RS only
    # the same machine as the eyeriss preset but for its link, GLB ports and mapping family
    ey = load_hw("eyeriss")
    assert [(x.name, x.capacity_words, x.keeps) for x in hw.levels] == [(x.name, x.capacity_words, x.keeps)
                                                                          for x in ey.levels]
    assert hw.fingerprint() != ey.fingerprint()
    assert ey.mapspace.family == "any"                                            # the eyeriss preset's whole space
