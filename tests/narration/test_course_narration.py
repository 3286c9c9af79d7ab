"""Narration: real Piper synthesis → MP3 + WebVTT whose cues match the lesson's paragraphs."""
from __future__ import annotations

import io
import struct
import time
import wave
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from narration import synthesis as narration
from courseapp.models import Module
from narration.models import Narration
from courseapp.rendering import render_markdown
from narration.jobs import run_narration

# MPEG audio frame headers: bitrate (kbit/s) by index for MPEG-2/2.5 layer III, sample rates by version.
MP3_BITRATES_V2 = [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160]
MP3_BITRATES_V1 = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320]
MP3_RATES = {3: (44100, 48000, 32000), 2: (22050, 24000, 16000), 0: (11025, 12000, 8000)}


def mp3_frames(data: bytes) -> list[tuple[int, int, bytes]]:
    """(bitrate kbit/s, sample rate, frame bytes) of every layer III frame of a bare MP3 stream: the whole
    file must be frames, back to back (what the narration encoder writes)."""
    frames, position = [], 0
    while position < len(data):
        header = data[position:position + 4]
        assert header[0] == 0xFF and header[1] & 0xE0 == 0xE0, f"no frame sync at byte {position}"
        version, layer = (header[1] >> 3) & 3, (header[1] >> 1) & 3
        assert layer == 1, "layer III"
        bitrate = (MP3_BITRATES_V1 if version == 3 else MP3_BITRATES_V2)[header[2] >> 4]
        rate = MP3_RATES[version][(header[2] >> 2) & 3]
        padding = (header[2] >> 1) & 1
        length = (144 if version == 3 else 72) * bitrate * 1000 // rate + padding
        frames.append((bitrate, rate, data[position:position + length]))
        position += length
    return frames


def mp3_seconds(data: bytes) -> float:
    frames = mp3_frames(data)
    return sum((1152 if rate >= 32000 else 576) / rate for _, rate, _ in frames)

SHORT_MODULE = """## The KV cache

Keys and values of past tokens never change, so the engine keeps them.

```python
cache = {}  # code is not narrated
```

:::{callout} note
Queries are used once.
:::

:::{quiz}
- question: Is the quiz narrated?
  choices:
    - text: No.
      correct: true
      explanation: Quizzes are skipped.
    - text: Yes.
      explanation: They are not.
:::
"""


def test_real_piper_synthesis_matches_paragraphs(tmp_path):
    rendered = render_markdown(SHORT_MODULE)
    assert [c.text for c in rendered.cues] == [
        "The KV cache",
        "Keys and values of past tokens never change, so the engine keeps them.",
        "Queries are used once.",
    ]
    progress = []
    result = narration.synthesize(rendered.cues, tmp_path, progress=progress.append)
    assert not result.cached and progress[-1] == 1.0

    assert result.audio_path.suffix == ".mp3"
    data = result.audio_path.read_bytes()
    frames = mp3_frames(data)
    assert {(bitrate, rate) for bitrate, rate, _ in frames} == {(32, 22050)}  # 32 kbit/s of Piper's 22,050 Hz
    duration = result.duration
    assert mp3_seconds(data) == pytest.approx(duration, abs=0.2)  # plus the encoder's delay and padding
    assert len({payload[4:] for _, _, payload in frames}) > len(frames) // 2  # speech: frames differ (silence repeats)
    wav_bytes = 44 + round(duration * 22050) * 2
    assert len(data) * 8 <= wav_bytes  # at least 8× smaller than the WAV it used to be

    cues = narration.parse_vtt(result.vtt_path.read_text())
    assert [c.id for c in cues] == ["c1", "c2", "c3"]  # one cue per heading/paragraph, ids = data-cue
    assert len(cues) == len(rendered.cues)
    assert all(c.start < c.end for c in cues)
    assert all(a.end <= b.start for a, b in zip(cues, cues[1:]))
    assert cues[-1].end <= duration
    assert cues[1].end - cues[1].start > 2  # a sentence takes a couple of seconds to say
    for cue in rendered.cues:
        assert f'data-cue="{cue.id}"' in rendered.html

    started = time.monotonic()
    again = narration.synthesize(rendered.cues, tmp_path)
    assert again.cached and again.key == result.key and time.monotonic() - started < 0.5
    assert again.duration == pytest.approx(duration, abs=0.001)  # from the cues, to the millisecond


