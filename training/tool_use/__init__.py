"""Tool use, task-independent: malformed tool calls, tool-name checks, the agent's system prompt."""
