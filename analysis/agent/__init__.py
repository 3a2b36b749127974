"""The LLM investigation: the prompt (untrusted text quoted as data), the bounded tool loop over the file
tools, and parsing of the model's answer into the report schema.

Submodules are listed rather than imported: `loop` pulls in langchain, which `prompt` does not need.
"""

__all__ = ["answer", "config", "loop", "prompt"]
