"""OpenAI-streaming load: its settings as plain data, and what each request asks for.

A load of this kind sends streamed completions to an OpenAI-compatible route
(`/v1/completions`, or `/v1/chat/completions` for chat), each with a prompt of a drawn
length and a drawn `max_tokens`, and is timed per token (TTFT, every inter-token gap:
backend/load/openai_stream.py). The lengths come from a `LengthDist`:

  fixed        always `value`
  uniform      any whole number from `min` to `max`, each as likely
  long-tailed  a bounded Pareto from `min` to `max` (shape `alpha`, default 1.2): most
               draws near `min`, a few up to `max`

A prompt of N tokens is N common words (`prompt_unit: word`, the default: one token each to
the usual BPE tokenizers) or N ASCII characters (`prompt_unit: byte`, for a byte-level
tokenizer); the server's own count (`usage.prompt_tokens`) is what the load reports.
`ignore_eos` (an extension vLLM and Ray Serve LLM accept) asks for exactly `max_tokens`.

A demo catalog entry's `load.openai` (resources/demos.yaml) is parsed by
`parse_openai_load`; the command line's length specs (`128`, `uniform:32-512`,
`long-tailed:16-2048`) by `parse_length_spec`. Both raise ValueError saying what to fix.

No network and no Qt: views may import it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

FIXED = "fixed"
UNIFORM = "uniform"
LONG_TAILED = "long-tailed"
DISTRIBUTIONS = (FIXED, UNIFORM, LONG_TAILED)
MAX_LENGTH = 1_000_000  # tokens: a prompt of ~4 MB of text at most
DEFAULT_ALPHA = 1.2
PROMPT_UNITS = ("word", "byte")

# Common short English words: each is one token to the usual tokenizers (GPT-2/Llama BPE,
# with its leading space), so a prompt of N words is about N tokens.
_WORDS = ("the of and to in is it that for on was with as at by be this from or an are "
          "not but all we can one has had were they will which there their more been "
          "time into only new some could these two may then first any like over such "
          "our man me even most made after also did many before must through back years "
          "where much your way well down should because each just those people how too "
          "little state good very make world still own see men work long get here both "
          "between life being under never day same another know while last might us great "
          "old year off come since against go came right used take three").split()


@dataclass(frozen=True)
class LengthDist:
    """A distribution of token counts (prompt lengths, or output lengths)."""

    distribution: str = FIXED
    min: int = 1
    max: int = 1
    value: int | None = None  # fixed
    alpha: float = DEFAULT_ALPHA  # long-tailed: the Pareto shape (smaller: longer tail)

    def __post_init__(self) -> None:
        if self.distribution not in DISTRIBUTIONS:
            raise ValueError(f"distribution {self.distribution!r} is not one of "
                             f"{', '.join(DISTRIBUTIONS)}")
        if self.distribution == FIXED:
            if self.value is None or not 1 <= self.value <= MAX_LENGTH:
                raise ValueError(f"a fixed length needs a value from 1 to {MAX_LENGTH:,}")
            return
        if not 1 <= self.min <= MAX_LENGTH or not 1 <= self.max <= MAX_LENGTH:
            raise ValueError(f"min and max must be from 1 to {MAX_LENGTH:,} tokens")
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is larger than max ({self.max})")
        if self.distribution == LONG_TAILED and not 0 < self.alpha <= 10:
            raise ValueError("alpha (the long tail's shape) must be > 0 and <= 10")

    @property
    def low(self) -> int:
        return self.value if self.distribution == FIXED else self.min

    @property
    def high(self) -> int:
        return self.value if self.distribution == FIXED else self.max

    def sample(self, rng: random.Random) -> int:
        """One length, drawn with *rng*."""
        if self.distribution == FIXED:
            return self.value
        if self.distribution == UNIFORM:
            return rng.randint(self.min, self.max)
        lo, hi, a = float(self.min), float(self.max), self.alpha
        if lo == hi:
            return self.min
        # Bounded Pareto by its inverse CDF: u = 0 gives lo, u = 1 gives hi.
        u = rng.random()
        x = lo / (1.0 - u * (1.0 - (lo / hi) ** a)) ** (1.0 / a)
        return max(self.min, min(self.max, int(round(x))))

    def describe(self) -> str:
        if self.distribution == FIXED:
            return str(self.value)
        return f"{self.distribution} {self.min}–{self.max}"


@dataclass(frozen=True)
class OpenAILoad:
    """What each streamed completion asks for. *model* None: the first model the server
    lists at /v1/models (none named if it lists none). *chat* None: chat when the route
    ends in /chat/completions."""

    model: str | None = None
    chat: bool | None = None
    prompt_tokens: LengthDist = field(default_factory=lambda: LengthDist(value=128))
    output_tokens: LengthDist = field(default_factory=lambda: LengthDist(value=64))
    temperature: float = 0.0
    seed: int | None = None
    prompt_unit: str = "word"  # a prompt token is a word, or (byte) one ASCII character
    ignore_eos: bool = False  # ask for exactly max_tokens (vLLM's extension)

    def __post_init__(self) -> None:
        if not 0 <= self.temperature <= 2:
            raise ValueError("temperature must be from 0 to 2")
        if self.prompt_unit not in PROMPT_UNITS:
            raise ValueError(f"prompt_unit {self.prompt_unit!r} is not one of "
                             f"{', '.join(PROMPT_UNITS)}")

    def is_chat(self, url: str) -> bool:
        if self.chat is not None:
            return self.chat
        return url.split("?", 1)[0].rstrip("/").endswith("/chat/completions")

    def describe(self) -> str:
        model = self.model or "the server's first model"
        return (f"streamed completions of {model}: prompt {self.prompt_tokens.describe()}"
                f" tokens, output {self.output_tokens.describe()} tokens")


class RequestMaker:
    """Draws each request's lengths and builds its body; the same seeds give the same
    sequence of bodies."""

    def __init__(self, load: OpenAILoad, url: str, seed: int | None = None) -> None:
        self.load = load
        self.chat = load.is_chat(url)
        self.model = load.model
        # The load's seed, and the engine's where it has one too: a cluster's workers
        # (engine seeds seed + k) then draw different, still reproducible, sequences.
        if load.seed is None or seed is None:
            self._rng = random.Random(load.seed if load.seed is not None else seed)
        else:
            self._rng = random.Random(f"{load.seed}/{seed}")

    def lengths(self) -> tuple[int, int]:
        """(prompt tokens, max_tokens) of the next request."""
        return (self.load.prompt_tokens.sample(self._rng),
                self.load.output_tokens.sample(self._rng))

    def next_body(self) -> tuple[dict, int]:
        """(the next request's JSON body, its prompt's length in tokens)."""
        n_in, n_out = self.lengths()
        start = self._rng.randrange(len(_WORDS))
        if self.load.prompt_unit == "byte":
            letters = "abcdefghijklmnopqrstuvwxyz "
            text = "".join(letters[(start + i * 5) % len(letters)] for i in range(n_in))
        else:
            text = " ".join(_WORDS[(start + i * 7) % len(_WORDS)] for i in range(n_in))
        body: dict = {"max_tokens": n_out, "temperature": self.load.temperature,
                      "stream": True, "stream_options": {"include_usage": True}}
        if self.load.ignore_eos:
            body["ignore_eos"] = True
        if self.model:
            body["model"] = self.model
        if self.chat:
            body["messages"] = [{"role": "user", "content": text}]
        else:
            body["prompt"] = text
        return body, n_in


def parse_length(raw, where: str) -> LengthDist:
    """A `{distribution, min, max, value?, alpha?}` mapping (or a bare whole number: fixed)
    as a LengthDist; ValueError names *where* and what is wrong."""
    if isinstance(raw, bool):
        raise ValueError(f"{where}: expected a mapping or a whole number, not {raw!r}")
    if isinstance(raw, int):
        raw = {"distribution": FIXED, "value": raw}
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected a mapping {{distribution, min, max, value}}, "
                         f"not {type(raw).__name__}")
    unknown = set(raw) - {"distribution", "min", "max", "value", "alpha"}
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(sorted(map(str, unknown)))} "
                         "(known: distribution, min, max, value, alpha)")
    dist = raw.get("distribution", FIXED)
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"{where}.distribution: {dist!r} is not one of "
                         f"{', '.join(DISTRIBUTIONS)}")
    values = {}
    for key in ("min", "max", "value"):
        v = raw.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise ValueError(f"{where}.{key}: expected a whole number of tokens, not {v!r}")
        values[key] = v
    if dist == FIXED:
        value = values["value"]
        if value is None:
            if values["min"] is None or values["min"] != values["max"]:
                raise ValueError(f"{where}: a fixed length needs `value` (or min = max)")
            value = values["min"]
        values = {"value": value}
    else:
        missing = [k for k in ("min", "max") if values[k] is None]
        if missing:
            raise ValueError(f"{where}: a {dist} length needs {' and '.join(missing)}")
        values = {"min": values["min"], "max": values["max"]}
    alpha = raw.get("alpha", DEFAULT_ALPHA)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
        raise ValueError(f"{where}.alpha: expected a number, not {alpha!r}")
    try:
        return LengthDist(distribution=dist, alpha=float(alpha), **values)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None


def parse_openai_load(raw, where: str = "load.openai") -> OpenAILoad:
    """A catalog entry's `load.openai` mapping as an OpenAILoad: `{model, chat?,
    prompt_tokens: {...}, output_tokens: {...}, temperature?, seed?, prompt_unit?,
    ignore_eos?}`
    (lengths as `parse_length` reads them; left out: 128 prompt and 64 output tokens)."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected a mapping, not {type(raw).__name__}")
    known = {"model", "chat", "prompt_tokens", "output_tokens", "temperature", "seed",
             "prompt_unit", "ignore_eos"}
    unknown = set(raw) - known
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(sorted(map(str, unknown)))} "
                         f"(known: {', '.join(sorted(known))})")
    model = raw.get("model")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise ValueError(f"{where}.model: expected the model's name, not {model!r}")
    chat = raw.get("chat")
    if chat is not None and not isinstance(chat, bool):
        raise ValueError(f"{where}.chat: expected true or false, not {chat!r}")
    temperature = raw.get("temperature", 0.0)
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise ValueError(f"{where}.temperature: expected a number, not {temperature!r}")
    ignore_eos = raw.get("ignore_eos", False)
    if not isinstance(ignore_eos, bool):
        raise ValueError(f"{where}.ignore_eos: expected true or false, not {ignore_eos!r}")
    unit = raw.get("prompt_unit", "word")
    if unit not in PROMPT_UNITS:
        raise ValueError(f"{where}.prompt_unit: {unit!r} is not one of "
                         f"{', '.join(PROMPT_UNITS)}")
    seed = raw.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValueError(f"{where}.seed: expected a whole number, not {seed!r}")
    default = OpenAILoad()
    try:
        return OpenAILoad(
            model=model.strip() if model else None, chat=chat,
            prompt_tokens=(parse_length(raw["prompt_tokens"], f"{where}.prompt_tokens")
                           if "prompt_tokens" in raw else default.prompt_tokens),
            output_tokens=(parse_length(raw["output_tokens"], f"{where}.output_tokens")
                           if "output_tokens" in raw else default.output_tokens),
            temperature=float(temperature), seed=seed, prompt_unit=unit,
            ignore_eos=ignore_eos)
    except ValueError as e:
        if str(e).startswith(where):
            raise
        raise ValueError(f"{where}: {e}") from None


def parse_length_spec(text: str) -> LengthDist:
    """A command-line length: `128` (fixed), `uniform:32-512`, `long-tailed:16-2048`, or
    `fixed:128`; ValueError says the accepted forms."""
    forms = "N, fixed:N, uniform:MIN-MAX or long-tailed:MIN-MAX (whole numbers of tokens)"
    spec = text.strip()
    dist, sep, rest = spec.partition(":")
    if not sep:
        dist, rest = FIXED, spec
    dist = dist.strip().lower()
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"{text!r}: unknown distribution {dist!r}; expected {forms}")
    try:
        if dist == FIXED:
            return LengthDist(value=int(rest))
        lo, dash, hi = rest.partition("-")
        if not dash:
            raise ValueError("expected MIN-MAX")
        return LengthDist(distribution=dist, min=int(lo), max=int(hi))
    except ValueError as e:
        detail = "" if "invalid literal" in str(e) else f" ({e})"
        raise ValueError(f"{text!r}: not a length{detail}; expected {forms}") from None
