"""Build the bundled tiny Kimi-K2.5-shaped tokenizer in core/tokenizer/assets/kimi-k2.5-tiny/.

The real Kimi tokenizer (TikToken, 163,840 ids) cannot be shipped or downloaded here, so this
script trains a small byte-level BPE (about 4,000 ordinary tokens, ids 0..N-1) on English text
that every CPython carries (``pydoc_data.topics``) and places Kimi's special tokens at their
real ids (163584..163839). Each special token is put into the BPE vocabulary at its id *and*
listed in ``added_tokens`` with the same id: the ``tokenizers`` library would otherwise give a
token listed only in ``added_tokens`` the next free id.

The output is deterministic for a given Python (the corpus) and ``tokenizers`` version:

    python scripts/build_kimi_tokenizer.py            # (re)write the assets
    python scripts/build_kimi_tokenizer.py --check    # rebuild in memory, compare, exit 1 on drift
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "core" / "tokenizer" / "assets" / "kimi-k2.5-tiny"

REGULAR_VOCAB = 4000
RESERVED_FIRST = 163584
VOCAB_SIZE = 163840

# (id, text, special flag) exactly as in Kimi's tokenizer_config.json.
NAMED_SPECIALS: tuple[tuple[int, str, bool], ...] = (
    (163584, "[BOS]", True),
    (163585, "[EOS]", True),
    (163586, "<|im_end|>", True),
    (163587, "<|im_user|>", True),
    (163588, "<|im_assistant|>", True),
    (163590, "<|start_header_id|>", True),
    (163591, "<|end_header_id|>", True),
    (163593, "[EOT]", True),
    (163594, "<|im_system|>", True),
    (163595, "<|tool_calls_section_begin|>", False),
    (163596, "<|tool_calls_section_end|>", False),
    (163597, "<|tool_call_begin|>", False),
    (163598, "<|tool_call_argument_begin|>", False),
    (163599, "<|tool_call_end|>", False),
    (163601, "<|im_middle|>", True),
    (163602, "<|media_begin|>", True),
    (163603, "<|media_content|>", True),
    (163604, "<|media_end|>", True),
    (163605, "<|media_pad|>", True),
    (163606, "<think>", False),
    (163607, "</think>", False),
    (163838, "[UNK]", True),
    (163839, "[PAD]", True),
)

# A cl100k-like split with Kimi's extra rule that runs of Han characters stay together.
PRE_TOKENIZE_PATTERN = (
    r"[\p{Han}]+"
    r"|[^\r\n\p{L}\p{N}]?\p{L}+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+"
    r"|\s+(?!\S)"
    r"|\s+"
)

# Words every chat prompt contains, one per line (no leading space, as after a role token),
# so the role names become single tokens as they are in Kimi.
CHAT_WORDS = (
    "\n".join(
        (
            "system",
            "user",
            "assistant",
            "tool",
            "tool_declare",
            "functions",
            "## Return of",
            "You are Kimi, an AI assistant created by Moonshot AI.",
            "get_weather",
            "function",
        )
    )
    + "\n"
)

DEFAULT_SYSTEM = "You are Kimi, an AI assistant created by Moonshot AI."

# The chat template, in the Kimi-K2.5 layout (ids in core/kimi.py). Written as
# one line per construct; every tag trims whitespace so only literal output reaches the prompt.
CHAT_TEMPLATE_LINES = (
    "{#- Tiny stand-in for Kimi-K2.5's chat template (eagle-tui). -#}",
    "{%- macro text_of(content) -%}",
    "{%- if content is string -%}{{ content }}",
    "{%- elif content is iterable and content is not mapping -%}",
    "{%- for part in content -%}",
    "{%- if part is string -%}{{ part }}",
    "{%- elif part.type == 'text' -%}{{ part.text }}",
    "{%- endif -%}",
    "{%- endfor -%}",
    "{%- elif content is not none -%}{{ content }}",
    "{%- endif -%}",
    "{%- endmacro -%}",
    "{%- set ns = namespace(last_plain=-1, call_n=0) -%}",
    "{%- for m in messages -%}",
    "{%- if m.role == 'assistant' and not m.tool_calls -%}{%- set ns.last_plain = loop.index0 -%}"
    "{%- endif -%}",
    "{%- endfor -%}",
    "{%- if tools -%}",
    "<|im_system|>tool_declare<|im_middle|>{{ tools | tojson(separators=(',', ':')) }}<|im_end|>",
    "{%- endif -%}",
    "{%- if not messages or messages[0].role != 'system' -%}",
    "<|im_system|>system<|im_middle|>" + DEFAULT_SYSTEM + "<|im_end|>",
    "{%- endif -%}",
    "{%- for m in messages -%}",
    "{%- if m.role == 'user' -%}",
    "<|im_user|>user<|im_middle|>{{ text_of(m.content) }}<|im_end|>",
    "{%- elif m.role == 'assistant' -%}",
    "<|im_assistant|>assistant<|im_middle|>",
    "{%- if loop.index0 > ns.last_plain -%}<think>{{ m.reasoning_content or '' }}</think>",
    "{%- else -%}<think></think>",
    "{%- endif -%}",
    "{{ text_of(m.content) }}",
    "{%- if m.tool_calls -%}",
    "<|tool_calls_section_begin|>",
    "{%- for tc in m.tool_calls -%}",
    "{%- set fn = tc.function if tc.function is defined else tc -%}",
    "{%- set call_id = tc.id if tc.id else 'functions.' ~ fn.name ~ ':' ~ ns.call_n -%}",
    "{%- set ns.call_n = ns.call_n + 1 -%}",
    "<|tool_call_begin|>{{ call_id }}<|tool_call_argument_begin|>",
    "{%- if fn.arguments is string -%}{{ fn.arguments }}",
    "{%- else -%}{{ (fn.arguments or {}) | tojson(separators=(',', ':')) }}",
    "{%- endif -%}",
    "<|tool_call_end|>",
    "{%- endfor -%}",
    "<|tool_calls_section_end|>",
    "{%- endif -%}",
    "<|im_end|>",
    "{%- elif m.role == 'tool' -%}",
    "<|im_system|>tool<|im_middle|>## Return of {{ m.tool_call_id }}{{ '\\n' }}"
    "{{ text_of(m.content) }}<|im_end|>",
    "{%- else -%}",
    "<|im_system|>{{ m.role }}<|im_middle|>{{ text_of(m.content) }}<|im_end|>",
    "{%- endif -%}",
    "{%- endfor -%}",
    "{%- if add_generation_prompt -%}",
    "<|im_assistant|>assistant<|im_middle|>",
    "{%- if thinking is defined and not thinking -%}<think></think>",
    "{%- else -%}<think>",
    "{%- endif -%}",
    "{%- endif -%}",
)
CHAT_TEMPLATE = "\n".join(CHAT_TEMPLATE_LINES)


def special_tokens() -> list[tuple[int, str, bool]]:
    """Every id in the reserved range: the named Kimi specials plus reserved fillers."""
    named = {tid: (text, flag) for tid, text, flag in NAMED_SPECIALS}
    out = []
    for tid in range(RESERVED_FIRST, VOCAB_SIZE):
        text, flag = named.get(tid, (f"<|reserved_token_{tid}|>", True))
        out.append((tid, text, flag))
    return out


def corpus_lines() -> list[str]:
    """The training text: the stdlib's pydoc topics (sorted) plus chat words."""
    import pydoc_data.topics as topics

    lines = [topics.topics[key] for key in sorted(topics.topics)]
    lines.extend([CHAT_WORDS] * 200)
    return lines


