"""ls, show, tree, log and runs on the sample store: text for people, --json for scripts."""

from __future__ import annotations

from tests.cli.conftest import LONG, Sample, as_json, ok


def test_ls_lists_top_threads_newest_first_with_their_lengths(sample: Sample) -> None:
    listed = as_json("ls", "--store", sample.url)
    ids = [t["id"] for t in listed["threads"]]
    assert ids[0] == "run-1" and set(ids) == {"run-1", "other", "retry", "retry-2", "support"}
    heads = {t["id"]: t["head"] for t in listed["threads"]}
    assert heads == {"run-1": None, "other": 0, "retry": 4, "retry-2": 4, "support": 5}
    assert listed["next_cursor"] is None
    text = ok("ls", "--store", sample.url)
    assert "Late order" in text and "env=prod, team=care" in text and "workflow (paused)" in text


def test_ls_filters_by_tag_kind_and_title(sample: Sample) -> None:
    def ids(*options: str) -> set[str]:
        return {t["id"] for t in as_json("ls", "--store", sample.url, *options)["threads"]}

    assert ids("--tag", "env=prod", "--tag", "team=care") == {"support", "retry", "retry-2"}
    assert ids("--tag", "env=dev") == {"other"}
    assert ids("--kind", "workflow") == {"run-1"}
    assert ids("--title", "RETRY") == {"retry", "retry-2"}
    assert len(ids("--sub-threads")) == 5 + 3  # the run's main, draft and editor


def test_ls_pages_with_the_cursor_it_prints(sample: Sample) -> None:
    seen: list[str] = []
    options = ["ls", "--store", sample.url, "--limit", "2", "--oldest-first"]
    page = as_json(*options)
    while True:
        seen += [t["id"] for t in page["threads"]]
        if page["next_cursor"] is None:
            break
        page = as_json(*options, "--after", page["next_cursor"])
    assert seen[0] == "support" and len(seen) == len(set(seen)) == 5
    assert "more: add --after " in ok("ls", "--store", sample.url, "--limit", "1")


def test_show_pairs_tool_calls_with_results_and_folds_long_text(sample: Sample) -> None:
    text = ok("show", "support", "--store", sample.url)
    assert "#1 user · alice" in text and "My order is late." in text
    assert 'call lookup_order({"order": 42})' in text
    assert 'result: {"status": "shipped"}  (#3)' in text  # beside its call
    assert "result of call_1: shown with #2" in text
    flat = " ".join(text.split())
    assert "more characters: --full shows them]" in flat and LONG not in flat
    full = ok("show", "support", "--store", sample.url, "--full")
    assert "x" * 2000 in full.replace("\n", "").replace(" ", "")


def test_show_json_holds_the_messages_and_the_call_pairs(sample: Sample) -> None:
    shown = as_json("show", "support", "--store", sample.url)
    assert shown["thread"]["id"] == "support" and shown["checkpoint"] is None
    assert [m["id"] for m in shown["messages"]] == sample.messages
    assert shown["messages"][4]["contents"][0]["text"] == LONG  # JSON is never folded
    assert shown["tool_calls"] == [
        {
            "call_id": "call_1",
            "name": "lookup_order",
            "call_message_id": sample.messages[2],
            "result_message_id": sample.messages[3],
            "is_error": False,
        }
    ]
    last = as_json("show", "support", "--store", sample.url, "--last", "2")
    assert (last["first_index"], [m["id"] for m in last["messages"]]) == (3, sample.messages[3:])


def test_show_at_a_checkpoint_shows_the_thread_as_it_was(sample: Sample) -> None:
    then = as_json("show", "support", "--store", sample.url, "--at", "asked")
    assert then["checkpoint"]["label"] == "asked"
    assert [m["id"] for m in then["messages"]] == sample.messages[:3]
    assert then["tool_calls"][0]["result_message_id"] is None
    assert "no result yet" in ok("show", "support", "--store", sample.url, "--at", "asked")
    sorry = as_json("show", "retry", "--store", sample.url, "--at", "sorry")
    assert sorry["messages"][-1]["contents"][0]["text"] == "Sorry! Refund issued."


def test_show_a_workflow_shows_each_sub_thread(sample: Sample) -> None:
    shown = as_json("show", "run-1", "--store", sample.url)
    subs = {s["key"]: s for s in shown["sub_threads"]}
    assert list(subs) == ["main", "draft", "editor"]
    assert [m["contents"][0]["text"] for m in subs["draft"]["messages"]] == ["a draft"]
    text = ok("show", "run-1", "--store", sample.url)
    assert "draft: " in text and "a draft" in text and "workflow (paused)" in text


def test_tree_shows_ancestors_forks_and_fork_points(sample: Sample) -> None:
    lineage = as_json("tree", "retry", "--store", sample.url)
    (parent,) = lineage["ancestors"]
    assert (parent["thread_id"], parent["fork_point"], parent["fork_index"]) == (
        "support",
        sample.messages[2],
        2,
    )
    assert parent["fork_text"] == "Let me check."
    (child,) = lineage["children"]  # forked whole before retry's rollback: its point is gone
    assert (child["thread"]["id"], child["fork_index"], child["children"]) == ("retry-2", 3, [])
    assert child["fork_text"] == "Sorry! Refund issued."  # found in the fork itself
    root = as_json("tree", "support", "--store", sample.url)
    assert root["ancestors"] == []
    assert [c["thread"]["id"] for c in root["children"]] == ["retry"]
    assert [c["thread"]["id"] for c in root["children"][0]["children"]] == ["retry-2"]
    text = ok("tree", "retry-2", "--store", sample.url)
    assert text.index("support") < text.index("retry ") < text.index("retry-2")
    assert "forked at #2 “Let me check.”" in text and "forked at #3 “Sorry!" in text


def test_log_lists_checkpoints_with_counts_and_state_hashes(sample: Sample) -> None:
    log = as_json("log", "support", "--store", sample.url)["checkpoints"]
    assert [(c["label"], c["message_count"]) for c in log] == [("asked", 3), ("done", 5)]
    assert log[0]["state_digest"] is None and len(log[1]["state_digest"]) == 64
    text = ok("log", "support", "--store", sample.url)
    assert "asked" in text and log[1]["state_digest"][:12] in text
    rolled = as_json("log", "retry", "--store", sample.url)["checkpoints"]
    assert [(c["label"], c["reason"]) for c in rolled] == [
        ("sorry", "manual"),
        ("before-rollback", "rollback"),
    ]


def test_runs_lists_runs_and_shows_one_with_its_interrupts(sample: Sample) -> None:
    (run,) = as_json("runs", "--store", sample.url)["runs"]
    assert (run["id"], run["status"], run["workflow"]) == ("run-1", "paused", "approval")
    assert [r["step"] for r in run["current"]] == ["approve"]
    assert [(i["step"], i["prompt"]) for i in run["interrupts"]] == [
        ("approve", {"question": "publish?"})
    ]
    one = as_json("runs", "run-1", "--store", sample.url)
    assert [(s["step"], s["status"]) for s in one["history"]] == [
        ("draft", "completed"),
        ("approve", "interrupted"),
    ]
    assert [s["key"] for s in one["sub_thread_summaries"]] == ["main", "draft", "editor"]
    text = ok("runs", "run-1", "--store", sample.url)
    assert 'waiting: step approve (editor) asks {"question": "publish?"}' in text
    assert "approval" in ok("runs", "--store", sample.url)
