"""Natural-language questions: an OpenAI-compatible chat client, question rewriting, the local
model (llama.cpp). The ``openai`` package is imported on first use only.

Example:
    >>> from pglogic.llm.client import LLMConfig
    >>> LLMConfig("http://127.0.0.1:8080/v1", "qwen").model
    'qwen'
"""
