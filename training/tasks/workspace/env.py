"""A team workspace (chat channels and a ticket tracker) as a multi-turn tool-use environment.

All state lives in memory on one instance and is rebuilt by `reset` for every episode: tools touch no files, no
network and run no code. TRL's `environment_factory` creates instances, calls `reset(**row)` before each rollout,
exposes every public method except `reset`/`get_reward` as a tool (the docstrings become the JSON schemas the
model sees), and calls `get_reward` once per finished rollout: the task's goal checker, 1.0 or 0.0.

A valid call with a value the workspace cannot act on (a channel that does not exist) returns an `error: ...`
string, as a real API would; calls that do not match a tool's schema are the trainer's business
(`training.tool_use.tool_calls`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

# The workspace every episode starts from: channels and what was already said in them.
DEFAULT_CHANNELS: dict[str, list[tuple[str, str]]] = {
    "general": [("ana", "welcome to the team"), ("bo", "lunch at noon")],
    "eng": [("cy", "build green"), ("ana", "review my patch please")],
    "ops": [("di", "disk alert on db1"), ("cy", "rotated the keys")],
    "sales": [("ed", "demo went well")],
    "design": [("fa", "new logo draft is up")],
}
PRIORITIES = ("low", "medium", "high")
AGENT = "agent"


@dataclass
class Ticket:
    title: str
    body: str
    priority: str


@dataclass
class WorkspaceState:
    channels: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    tickets: list[Ticket] = field(default_factory=list)


class GoalError(ValueError):
    """A task row whose goal the environment cannot check; the message names the field."""


def _channel_name(channel: str) -> str:
    # "#eng" and "eng" name the same channel, as in the chat apps this imitates.
    return channel.strip().lstrip("#")


class WorkspaceEnv:
    """One episode of the workspace: channels, messages, tickets, and the task's goal checker."""

    def __init__(self):
        self.state = WorkspaceState()
        self.task: str | None = None
        self.goal: dict = {}

    # ---- episode --------------------------------------------------------------------------------------------------
    def reset(self, task: str | None = None, goal_json: str | None = None, **row) -> None:
        """Start a fresh episode for one task row (`task`, `goal_json`); the prompt already states the task."""
        self.state = WorkspaceState(channels={name: list(msgs) for name, msgs in DEFAULT_CHANNELS.items()})
        if task is None or goal_json is None:
            raise GoalError(
                f"workspace task row needs 'task' and 'goal_json' (got columns {sorted(['task', 'goal_json', *row])} "
                f"with task={task!r}, goal_json={goal_json!r})"
            )
        if task not in GOAL_CHECKERS:
            raise GoalError(f"unknown workspace task {task!r}; known tasks: {sorted(GOAL_CHECKERS)}")
        self.task = task
        self.goal = json.loads(goal_json)
        return None

    @property
    def state_key(self) -> tuple:
        """The episode's state (training/tool_use/state_keys.py): the task, its goal, every channel's messages and
        every ticket. A property, not a tool."""
        channels = tuple((name, tuple(messages)) for name, messages in self.state.channels.items())
        tickets = tuple((t.title, t.body, t.priority) for t in self.state.tickets)
        return self.task, json.dumps(self.goal, sort_keys=True), channels, tickets

    def get_reward(self) -> float:
        """1.0 when the episode's goal holds in the final workspace state, else 0.0."""
        if self.task is None:
            raise GoalError("get_reward called before reset: no task to check")
        return 1.0 if GOAL_CHECKERS[self.task](self.state, self.goal) else 0.0

    # ---- tools ----------------------------------------------------------------------------------------------------
    # Docstrings are the tool schemas in the model's prompt: kept terse, the tiny model's context is 1024 tokens.
    def list_channels(self):
        """List channels."""
        return ", ".join(self.state.channels)

    def read_channel(self, channel: str):
        """Read a channel.

        Args:
            channel: name
        """
        name = _channel_name(channel)
        if name not in self.state.channels:
            return f"error: no channel #{name}; channels: {self.list_channels()}"
        return "\n".join(f"{user}: {text}" for user, text in self.state.channels[name]) or "(no messages)"

    def search_messages(self, query: str):
        """Search messages.

        Args:
            query: text
        """
        needle = query.strip().lower()
        hits = [
            f"#{name} {user}: {text}"
            for name, msgs in self.state.channels.items()
            for user, text in msgs
            if needle and needle in text.lower()
        ]
        return "\n".join(hits) or f"no messages match {query!r}"

    def send_slack_message(self, channel: str, text: str):
        """Post a message.

        Args:
            channel: name
            text: message
        """
        name = _channel_name(channel)
        if name not in self.state.channels:
            return f"error: no channel #{name}; channels: {self.list_channels()}"
        if not text.strip():
            return "error: empty message"
        self.state.channels[name].append((AGENT, text))
        return f"sent to #{name}"

    def create_ticket(self, title: str, body: str, priority: Literal["low", "medium", "high"]):
        """Create a ticket.

        Args:
            title: title
            body: details
            priority: urgency
        """
        if not title.strip():
            return "error: empty title"
        self.state.tickets.append(Ticket(title=title, body=body, priority=priority))
        return f"created T-{len(self.state.tickets)}"


# ---- goal checkers (pure functions of the final state) ------------------------------------------------------------
def agent_posts(state: WorkspaceState) -> list[tuple[str, str]]:
    """(channel, text) of every message the agent posted in this episode."""
    return [(name, text) for name, msgs in state.channels.items() for user, text in msgs if user == AGENT]


def check_post_message(state: WorkspaceState, goal: dict) -> bool:
    """The goal text landed in the goal channel, and the agent posted nothing anywhere else."""
    posts = agent_posts(state)
    return bool(posts) and all(
        name == goal["channel"] and text.strip() == goal["text"] for name, text in posts
    )


def check_create_ticket(state: WorkspaceState, goal: dict) -> bool:
    """Exactly one ticket, with the goal title and the goal priority; no message was posted."""
    return (
        len(state.tickets) == 1
        and state.tickets[0].title.strip() == goal["title"]
        and state.tickets[0].priority == goal["priority"]
        and not agent_posts(state)
    )


GOAL_CHECKERS = {"post_message": check_post_message, "create_ticket": check_create_ticket}

