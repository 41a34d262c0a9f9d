"""The server log: the sink, SGLang's log dialects, tqdm bars, uvicorn's lines."""
