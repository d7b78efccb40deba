"""Greek letters typed as Unicode ("α", "2πr") spelled as their LaTeX commands, so that the ``number``
extractor reads "\\boxed{α + 1}" as the answer "\\boxed{\\alpha + 1}" is, as math-verify reads them (it
read 1, another answer's, and "\\boxed{2πr}" read 2). Case stays: "Δ" is ``\\Delta``, "δ" ``\\delta``,
two variables. The variant forms map as math-verify maps them ("ϵ" is ``\\varepsilon``, "ϕ" ``\\varphi``).
A letter inside a Greek word is prose, left as written, and so is "μ" before a latin letter: a unit's
prefix ("5μm")."""

from __future__ import annotations

import re

_NAMES = {
    **dict(
        zip(
            "αβγδεζηθικλμνξπρστυφχψω",
            "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi pi rho sigma tau upsilon "
            "phi chi psi omega".split(),
            strict=True,
        )
    ),
    **dict(zip("ΓΔΘΛΞΠΣΥΦΨΩ", "Gamma Delta Theta Lambda Xi Pi Sigma Upsilon Phi Psi Omega".split(), strict=True)),
    "ϵ": "varepsilon",
    "ϑ": "vartheta",
    "ϕ": "varphi",
    "ϱ": "varrho",
}
_WORD = "\u0370-\u03ff\u1f00-\u1fff"  # Greek and its extended block: letters of a Greek word
_ANY = re.compile("[\u0370-\u03ff]")
_LETTER = re.compile(r"(?<![" + _WORD + r"])(?:[" + "".join(_NAMES) + r"])(?![" + _WORD + r"])(?!(?<=μ)[a-zA-Z])([a-zA-Z]?)")


def as_commands(text: str) -> str:
    """The text with each Greek letter that stands alone spelled as its command, a space after it
    before a latin letter ("αx" as "\\alpha x", no command "\\alphax")."""
    if not _ANY.search(text):  # most answers: nothing to spell
        return text
    return _LETTER.sub(_command, text)


def _command(m: re.Match[str]) -> str:
    after = m.group(1)
    return "\\" + _NAMES[m.group()[0]] + (" " + after if after else "")
