"""What a narration file may be: audio recognised by its bytes, cues that parse as WebVTT.

An uploaded name or extension says nothing trustworthy (HTML named `.mp3` is still HTML), so audio is
identified from its container's magic bytes, stored under a name the server chooses with the extension of
what it really is, and served with a content type from a fixed table (`SERVED_TYPES`); any other file under
the narration directory is never served.
"""
from __future__ import annotations

import secrets
from dataclasses import dataclass

from .narration import VTTError, parse_vtt

SERVED_TYPES = {
    ".wav": "audio/wav",
    ".mp3": "audio/mpeg",
    ".ogg": "audio/ogg",
    ".m4a": "audio/mp4",
    ".vtt": "text/vtt; charset=utf-8",
}


@dataclass(frozen=True)
class AudioKind:
    extension: str
    content_type: str


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
    return kind


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