def test_cache_key_follows_text():
    a = render_markdown("Hello there.\n").cues
    b = render_markdown("Hello there!\n").cues
    assert narration.narration_key(a) != narration.narration_key(b)
    assert narration.narration_key(a) == narration.narration_key(render_markdown("Hello there.\n").cues)


def test_vtt_round_trip_and_errors():
    cues = [narration.TimedCue("c1", 0.25, 1.5, "A <b> & --> c"), narration.TimedCue("c2", 3723.5, 3725, "B")]
    text = narration.write_vtt(cues)
    assert "01:02:03.500 --> 01:02:05.000" in text
    parsed = narration.parse_vtt(text)
    assert [(c.id, c.start, c.end) for c in parsed] == [("c1", 0.25, 1.5), ("c2", 3723.5, 3725.0)]
    with pytest.raises(narration.VTTError, match="line 1"):
        narration.parse_vtt("00:00.000 --> 00:01.000\nx\n")
    with pytest.raises(narration.VTTError, match="line 4"):
        narration.parse_vtt("WEBVTT\n\nc1\nnonsense\n")


def test_speakable_text():
    assert narration.speakable("2 × 32 × 8") == "2 times 32 times 8"
    assert narration.speakable("4–8 times") == "4 to 8 times"
    assert narration.speakable("SmolLM2-135M") == "SmolLM2-135M"
    assert narration.speakable("128 KiB per token, 3.35 TB/s") == "128 kibibytes per token, 3.35 terabytes per second"
    assert narration.speakable("GiB of cache") == "GiB of cache"  # only after a number


def test_math_symbols_in_a_cue_are_spoken_as_words():
    """The voice gets words, not symbols it would skip or spell out (÷ √ ᵀ powers α Σ subscripts ±)."""
    sentence = ("Scores are QKᵀ ÷ √d for 10⁸ pairs; d₁ … dₖ are accepted with probability α each, "
                "and Σ min(p, q) varies by ±30 % at 3.35 × 10¹² bytes per second.")
    [cue] = render_markdown(sentence + "\n").cues
    assert cue.text == sentence  # the page and the captions keep the symbols
    spoken = narration.speakable(cue.text)
    assert spoken == ("Scores are QK transpose divided by square root of d for 10 to the power 8 pairs; "
                      "d sub 1 … d sub k are accepted with probability alpha each, and the sum of "
                      "min(p, q) varies by plus or minus 30 % at 3.35 times 10 to the power 12 bytes per second.")
    assert not set(spoken) & set("÷√ᵀ⁰¹²³⁴⁵⁶⁷⁸⁹αΣₖ±")
    assert narration.speakable("N² and dᵢ₋₁, 10⁻³") == "N squared and d sub i minus 1, 10 to the power minus 3"


class FakeVoice:
    """Stands in for Piper where a test is about bookkeeping, not speech (that is tested above)."""

    class config:  # noqa: N801 (mirrors PiperVoice.config)
        sample_rate = 16000

    def synthesize(self, text):
        yield type("Chunk", (), {"audio_int16_bytes": b"\x00\x01" * 400 * len(text)})()


