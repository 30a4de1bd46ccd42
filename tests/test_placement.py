"""ddpdemo.runtime.placement: every placement satisfies the Placement
protocol, member by member, and locality is the placement's answer (no
engines here: the objects are only made)."""
import pytest

from ddpdemo.runtime import controller, outcome, placement
from ddpdemo.runtime.placement import (LauncherPlacement, LocalPlacement,
                                       Placement, ProfilePlacement)
from ddpdemo.runtime.ssh import SSHRanks

pytestmark = pytest.mark.fast


def members():
    """The protocol's members: its annotated attributes and methods."""
    return sorted(set(Placement.__annotations__) | {
        name for name, value in vars(Placement).items()
        if callable(value) and not name.startswith("_")})


def every_placement():
    return [LocalPlacement(2), LauncherPlacement(2, "slurm"),
            LauncherPlacement(2, "mpi"), SSHRanks(2, {"a": 1, "b": 1}),
            ProfilePlacement("mine")]


def test_the_protocol_lists_the_interface_the_docstring_gives():
    for name in members():
        assert name in placement.__doc__, name
    assert {"local", "launch", "kill", "OPTIONS"} <= set(members())


@pytest.mark.parametrize("where", every_placement(),
                         ids=lambda p: type(p).__name__)
def test_every_placement_has_every_member(where):
    lacking = [m for m in members() if not hasattr(where, m)]
    assert not lacking, lacking
    assert isinstance(where, Placement)


def test_a_placement_lacking_one_member_is_not_a_placement():
    local = LocalPlacement(2)
    for missing in ("kill", "local", "exit_code"):
        fake = type("Lacking", (), {m: getattr(local, m) for m in members()
                                    if m != missing})()
        assert not isinstance(fake, Placement), missing
    whole = type("Whole", (), {m: getattr(local, m) for m in members()})()
    assert isinstance(whole, Placement)


def test_locality_is_the_placements_answer():
    assert [p.local for p in every_placement()] == [
        True, False, False, False, False]
    # The controller is ours to guard wherever we start one.
    assert [p.local_controller for p in every_placement()] == [
        True, True, True, True, False]


def test_the_runtime_asks_the_placement_not_the_class():
    """controller.py and outcome.py read `local_controller` and `local`,
    not a launcher's class or whether a dump path was given."""
    import inspect
    assert "local_controller" in inspect.getsource(controller.start)
    assert "gen.local" in inspect.getsource(outcome.settle)
    assert "dump is not None" not in inspect.getsource(outcome.settle)
