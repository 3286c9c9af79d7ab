"""What a narration file may be: audio recognised by its bytes, cues that parse as WebVTT.

An uploaded name or extension says nothing trustworthy (HTML named `.mp3` is still HTML), so audio is
identified from its container's magic bytes, stored under a name the server chooses with the extension of
what it really is, and served with a content type from a fixed table (`SERVED_TYPES`); any other file under
the narration directory is never served.
"""
from __future__ import annotations

import secrets
import struct
from dataclasses import dataclass, replace

from .synthesis import VTTError, parse_vtt

SERVED_TYPES = {
    ".wav": "audio/wav",
    ".mp3": "audio/mpeg",
    ".ogg": "audio/ogg",
    ".m4a": "audio/mp4",
    ".vtt": "text/vtt; charset=utf-8",
}
# What a WAV header may say and still be played: anything else is a damaged or hostile header.
WAV_RATES = range(1_000, 768_001)  # samples per second
WAV_MAX_CHANNELS = 32
WAV_MAX_CHUNKS = 64  # chunks before "data" (LIST, fact, …): a real file has a handful


@dataclass(frozen=True)
class AudioKind:
    extension: str
    content_type: str
    duration: float | None = None  # seconds, from a checked WAV header; None for other containers


def sniff_audio(head: bytes) -> AudioKind | None:
    """The audio container of a file from its first bytes (≥ 12), or None when it is not one we serve."""
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return AudioKind(".wav", SERVED_TYPES[".wav"])
    if head[:4] == b"OggS":  # Ogg Vorbis and Ogg Opus
        return AudioKind(".ogg", SERVED_TYPES[".ogg"])
    if head[4:8] == b"ftyp" and head[8:12] in (b"M4A ", b"M4B ", b"mp42", b"isom", b"mp41", b"dash"):
        return AudioKind(".m4a", SERVED_TYPES[".m4a"])
    if head[:3] == b"ID3" or (len(head) > 1 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0 and head[1] & 0x06):
        return AudioKind(".mp3", SERVED_TYPES[".mp3"])  # ID3 tag, or an MPEG audio frame sync (layer ≠ 0)
    return None


def check_audio(upload, max_bytes: int) -> AudioKind:
    """Raises ValueError with a message for the form; the file's position is left at 0."""
    if upload.size > max_bytes:
        raise ValueError(f"The audio file is {upload.size / 1e6:.0f} MB; the limit is {max_bytes / 1e6:.0f} MB.")
    upload.seek(0)
    head = upload.read(16)
    upload.seek(0)
    kind = sniff_audio(head)
    if kind is None:
        raise ValueError("This is not an audio file this site can play: upload WAV, MP3, Ogg (Vorbis/Opus) or "
                         "M4A audio (checked from the file's contents, not its name).")
    if kind.extension == ".wav":
        try:
            return replace(kind, duration=wav_duration(upload, upload.size))
        finally:
            upload.seek(0)
    return kind


def wav_duration(upload, size: int) -> float:
    """The length in seconds a WAV file's header gives, once the header is shown to make sense.

    Reads the RIFF chunk headers only (seeking past their data), at most `WAV_MAX_CHUNKS` of them, so the
    cost does not depend on the file. Raises ValueError naming the problem: no format or data chunk, zero
    channels or sample rate, a frame size of zero, or chunk sizes running past the end of the file.
    """
    def bad(problem: str) -> ValueError:
        return ValueError(f"This WAV file's header is damaged: {problem}. Export the recording again as WAV "
                          "(or as MP3/Ogg).")

    upload.seek(12)  # after "RIFF", the RIFF size and "WAVE" (checked by sniff_audio)
    position, fmt = 12, None
    for _ in range(WAV_MAX_CHUNKS):
        header = upload.read(8)
        if len(header) < 8:
            raise bad("it has no audio data chunk" if fmt else "it has no format chunk")
        chunk_id, chunk_size = header[:4], struct.unpack("<I", header[4:])[0]
        position += 8
        if chunk_id == b"fmt ":
            if not 16 <= chunk_size <= size - position:
                raise bad(f"its format chunk is {chunk_size} bytes long")
            _format, channels, rate, _byte_rate, frame_bytes, _bits = struct.unpack("<HHIIHH", upload.read(16))
            if not 1 <= channels <= WAV_MAX_CHANNELS:
                raise bad(f"it says {channels} channels")
            if rate not in WAV_RATES:
                raise bad(f"it says a sample rate of {rate} Hz")
            if frame_bytes == 0:
                raise bad("it says each sample takes 0 bytes")
            fmt = (rate, frame_bytes)
        elif chunk_id == b"data":
            if fmt is None:
                raise bad("its audio data comes before its format chunk")
            if chunk_size > size - position:
                raise bad(f"it says {chunk_size} bytes of audio, but the file holds {size - position} after "
                          "the header (truncated?)")
            rate, frame_bytes = fmt
            if chunk_size < frame_bytes:
                raise bad("it holds no audio")
            return chunk_size / frame_bytes / rate
        position += chunk_size + (chunk_size & 1)  # chunks are padded to an even length
        if position > size:
            raise bad(f"a {chunk_id.decode('latin-1')!r} chunk runs past the end of the file")
        upload.seek(position)
    raise bad(f"more than {WAV_MAX_CHUNKS} chunks come before the audio")


def check_cues(upload, max_bytes: int = 2 * 1024 * 1024) -> list:
    """The parsed cues of a WebVTT upload; raises ValueError naming what is wrong."""
    if upload.size > max_bytes:
        raise ValueError(f"The cue file is larger than {max_bytes // (1024 * 1024)} MB.")
    upload.seek(0)
    try:
        cues = parse_vtt(upload.read().decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError("The cue file is not UTF-8 text.") from None
    except VTTError as exc:
        raise ValueError(f"Not a valid WebVTT file: {exc}") from None
    finally:
        upload.seek(0)
    if not cues:
        raise ValueError("The WebVTT file has no cues.")
    return cues


def stored_name(extension: str) -> str:
    """A fresh server-chosen file name: random, so it reveals nothing and never collides."""
    return f"{secrets.token_hex(12)}{extension}"