@pytest.mark.django_db
def test_narration_job_and_module_page(client, course, monkeypatch):
    monkeypatch.setattr(narration, "load_voice", FakeVoice)
    module = Module.objects.get(slug="intro")
    record = run_narration(module.pk)
    assert record.status == Narration.Status.READY and record.progress == 1.0
    assert record.cue_hash == module.cue_hash and not record.is_stale
    html = client.get(reverse("courseapp:module", args=["intro"])).content.decode()
    assert "Audio version of this page" in html
    assert f'src="{record.audio_url}"' in html and f'src="{record.vtt_url}"' in html
    assert 'kind="captions"' in html

    audio = client.get(record.audio_url, HTTP_RANGE="bytes=0-99")
    assert audio.status_code == 206 and len(b"".join(audio.streaming_content)) == 100
    assert audio["Content-Range"].endswith(f"/{record.audio.size}")
    vtt = client.get(record.vtt_url)
    assert vtt.status_code == 200 and vtt["Content-Type"].startswith("text/vtt")
    assert client.get("/narration/../../etc/passwd").status_code == 404
    assert client.get("/narration/%2E%2E/%2E%2E/settings.py").status_code == 404

    index = client.get("/").content.decode()
    assert "min audio" in index
    assert "earlier version of this page" not in html
    Module.objects.filter(pk=module.pk).update(cue_hash="changed")
    html = client.get(reverse("courseapp:module", args=["intro"])).content.decode()
    assert "earlier version of this page" in html


@pytest.mark.django_db
def test_instructor_generate_upload_and_status(client, course, instructor, monkeypatch):
    queued = []
    monkeypatch.setattr("narration.jobs.app.send_task",
                        lambda name, **kw: queued.append(kw) or type("R", (), {"id": "task-1"})())
    client.force_login(instructor)
    response = client.post(reverse("authoring:narrate", args=["intro"]))
    assert response.status_code == 302 and queued[0]["queue"] == "cpu"
    status = client.get(reverse("authoring:narration_status", args=["intro"])).json()
    assert status["status"] == "pending" and status["busy"]

    vtt = b"WEBVTT\n\nc1\n00:00:00.000 --> 00:00:01.000\nWhy it matters\n"


    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(8000)
        wav.writeframes(b"\x00\x00" * 16000)
    response = client.post(reverse("authoring:upload", args=["intro"]), {
        "audio": SimpleUploadedFile("mine.wav", buffer.getvalue(), content_type="audio/wav"),
        "vtt": SimpleUploadedFile("mine.vtt", vtt, content_type="text/vtt"),
    })
    assert response.status_code == 302
    record = Narration.objects.get(module__slug="intro")
    assert record.origin == Narration.Origin.UPLOAD and record.is_ready
    assert record.duration == pytest.approx(2.0)

    bad = client.post(reverse("authoring:upload", args=["intro"]), {
        "audio": SimpleUploadedFile("x.wav", buffer.getvalue()),
        "vtt": SimpleUploadedFile("x.vtt", b"not a vtt"),
    })
    assert bad.status_code == 400 and "Not a valid WebVTT file" in bad.content.decode()


@pytest.mark.django_db
def test_generate_with_broker_down_is_reported(client, course, instructor, monkeypatch):
    def refuse(name, **kwargs):
        raise ConnectionRefusedError("no broker")

    monkeypatch.setattr("narration.jobs.app.send_task", refuse)
    client.force_login(instructor)
    response = client.post(reverse("authoring:narrate", args=["intro"]), follow=True)
    assert "task queue is not reachable" in response.content.decode()
    assert Narration.objects.get(module__slug="intro").status == Narration.Status.FAILED


@pytest.mark.django_db
def test_narrate_command(course, monkeypatch, capsys):
    from django.core.management import CommandError, call_command

    monkeypatch.setattr(narration, "load_voice", FakeVoice)
    call_command("narrate", "intro")
    assert "intro:" in capsys.readouterr().out
    call_command("narrate", "--all")
    assert Narration.objects.filter(status=Narration.Status.READY).count() == 3
    with pytest.raises(CommandError, match="no such module"):
        call_command("narrate", "ghost")
    with pytest.raises(CommandError, match="slugs or --all"):
        call_command("narrate")


