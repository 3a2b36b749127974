"""The agent's settings: which model, and the bounds of one investigation (no langchain import here)."""

from __future__ import annotations

from pydantic import BaseModel, Field

__all__ = ["MIN_TOOL_OUTPUT", "AgentConfig"]

MIN_TOOL_OUTPUT = 200
"""Characters of a tool result the model always gets, however full the conversation."""


class AgentConfig(BaseModel):
    """The model and the bounds of one investigation (the Ollama URL is given to `Agent` apart)."""

    model: str = Field("qwen2.5-coder:7b", description="Ollama chat model that investigates bursts.")
    max_steps: int = Field(8, ge=1, description="Model requests per analysis, the final answer included.")
    timeout_s: float = Field(120.0, gt=0, description="Wall clock for the investigation steps.")
    max_tool_calls_per_step: int = Field(8, ge=1, description="Tool calls run of one model reply; the rest are "
                                                              "answered as not run.")
    request_timeout_s: float = Field(60.0, gt=0, description="HTTP timeout of one model request.")
    tool_output_chars: int = Field(6000, ge=MIN_TOOL_OUTPUT, description="Cap of one tool result.")
    context_budget_chars: int = Field(60_000, ge=1000, description="Conversation size that ends tool use.")
    prompt_budget_chars: int = Field(24_000, ge=1000, description="Cap of the first user message.")
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="Sampling temperature; 0 keeps answers reproducible.")
    num_ctx: int = Field(8192, ge=512, description="Context window (tokens) asked of Ollama.")
