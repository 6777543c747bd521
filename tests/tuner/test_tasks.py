"""Task extraction from partitioned graphs (weights against an independent count of the model's
ops) and the gradient task scheduler."""
import pytest

import sim
from partition.builder import GraphBuilder
from partition.byoc.pipeline import partition_for
from tuner.tasks import ANCHOR_OPS, Task, TaskError, TaskScheduler, extract_tasks, kernels

HW = sim.load_hw("edge-npu")


def two_block_graph():
    b = GraphBuilder("t", 0)
    x = b.input("x", (1, 8, 16, 16))
    y = b.conv_bn(x, 8, 3, name="a")
    y = b.conv_bn(y, 8, 3, name="b")           # same workload as "a": one task of weight 2
    y = b.conv_bn(y, 16, 1, name="c", act=None)
    return b.finish([y])


def test_repeated_kernels_become_one_weighted_task():
    pg = partition_for(two_block_graph(), HW.partition_target())
    tasks = extract_tasks(pg)
    assert [t.weight for t in tasks] == [2, 1]
    a, c = tasks[0].workload, tasks[1].workload
    assert a == sim.Workload.conv2d(1, 8, 16, 16, 8, 3, 3, pad=1, dtype_bytes=4, epilogue=("batch_norm", "relu"))
    assert c.d["k"] == 16 and c.epilogue == ("batch_norm",)
    assert len(tasks[0].names) == 2


def test_unpartitioned_graph_has_no_tasks():
    assert extract_tasks(two_block_graph()) == ()


def test_resnet18_weights_match_the_models_op_count():
    from partition import models
    g = models.get("resnet18")
    pg = partition_for(g, HW.partition_target())
    tasks = extract_tasks(pg)
    anchors = sum(n.op in ANCHOR_OPS for _, n in g.walk())
    assert sum(t.weight for t in tasks) == anchors          # every conv/dense offloaded exactly once
    assert len({t.key for t in tasks}) == len(tasks)
    assert len(tasks) < anchors                            # repeats merged
    assert len(kernels(pg)) == anchors


def test_task_validation():
    with pytest.raises(TaskError, match="weight must be an integer >= 1"):
        Task(sim.Workload.gemm(2, 2, 2), weight=0)
    with pytest.raises(TaskError, match="no tasks"):
        TaskScheduler([])


def tasks3():
    return [Task(sim.Workload.gemm(8, 8, 8 * (i + 1)), weight=w) for i, w in enumerate((1, 10, 1))]


def test_scheduler_warms_up_each_task_in_order_then_follows_the_gradient():
    s = TaskScheduler(tasks3())
    order = []
    for best in (1000.0, 1000.0, 1000.0):
        i = s.next_task()
        order.append(i)
        s.record(i, best)
    assert order == [0, 1, 2]
    # Equal cycles, task 1 weighs 10x: it cuts the weighted latency most.
    assert s.next_task() == 1
    assert s.gradient(1) == pytest.approx(10 * 1000.0)
    assert s.objective() == 12 * 1000.0


def test_scheduler_prefers_a_task_that_keeps_improving():
    s = TaskScheduler([Task(sim.Workload.gemm(8, 8, 8)), Task(sim.Workload.gemm(8, 8, 16))])
    for best in (1000.0, 500.0, 250.0, 125.0):
        s.record(0, best)       # halving every round
    for best in (300.0, 300.0, 300.0, 300.0):
        s.record(1, best)       # stuck
    # gradients: task 0: 0.2 * (1000-125)/3 + 0.8 * 125/4; task 1: 0.2 * 0 + 0.8 * 300/4
    assert s.gradient(0) == pytest.approx(0.2 * 875 / 3 + 0.8 * 125 / 4)
    assert s.gradient(1) == pytest.approx(0.8 * 75)
    assert s.next_task() == 0


def test_done_tasks_are_skipped():
    s = TaskScheduler(tasks3())
    for i in range(3):
        s.record(i, 100.0)
    s.mark_done(1)
    assert s.next_task() in (0, 2)
    s.mark_done(0)
    s.mark_done(2)
    assert s.next_task() is None