@pytest.mark.django_db
def test_stalled_narration_is_reported(client, course, instructor):
    from datetime import timedelta

    from django.utils import timezone

    module = Module.objects.get(slug="intro")
    record = Narration.objects.create(module=module, status=Narration.Status.RUNNING, progress=0.4)
    client.force_login(instructor)
    url = reverse("authoring:narration_status", args=["intro"])
    assert client.get(url).json()["busy"] is True
    Narration.objects.filter(pk=record.pk).update(updated_at=timezone.now() - timedelta(minutes=11))
    state = client.get(url).json()
    assert state["busy"] is False and state["label"].startswith("Stalled")


@pytest.mark.django_db
def test_narrate_queue_skips_current_narration(course, monkeypatch, capsys):
    """`make run` queues only what is missing or stale, so a restart re-synthesizes nothing."""
    from django.core.management import call_command

    monkeypatch.setattr(narration, "load_voice", FakeVoice)
    call_command("narrate", "intro")  # intro now has current narration
    queued = []
    monkeypatch.setattr("narration.jobs.app.send_task",
                        lambda name, args, **kw: queued.append(args[0]) or type("R", (), {"id": "t"})())
    call_command("narrate", "--all", "--queue")
    intro = Module.objects.get(slug="intro")
    assert intro.pk not in queued
    assert sorted(queued) == sorted(Module.objects.exclude(slug="intro").values_list("pk", flat=True))
    assert Narration.objects.get(module=intro).status == Narration.Status.READY
    queued.clear()
    call_command("narrate", "--all", "--queue")  # the others are now queued (busy): nothing new
    assert queued == []


def pcm_wav(seconds: float, rate: int = 8000, width: int = 2, channels: int = 1) -> bytes:
    """A PCM WAV of a 440 Hz tone (not silence, so the encoder has something to say)."""
    import math

    frames = bytearray()
    for n in range(int(rate * seconds)):
        value = int(0.3 * math.sin(2 * math.pi * 440 * n / rate) * (2 ** (8 * width - 1) - 1))
        sample = (value + 128).to_bytes(1, "little") if width == 1 else value.to_bytes(width, "little", signed=True)
        frames += sample * channels
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as wav:
        wav.setnchannels(channels)
        wav.setsampwidth(width)
        wav.setframerate(rate)
        wav.writeframes(bytes(frames))
    return buffer.getvalue()


def float_wav(seconds: float, rate: int = 8000) -> bytes:
    """A 32-bit floating-point WAV (format 3): valid, playable, but not PCM the encoder reads."""
    data = struct.pack(f"<{int(rate * seconds)}f", *([0.25] * int(rate * seconds)))
    fmt = struct.pack("<HHIIHH", 3, 1, rate, rate * 4, 4, 32)
    chunks = b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", 4 + len(chunks)) + b"WAVE" + chunks


UPLOAD_VTT = b"WEBVTT\n\nc1\n00:00:00.000 --> 00:00:01.000\nWhy it matters\n"


def post_upload(client, audio: bytes, name: str = "talk.wav", **extra):
    return client.post(reverse("authoring:upload", args=["intro"]), {
        "audio": SimpleUploadedFile(name, audio), "vtt": SimpleUploadedFile("talk.vtt", UPLOAD_VTT), **extra})


@pytest.mark.django_db
@pytest.mark.parametrize("width, channels, rate", [(2, 1, 8000), (2, 2, 44100), (1, 1, 11025), (3, 2, 48000)])
def test_an_uploaded_wav_is_stored_and_served_as_mp3(client, course, instructor, width, channels, rate):
    client.force_login(instructor)
    wav = pcm_wav(1.5, rate=rate, width=width, channels=channels)
    assert post_upload(client, wav).status_code == 302
    record = Narration.objects.get(module__slug="intro")
    assert record.audio.name.endswith(".mp3") and record.duration == pytest.approx(1.5, abs=0.001)
    stored = record.audio.read()
    assert mp3_seconds(stored) == pytest.approx(1.5, abs=0.25)  # + encoder delay and padding: a few frames
    assert len(stored) <= 32_000 / 8 * (1.5 + 0.25)  # 32 kbit/s, whatever the WAV's rate, width or channels
    client.logout()
    audio = client.get(record.audio_url)
    assert audio.status_code == 200 and audio["Content-Type"] == "audio/mpeg"