def corpus_sha256(lines: list[str]) -> str:
    """Hash of the training text, recorded so a rebuild can tell if its input changed."""
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()


def train_bpe(lines: list[str]) -> Tokenizer:
    """Train the byte-level BPE that supplies ids 0..REGULAR_VOCAB-1."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRE_TOKENIZE_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=REGULAR_VOCAB,
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
        show_progress=False,
    )

    def batches() -> Iterator[str]:
        yield from lines

    tok.train_from_iterator(batches(), trainer=trainer, length=len(lines))
    return tok


def added_token_entry(tid: int, text: str, special: bool) -> dict[str, Any]:
    """One ``added_tokens`` entry in tokenizer.json."""
    return {
        "id": tid,
        "content": text,
        "single_word": False,
        "lstrip": False,
        "rstrip": False,
        "normalized": False,
        "special": special,
    }


def with_specials(trained: Tokenizer) -> Tokenizer:
    """Place every special token in the BPE vocabulary and in ``added_tokens`` at its Kimi id."""
    data = json.loads(trained.to_str())
    vocab: dict[str, int] = data["model"]["vocab"]
    if max(vocab.values()) >= RESERVED_FIRST:
        raise SystemExit("trained vocabulary reaches into the reserved range")
    specials = special_tokens()
    for tid, text, _ in specials:
        if text in vocab:
            raise SystemExit(f"special {text!r} already in the trained vocabulary")
        vocab[text] = tid
    data["added_tokens"] = [added_token_entry(t, s, f) for t, s, f in specials]
    return Tokenizer.from_str(json.dumps(data))


def tokenizer_config() -> dict[str, Any]:
    """tokenizer_config.json: class, special-token names, flags and the chat template."""
    decoder = {
        str(tid): {k: v for k, v in added_token_entry(tid, text, flag).items() if k != "id"}
        for tid, text, flag in special_tokens()
    }
    return {
        "added_tokens_decoder": decoder,
        "bos_token": "[BOS]",
        "eos_token": "[EOS]",
        "pad_token": "[PAD]",
        "unk_token": "[UNK]",
        "clean_up_tokenization_spaces": False,
        "model_max_length": 262144,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": CHAT_TEMPLATE,
    }


NOTE = (
    "Tiny stand-in for Kimi-K2.5 built by eagle-tui's scripts/build_kimi_tokenizer.py: "
    "a {n}-token byte-level BPE trained on Python {py}'s pydoc_data.topics (sha256 {sha}) "
    "with Kimi's special tokens at their real ids. Not Kimi's vocabulary: ordinary text "
    "tokenizes differently; use it for tests and demos only."
)


def model_config(note: str) -> dict[str, Any]:
    """config.json: enough of a Kimi-K2.5 model config for vocab bound and stop ids."""
    return {
        "_note": note,
        "architectures": ["KimiK25ForConditionalGeneration"],
        "model_type": "kimi_k25",
        "vocab_size": VOCAB_SIZE,
        "bos_token_id": 163584,
        "eos_token_id": 163586,
        "pad_token_id": 163839,
        "max_position_embeddings": 262144,
    }


def generation_config() -> dict[str, Any]:
    """generation_config.json: the turn end is the stop token."""
    return {"bos_token_id": 163584, "eos_token_id": 163586}


def dumps(obj: dict[str, Any]) -> str:
    """Stable JSON text for the asset files."""
    return json.dumps(obj, ensure_ascii=False, indent=2, sort_keys=False) + "\n"


def verify(tok: Tokenizer) -> None:
    """Every special id must encode from its text as exactly that one id and decode back."""
    for tid, text, _ in special_tokens():
        got = tok.encode(text, add_special_tokens=False).ids
        if got != [tid]:
            raise SystemExit(f"{text!r} encodes to {got}, expected [{tid}]")
        if tok.decode([tid], skip_special_tokens=False) != text:
            raise SystemExit(f"{tid} does not decode to {text!r}")
    sample = "Hello, world! Ünïcødé 中文 \n\t tabs"
    if tok.decode(tok.encode(sample).ids) != sample:
        raise SystemExit("ordinary text does not round-trip")


def build() -> dict[str, str]:
    """Build every asset file; returns file name -> text."""
    lines = corpus_lines()
    tok = with_specials(train_bpe(lines))
    verify(tok)
    py = ".".join(str(p) for p in sys.version_info[:3])
    note = NOTE.format(n=REGULAR_VOCAB, py=py, sha=corpus_sha256(lines)[:16])
    return {
        "tokenizer.json": tok.to_str(pretty=False) + "\n",
        "tokenizer_config.json": dumps(tokenizer_config()),
        "config.json": dumps(model_config(note)),
        "generation_config.json": dumps(generation_config()),
    }


def check(files: dict[str, str], out_dir: Path) -> int:
    """Compare a fresh build with the files on disk; 0 when identical."""
    drift = [
        name
        for name, text in files.items()
        if not (out_dir / name).is_file() or (out_dir / name).read_text(encoding="utf-8") != text
    ]
    for name in drift:
        print(f"differs: {out_dir / name}", file=sys.stderr)
    return 1 if drift else 0


def write(files: dict[str, str], out_dir: Path) -> None:
    """Write the asset files, each atomically."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        tmp = out_dir / f".{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(out_dir / name)
        print(f"wrote {out_dir / name} ({len(text.encode('utf-8')):,} bytes)")


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    os.environ.setdefault("RAYON_NUM_THREADS", "1")  # one trainer thread: same result anywhere
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="output directory")
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    files = build()
    if args.check:
        return check(files, args.out)
    write(files, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
