"""The one task registry (training/run_setup/tasks.py): every task folder registers one `Task`, found by name; a
module that registers none or two, a name held twice, an unknown name, each refused with what is wrong."""

from importlib.metadata import EntryPoint

import pytest

from training.run_setup import tasks
from training.registries import Registry
from training.run_setup.tasks import Task, UnknownTaskName


@pytest.fixture
def fresh_registry(monkeypatch):
    """An empty registry, loaded from the entry points `monkeypatch` gives `entry_points`."""
    monkeypatch.setattr(tasks, "_TASKS", Registry("task", unknown=UnknownTaskName))
    monkeypatch.setattr(tasks, "_loaded", False)

    def given(*pairs):
        eps = [EntryPoint(name, value, tasks.ENTRY_POINT_GROUP) for name, value in pairs]
        monkeypatch.setattr(tasks, "entry_points", lambda group: eps if group == tasks.ENTRY_POINT_GROUP else [])
    return given


def test_the_bundled_tasks_are_registered_by_name_with_their_pieces():
    assert [t.name for t in tasks.all()] == ["causal", "larger_number", "workspace"]
    causal = tasks.get("causal")
    assert list(causal.rewards) == ["optimization", "structure", "parent", "exploration"]
    assert causal.evaluation.name == "causal" and "causal/regret" in causal.metrics
    assert tasks.tiny_model("tiny-qwen3-causal") is causal.tiny_models["tiny-qwen3-causal"]
    assert tasks.tiny_model("no-such-model") is None
    assert tasks.tokenizer_lines() == tasks.get("workspace").tokenizer_lines()


def test_an_unknown_task_name_is_refused_with_the_registered_ones():
    with pytest.raises(UnknownTaskName, match=r"'causl' .*did you mean causal\?.*registered: causal, larger_number, "
                                              r"workspace"):
        tasks.get("causl")


def test_a_task_module_must_register_exactly_the_task_it_is_listed_as(fresh_registry, tmp_path, monkeypatch):
    (tmp_path / "registers_none.py").write_text("")
    (tmp_path / "registers_two.py").write_text(
        "from training.run_setup.tasks import Task, register\n"
        "register(Task(name='two_a', description=''))\nregister(Task(name='two_b', description=''))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    fresh_registry(("none", "registers_none"))
    with pytest.raises(RuntimeError, match=r"registers_none .*registered no task; it must register exactly one Task "
                                           r"named 'none'"):
        tasks.load_tasks()
    fresh_registry(("two_a", "registers_two"))
    with pytest.raises(RuntimeError, match=r"registered \['two_a', 'two_b'\]"):
        tasks.load_tasks()


def test_an_entry_point_to_a_missing_module_asks_for_a_reinstall(fresh_registry):
    fresh_registry(("causal", "training.tasks.causal.registration"))  # the name before the Task registry
    with pytest.raises(RuntimeError, match=r"training.tasks.causal.registration .*does not exist: the package's "
                                           r"metadata is stale; reinstall it \(pip install -e .\)"):
        tasks.load_tasks()


def test_no_entry_point_is_refused_naming_the_group(fresh_registry):
    fresh_registry()
    with pytest.raises(RuntimeError, match="strict_grpo.tasks"):
        tasks.load_tasks()


def test_a_name_belongs_to_one_task(fresh_registry):
    def reward(completions, **kwargs):
        return [0.0] * len(completions)

    tasks.register(Task(name="a", description="", rewards={"score": reward}, metrics={"a/x": "always"}))
    with pytest.raises(ValueError, match="task 'a' is registered twice"):
        tasks.register(Task(name="a", description=""))
    with pytest.raises(ValueError, match=r"task 'b' registers rewards that other tasks hold: \{'score': 'a'\}"):
        tasks.register(Task(name="b", description="", rewards={"score": reward}))
    with pytest.raises(ValueError, match=r"task 'c' registers metrics that other tasks hold: \{'a/x': 'a'\}"):
        tasks.register(Task(name="c", description="", metrics={"a/x": "always"}))