@pytest.mark.django_db
def test_an_uploaded_wav_the_encoder_cannot_read_is_kept_as_wav(client, course, instructor):
    client.force_login(instructor)
    wav = float_wav(1.0)
    assert post_upload(client, wav).status_code == 302
    record = Narration.objects.get(module__slug="intro")
    assert record.audio.name.endswith(".wav") and record.audio.read() == wav  # nothing lost
    assert client.get(record.audio_url)["Content-Type"] == "audio/wav"


@pytest.mark.django_db
def test_narrate_mp3_converts_wav_narrations_and_they_keep_playing(client, course, capsys):
    """Narration stored as WAV before MP3 keeps its cues and plays as MP3 after `narrate --mp3`."""
    from django.core.files.base import ContentFile
    from django.core.management import call_command

    module = Module.objects.get(slug="intro")
    wav = pcm_wav(2.0, rate=22050)
    record = Narration.objects.create(module=module, status=Narration.Status.READY, origin=Narration.Origin.PIPER,
                                      duration=2.0, cue_hash=module.cue_hash, voice=narration.VOICE_NAME)
    record.audio.save("narration/old.wav", ContentFile(wav), save=False)
    record.vtt.save("narration/old.vtt", ContentFile(UPLOAD_VTT), save=False)
    record.save()
    wav_path = Path(record.audio.path)
    assert client.get(record.audio_url)["Content-Type"] == "audio/wav"  # a WAV narration plays as before

    call_command("narrate", "--mp3", "--all")
    out = capsys.readouterr().out
    record.refresh_from_db()
    assert record.audio.name.endswith(".mp3") and not wav_path.exists()
    assert f"intro: {len(wav):,} bytes of WAV → {record.audio.size:,} bytes of MP3" in out
    assert len(wav) >= 8 * record.audio.size
    assert record.is_ready and not record.is_stale and record.vtt.name.endswith(".vtt")
    audio = client.get(record.audio_url)
    assert audio.status_code == 200 and audio["Content-Type"] == "audio/mpeg"
    assert mp3_seconds(b"".join(audio.streaming_content)) == pytest.approx(2.0, abs=0.25)
    call_command("narrate", "--mp3", "--all")  # already MP3: nothing to do
    assert capsys.readouterr().out == ""


MATH_MODULE = r"""## Step time $t_{\text{step}}$

One decode step takes $t_{\text{step}} = \frac{\text{bytes}}{\text{bandwidth}}$, about $N^2$ work.

$$
S = \frac{QK^{T}}{\sqrt{d}}
$$

- each item costs $10^{-3}$ seconds
"""
LATEX_SOURCE = ("$", "\\", "_{", "^{", "{", "}", "frac", "text{", "sqrt")


def test_math_is_spoken_as_words_never_as_latex():
    cues = render_markdown(MATH_MODULE).cues
    texts = [narration.speakable(c.text) for c in cues]
    assert texts == [
        "Step time t sub step",
        "One decode step takes t sub step equals bytes over bandwidth, about N squared work.",
        "S equals Q K transpose over the square root of d",
        "each item costs 10 to the power minus 3 seconds.",
    ]
    for text in texts:
        assert not any(mark in text for mark in LATEX_SOURCE), text


