"""The fake model: the served tokenizer directory, deterministic outputs, detokenizing, logprobs."""
