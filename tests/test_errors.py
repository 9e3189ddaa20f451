"""Every project exception survives pickling (``compare`` sends them back from worker processes)."""

from __future__ import annotations

import importlib
import pickle
import pkgutil

import pytest

import slurmplan
from slurmplan.domain import SlurmplanError, ValidationError

# Constructor arguments for each subclass whose ``__init__`` takes more than a message.
_ARGS: dict[str, tuple] = {
    "ValidationError": ("policy", "bogus", "one of: las, fifo", "compare"),
    "TraceError": ("gpus", -1, "a count > 0", "t.jsonl:3"),
    "SlurmCommandError": (["sinfo", "--json"], 1, "sinfo: error: bad conf\n", "out"),
    "SlurmOutputError": ("sinfo", "nodes[0].name", "expected a string"),
}


def _all_subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *_all_subclasses(sub)]
    return out


def _error_classes() -> list[type]:
    for mod in pkgutil.walk_packages(slurmplan.__path__, "slurmplan."):
        if mod.name != "slurmplan.launch.__main__":
            importlib.import_module(mod.name)
    return [SlurmplanError, *_all_subclasses(SlurmplanError)]


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda c: c.__name__)
def test_every_error_round_trips_through_pickle(cls):
    exc = cls(*_ARGS.get(cls.__name__, ("something went wrong",)))
    exc.note = "added after construction"
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is cls
    assert str(back) == str(exc)
    assert {k: v for k, v in vars(back).items()} == vars(exc)


def test_validation_error_keeps_its_fields_across_processes():
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=1) as pool, pytest.raises(ValidationError) as info:
        pool.submit(_raise, "bogus").result()
    assert (info.value.field, info.value.value, info.value.where) == ("policy", "bogus", "worker")
    assert "invalid policy 'bogus'" in str(info.value)


def _raise(value: str) -> None:
    raise ValidationError("policy", value, "a known policy", "worker")
