"""SGLang 0.5.23's three layers of ``/generate`` validation, each with its own 400 shape."""
