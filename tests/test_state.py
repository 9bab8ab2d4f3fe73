from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_threads import ImmutableState, StateConflictError

keys = st.sampled_from(["a", "b", "c", "d"])
leaves = (
    st.integers() | st.text(st.characters(blacklist_characters="\x00"), max_size=3) | st.booleans()
)  # NUL is refused
objects = st.recursive(
    st.dictionaries(keys, leaves, max_size=3),
    lambda children: st.dictionaries(
        keys, leaves | children | st.lists(leaves, max_size=2), max_size=3
    ),
    max_leaves=10,
)


def reference_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = reference_merge_patch(result.get(key), value)
    return result


def test_apply_shares_every_untouched_value() -> None:
    state = ImmutableState({f"k{i}": {"payload": [i, i + 1]} for i in range(10_000)})
    changed = state.apply({"k5": {"payload": None, "flag": True}})
    assert changed["k5"] == {"flag": True}
    assert state["k5"] == {"payload": (5, 6)}
    assert all(changed[f"k{i}"] is state[f"k{i}"] for i in range(10_000) if i != 5)


def test_set_creates_paths_and_shares_siblings() -> None:
    state = ImmutableState({"a": {"x": {"deep": 1}, "y": 2}, "b": 3})
    changed = state.set("a.z.w", 4)
    assert changed.to_dict() == {"a": {"x": {"deep": 1}, "y": 2, "z": {"w": 4}}, "b": 3}
    assert changed["a"]["x"] is state["a"]["x"]
    assert state.get_path("a.z.w") is None and changed.get_path(["a", "z", "w"]) == 4


def test_state_is_read_only_all_the_way_down() -> None:
    state = ImmutableState({"a": {"b": [1, 2]}})
    with pytest.raises(TypeError):
        state["a"]["c"] = 1
    assert isinstance(state["a"]["b"], tuple)
    plain = state.to_dict()
    plain["a"]["b"].append(3)
    assert state.to_dict() == {"a": {"b": [1, 2]}}


def test_non_json_values_are_rejected_naming_the_path() -> None:
    with pytest.raises(TypeError, match=r"a\.b"):
        ImmutableState({"a": {"b": object()}})


@given(base=objects, patch=objects)
def test_apply_is_rfc7386_merge_patch(base: dict[str, Any], patch: dict[str, Any]) -> None:
    assert ImmutableState(base).apply(patch).to_dict() == reference_merge_patch(base, patch)


@given(state=objects)
def test_json_bytes_round_trip_and_digest_is_stable(state: dict[str, Any]) -> None:
    frozen = ImmutableState(state)
    again = ImmutableState.from_json_bytes(frozen.to_json_bytes())
    assert again == frozen and again.digest == frozen.digest


def test_last_write_wins_takes_the_other_side() -> None:
    ours = ImmutableState({"a": 1, "nested": {"x": 1, "y": 1}})
    theirs = ImmutableState({"a": 2, "nested": {"y": 2}, "b": 3})
    assert ours.merge(theirs).to_dict() == {"a": 2, "nested": {"x": 1, "y": 2}, "b": 3}


def test_combine_lists_concatenates_and_falls_back_for_scalars() -> None:
    ours = ImmutableState({"notes": ["a"], "n": 1})
    theirs = ImmutableState({"notes": ["b"], "n": 2})
    merged = ours.merge(theirs, policy="combine_lists")
    assert merged.to_dict() == {"notes": ["a", "b"], "n": 2}


def test_combine_lists_with_base_appends_only_additions() -> None:
    base = ImmutableState({"notes": ["seed"]})
    left = base.apply({"notes": ["seed", "left"]})
    right = base.apply({"notes": ["seed", "right"]})
    merged = left.merge(right, policy="combine_lists", base=base)
    assert merged["notes"] == ("seed", "left", "right")


def test_raise_policy_names_the_conflicting_key() -> None:
    ours = ImmutableState({"plan": {"step": 1}, "same": 1})
    theirs = ImmutableState({"plan": {"step": 2}, "same": 1})
    with pytest.raises(StateConflictError, match=r"plan\.step") as info:
        ours.merge(theirs, policy="raise")
    assert (info.value.key, info.value.ours, info.value.theirs) == ("plan.step", 1, 2)


def test_three_way_merge_takes_one_sided_changes_without_conflict() -> None:
    base = ImmutableState({"a": 1, "b": 1, "gone": 0})
    left = base.apply({"a": 2, "gone": None})
    right = base.apply({"b": 3})
    assert left.merge(right, policy="raise", base=base).to_dict() == {"a": 2, "b": 3}


def test_unknown_policy_is_rejected() -> None:
    with pytest.raises(ValueError, match="policy"):
        ImmutableState().merge({}, policy="first_wins")  # type: ignore[arg-type]
