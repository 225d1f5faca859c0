"""tune's plan against the wall clock, on simulated cost surfaces (a simulated clock, synthetic
fixed and measuring costs: no timing of this machine): all its rounds fit the budget, compile is
charged once per combo, precision is screened first, a small space is measured whole, and
checkpointing is screened at a micro-batch that only fits with it."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from gpubench.config.spec import Budget
from gpubench.tune import trial
from gpubench.tune.plan import Planner, TrialCost
from gpubench.tune.search import ROUNDS, Combo, Config, Cut, Space, Stop, search

BATCHES = tuple(2**i for i in range(2, 11))
BASE = ("fp32", "eager", 2)


def _screen_key(combo: Combo) -> tuple[int, list[int]]:
    changed = [n for n, ((_, v), w) in enumerate(zip(combo, BASE, strict=True)) if v != w]
    return len(changed), changed


# in the order space.combos screens them: the base, one axis changed (precision first), ...
COMBOS = tuple(
    sorted(
        (
            (("precision", p), ("compile", c), ("threads", t))
            for p, c, t in itertools.product(("fp32", "bf16"), ("eager", "compile"), (2, 1))
        ),
        key=_screen_key,
    )
)
SWEEP = Budget()  # the sweep's measurement: 3 s of warm-up and 2 s of measuring at the most


def speed(config: Config) -> float:
    """bf16 1.5x, compile 1.2x, two threads 1.3x; the batch peaks at 256."""
    s = dict(config.combo)
    b = config.batch_size
    f = (1.5 if s["precision"] == "bf16" else 1.0) * (1.2 if s["compile"] == "compile" else 1.0)
    f *= 1.3 if s.get("threads") == 2 else 1.0
    return 1000 * f * (b / (b + 32)) * (1 if b <= 256 else (256 / b) ** 0.3)


@dataclass
class Machine:
    """A simulated tune: a clock, a trial's fixed cost (a compiled combo's first trial pays
    `compile_s` more), and trials that measure to their budget's limits, cut to the deadline
    as the tuner cuts them."""

    budget_s: float | None
    fixed_s: float = 1.0
    compile_s: float = 10.0
    start_s: float = 5.0  # start-up and max-batch, before the search
    worker_start_s: float = 0.0  # what the first trial pays more: its worker's start
    # a CPU's step time at a configuration (None: steps too fast to matter): a trial runs at
    # least `fewest_steps` of them whatever its limit
    step_s: Callable[[Config], float] | None = None
    fewest_steps: int = 14
    clock: float = 0.0
    compiled: set[tuple[Combo, int]] = field(default_factory=set)
    planner: Planner = field(init=False)
    overrun_s: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.clock = self.start_s
        limits = [trial.measuring_limit_s(trial.round_budget(SWEEP, r)) for r in range(ROUNDS)]
        self.planner = Planner(self.budget_s, lambda: self.clock, limits, 0.15, self.start_s)
        self.planner.fewest_steps = self.fewest_steps if self.step_s is not None else 0

    def measure(self, surface: Callable[[Config], float | None]) -> Callable[..., float | None]:
        def run(config: Config, rnd: int) -> float | None:
            p = self.planner
            budget = trial.round_budget(SWEEP, rnd, p.scale())
            left, fixed = p.left_s(), p.fixed_s(config.combo, config.batch_size)
            cut = False
            if left is not None:
                if left - fixed <= 0:
                    raise Stop
                budget, cut = trial.bounded(budget, left - fixed)
            compiling = dict(config.combo)["compile"] == "compile"
            key = (config.combo, config.batch_size)  # a static graph per batch, as torch's
            compile_s = self.compile_s if compiling and key not in self.compiled else 0.0
            self.compiled.add(key)
            limit = trial.measuring_limit_s(budget)
            step = self.step_s(config) if self.step_s is not None else 0.0
            measuring = max(limit, self.fewest_steps * step)
            fresh = not p.costs
            fixed = self.fixed_s + compile_s + (self.worker_start_s if fresh else 0.0)
            self.clock += fixed + measuring
            if left is not None:  # past the search's deadline: only by a compile not planned
                self.overrun_s.append(self.clock - (self.clock - measuring - self.fixed_s) - left)
            p.observe(TrialCost(config.combo, rnd, fixed, measuring, compile_s, p.scale(),
                                limit, config.batch_size, step, surface(config),
                                fresh_worker=fresh))  # fmt: skip
            if cut:
                raise Cut(surface(config))
            return surface(config)

        return run


def test_unpaced_the_search_overruns_a_budget_that_the_plan_fits_all_rounds_into() -> None:
    space = Space(COMBOS, BATCHES)
    unpaced = Machine(None)
    search(space, unpaced.measure(speed))
    budget = 0.5 * unpaced.clock  # half of what the halving takes unpaced
    paced = Machine(budget)
    out = search(space, paced.measure(speed), pacer=paced.planner)
    assert out.rounds_decided == ROUNDS and out.stopped_in_round is None
    assert {t.round for t in out.trials} == {0, 1, 2}
    assert paced.clock <= budget - paced.planner.reserve_s() + 1e-6
    assert any(r.scale < 1 for r in paced.planner.rounds)  # it measured shorter to fit
    # half the time: the biggest lever (bf16) found, not every toggle's combination
    assert out.best is not None and dict(out.best.combo)["precision"] == "bf16"


def test_a_budget_too_short_for_every_round_ends_with_a_cut_or_stop_never_past_it() -> None:
    space = Space(COMBOS, BATCHES)
    m = Machine(40.0)
    out = search(space, m.measure(speed), pacer=m.planner)
    # a trial never runs past the search's deadline by more than its fixed cost's error
    assert all(o <= m.compile_s + 1e-6 for o in m.overrun_s)
    assert m.clock <= 40.0 + m.compile_s
    cut = [t for t in out.trials if t.outcome == "cut"]
    assert all(t is out.trials[-1] for t in cut)  # a cut trial ends the search
    assert out.best is None or all(t.config != out.best or t.outcome != "cut" for t in cut[-1:])


def test_a_cut_trial_is_recorded_but_never_ranked() -> None:
    space = Space(COMBOS[:1], (4, 8, 16))

    def measure(config: Config, rnd: int) -> float | None:
        if config.batch_size == 16:
            raise Cut(1e9)  # the fastest figure, but cut: never the best
        return float(config.batch_size)

    out = search(space, measure)
    assert [t.config.batch_size for t in out.trials] == [4, 16]  # 16 first cut: the end
    assert out.trials[-1].outcome == "cut" and out.stopped_in_round == 0
    assert out.best == Config(COMBOS[0], 4) and out.best_samples_per_s == 4.0


def test_compile_is_charged_once_per_configuration_and_foreseen_for_unmeasured_ones() -> None:
    p = Planner(100.0, lambda: 0.0, [1.0, 3.0, 9.0], 0.15, prior_fixed_s=0.5)
    eager = (("precision", "fp32"), ("compile", "eager"))
    compiled = (("precision", "fp32"), ("compile", "compile"))
    other = (("precision", "bf16"), ("compile", "compile"))
    assert p.fixed_s(compiled, 64) == 0.5  # nothing ran: max-batch's probes say
    p.observe(TrialCost(eager, 0, 1.0, 1.0, limit_s=1.0, batch_size=64))
    assert p.fixed_s(compiled, 64) == 1.0  # no compile seen yet: the largest first trial
    p.observe(TrialCost(compiled, 0, 12.0, 1.0, compile_s=10.0, limit_s=1.0, batch_size=64))
    assert p.fixed_s(compiled, 64) == 2.0  # measured again: its graph is cached
    assert p.fixed_s(compiled, 128) == 12.0  # a new batch compiles afresh (a graph per shape)
    assert p.fixed_s(other, 64) == 12.0  # an unmeasured setting: the compiled one's cost
    p.observe(TrialCost(other, 0, 20.0, 1.0, compile_s=18.0, limit_s=1.0, batch_size=64))
    assert p.fixed_s(compiled, 256) == 12.0  # its own compile, not another setting's
    assert p.fixed_s((("precision", "fp16"), ("compile", "compile")), 64) == 20.0  # the largest
    assert p.cost_s(1, [other] * 3, 1.0) == 2.0 + 20.0 + 20.0 + 3 * 3.0  # a start, two climbs
    p.observe(TrialCost(compiled, 1, 5.0, 3.0, compile_s=0.5, limit_s=3.0, batch_size=64))
    assert p.fixed_s(compiled, 64) == 5.0  # it did cost more again
    assert p.fixed_s(other, 64) == 20.0 - 18.0 + 0.5  # the cache's compile, as measured


def test_precision_is_screened_before_secondary_toggles_and_bf16_in_round_0() -> None:
    from gpubench.config.spec import Point
    from gpubench.tune.space import combos

    base = Point("cnn", "tiny", "cpu", "fp32", "sgd", 1)
    values = {
        "precision": ("fp16", "fp32", "bf16"),
        "compile": ("eager", "compile"),
        "threads": (1, 2),
        "channels_last": (False, True),
        "cuda_graph": (False,),
        "cudnn_benchmark": (False,),
        "checkpoint": ("none",),
    }
    order = combos(base, values, has_conv=True)
    changed = [[a for a, v in c if dict(order[0])[a] != v] for c in order]
    assert changed[0] == [] and changed[1:3] == [["precision"], ["precision"]]
    assert dict(order[1])["precision"] == "bf16"  # bf16 first-class
    assert changed[3:6] == [["compile"], ["threads"], ["channels_last"]]
    # a budget that screens only a few combos screens bf16 (the threads/compile ones later)
    space = Space(order, BATCHES)
    m = Machine(60.0)
    out = search(space, m.measure(lambda c: 1000.0 * c.batch_size / (c.batch_size + 32)),
                 pacer=m.planner)  # fmt: skip
    screened = {t.config.combo for t in out.trials if t.round == 0}
    assert order[1] in screened and len(screened) < len(order)


def test_a_space_cheaper_to_measure_whole_than_tunes_own_costs_is_measured_whole() -> None:
    small = Space(
        tuple((("precision", p), ("compile", "eager")) for p in ("fp32", "bf16")),
        tuple(2**i for i in range(2, 9)),  # the 7 batch sizes x 2 precisions
    )
    m = Machine(60.0, fixed_s=0.3, start_s=8.0)
    m.planner.prior_fixed_s = 0.3
    out = search(small, m.measure(speed), pacer=m.planner)
    assert out.measure_all and m.planner.to_dict()["measure_all"]
    assert {t.config for t in out.trials if t.round == 0} == {
        Config(c, b) for c in small.combos for b in small.batch_sizes
    }
    assert out.rounds_decided == ROUNDS and out.best == max(
        (Config(c, b) for c in small.combos for b in small.batch_sizes), key=speed
    )
    big = Machine(60.0, fixed_s=0.3, start_s=8.0)
    big.planner.prior_fixed_s = 0.3
    assert not search(Space(COMBOS, BATCHES), big.measure(speed), pacer=big.planner).measure_all


def test_a_workers_start_in_the_first_trial_does_not_price_every_other_setting_out() -> None:
    # the H100 trace (cnn, 4 precisions x 9 batches, eager): 22 s before the first trial, which
    # took 4 s with its worker's start, then 0.5 s a trial. Costed at the first trial, no other
    # precision had room: "measured the whole space" named fp32 alone, 9 of 36 measured.
    precisions = ("fp32", "bf16", "fp16", "tf32")
    space = Space(tuple((("precision", p), ("compile", "eager")) for p in precisions), BATCHES)
    m = Machine(60.0, fixed_s=0.1, start_s=22.0, worker_start_s=3.5)
    out = search(space, m.measure(speed), pacer=m.planner)
    assert out.measure_all and out.rounds_decided == ROUNDS
    assert {t.config for t in out.trials if t.round == 0} == {
        Config(c, b) for c in space.combos for b in BATCHES
    }
    assert dict(out.best.combo)["precision"] == "bf16"  # speed(): bf16 is the fastest


def test_a_space_measured_whole_but_costlier_than_planned_goes_on_by_the_halving() -> None:
    # the plan chose to measure it all, then trials cost 8x what it saw: breadth first, each
    # setting was measured at its smallest batch before any got a larger one; once the rest no
    # longer fits, the halving goes on from what was measured (a CPU's torch.compile, 20-35 s
    # a batch, had spent a cnn tune's round 0 on B=4 and B=8)
    precisions = ("fp32", "bf16", "fp16", "tf32")
    space = Space(tuple((("precision", p), ("compile", "eager")) for p in precisions), BATCHES)
    m = Machine(90.0, fixed_s=0.3, start_s=30.0)
    m.planner.prior_fixed_s = 0.3
    run = m.measure(speed)

    def slower(config: Config, rnd: int) -> float | None:
        m.fixed_s = 0.3 if len(m.planner.costs) < 4 else 2.5  # 8x what the plan was told
        return run(config, rnd)

    out = search(space, slower, pacer=m.planner)
    first = [t.config for t in out.trials if t.round == 0]
    assert not out.measure_all and len(first) < len(space.combos) * len(BATCHES)
    plan = m.planner.to_dict()
    assert not plan["measure_all"]
    assert plan["measure_all_why"].startswith("measuring the whole space was dropped after")
    assert {c.combo for c in first} == set(space.combos)
    assert {c.batch_size for c in first[:4]} == {min(BATCHES)}
    assert out.rounds_decided == ROUNDS and out.best is not None
    assert dict(out.best.combo)["precision"] == "bf16"  # speed(): bf16 is the fastest
    assert m.clock <= 90.0 + 1e-6


def test_checkpointing_is_screened_at_a_micro_batch_that_only_fits_with_it() -> None:
    none = (("precision", "fp32"), ("checkpoint", "none"))
    blocks = (("precision", "fp32"), ("checkpoint", "blocks"))
    space = Space((none, blocks), (4, 8, 16, 32, 64), 64, (("blocks", 64), ("none", 16)))

    def surface(config: Config) -> float | None:
        mode = dict(config.combo)["checkpoint"]
        if mode == "none" and config.batch_size > 16:
            return None  # out of memory without checkpointing
        return config.batch_size * (0.8 if mode == "blocks" else 1.0)

    out = search(space, lambda c, rnd: surface(c))
    first = [t.config for t in out.trials if t.round == 0]
    assert Config(blocks, 64, 64) in first  # screened where only it fits
    assert all(c.batch_size <= 16 for c in first if c.combo == none)  # no trial past its fit
    assert out.best == Config(blocks, 64, 64)


def test_a_max_batch_search_given_seconds_caps_its_probes_batch_to_what_they_afford() -> None:
    from gpubench.run.batch_search import Probe
    from gpubench.run.maxbatch import GROWTH, PLANNED_PROBES, _affordable

    one = [Probe(1, "ok", None, 2.0, "fit", step_time_s=0.001)]
    # with one probe a step is taken to grow in proportion to the batch, and the second probe
    # (4 steps of 0.001 s x B) may take all the time: it tells the line
    assert _affordable(one, 0.008 * 4, 3, 1) == min(8, GROWTH)
    assert _affordable(one, 0.0, 3, 1) == 1  # never under where it is
    assert _affordable(one, 1e9, 3, 1) == GROWTH  # never more than GROWTH-fold in a stage
    # two probes: the line through them (0.01 s + 0.0001 s per sample)
    two = [
        Probe(8, "ok", None, 1.0, "fit", step_time_s=0.0108),
        Probe(16, "ok", None, 2.0, "search", step_time_s=0.0116),
    ]
    allowed = 0.03 * PLANNED_PROBES * 4  # 0.03 s a step: 0.01 + 0.0001 x 200
    assert _affordable(two, allowed, 3, 16) == 200
    assert _affordable([Probe(1, "oom", None, 2.0, "fit")], 8.0, 3, 1) == 1


def test_a_trial_with_the_deadline_in_its_middle_stops_at_a_step_near_it() -> None:
    # a real tiny model measured in this process: unbounded, this budget warms up for 10 s and
    # measures for 30 s at the least (no interval ever tight enough); bounded to 1 s of room,
    # the harness ends it at a step boundary, with the fewest steps that give an interval
    from gpubench.config.spec import Point
    from gpubench.run.worker import run_point

    long = Budget(warmup_min_s=10.0, warmup_max_s=10.0, min_time_s=30.0, max_time_s=30.0,
                  target_rel_ci=0.0, profile_steps=0)  # fmt: skip
    bounded, cut = trial.bounded(long, 1.0)
    assert cut and trial.measuring_limit_s(bounded) == 1.0
    assert trial.bounded(long, 60.0) == (long, False)  # room enough: not cut
    row = run_point(Point("mlp", "tiny", "cpu", "fp32", "sgd", 4, threads=1), bounded)
    assert row["status"] == "ok" and row["steps_measured"] >= 6
    spent = row["warmup_time_s"] + row["wall_time_s"]
    assert spent < (long.warmup_min_s + long.min_time_s) / 4  # nowhere near the unbounded 40 s


def test_a_cut_measurement_never_becomes_a_configurations_row() -> None:
    from gpubench.tune.tuner import deepest

    row = {"model": "mlp", "model_size": "tiny", "device": "cpu", "precision": "fp32",
           "optimizer": "sgd", "batch_size": 4, "seed": 0}  # fmt: skip
    kept = [{**row, "tune_round": 0, "samples_per_s": 10.0}]
    cut = [{**row, "tune_round": 1, "samples_per_s": 99.0, "tune_cut": True}]
    assert deepest(kept + cut) == kept


def test_on_cuda_bf16_is_the_first_setting_screened(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from gpubench.config.spec import Point
    from gpubench.tune.space import combos

    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))  # H100
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
    base = Point("cnn", "tiny", "cuda", "fp32", "sgd", 1)
    values = {
        "precision": ("fp32", "tf32", "fp16", "bf16"),
        "compile": ("eager", "compile"),
        "threads": (None,),
        "channels_last": (False, True),
        "cuda_graph": (False, True),
        "cudnn_benchmark": (False, True),
        "checkpoint": ("none",),
    }
    order = combos(base, values, has_conv=True)
    first = [{a: v for a, v in c if dict(order[0])[a] != v} for c in order[1:5]]
    assert first == [{"precision": "bf16"}, {"precision": "fp16"}, {"precision": "tf32"},
                     {"compile": "compile"}]  # fmt: skip


def test_slow_steps_cost_the_fewest_steps_in_every_round_not_a_multiple_of_the_first() -> None:
    # a trial past its 0.5 s limit ran on the fewest steps an interval needs: a longer round
    # costs no more until its own limit is longer still; one that used half its limit scales
    p = Planner(100.0, lambda: 0.0, [0.5, 1.5, 4.5], 0.15)
    p.observe(TrialCost(COMBOS[0], 0, 0.3, 6.0, limit_s=0.5))
    assert p.measuring_est_s(2, 1.0) == 6.0 and p.measuring_est_s(0, 1.0) == 6.0
    q = Planner(100.0, lambda: 0.0, [0.5, 1.5, 4.5], 0.15)
    q.observe(TrialCost(COMBOS[0], 0, 0.3, 0.25, limit_s=0.5))
    assert q.measuring_est_s(2, 1.0) == 2.25 and q.measuring_est_s(2, 0.5) == 1.125


def test_a_configuration_whose_steps_took_long_is_not_started_without_room_for_them() -> None:
    clock = [0.0]
    p = Planner(100.0, lambda: clock[0], [0.5, 1.5, 4.5], 0.15)
    slow, fast = COMBOS[1], COMBOS[0]
    for b in (8, 16, 32, 64):
        p.observe(TrialCost(fast, 0, 0.3, 0.5, limit_s=0.5, batch_size=b))
    p.observe(TrialCost(slow, 0, 0.3, 60.0, limit_s=0.5, batch_size=64))  # past its limit
    p.begin(1, [fast, slow], [2])
    clock[0] = 40.0  # about 50 s of trials left: not the 60 s its steps take
    assert p.room(1, fast, 8) and not p.room(1, slow, 64)
    assert p.room(1, slow, 8)  # another batch of it has shown nothing of the kind
    assert not p.room(1, COMBOS[2], 64)  # another combo at that batch: its steps as slow


def test_a_cpu_whose_large_batches_take_seconds_a_step_is_searched_from_its_small_batches() -> None:
    # issue 42's head to head (cnn small on the 2-core CPU, 25% of a 506 s grid): tune began
    # with B=1024 (2.3 s a step, 30 s a trial), priced everything else out with it and answered
    # B=1024 at x0.36 of the grid's B=128. Cheap batches first, each larger one priced at its
    # fewest steps from the nearest measured batch, it screens every setting near the peak.
    combos = tuple(
        (("precision", "fp32"), ("compile", c), ("threads", t))
        for c, t in (("eager", 2), ("compile", 2), ("eager", 1), ("compile", 1))
    )
    space = Space(combos, BATCHES)

    def cnn(config: Config) -> float:
        s, b = dict(config.combo), config.batch_size
        f = (1.05 if s["compile"] == "compile" else 1.0) * (1.0 if s["threads"] == 2 else 0.6)
        return 700 * f * b / (b + 8) * (1 if b <= 128 else (128 / b) ** 0.2)

    m = Machine(126.0, fixed_s=0.5, compile_s=8.0, step_s=lambda c: c.batch_size / cnn(c))
    out = search(space, m.measure(cnn), pacer=m.planner)
    best = max((Config(c, b) for c in combos for b in BATCHES), key=cnn)
    assert out.best is not None and cnn(out.best) >= 0.9 * cnn(best)
    assert {dict(t.config.combo)["threads"] for t in out.trials if t.round == 0} == {1, 2}
    assert m.clock <= 126.0 + m.compile_s