@pytest.mark.django_db
def test_no_module_of_the_course_reads_latex_aloud():
    """Over every lesson in content/: what Piper is given holds no LaTeX source."""
    from courseapp.loader import load_course

    load_course(Path(__file__).resolve().parents[2] / "content")
    modules = list(Module.objects.all())
    assert len(modules) >= 10
    for module in modules:
        for cue in module.cues:
            spoken = narration.speakable(cue["text"])
            source_marks = ("$", "\\", "_{", "^{", "\\frac", "\\text")
            assert not any(mark in spoken for mark in source_marks), (module.slug, spoken)


def test_each_sentence_start_is_a_timestamp_tag_in_its_cue(tmp_path, monkeypatch):
    """The player highlights the sentence being spoken from these tags; cue ids and texts stay as they were."""
    monkeypatch.setattr(narration, "load_voice", FakeVoice)
    text = "An H100 reads 3.35 TB/s. That caps one stream, e.g. at 209 tokens. Why?\n\nOne only.\n"
    cues = render_markdown(text).cues
    result = narration.synthesize(cues, tmp_path)
    vtt = result.vtt_path.read_text()
    first, second = narration.parse_vtt(vtt)
    assert first.text == cues[0].text and second.text == "One only." and second.sentences == ()
    assert [s for _, s in first.sentences] == ["An H100 reads 3.35 TB/s.", "That caps one stream, e.g. at 209 tokens.",
                                               "Why?"]
    starts = [t for t, _ in first.sentences]
    assert starts[0] == first.start and starts == sorted(starts) and starts[-1] < first.end
    assert vtt.count("<00:00:") == 2  # a tag before each sentence after the first
    assert narration.parse_vtt(narration.write_vtt([first, second])) == [first, second]


@pytest.mark.django_db
def test_make_run_queues_wav_narrations_for_mp3(course, monkeypatch, capsys):
    """`narrate --all --queue` (what `make run` runs) sends a current WAV narration to the `cpu` workers for
    re-encoding, and the task converts it."""
    from django.core.files.base import ContentFile
    from django.core.management import call_command

    from workers.narration import convert_narration

    module = Module.objects.get(slug="intro")
    record = Narration.objects.create(module=module, status=Narration.Status.READY, origin=Narration.Origin.UPLOAD,
                                      duration=1.0, cue_hash=module.cue_hash)
    record.audio.save("narration/up.wav", ContentFile(pcm_wav(1.0)), save=False)
    record.vtt.save("narration/up.vtt", ContentFile(UPLOAD_VTT), save=False)
    record.save()
    sent = []
    monkeypatch.setattr("narration.jobs.app.send_task",
                        lambda name, args, **kw: sent.append((name, args, kw)) or type("R", (), {"id": "t"})())
    call_command("narrate", "--all", "--queue")
    converted = [item for item in sent if item[0] == "courseapp.convert_narration"]
    assert converted == [("courseapp.convert_narration", [record.pk], {"kwargs": {}, "queue": "cpu", "retry": False})]
    assert "intro: WAV narration queued for re-encoding as MP3" in capsys.readouterr().out
    convert_narration(record.pk)
    record.refresh_from_db()
    assert record.audio.name.endswith(".mp3") and record.origin == Narration.Origin.UPLOAD and record.is_ready


def test_real_piper_speaks_a_formula_as_words(tmp_path):
    """A short real synthesis of a paragraph with LaTeX: the cue (what Piper was given, and the captions) holds
    words, and the audio lasts as long as saying them takes."""
    [cue] = render_markdown(r"The step time is $t = \frac{B}{W}$, about $N^{2}$ operations." + "\n").cues
    assert cue.text == "The step time is t equals B over W, about N squared operations."
    result = narration.synthesize([cue], tmp_path)
    captions = result.vtt_path.read_text()
    assert "t equals B over W" in captions and not any(mark in captions for mark in ("$", "\\", "{", "^"))
    assert 2 < result.duration < 10 and mp3_seconds(result.audio_path.read_bytes()) == pytest.approx(
        result.duration, abs=0.2)
