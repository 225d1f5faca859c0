"""The search kept as an Optuna study in the run folder (tune.db, SQLite), so optuna-dashboard
shows it (`optuna-dashboard sqlite:///DIR/tune.db`) and other Optuna tools can read it.

Optuna does not choose what is measured (gpubench.tune.search does, see the README's design
note): each configuration is one trial, its params the competing settings, its intermediate
value at step r the samples/s measured in round r; a configuration the search left behind is
told PRUNED, one measured in the last round COMPLETE with that round's figure, one that could
not run FAIL. A configuration still open when the search stopped stays RUNNING, and a resumed
tune goes on reporting to it. Recording is idempotent: a resumed tune that replays what was
measured adds nothing twice.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.trial import TrialState

from gpubench.tune.search import Config, Trial
from gpubench.tune.space import AXES, TuneSpace

FILE = "tune.db"
STUDY = "tune"
_KEY = "config"  # the user attribute holding a trial's configuration as canonical JSON


def storage_url(run_dir: Path) -> str:
    return f"sqlite:///{(run_dir / FILE).resolve()}"


class StudyLog:
    """Records the search's trials into the study `STUDY` of `run_dir`/tune.db."""

    def __init__(self, run_dir: Path, space: TuneSpace) -> None:
        optuna.logging.set_verbosity(optuna.logging.WARNING)  # the console prints progress
        self.study = optuna.create_study(
            study_name=STUDY,
            storage=storage_url(run_dir),
            direction="maximize",
            load_if_exists=True,
        )
        self.dists: dict[str, BaseDistribution] = {
            a: CategoricalDistribution(list(space.values[a])) for a in AXES
        }
        b = space.batch_sizes
        if space.effective_batch is None:
            self.dists["batch_size"] = IntDistribution(b[0], b[-1], log=True)
        else:  # a fixed effective batch: the trials differ in its accumulation steps
            e = space.effective_batch
            self.dists["batch_size"] = IntDistribution(e, e)
            self.dists["accumulate"] = CategoricalDistribution(list(space.accumulate_values()))
        # configuration -> (trial number, trial id, steps reported, finished)
        self._known: dict[str, tuple[int, int, set[int], bool]] = {}
        for t in self.study.get_trials(deepcopy=False):
            key = t.user_attrs.get(_KEY)
            if key is not None:
                finished = t.state != TrialState.RUNNING
                # _trial_id: Optuna's public Trial(study, trial_id) needs the storage's id
                self._known[key] = (t.number, t._trial_id, set(t.intermediate_values), finished)

    def record(self, config: Config, rnd: int, samples_per_s: float | None) -> None:
        """One measurement of `config` in round `rnd` (None: it could not run)."""
        key = _key(config)
        if key not in self._known:
            self.study.enqueue_trial(config.settings())
            trial = self.study.ask(self.dists)
            trial.set_user_attr(_KEY, key)
            self._known[key] = (trial.number, trial._trial_id, set(), False)
        number, trial_id, steps, finished = self._known[key]
        if finished or rnd in steps:
            return
        if samples_per_s is None:
            self.study.tell(number, state=TrialState.FAIL)
            self._known[key] = (number, trial_id, steps, True)
            return
        optuna.trial.Trial(self.study, trial_id).report(samples_per_s, rnd)
        steps.add(rnd)

    def settle(self, trials: list[Trial]) -> None:
        """Tell each configuration's fate once the search has decided it (its last trial's
        outcome): pruned, or complete with its last round's figure."""
        last: dict[str, Trial] = {}
        for t in trials:
            last[_key(t.config)] = t
        for key, t in last.items():
            number, trial_id, steps, finished = self._known[key]
            if finished or t.outcome not in ("pruned", "final"):
                continue
            if t.outcome == "pruned":
                self.study.tell(number, state=TrialState.PRUNED)
            else:
                self.study.tell(number, t.samples_per_s)
            self._known[key] = (number, trial_id, steps, True)


def _key(config: Config) -> str:
    settings: dict[str, Any] = config.settings()
    return json.dumps(settings, sort_keys=True)
