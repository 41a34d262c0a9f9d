"""Client for SGLang's native HTTP API (``/generate`` with ``input_ids``, health, info, abort)."""
