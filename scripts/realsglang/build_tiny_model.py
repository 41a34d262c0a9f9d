#!/usr/bin/env python3
"""Build a tiny Llama checkpoint and its tokenizer for a real SGLang server on a CPU.

Writes a Hugging Face model folder (config.json, model.safetensors, generation_config.json,
tokenizer.json, tokenizer_config.json) without downloading anything: the byte-level BPE
tokenizer is trained here on a fixed synthetic corpus, the weights are made here.

    python build_tiny_model.py OUT_DIR [--mode random|script] [--seed 0] [--vocab 1024]
                               [--model-vocab N] [--hidden 64] [--layers 2] [--dtype float32]

Tokenizer: exactly ``--vocab`` (1024) tokens, so every model id decodes. Special tokens
``<|endoftext|>`` = 0 (pad), ``<|im_start|>`` = 1, ``<|im_end|>`` = 2 (EOS); added,
non-special tokens (as in Qwen3) at the end: ``<think>`` = 1020, ``</think>`` = 1021,
``<tool_call>`` = 1022, ``</tool_call>`` = 1023. ChatML chat template; the generation prompt
ends in "\\n" (id 201). User "Hello world" renders as
``[1, 936, 201, 958, 954, 2, 201, 1, 300, 85, 927, 201]``.

``--mode random``: random weights (std 0.5). Greedy output is deterministic for a seed but
not predictable, and it practically never emits EOS.

``--mode script``: still an ordinary Llama checkpoint, but the attention and MLP output
projections are zero, so the residual stream is the current token's embedding, and the
embeddings and lm_head are set so that the next token is a fixed permutation ``succ`` of
the current one (saved in script.json). After any prompt ending in "\\n" greedy decoding
gives exactly ``[1020, 42, 496, 16, 1021, 435, 75, 3, 2]`` =
``<think>Hmm.</think> Hi!<|im_end|>`` and stops on EOS. The successor's probability is
close to 1, so temperature-1 sampling follows the same script.

Needs torch, transformers, tokenizers and safetensors (the SGLang venv has them).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
from pathlib import Path
from typing import Any

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]  # ids 0, 1, 2
ADDED_TOKENS = ["<think>", "</think>", "<tool_call>", "</tool_call>"]  # the last four ids

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}"
    "{{- '<think>\\n\\n</think>\\n\\n' -}}"
    "{%- endif -%}"
    "{%- endif -%}"
)

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello world! This is a tiny test model for an inference server.",
    "user assistant system tool think answer question reason step",
    "0123456789 + - * / = ( ) [ ] { } < > , . ; : ! ? ' \" \\n",
    "What is the capital of France? Paris is the capital of France.",
    "Let me think about this problem step by step before answering.",
    "import json\ndef main():\n    print('hello')\n",
    "The cat sat on the mat. A dog ran in the park. Numbers: 1 2 3 4 5.",
]

# The scripted answer, as text pieces between the special ids (see make_script_weights).
SCRIPT_REASONING = ("Hmm", ".")
SCRIPT_ANSWER = (" Hi", "!")


def corpus(lines: int = 3000, seed: int = 1234) -> list[str]:
    """Fixed sentences plus deterministic pseudo-words: enough text for BPE training to
    reach the requested vocabulary size, the same on every run."""
    rnd = random.Random(seed)
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    weights = [26 - i for i in range(len(letters))]
    out = SENTENCES * 20
    for _ in range(lines):
        words = []
        for _ in range(rnd.randint(3, 12)):
            word = "".join(rnd.choices(letters, weights=weights, k=rnd.randint(1, 9)))
            if rnd.random() < 0.1:
                word = word.capitalize()
            if rnd.random() < 0.05:
                word = str(rnd.randint(0, 9999))
            words.append(word)
        out.append(" ".join(words) + rnd.choice([".", ",", "!", "?", "", "\n"]))
    return out


def build_tokenizer(out_dir: Path, vocab_size: int) -> Any:
    from tokenizers import (
        AddedToken,
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(ADDED_TOKENS),
        min_frequency=1,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED_TOKENS])

    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        additional_special_tokens=["<|im_start|>"],
        clean_up_tokenization_spaces=False,
        model_max_length=2048,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out_dir)
    # Keep the template inside tokenizer_config.json too (older readers ignore
    # chat_template.jinja), and use names that transformers 4.x understands as well.
    config_path = out_dir / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["chat_template"] = CHAT_TEMPLATE
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    extra = config.get("extra_special_tokens") or config.get("additional_special_tokens")
    if isinstance(extra, list):
        config["additional_special_tokens"] = extra
        config.pop("extra_special_tokens", None)
    config_path.write_text(json.dumps(config, indent=2, ensure_ascii=False))
    return fast


def make_script_weights(model: Any, tok: Any, seed: int) -> dict[str, Any]:
    """Make the next token a fixed permutation ``succ`` of the current one.

    With o_proj and down_proj zero the residual stream is the embedding ``E[t]`` of the
    current token; the final RMSNorm weight is 1 and ``lm_head[v] = scale * E[pred[v]]``
    with unit-length random rows, so the largest logit for token t is at ``v = succ[t]``
    (``E[t] . E[t] = 1`` beats every ``E[s] . E[t]``).
    """
    import torch

    vocab = model.config.vocab_size
    newline = tok.convert_tokens_to_ids("\u010a")  # byte-level "\n"
    chain = [newline, tok.convert_tokens_to_ids("<think>")]
    for piece in SCRIPT_REASONING:
        chain += tok.encode(piece, add_special_tokens=False)
    chain.append(tok.convert_tokens_to_ids("</think>"))
    for piece in SCRIPT_ANSWER:
        chain += tok.encode(piece, add_special_tokens=False)
    chain.append(tok.convert_tokens_to_ids("<|im_end|>"))
    assert len(set(chain)) == len(chain), ("the script's tokens must be distinct", chain)

    succ = dict(itertools.pairwise(chain))
    rnd = random.Random(seed)
    sources = [t for t in range(vocab) if t not in succ]
    taken = set(chain[1:])
    targets = [t for t in range(vocab) if t not in taken]
    rnd.shuffle(targets)
    succ.update(zip(sources, targets, strict=True))
    assert sorted(succ.values()) == list(range(vocab))
    pred = {b: a for a, b in succ.items()}

    generator = torch.Generator().manual_seed(seed)
    emb = torch.randn(vocab, model.config.hidden_size, generator=generator)
    emb = emb / emb.norm(dim=1, keepdim=True)
    scale = 3.0
    with torch.no_grad():
        model.model.embed_tokens.weight.copy_(emb)
        model.lm_head.weight.copy_(scale * emb[torch.tensor([pred[v] for v in range(vocab)])])
        model.model.norm.weight.fill_(1.0)
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
    return {
        "chain": chain,
        "chain_tokens": tok.convert_ids_to_tokens(chain),
        "succ": [succ[t] for t in range(vocab)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--mode", default="random", choices=["random", "script"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--vocab", type=int, default=1024, help="tokenizer size (BPE target)")
    parser.add_argument("--model-vocab", type=int, default=0,
                        help="model vocab; 0 = the tokenizer's size, more = padded like "
                             "real models (ids past the tokenizer then decode to '')")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--max-pos", type=int, default=4096)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    args = parser.parse_args()

    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    out_dir: Path = args.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(out_dir, args.vocab)
    eos_id = tok.convert_tokens_to_ids("<|im_end|>")
    pad_id = tok.convert_tokens_to_ids("<|endoftext|>")
    bos_id = tok.convert_tokens_to_ids("<|im_start|>")
    model_vocab = args.model_vocab or len(tok)
    assert len(tok) <= model_vocab, (len(tok), model_vocab)

    torch.manual_seed(args.seed)
    config = LlamaConfig(
        vocab_size=model_vocab,
        hidden_size=args.hidden,
        intermediate_size=args.hidden * 2,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads,
        head_dim=args.hidden // args.heads,
        max_position_embeddings=args.max_pos,
        rms_norm_eps=1e-6,
        rope_theta=10000.0,
        hidden_act="silu",
        tie_word_embeddings=False,
        bos_token_id=bos_id,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        initializer_range=0.5,  # large: peaky, far from uniform logits
    )
    model = LlamaForCausalLM(config)
    script = make_script_weights(model, tok, args.seed) if args.mode == "script" else None
    model = model.to(getattr(torch, args.dtype))
    model.save_pretrained(out_dir, safe_serialization=True)
    # the dtype under both spellings (transformers 4.x and 5.x), rope_theta for old readers
    config_path = out_dir / "config.json"
    saved = json.loads(config_path.read_text())
    saved["torch_dtype"] = saved["dtype"] = args.dtype
    saved.setdefault("rope_theta", 10000.0)
    config_path.write_text(json.dumps(saved, indent=2))
    if script is not None:
        (out_dir / "script.json").write_text(json.dumps(script))
    GenerationConfig(bos_token_id=bos_id, eos_token_id=eos_id, pad_token_id=pad_id,
                     do_sample=False).save_pretrained(out_dir)

    ids = tok.apply_chat_template([{"role": "user", "content": "Hello world"}],
                                  add_generation_prompt=True, tokenize=True)
    if hasattr(ids, "keys"):
        ids = ids["input_ids"]
    print(json.dumps({
        "out_dir": str(out_dir.resolve()),
        "mode": args.mode,
        "tokenizer_len": len(tok),
        "vocab_size": model_vocab,
        "eos_token_id": eos_id,
        "pad_token_id": pad_id,
        "think_ids": [tok.convert_tokens_to_ids("<think>"), tok.convert_tokens_to_ids("</think>")],
        "example_chat_ids": list(ids),
        "params": sum(p.numel() for p in model.parameters()),
        "script_chain": script["chain"] if script else None,
    }))


if __name__ == "__main__":
    main()
