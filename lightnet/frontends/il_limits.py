"""Limits on IL macro expansion: a macro that doubles itself 40 times expands
to 2**40 tokens, which no machine holds. The preprocessor is stopped when the
limit is passed, with one line naming it (see docs/errors.md, `il.expansion`).

- pcpp: `ExpansionLimit`, a mixin of the pcpp Preprocessor, counts the tokens
  every macro expansion produces (nested ones included, as they are made) and
  the depth of macros expanding inside macros.
- the system cpp: `run_cpp` reads its output and stops it once it passes
  MAX_PREPROCESSED_BYTES.
"""

from __future__ import annotations

import subprocess
import threading

# Tokens made by macro expansion in one source, counted at every level of
# nesting (pcpp): a real model expands to a few ten thousand.
MAX_EXPANSION_TOKENS = 1_000_000
# Macros expanding inside the expansion of macros (pcpp).
MAX_MACRO_DEPTH = 100
# Bytes of preprocessed text (the system cpp): above what MAX_OPS ops take
# (about 100 bytes each), and cpp writes a runaway expansion at ~1 MB/s.
MAX_PREPROCESSED_BYTES = 16 << 20


class ExpansionLimit:
    """pcpp Preprocessor mixin: a source whose macros expand beyond the limits
    is an error (`on_error`) at the line where the outermost macro is used."""

    expanded_tokens = 0
    _site = (None, None)

    def expand_macros(self, tokens, expanding_from=[]):  # noqa: B006 - pcpp's signature
        if not expanding_from and tokens:
            self._site = (tokens[0].source, tokens[0].lineno)
        if len(expanding_from) > MAX_MACRO_DEPTH:
            self.on_error(*self._site, f"macros expand inside macros more than "
                          f"{MAX_MACRO_DEPTH} deep (the limit; macro '{expanding_from[0]}')")
        out = super().expand_macros(tokens, expanding_from)
        if expanding_from:
            self.expanded_tokens += len(out)
            if self.expanded_tokens > MAX_EXPANSION_TOKENS:
                self.on_error(*self._site, f"macro expansion makes more than "
                              f"{MAX_EXPANSION_TOKENS} tokens (the limit; macro "
                              f"'{expanding_from[0]}')")
        return out


class OutputTooLarge(Exception):
    """The preprocessor's output passed MAX_PREPROCESSED_BYTES."""


def run_cpp(cmd: list[str], text: str) -> subprocess.CompletedProcess:
    """Run the preprocessor `cmd` on `text` as subprocess.run(capture_output=True,
    text=True) would, but stop it (OutputTooLarge) once its output passes
    MAX_PREPROCESSED_BYTES."""
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    stderr = []

    def feed():
        try:
            proc.stdin.write(text.encode("utf-8"))
            proc.stdin.close()
        except OSError:  # it stopped reading: its exit status says why
            pass

    threads = [threading.Thread(target=feed),
               threading.Thread(target=lambda: stderr.append(proc.stderr.read()))]
    for t in threads:
        t.start()
    out, size = [], 0
    try:
        while chunk := proc.stdout.read1(1 << 16):
            out.append(chunk)
            size += len(chunk)
            if size > MAX_PREPROCESSED_BYTES:
                proc.kill()
                raise OutputTooLarge()
    finally:
        proc.stdout.close()
        returncode = proc.wait()
        for t in threads:
            t.join()
        proc.stderr.close()

    def decode(data: bytes) -> str:  # as text=True does: universal newlines
        return data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")

    return subprocess.CompletedProcess(cmd, returncode, decode(b"".join(out)),
                                       decode(b"".join(stderr)))
