"""Narration audio stored as MP3 (LAME, through lameenc): speech at 32 kbit/s mono is about 11× smaller than
the 16-bit PCM WAV Piper produces (352.8 kbit/s at 22,050 Hz), which matters to a student on a phone.

`Mp3Writer` encodes PCM as it is synthesized; `wav_to_mp3` re-encodes a WAV file (an instructor's upload,
or narration stored as WAV before MP3) and returns its duration. Both write to a temporary file and move it
into place only when complete, so a failure leaves nothing half-written.
"""
from __future__ import annotations

import os
import tempfile
import wave
from pathlib import Path

import numpy as np

BITRATE_KBPS = 32
QUALITY = 2  # LAME's 0 (best, slowest) … 9; 2 is its recommended "near-best"
EXTENSION = ".mp3"
READ_FRAMES = 1 << 16


class Mp3Writer:
    """Mono 16-bit PCM in, MP3 out to `path` (written to a temporary file, renamed on `close`)."""

    def __init__(self, path: Path | str, sample_rate: int):
        import lameenc

        self.path = Path(path)
        self._encoder = lameenc.Encoder()
        self._encoder.set_bit_rate(BITRATE_KBPS)
        self._encoder.set_in_sample_rate(sample_rate)
        self._encoder.set_channels(1)
        self._encoder.set_quality(QUALITY)
        fd, self._tmp = tempfile.mkstemp(suffix=".mp3.tmp", dir=self.path.parent)
        self._file = os.fdopen(fd, "wb")

    def write(self, pcm: bytes) -> None:
        if pcm:
            self._file.write(self._encoder.encode(pcm))

    def close(self) -> None:
        """Finish the stream and move the file into place."""
        self._file.write(self._encoder.flush())
        self._file.close()
        os.replace(self._tmp, self.path)

    def abort(self) -> None:
        self._file.close()
        if os.path.exists(self._tmp):
            os.unlink(self._tmp)


def _mono_int16(frames: bytes, width: int, channels: int) -> bytes:
    """Integer PCM of 1–4 bytes per sample, any channel count → mono 16-bit (channels averaged)."""
    if width == 1:  # 8-bit WAV is unsigned
        samples = (np.frombuffer(frames, dtype=np.uint8).astype(np.int32) - 128) << 8
    elif width == 3:
        raw = np.frombuffer(frames, dtype=np.uint8).reshape(-1, 3).astype(np.int32)
        samples = ((raw[:, 0] << 8) | (raw[:, 1] << 16) | (raw[:, 2] << 24)) >> 16
    else:
        dtype = {2: "<i2", 4: "<i4"}[width]
        samples = np.frombuffer(frames, dtype=dtype).astype(np.int32) >> (8 * (width - 2))
    if channels > 1:
        samples = samples[: len(samples) // channels * channels].reshape(-1, channels).mean(axis=1)
    return np.clip(samples, -32768, 32767).astype("<i2").tobytes()


def wav_to_mp3(source, destination: Path | str) -> float:
    """Encode a PCM WAV (a path or a seekable binary file) as MP3 at `destination`; returns seconds.

    Raises ValueError for a WAV this cannot decode (compressed or floating-point samples)."""
    try:
        wav = wave.open(source if not isinstance(source, (str, Path)) else str(source), "rb")
    except (wave.Error, EOFError) as exc:
        raise ValueError(f"this WAV file cannot be decoded ({exc}): export it as 16-bit PCM WAV or as MP3") from None
    with wav:
        width, channels, rate = wav.getsampwidth(), wav.getnchannels(), wav.getframerate()
        if width not in (1, 2, 3, 4) or channels < 1 or rate < 1:
            raise ValueError("this WAV file cannot be decoded: export it as 16-bit PCM WAV or as MP3")
        writer = Mp3Writer(destination, rate)
        frames = 0
        try:
            while chunk := wav.readframes(READ_FRAMES):
                frames += len(chunk) // (width * channels)
                writer.write(_mono_int16(chunk, width, channels))
            if frames == 0:
                raise ValueError("this WAV file holds no audio")
        except BaseException:
            writer.abort()
            raise
        writer.close()
    return frames / rate
